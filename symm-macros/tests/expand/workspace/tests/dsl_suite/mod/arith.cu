// CUDA C of #[symm_kernel] on `arith` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_arith(const symm_kctx& __ctx, symm_slice<G_T> v_x, symm_slice<G_T> v_y, symm_slice<G_T> v_out, symm_u32 v_n) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
if ((v_i < v_n)) {
auto v_a = SYMM_AT(__ctx, v_x, v_i, 3);
auto v_b = SYMM_AT(__ctx, v_y, v_i, 4);
auto v_m = f_mix(__ctx, v_a, v_b);
auto v_q = symm_sqrt(((symm_abs(v_m) + symm_from_f32<G_T>(1.0f))));
SYMM_AT(__ctx, v_out, v_i, 7) = (((v_a > v_b)) ? ((v_m - v_q)) : ((-((v_m + v_q)))));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_y_ptr, symm_u64 v_y_len, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_arith<$G_T$>(__ctx, symm_slice<$G_T$>{($G_T$*)v_x_ptr, v_x_len}, symm_slice<$G_T$>{($G_T$*)v_y_ptr, v_y_len}, symm_slice<$G_T$>{($G_T$*)v_out_ptr, v_out_len}, v_n);
}
