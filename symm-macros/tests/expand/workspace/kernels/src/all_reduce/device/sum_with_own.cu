// CUDA C of #[symm_kernel] on `sum_with_own` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V>
__device__ __forceinline__ symm_array<G_T, G_V> f_sum_with_own(const symm_kctx& __ctx, symm_array<symm_array<G_T, G_V>, 8ULL> v_vals, symm_array<G_T, G_V> v_own, symm_u32 v_rank, symm_u32 v_world) {
symm_array<float, G_V> v_acc = symm_array_fill<float, G_V>(0.0f);
{
const symm_u32 t_end1 = v_world;
for (symm_u32 v_r = ((symm_u32)0ULL); v_r < t_end1; v_r += 1) {
auto v_v = (((v_r == v_rank)) ? (v_own) : (SYMM_AT(__ctx, v_vals, v_r, 8)));
{
const symm_u64 t_end2 = G_V;
#pragma unroll
for (symm_u64 v_k = ((symm_u64)0ULL); v_k < t_end2; v_k += 1) {
SYMM_AT(__ctx, v_acc, v_k, 10) += symm_to_f32(SYMM_AT(__ctx, v_v, v_k, 10));
}
}
}
}
symm_array<G_T, G_V> v_res = symm_array_fill<G_T, G_V>(symm_from_f32<G_T>(0.0f));
{
const symm_u64 t_end3 = G_V;
#pragma unroll
for (symm_u64 v_k_2 = ((symm_u64)0ULL); v_k_2 < t_end3; v_k_2 += 1) {
SYMM_AT(__ctx, v_res, v_k_2, 15) = symm_from_f32<G_T>(SYMM_AT(__ctx, v_acc, v_k_2, 15));
}
}
return v_res;
}
