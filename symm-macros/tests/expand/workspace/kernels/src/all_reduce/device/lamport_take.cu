// CUDA C of #[symm_kernel] on `lamport_take` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V>
__device__ __forceinline__ symm_array<symm_array<G_T, G_V>, 8ULL> f_lamport_take(const symm_kctx& __ctx, symm_slice<G_T> v_stage, symm_u32 v_first, symm_u32 v_stride, symm_u32 v_ranks, symm_u32 v_world) {
auto v_empty = symm_from_bits32<G_T>((symm_u32)(((symm_u32)4294967295ULL)));
symm_array<G_T, G_V> v_cleared = symm_array_fill<G_T, G_V>(v_empty);
symm_array<symm_array<G_T, G_V>, 8ULL> v_got = symm_dsl_gather_ready<G_V>(__ctx, v_stage, v_first, v_stride, v_ranks, v_empty);
{
const symm_u32 t_end1 = v_world;
for (symm_u32 v_r = ((symm_u32)0ULL); v_r < t_end1; v_r += 1) {
if ((((((v_ranks >> v_r)) & ((symm_u32)1ULL))) == ((symm_u32)1ULL))) {
symm_dsl_store_vec(v_stage, (v_first + (v_r * v_stride)), v_cleared);
}
}
}
return v_got;
}
