// CUDA C of #[symm_kernel] on `axpy` in tests/ui/pass/generic_const_helper.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ G_T f_axpy(const symm_kctx& __ctx, G_T v_a, G_T v_x, G_T v_y) {
return symm_fma(v_a, v_x, v_y);
}
