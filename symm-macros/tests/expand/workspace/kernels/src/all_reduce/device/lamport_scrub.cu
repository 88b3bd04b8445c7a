// CUDA C of #[symm_kernel] on `lamport_scrub` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V>
__device__ __forceinline__ symm_array<G_T, G_V> f_lamport_scrub(const symm_kctx& __ctx, symm_array<G_T, G_V> v_v) {
auto v_empty = symm_to_bits32(symm_from_bits32<G_T>((symm_u32)(((symm_u32)4294967295ULL))));
auto v_w = v_v;
{
const symm_u64 t_end1 = G_V;
#pragma unroll
for (symm_u64 v_k = ((symm_u64)0ULL); v_k < t_end1; v_k += 1) {
if ((symm_to_bits32(SYMM_AT(__ctx, v_w, v_k, 4)) == v_empty)) {
SYMM_AT(__ctx, v_w, v_k, 5) = symm_from_bits32<G_T>((symm_u32)((v_empty >> 1)));
}
}
}
return v_w;
}
