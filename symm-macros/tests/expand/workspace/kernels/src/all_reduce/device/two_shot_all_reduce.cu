// CUDA C of #[symm_kernel] on `two_shot_all_reduce` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V, symm_u64 G_W>
__device__ __forceinline__ void k_two_shot_all_reduce(const symm_kctx& __ctx, symm_buf<G_T> v_input, symm_buf<G_T> v_scratch, symm_slice<G_T> v_out, symm_u32 v_n, symm_u32 v_ch) {
f_enter_call(__ctx);
auto v_rank = symm_rank(v_input);
auto v_world = (((G_W > ((symm_u64)0ULL))) ? (symm_cast<symm_u32>(G_W)) : (symm_world(v_input)));
auto v_epoch = f_next_epoch(__ctx, v_input, v_ch);
f_epoch_barrier(__ctx, v_input, v_ch, v_epoch);
auto v_stride = (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
auto v_first = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
auto v_vecs = (v_n / symm_cast<symm_u32>(G_V));
auto v_chunk = ((((v_vecs + v_world) - ((symm_u32)1ULL))) / v_world);
auto v_base = (v_rank * v_chunk);
auto v_j = v_first;
while (((v_j < v_chunk) && ((v_base + v_j) < v_vecs))) {
auto v_i = (((v_base + v_j)) * symm_cast<symm_u32>(G_V));
auto v_res = f_sum_peers<G_T, G_V>(__ctx, v_input, v_i, v_world);
{
const SYMM_TY(v_world) t_end1 = v_world;
for (SYMM_TY(v_world) v_r = ((SYMM_TY(v_world))0ULL); v_r < t_end1; v_r += 1) {
symm_dsl_store_vec(symm_peer(v_scratch, v_r), v_i, v_res);
}
}
v_j += v_stride;
}
auto v_e = ((v_vecs * symm_cast<symm_u32>(G_V)) + v_first);
float v_tail = 0.0f;
if ((v_e < v_n)) {
{
const SYMM_TY(v_world) t_end2 = v_world;
for (SYMM_TY(v_world) v_r_2 = ((SYMM_TY(v_world))0ULL); v_r_2 < t_end2; v_r_2 += 1) {
v_tail += symm_to_f32(SYMM_AT(__ctx, symm_peer(v_input, v_r_2), v_e, 34));
}
}
}
f_sync_threads(__ctx);
f_epoch_barrier(__ctx, v_input, (v_ch + ((symm_u32)1ULL)), v_epoch);
auto v_mine = symm_local(v_scratch);
{
const SYMM_TY(v_world) t_end3 = v_world;
for (SYMM_TY(v_world) v_c = ((SYMM_TY(v_world))0ULL); v_c < t_end3; v_c += 1) {
auto v_j_2 = v_first;
while (((v_j_2 < v_chunk) && (((v_c * v_chunk) + v_j_2) < v_vecs))) {
auto v_i_2 = ((((v_c * v_chunk) + v_j_2)) * symm_cast<symm_u32>(G_V));
symm_dsl_store_vec(v_out, v_i_2, symm_dsl_load_vec<G_V>(v_mine, v_i_2));
v_j_2 += v_stride;
}
}
}
if ((v_e < v_n)) {
SYMM_AT(__ctx, v_out, v_e, 49) = symm_from_f32<G_T>(v_tail);
}
f_commit_epoch(__ctx, v_input, v_epoch, v_ch);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_input_ptrs, const symm_u64* v_input_pads, symm_u32 v_input_rank, symm_u32 v_input_world, symm_u64 v_input_len, symm_u64 v_input_local, symm_u64 v_input_lpad, const symm_u64* v_scratch_ptrs, const symm_u64* v_scratch_pads, symm_u32 v_scratch_rank, symm_u32 v_scratch_world, symm_u64 v_scratch_len, symm_u64 v_scratch_local, symm_u64 v_scratch_lpad, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n, symm_u32 v_ch) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_two_shot_all_reduce<$G_T$, $G_V$, $G_W$>(__ctx, symm_buf<$G_T$>{v_input_ptrs, v_input_pads, v_input_rank, v_input_world, v_input_len, v_input_local, v_input_lpad}, symm_buf<$G_T$>{v_scratch_ptrs, v_scratch_pads, v_scratch_rank, v_scratch_world, v_scratch_len, v_scratch_local, v_scratch_lpad}, symm_slice<$G_T$>{($G_T$*)v_out_ptr, v_out_len}, v_n, v_ch);
}
