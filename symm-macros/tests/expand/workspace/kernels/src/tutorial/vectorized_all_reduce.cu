// CUDA C of #[symm_kernel] on `vectorized_all_reduce` in kernels/src/tutorial.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V>
__device__ __forceinline__ void k_vectorized_all_reduce(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_slice<G_T> v_out, symm_u32 v_n, symm_u32 v_entry, symm_u32 v_exit) {
f_block_barrier(__ctx, v_buf, v_entry);
auto v_world = symm_world(v_buf);
auto v_stride = (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
auto v_first = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
auto v_vecs = (v_n / symm_cast<symm_u32>(G_V));
auto v_v = v_first;
while ((v_v < v_vecs)) {
symm_array<G_T, G_V> v_zero = symm_array_fill<G_T, G_V>(symm_from_f32<G_T>(0.0f));
symm_array<symm_array<G_T, G_V>, 8ULL> v_parts = symm_array_fill<symm_array<G_T, G_V>, 8ULL>(v_zero);
{
const symm_u32 t_end1 = v_world;
for (symm_u32 v_r = ((symm_u32)0ULL); v_r < t_end1; v_r += 1) {
SYMM_AT(__ctx, v_parts, v_r, 17) = symm_dsl_load_vec<G_V>(symm_peer(v_buf, v_r), (v_v * symm_cast<symm_u32>(G_V)));
}
}
symm_array<float, G_V> v_acc = symm_array_fill<float, G_V>(0.0f);
{
const symm_u32 t_end2 = v_world;
for (symm_u32 v_r_2 = ((symm_u32)0ULL); v_r_2 < t_end2; v_r_2 += 1) {
auto v_p = SYMM_AT(__ctx, v_parts, v_r_2, 21);
{
const symm_u64 t_end3 = G_V;
#pragma unroll
for (symm_u64 v_k = ((symm_u64)0ULL); v_k < t_end3; v_k += 1) {
SYMM_AT(__ctx, v_acc, v_k, 23) += symm_to_f32(SYMM_AT(__ctx, v_p, v_k, 23));
}
}
}
}
symm_array<G_T, G_V> v_res = v_zero;
{
const symm_u64 t_end4 = G_V;
#pragma unroll
for (symm_u64 v_k_2 = ((symm_u64)0ULL); v_k_2 < t_end4; v_k_2 += 1) {
SYMM_AT(__ctx, v_res, v_k_2, 28) = symm_from_f32<G_T>(SYMM_AT(__ctx, v_acc, v_k_2, 28));
}
}
symm_dsl_store_vec(v_out, (v_v * symm_cast<symm_u32>(G_V)), v_res);
v_v += v_stride;
}
auto v_i = ((v_vecs * symm_cast<symm_u32>(G_V)) + v_first);
while ((v_i < v_n)) {
float v_acc_2 = 0.0f;
{
const symm_u32 t_end5 = v_world;
for (symm_u32 v_r_3 = ((symm_u32)0ULL); v_r_3 < t_end5; v_r_3 += 1) {
v_acc_2 += symm_to_f32(SYMM_AT(__ctx, symm_peer(v_buf, v_r_3), v_i, 37));
}
}
SYMM_AT(__ctx, v_out, v_i, 39) = symm_from_f32<G_T>(v_acc_2);
v_i += v_stride;
}
f_block_barrier(__ctx, v_buf, v_exit);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n, symm_u32 v_entry, symm_u32 v_exit) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_vectorized_all_reduce<$G_T$, $G_V$>(__ctx, symm_buf<$G_T$>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, symm_slice<$G_T$>{($G_T$*)v_out_ptr, v_out_len}, v_n, v_entry, v_exit);
}
