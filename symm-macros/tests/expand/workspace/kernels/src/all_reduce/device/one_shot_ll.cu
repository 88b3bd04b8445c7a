// CUDA C of #[symm_kernel] on `one_shot_ll` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_P, symm_u64 G_W>
__device__ __forceinline__ void k_one_shot_ll(const symm_kctx& __ctx, symm_buf<G_T> v_input, symm_buf<symm_u64> v_stage, symm_slice<G_T> v_out, symm_u32 v_n, symm_u32 v_cap, symm_u32 v_ch) {
f_enter_call(__ctx);
auto v_rank = symm_rank(v_input);
auto v_world = (((G_W > ((symm_u64)0ULL))) ? (symm_cast<symm_u32>(G_W)) : (symm_world(v_input)));
auto v_src = symm_local(v_input);
auto v_mine = symm_local(v_stage);
auto v_stride = (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
auto v_first = f_spread_first(__ctx);
auto v_words = f_ll_words<G_T, G_P>(__ctx, v_src, v_first, v_n);
auto v_epoch = f_next_epoch(__ctx, v_stage, v_ch);
auto v_per = symm_cast<symm_u32>(G_P);
auto v_width = (((symm_u32)32ULL) / v_per);
symm_u32 v_mask = (((v_per == ((symm_u32)1ULL))) ? (((symm_u32)4294967295ULL)) : (((symm_u32)65535ULL)));
auto v_packets = ((((v_n + v_per) - ((symm_u32)1ULL))) / v_per);
auto v_pairs = (((v_packets + ((symm_u32)1ULL))) / ((symm_u32)2ULL));
auto v_parity = (v_epoch & ((SYMM_TY(v_epoch))1ULL));
auto v_tag = ((symm_cast<symm_u64>(v_epoch)) << 32);
auto v_g = v_first;
while ((v_g < v_pairs)) {
symm_array<symm_u64, 2ULL> v_pkt = symm_array<symm_u64, 2ULL>{{(v_tag | (symm_cast<symm_u64>(SYMM_AT(__ctx, v_words, ((symm_u64)0ULL), 35)))), (v_tag | (symm_cast<symm_u64>(SYMM_AT(__ctx, v_words, ((symm_u64)1ULL), 35))))}};
{
const SYMM_TY(v_world) t_end1 = v_world;
for (SYMM_TY(v_world) v_r = ((SYMM_TY(v_world))0ULL); v_r < t_end1; v_r += 1) {
symm_dsl_store_vec_volatile(symm_peer(v_stage, v_r), (((((((v_parity * v_world) + v_rank)) * v_cap) + v_g)) * ((symm_u32)2ULL)), v_pkt);
}
}
v_g += v_stride;
v_words = f_ll_words<G_T, G_P>(__ctx, v_src, v_g, v_n);
}
auto v_ranks = (((((symm_u32)1ULL) << v_world)) - ((symm_u32)1ULL));
auto v_q = v_first;
while ((v_q < v_pairs)) {
symm_array<symm_array<symm_u64, 2ULL>, 8ULL> v_got = symm_dsl_gather_tagged2(__ctx, v_mine, (((((v_parity * v_world) * v_cap) + v_q)) * ((symm_u32)2ULL)), (v_cap * ((symm_u32)2ULL)), v_ranks, v_epoch);
symm_array<float, G_P> v_lo = symm_array_fill<float, G_P>(0.0f);
symm_array<float, G_P> v_hi = symm_array_fill<float, G_P>(0.0f);
{
const SYMM_TY(v_world) t_end2 = v_world;
for (SYMM_TY(v_world) v_r_2 = ((SYMM_TY(v_world))0ULL); v_r_2 < t_end2; v_r_2 += 1) {
auto v_v = SYMM_AT(__ctx, v_got, v_r_2, 54);
auto v_b0 = symm_cast<symm_u32>(SYMM_AT(__ctx, v_v, ((symm_u64)0ULL), 55));
auto v_b1 = symm_cast<symm_u32>(SYMM_AT(__ctx, v_v, ((symm_u64)1ULL), 56));
{
const symm_u64 t_end3 = G_P;
#pragma unroll
for (symm_u64 v_k = ((symm_u64)0ULL); v_k < t_end3; v_k += 1) {
auto v_s = (symm_cast<symm_u32>(v_k) * v_width);
SYMM_AT(__ctx, v_lo, v_k, 59) += symm_to_f32(symm_from_bits32<G_T>((symm_u32)((((v_b0 >> v_s)) & v_mask))));
SYMM_AT(__ctx, v_hi, v_k, 60) += symm_to_f32(symm_from_bits32<G_T>((symm_u32)((((v_b1 >> v_s)) & v_mask))));
}
}
}
}
{
const symm_u64 t_end4 = G_P;
#pragma unroll
for (symm_u64 v_k_2 = ((symm_u64)0ULL); v_k_2 < t_end4; v_k_2 += 1) {
auto v_e0 = (((v_q * ((SYMM_TY(v_q))2ULL)) * v_per) + symm_cast<symm_u32>(v_k_2));
if ((v_e0 < v_n)) {
SYMM_AT(__ctx, v_out, v_e0, 66) = symm_from_f32<G_T>(SYMM_AT(__ctx, v_lo, v_k_2, 66));
}
auto v_e1 = (v_e0 + v_per);
if ((v_e1 < v_n)) {
SYMM_AT(__ctx, v_out, v_e1, 70) = symm_from_f32<G_T>(SYMM_AT(__ctx, v_hi, v_k_2, 70));
}
}
}
v_q += v_stride;
}
f_commit_epoch(__ctx, v_stage, v_epoch, v_ch);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_input_ptrs, const symm_u64* v_input_pads, symm_u32 v_input_rank, symm_u32 v_input_world, symm_u64 v_input_len, symm_u64 v_input_local, symm_u64 v_input_lpad, const symm_u64* v_stage_ptrs, const symm_u64* v_stage_pads, symm_u32 v_stage_rank, symm_u32 v_stage_world, symm_u64 v_stage_len, symm_u64 v_stage_local, symm_u64 v_stage_lpad, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n, symm_u32 v_cap, symm_u32 v_ch) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_one_shot_ll<$G_T$, $G_P$, $G_W$>(__ctx, symm_buf<$G_T$>{v_input_ptrs, v_input_pads, v_input_rank, v_input_world, v_input_len, v_input_local, v_input_lpad}, symm_buf<symm_u64>{v_stage_ptrs, v_stage_pads, v_stage_rank, v_stage_world, v_stage_len, v_stage_local, v_stage_lpad}, symm_slice<$G_T$>{($G_T$*)v_out_ptr, v_out_len}, v_n, v_cap, v_ch);
}
