// CUDA C of #[symm_kernel] on `lamport_load` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V>
__device__ __forceinline__ symm_array<G_T, G_V> f_lamport_load(const symm_kctx& __ctx, symm_slice<G_T> v_src, symm_u32 v_at, symm_u32 v_n) {
symm_array<G_T, G_V> v_v = symm_array_fill<G_T, G_V>(symm_from_f32<G_T>(0.0f));
if (((v_at + symm_cast<symm_u32>(G_V)) <= v_n)) {
v_v = symm_dsl_load_vec<G_V>(v_src, v_at);
}
else {
{
const symm_u64 t_end1 = G_V;
#pragma unroll
for (symm_u64 v_k = ((symm_u64)0ULL); v_k < t_end1; v_k += 1) {
auto v_e = (v_at + symm_cast<symm_u32>(v_k));
if ((v_e < v_n)) {
SYMM_AT(__ctx, v_v, v_k, 8) = SYMM_AT(__ctx, v_src, v_e, 8);
}
}
}
}
return f_lamport_scrub<G_T, G_V>(__ctx, v_v);
}
