// CUDA C of #[symm_kernel] on `broadcast` in kernels/src/collectives.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_broadcast(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_root, symm_u32 v_n, symm_u32 v_ready, symm_u32 v_done) {
auto v_rank = symm_rank(v_buf);
auto v_world = symm_world(v_buf);
if ((f_thread_idx_x(__ctx) == ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL))) {
if ((v_rank == v_root)) {
{
const symm_u32 t_end1 = v_world;
for (symm_u32 v_p = ((symm_u32)0ULL); v_p < t_end1; v_p += 1) {
if ((v_p != v_root)) {
symm_dsl_put_signal(__ctx, v_buf, v_p, v_ready);
}
}
}
}
else {
symm_dsl_wait_signal(__ctx, v_buf, v_root, v_ready);
}
}
f_sync_threads(__ctx);
if ((v_rank != v_root)) {
auto v_src = symm_peer(v_buf, v_root);
auto v_dst = symm_local(v_buf);
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
while ((v_i < v_n)) {
SYMM_AT(__ctx, v_dst, v_i, 20) = SYMM_AT(__ctx, v_src, v_i, 20);
v_i += (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
}
}
f_sync_threads(__ctx);
if ((f_thread_idx_x(__ctx) == ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL))) {
if ((v_rank == v_root)) {
{
const symm_u32 t_end2 = v_world;
for (symm_u32 v_p_2 = ((symm_u32)0ULL); v_p_2 < t_end2; v_p_2 += 1) {
if ((v_p_2 != v_root)) {
symm_dsl_wait_signal(__ctx, v_buf, v_p_2, v_done);
}
}
}
}
else {
symm_dsl_put_signal(__ctx, v_buf, v_root, v_done);
}
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, symm_u32 v_root, symm_u32 v_n, symm_u32 v_ready, symm_u32 v_done) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_broadcast<$G_T$>(__ctx, symm_buf<$G_T$>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, v_root, v_n, v_ready, v_done);
}
