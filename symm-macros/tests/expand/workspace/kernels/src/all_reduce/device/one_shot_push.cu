// CUDA C of #[symm_kernel] on `one_shot_push` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V, symm_u64 G_W>
__device__ __forceinline__ void k_one_shot_push(const symm_kctx& __ctx, symm_buf<G_T> v_input, symm_buf<G_T> v_stage, symm_slice<G_T> v_out, symm_u32 v_n, symm_u32 v_cap, symm_u32 v_ch) {
f_enter_call(__ctx);
auto v_rank = symm_rank(v_input);
auto v_world = (((G_W > ((symm_u64)0ULL))) ? (symm_cast<symm_u32>(G_W)) : (symm_world(v_input)));
auto v_epoch = f_next_epoch(__ctx, v_stage, v_ch);
auto v_base = ((((v_epoch & ((SYMM_TY(v_epoch))1ULL))) * v_world) * v_cap);
auto v_src = symm_local(v_input);
auto v_mine = symm_local(v_stage);
auto v_stride = (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
auto v_first = f_spread_first(__ctx);
auto v_vecs = (v_n / symm_cast<symm_u32>(G_V));
auto v_tail = (v_n - (v_vecs * symm_cast<symm_u32>(G_V)));
auto v_to = (v_base + (v_rank * v_cap));
auto v_i = v_first;
while ((v_i < v_vecs)) {
auto v_v = symm_dsl_load_vec<G_V>(v_src, (v_i * symm_cast<symm_u32>(G_V)));
{
const SYMM_TY(v_world) t_end1 = v_world;
for (SYMM_TY(v_world) v_r = ((SYMM_TY(v_world))0ULL); v_r < t_end1; v_r += 1) {
if ((v_r != v_rank)) {
symm_dsl_store_vec(symm_peer(v_stage, v_r), (v_to + (v_i * symm_cast<symm_u32>(G_V))), v_v);
}
}
}
v_i += v_stride;
}
auto v_e = ((v_vecs * symm_cast<symm_u32>(G_V)) + v_first);
if ((v_first < v_tail)) {
{
const SYMM_TY(v_world) t_end2 = v_world;
for (SYMM_TY(v_world) v_r_2 = ((SYMM_TY(v_world))0ULL); v_r_2 < t_end2; v_r_2 += 1) {
if ((v_r_2 != v_rank)) {
SYMM_AT(__ctx, symm_peer(v_stage, v_r_2), (v_to + v_e), 35) = SYMM_AT(__ctx, v_src, v_e, 35);
}
}
}
}
f_flag_exchange(__ctx, v_stage, v_ch, v_epoch);
auto v_i_2 = v_first;
while ((v_i_2 < v_vecs)) {
auto v_at = (v_i_2 * symm_cast<symm_u32>(G_V));
auto v_res = f_sum_staged<G_T, G_V>(__ctx, v_src, v_at, v_mine, v_base, v_cap, v_at, v_rank, v_world);
symm_dsl_store_vec(v_out, v_at, v_res);
v_i_2 += v_stride;
}
if ((v_first < v_tail)) {
float v_acc = 0.0f;
{
const SYMM_TY(v_world) t_end3 = v_world;
for (SYMM_TY(v_world) v_r_3 = ((SYMM_TY(v_world))0ULL); v_r_3 < t_end3; v_r_3 += 1) {
auto v_v_2 = (((v_r_3 == v_rank)) ? (SYMM_AT(__ctx, v_src, v_e, 51)) : (SYMM_AT(__ctx, v_mine, ((v_base + (v_r_3 * v_cap)) + v_e), 53)));
v_acc += symm_to_f32(v_v_2);
}
}
SYMM_AT(__ctx, v_out, v_e, 57) = symm_from_f32<G_T>(v_acc);
}
f_commit_epoch(__ctx, v_stage, v_epoch, v_ch);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_input_ptrs, const symm_u64* v_input_pads, symm_u32 v_input_rank, symm_u32 v_input_world, symm_u64 v_input_len, symm_u64 v_input_local, symm_u64 v_input_lpad, const symm_u64* v_stage_ptrs, const symm_u64* v_stage_pads, symm_u32 v_stage_rank, symm_u32 v_stage_world, symm_u64 v_stage_len, symm_u64 v_stage_local, symm_u64 v_stage_lpad, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n, symm_u32 v_cap, symm_u32 v_ch) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_one_shot_push<$G_T$, $G_V$, $G_W$>(__ctx, symm_buf<$G_T$>{v_input_ptrs, v_input_pads, v_input_rank, v_input_world, v_input_len, v_input_local, v_input_lpad}, symm_buf<$G_T$>{v_stage_ptrs, v_stage_pads, v_stage_rank, v_stage_world, v_stage_len, v_stage_local, v_stage_lpad}, symm_slice<$G_T$>{($G_T$*)v_out_ptr, v_out_len}, v_n, v_cap, v_ch);
}
