// CUDA C of #[symm_kernel] on `largest` in tests/ui/pass/generic_const_helper.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_W>
__device__ __forceinline__ G_T f_largest(const symm_kctx& __ctx, symm_array<G_T, G_W> v_v) {
auto v_m = SYMM_AT(__ctx, v_v, ((symm_u64)0ULL), 1);
{
const symm_u64 t_end1 = G_W;
#pragma unroll
for (symm_u64 v_k = ((symm_u64)1ULL); v_k < t_end1; v_k += 1) {
v_m = symm_max(v_m, SYMM_AT(__ctx, v_v, v_k, 3));
}
}
return v_m;
}
