// CUDA C of #[symm_kernel] on `ring_all_gather` in kernels/src/collectives.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_ring_all_gather(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_chunk, symm_u32 v_channel) {
auto v_rank = symm_rank(v_buf);
auto v_world = symm_world(v_buf);
auto v_next = symm_rem(((v_rank + ((symm_u32)1ULL))), v_world);
auto v_prev = symm_rem((((v_rank + v_world) - ((symm_u32)1ULL))), v_world);
auto v_stride = (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
auto v_src = symm_local(v_buf);
auto v_dst = symm_peer(v_buf, v_next);
{
const symm_u32 t_end1 = (v_world - ((symm_u32)1ULL));
for (symm_u32 v_step = ((symm_u32)0ULL); v_step < t_end1; v_step += 1) {
auto v_base = ((symm_rem((((v_rank + v_world) - v_step)), v_world)) * v_chunk);
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
while ((v_i < v_chunk)) {
SYMM_AT(__ctx, v_dst, (v_base + v_i), 12) = SYMM_AT(__ctx, v_src, (v_base + v_i), 12);
v_i += v_stride;
}
f_sync_threads(__ctx);
if ((f_thread_idx_x(__ctx) == ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL))) {
symm_dsl_put_signal(__ctx, v_buf, v_next, v_channel);
symm_dsl_wait_signal(__ctx, v_buf, v_prev, v_channel);
}
f_sync_threads(__ctx);
}
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, symm_u32 v_chunk, symm_u32 v_channel) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_ring_all_gather<$G_T$>(__ctx, symm_buf<$G_T$>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, v_chunk, v_channel);
}
