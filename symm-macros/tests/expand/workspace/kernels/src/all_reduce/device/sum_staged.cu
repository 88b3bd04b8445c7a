// CUDA C of #[symm_kernel] on `sum_staged` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V>
__device__ __forceinline__ symm_array<G_T, G_V> f_sum_staged(const symm_kctx& __ctx, symm_slice<G_T> v_own, symm_u32 v_i, symm_slice<G_T> v_stage, symm_u32 v_at, symm_u32 v_region, symm_u32 v_j, symm_u32 v_rank, symm_u32 v_world) {
symm_array<G_T, G_V> v_zero = symm_array_fill<G_T, G_V>(symm_from_f32<G_T>(0.0f));
symm_array<symm_array<G_T, G_V>, 8ULL> v_vals = symm_array_fill<symm_array<G_T, G_V>, 8ULL>(v_zero);
{
const symm_u32 t_end1 = v_world;
for (symm_u32 v_r = ((symm_u32)0ULL); v_r < t_end1; v_r += 1) {
SYMM_AT(__ctx, v_vals, v_r, 13) = (((v_r == v_rank)) ? (symm_dsl_load_vec<G_V>(v_own, v_i)) : (symm_dsl_load_vec<G_V>(v_stage, ((v_at + (v_r * v_region)) + v_j))));
}
}
return f_sum_in_rank_order<G_T, G_V>(__ctx, v_vals, v_world);
}
