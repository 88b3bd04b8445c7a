// CUDA C of #[symm_kernel] on `commit_epoch` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void f_commit_epoch(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_epoch, symm_u32 v_ch) {
f_sync_threads(__ctx);
if ((f_thread_idx_x(__ctx) == ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL))) {
auto v_rank = symm_rank(v_buf);
symm_dsl_store<SYMM_RELAXED, SYMM_GPU>(symm_pad(v_buf, v_rank), f_signal_slot(__ctx, (v_ch + ((symm_u32)2ULL)), f_block_idx_x(__ctx), v_rank), v_epoch);
}
}
