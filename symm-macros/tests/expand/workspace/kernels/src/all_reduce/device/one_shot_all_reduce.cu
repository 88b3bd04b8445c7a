// CUDA C of #[symm_kernel] on `one_shot_all_reduce` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V, symm_u64 G_W>
__device__ __forceinline__ void k_one_shot_all_reduce(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_slice<G_T> v_out, symm_u32 v_n, symm_u32 v_ch) {
f_enter_call(__ctx);
auto v_rank = symm_rank(v_buf);
auto v_world = (((G_W > ((symm_u64)0ULL))) ? (symm_cast<symm_u32>(G_W)) : (symm_world(v_buf)));
auto v_epoch = f_next_epoch(__ctx, v_buf, v_ch);
f_epoch_barrier(__ctx, v_buf, v_ch, v_epoch);
auto v_stride = (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
auto v_first = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
auto v_vecs = (v_n / symm_cast<symm_u32>(G_V));
auto v_i = v_first;
while ((v_i < v_vecs)) {
auto v_res = f_sum_peers<G_T, G_V>(__ctx, v_buf, (v_i * symm_cast<symm_u32>(G_V)), v_world);
symm_dsl_store_vec(v_out, (v_i * symm_cast<symm_u32>(G_V)), v_res);
v_i += v_stride;
}
auto v_j = ((v_vecs * symm_cast<symm_u32>(G_V)) + v_first);
while ((v_j < v_n)) {
float v_acc = 0.0f;
{
const SYMM_TY(v_world) t_end1 = v_world;
for (SYMM_TY(v_world) v_r = ((SYMM_TY(v_world))0ULL); v_r < t_end1; v_r += 1) {
v_acc += symm_to_f32(SYMM_AT(__ctx, symm_peer(v_buf, v_r), v_j, 26));
}
}
SYMM_AT(__ctx, v_out, v_j, 28) = symm_from_f32<G_T>(v_acc);
v_j += v_stride;
}
f_sync_threads(__ctx);
f_epoch_barrier(__ctx, v_buf, (v_ch + ((symm_u32)1ULL)), v_epoch);
f_commit_epoch(__ctx, v_buf, v_epoch, v_ch);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n, symm_u32 v_ch) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_one_shot_all_reduce<$G_T$, $G_V$, $G_W$>(__ctx, symm_buf<$G_T$>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, symm_slice<$G_T$>{($G_T$*)v_out_ptr, v_out_len}, v_n, v_ch);
}
