// CUDA C of #[symm_kernel] on `twice` in tests/dsl_smoke.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ G_T f_twice(const symm_kctx& __ctx, G_T v_x) {
return (v_x + v_x);
}
