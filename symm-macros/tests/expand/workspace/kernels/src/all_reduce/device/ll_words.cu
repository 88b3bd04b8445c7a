// CUDA C of #[symm_kernel] on `ll_words` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_P>
__device__ __forceinline__ symm_array<symm_u32, 2ULL> f_ll_words(const symm_kctx& __ctx, symm_slice<G_T> v_src, symm_u32 v_g, symm_u32 v_n) {
auto v_per = symm_cast<symm_u32>(G_P);
auto v_width = (((symm_u32)32ULL) / v_per);
symm_array<symm_u32, 2ULL> v_words = symm_array_fill<symm_u32, 2ULL>(((symm_u32)0ULL));
{
const symm_u32 t_end1 = ((symm_u32)2ULL);
#pragma unroll
for (symm_u32 v_h = ((symm_u32)0ULL); v_h < t_end1; v_h += 1) {
{
const symm_u32 t_end2 = v_per;
for (symm_u32 v_k = ((symm_u32)0ULL); v_k < t_end2; v_k += 1) {
auto v_e = (((((v_g * ((symm_u32)2ULL)) + v_h)) * v_per) + v_k);
if ((v_e < v_n)) {
SYMM_AT(__ctx, v_words, v_h, 8) |= (symm_to_bits32(SYMM_AT(__ctx, v_src, v_e, 8)) << ((v_k * v_width)));
}
}
}
}
}
return v_words;
}
