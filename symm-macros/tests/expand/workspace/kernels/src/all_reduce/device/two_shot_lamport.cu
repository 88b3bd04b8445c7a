// CUDA C of #[symm_kernel] on `two_shot_lamport` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V, symm_u64 G_W>
__device__ __forceinline__ void k_two_shot_lamport(const symm_kctx& __ctx, symm_buf<G_T> v_input, symm_buf<G_T> v_stage, symm_slice<G_T> v_out, symm_u32 v_n, symm_u32 v_cap, symm_u32 v_ch) {
f_enter_call(__ctx);
auto v_rank = symm_rank(v_input);
auto v_world = (((G_W > ((symm_u64)0ULL))) ? (symm_cast<symm_u32>(G_W)) : (symm_world(v_input)));
auto v_src = symm_local(v_input);
auto v_mine = symm_local(v_stage);
auto v_stride = (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
auto v_first = f_spread_first(__ctx);
auto v_vecs = ((((v_n + symm_cast<symm_u32>(G_V)) - ((symm_u32)1ULL))) / symm_cast<symm_u32>(G_V));
auto v_chunk = ((((v_vecs + v_world) - ((symm_u32)1ULL))) / v_world);
auto v_epoch = f_next_epoch(__ctx, v_stage, v_ch);
auto v_parts = (((((v_epoch & ((SYMM_TY(v_epoch))1ULL))) * ((SYMM_TY(((v_epoch & ((SYMM_TY(v_epoch))1ULL)))))2ULL)) * v_world) * v_cap);
auto v_sums = (v_parts + (v_world * v_cap));
auto v_j = v_first;
while ((v_j < v_chunk)) {
{
const SYMM_TY(v_world) t_end1 = v_world;
for (SYMM_TY(v_world) v_c = ((SYMM_TY(v_world))0ULL); v_c < t_end1; v_c += 1) {
if (((v_c != v_rank) && (((v_c * v_chunk) + v_j) < v_vecs))) {
auto v_v = f_lamport_load<G_T, G_V>(__ctx, v_src, ((((v_c * v_chunk) + v_j)) * symm_cast<symm_u32>(G_V)), v_n);
symm_dsl_store_vec_volatile(symm_peer(v_stage, v_c), ((v_parts + (v_rank * v_cap)) + (v_j * symm_cast<symm_u32>(G_V))), v_v);
}
}
}
v_j += v_stride;
}
auto v_j_2 = v_first;
while (((v_j_2 < v_chunk) && (((v_rank * v_chunk) + v_j_2) < v_vecs))) {
auto v_at = ((((v_rank * v_chunk) + v_j_2)) * symm_cast<symm_u32>(G_V));
auto v_own = f_lamport_load<G_T, G_V>(__ctx, v_src, v_at, v_n);
auto v_sum = f_lamport_sum<G_T, G_V>(__ctx, v_own, v_mine, v_parts, v_cap, (v_j_2 * symm_cast<symm_u32>(G_V)), v_rank, v_world);
auto v_res = f_lamport_scrub<G_T, G_V>(__ctx, v_sum);
{
const SYMM_TY(v_world) t_end2 = v_world;
for (SYMM_TY(v_world) v_r = ((SYMM_TY(v_world))0ULL); v_r < t_end2; v_r += 1) {
if ((v_r != v_rank)) {
symm_dsl_store_vec_volatile(symm_peer(v_stage, v_r), ((v_sums + (v_rank * v_cap)) + (v_j_2 * symm_cast<symm_u32>(G_V))), v_res);
}
}
}
f_lamport_store<G_T, G_V>(__ctx, v_out, v_at, v_n, v_res);
v_j_2 += v_stride;
}
auto v_j_3 = v_first;
while ((v_j_3 < v_chunk)) {
auto v_owners = ((symm_u32)0ULL);
{
const SYMM_TY(v_world) t_end3 = v_world;
for (SYMM_TY(v_world) v_c_2 = ((SYMM_TY(v_world))0ULL); v_c_2 < t_end3; v_c_2 += 1) {
if (((v_c_2 != v_rank) && (((v_c_2 * v_chunk) + v_j_3) < v_vecs))) {
v_owners |= (((symm_u32)1ULL) << v_c_2);
}
}
}
auto v_got = f_lamport_take<G_T, G_V>(__ctx, v_mine, (v_sums + (v_j_3 * symm_cast<symm_u32>(G_V))), v_cap, v_owners, v_world);
{
const SYMM_TY(v_world) t_end4 = v_world;
for (SYMM_TY(v_world) v_c_3 = ((SYMM_TY(v_world))0ULL); v_c_3 < t_end4; v_c_3 += 1) {
if ((((((v_owners >> v_c_3)) & ((symm_u32)1ULL))) == ((symm_u32)1ULL))) {
f_lamport_store<G_T, G_V>(__ctx, v_out, ((((v_c_3 * v_chunk) + v_j_3)) * symm_cast<symm_u32>(G_V)), v_n, SYMM_AT(__ctx, v_got, v_c_3, 66));
}
}
}
v_j_3 += v_stride;
}
f_commit_epoch(__ctx, v_stage, v_epoch, v_ch);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_input_ptrs, const symm_u64* v_input_pads, symm_u32 v_input_rank, symm_u32 v_input_world, symm_u64 v_input_len, symm_u64 v_input_local, symm_u64 v_input_lpad, const symm_u64* v_stage_ptrs, const symm_u64* v_stage_pads, symm_u32 v_stage_rank, symm_u32 v_stage_world, symm_u64 v_stage_len, symm_u64 v_stage_local, symm_u64 v_stage_lpad, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n, symm_u32 v_cap, symm_u32 v_ch) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_two_shot_lamport<$G_T$, $G_V$, $G_W$>(__ctx, symm_buf<$G_T$>{v_input_ptrs, v_input_pads, v_input_rank, v_input_world, v_input_len, v_input_local, v_input_lpad}, symm_buf<$G_T$>{v_stage_ptrs, v_stage_pads, v_stage_rank, v_stage_world, v_stage_len, v_stage_local, v_stage_lpad}, symm_slice<$G_T$>{($G_T$*)v_out_ptr, v_out_len}, v_n, v_cap, v_ch);
}
