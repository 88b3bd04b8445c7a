// CUDA C of #[symm_kernel] on `commit_epoch` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void f_commit_epoch(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_epoch, symm_u32 v_ch) {
__syncthreads();
if ((((symm_u32)threadIdx.x) == ((symm_u32)0ULL))) {
auto v_rank = symm_rank(v_buf);
symm_dsl_store<SYMM_RELAXED, SYMM_GPU>(symm_pad(v_buf, v_rank), symm_signal_slot((symm_u32)((v_ch + ((symm_u32)2ULL))), (symm_u32)(((symm_u32)blockIdx.x)), (symm_u32)(v_rank)), v_epoch);
}
}
