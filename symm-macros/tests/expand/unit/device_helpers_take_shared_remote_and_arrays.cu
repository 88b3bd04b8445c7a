// CUDA C of #[symm_kernel] on the unit case `device_helpers_take_shared_remote_and_arrays`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<symm_u64 G_N>
__device__ __forceinline__ symm_array<float, 4ULL> f_helper(const symm_kctx& __ctx, symm_array<float, 256ULL>& v_s, symm_slice<float> v_r, symm_slice<float> v_v, symm_array<float, G_N> v_a) {
auto v_q = (((f_inner<G_N>(__ctx, SYMM_AT(__ctx, v_a, ((symm_u64)0ULL), 1)) + f_inner<(G_N + 1ULL)>(__ctx, SYMM_AT(__ctx, v_s, ((symm_u64)0ULL), 1))) + symm_dsl_load<SYMM_RELAXED, SYMM_SYS>(v_r, ((symm_u64)0ULL))) + SYMM_AT(__ctx, v_v, ((symm_u64)0ULL), 1));
if ((v_q > ((SYMM_TY(v_q))0.0))) {
return symm_array_fill<float, 4ULL>(v_q);
}
return (((v_q < ((SYMM_TY(v_q))1.0))) ? (symm_array<float, 4ULL>{{1.0f, 2.0f, 3.0f, v_q}}) : (symm_array<float, 4ULL>{{v_q, v_q, v_q, v_q}}));
}
