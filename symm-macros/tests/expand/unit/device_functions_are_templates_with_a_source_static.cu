// CUDA C of #[symm_kernel] on the unit case `device_functions_are_templates_with_a_source_static`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ G_T f_norm(const symm_kctx& __ctx, G_T v_a) {
return (v_a * v_a);
}
