// CUDA C of #[symm_kernel] on `mix` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ G_T f_mix(const symm_kctx& __ctx, G_T v_a, G_T v_b) {
auto v_c = (((v_a * v_b) + v_a) - (v_b / ((symm_abs(v_b) + symm_from_f32<G_T>(1.0f)))));
return symm_max(symm_min(v_c, (v_a * symm_from_f32<G_T>(2.0f))), symm_fma(v_a, v_b, v_c));
}
