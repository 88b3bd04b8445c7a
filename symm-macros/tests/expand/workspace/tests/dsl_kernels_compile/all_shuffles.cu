// CUDA C of #[symm_kernel] on `all_shuffles` in tests/dsl_kernels_compile.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_all_shuffles(const symm_kctx& __ctx, symm_slice<G_T> v_x, symm_slice<G_T> v_y) {
auto v_i = f_thread_idx_x(__ctx);
auto v_a = f_shfl_xor(__ctx, SYMM_AT(__ctx, v_x, v_i, 2), 1);
auto v_b = f_shfl_down(__ctx, v_a, 2);
auto v_c = f_shfl_up(__ctx, v_b, 3);
SYMM_AT(__ctx, v_y, v_i, 5) = f_shfl_idx(__ctx, v_c, 4);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_y_ptr, symm_u64 v_y_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_all_shuffles<$G_T$>(__ctx, symm_slice<$G_T$>{($G_T$*)v_x_ptr, v_x_len}, symm_slice<$G_T$>{($G_T$*)v_y_ptr, v_y_len});
}
