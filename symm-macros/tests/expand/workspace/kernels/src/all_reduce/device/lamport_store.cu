// CUDA C of #[symm_kernel] on `lamport_store` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V>
__device__ __forceinline__ void f_lamport_store(const symm_kctx& __ctx, symm_slice<G_T> v_out, symm_u32 v_at, symm_u32 v_n, symm_array<G_T, G_V> v_v) {
if (((v_at + symm_cast<symm_u32>(G_V)) <= v_n)) {
symm_dsl_store_vec(v_out, v_at, v_v);
}
else {
{
const symm_u64 t_end1 = G_V;
#pragma unroll
for (symm_u64 v_k = ((symm_u64)0ULL); v_k < t_end1; v_k += 1) {
if (((v_at + (symm_cast<symm_u32>(v_k))) < v_n)) {
SYMM_AT(__ctx, v_out, (v_at + symm_cast<symm_u32>(v_k)), 6) = SYMM_AT(__ctx, v_v, v_k, 6);
}
}
}
}
}
