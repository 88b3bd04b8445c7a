// CUDA C of #[symm_kernel] on `gather_vectors` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_N>
__device__ __forceinline__ void k_gather_vectors(const symm_kctx& __ctx, symm_buf<G_T> v_stage, symm_slice<G_T> v_src, symm_slice<G_T> v_out, symm_u32 v_silent) {
if (((f_thread_idx_x(__ctx) != ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL)) || (f_block_idx_x(__ctx) != ((SYMM_TY(f_block_idx_x(__ctx)))0ULL)))) {
return;
}
auto v_rank = symm_rank(v_stage);
auto v_world = symm_world(v_stage);
symm_array<G_T, G_N> v_v = symm_array_fill<G_T, G_N>(SYMM_AT(__ctx, v_src, ((symm_u64)0ULL), 11));
{
const symm_u64 t_end1 = G_N;
#pragma unroll
for (symm_u64 v_k = ((symm_u64)0ULL); v_k < t_end1; v_k += 1) {
SYMM_AT(__ctx, v_v, v_k, 13) = SYMM_AT(__ctx, v_src, symm_cast<symm_u32>(v_k), 13);
}
}
if ((v_rank != v_silent)) {
{
const symm_u32 t_end2 = v_world;
for (symm_u32 v_r = ((symm_u32)0ULL); v_r < t_end2; v_r += 1) {
if ((v_r != v_rank)) {
symm_dsl_store_vec_volatile(symm_peer(v_stage, v_r), (v_rank * symm_cast<symm_u32>(G_N)), v_v);
}
}
}
}
auto v_empty = symm_from_bits32<G_T>((symm_u32)(((symm_u32)4294967295ULL)));
auto v_peers = (((((((symm_u32)1ULL) << v_world)) - ((symm_u32)1ULL))) & symm_not(((((symm_u32)1ULL) << v_rank))));
symm_array<symm_array<G_T, G_N>, 8ULL> v_got = symm_dsl_gather_ready<G_N>(__ctx, symm_local(v_stage), ((symm_u32)0ULL), symm_cast<symm_u32>(G_N), v_peers, v_empty);
{
const symm_u32 t_end3 = v_world;
for (symm_u32 v_r_2 = ((symm_u32)0ULL); v_r_2 < t_end3; v_r_2 += 1) {
if ((v_r_2 != v_rank)) {
auto v_g = SYMM_AT(__ctx, v_got, v_r_2, 29);
{
const symm_u64 t_end4 = G_N;
#pragma unroll
for (symm_u64 v_k_2 = ((symm_u64)0ULL); v_k_2 < t_end4; v_k_2 += 1) {
SYMM_AT(__ctx, v_out, ((v_r_2 * symm_cast<symm_u32>(G_N)) + symm_cast<symm_u32>(v_k_2)), 31) = SYMM_AT(__ctx, v_g, v_k_2, 31);
}
}
}
}
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_stage_ptrs, const symm_u64* v_stage_pads, symm_u32 v_stage_rank, symm_u32 v_stage_world, symm_u64 v_stage_len, symm_u64 v_stage_local, symm_u64 v_stage_lpad, void* v_src_ptr, symm_u64 v_src_len, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_silent) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_gather_vectors<$G_T$, $G_N$>(__ctx, symm_buf<$G_T$>{v_stage_ptrs, v_stage_pads, v_stage_rank, v_stage_world, v_stage_len, v_stage_local, v_stage_lpad}, symm_slice<$G_T$>{($G_T$*)v_src_ptr, v_src_len}, symm_slice<$G_T$>{($G_T$*)v_out_ptr, v_out_len}, v_silent);
}
