// CUDA C of #[symm_kernel] on `axpy` in examples/print_cuda.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_axpy(const symm_kctx& __ctx, symm_slice<G_T> v_x, symm_slice<G_T> v_y, G_T v_a, symm_u32 v_n) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
if ((v_i < v_n)) {
SYMM_AT(__ctx, v_y, v_i, 3) = symm_fma(v_a, SYMM_AT(__ctx, v_x, v_i, 3), SYMM_AT(__ctx, v_y, v_i, 3));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_y_ptr, symm_u64 v_y_len, $G_T$ v_a, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_axpy<$G_T$>(__ctx, symm_slice<$G_T$>{($G_T$*)v_x_ptr, v_x_len}, symm_slice<$G_T$>{($G_T$*)v_y_ptr, v_y_len}, v_a, v_n);
}
