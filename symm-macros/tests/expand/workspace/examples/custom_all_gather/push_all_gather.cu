// CUDA C of #[symm_kernel] on `push_all_gather` in examples/custom_all_gather.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_push_all_gather(const symm_kctx& __ctx, symm_slice<G_T> v_input, symm_buf<G_T> v_out, symm_u32 v_chunk, symm_u32 v_entry, symm_u32 v_exit) {
auto v_rank = symm_rank(v_out);
auto v_world = symm_world(v_out);
auto v_t = f_thread_idx_x(__ctx);
if (((v_t < v_world) && (v_t != v_rank))) {
symm_dsl_put_signal(__ctx, v_out, v_t, v_entry);
symm_dsl_wait_signal(__ctx, v_out, v_t, v_entry);
}
f_sync_threads(__ctx);
auto v_stride = (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
{
const symm_u32 t_end1 = v_world;
for (symm_u32 v_k = ((symm_u32)0ULL); v_k < t_end1; v_k += 1) {
auto v_dst = symm_peer(v_out, symm_rem(((v_rank + v_k)), v_world));
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + v_t);
while ((v_i < v_chunk)) {
SYMM_AT(__ctx, v_dst, ((v_rank * v_chunk) + v_i), 23) = SYMM_AT(__ctx, v_input, v_i, 23);
v_i += v_stride;
}
}
}
f_sync_threads(__ctx);
if (((v_t < v_world) && (v_t != v_rank))) {
symm_dsl_put_signal(__ctx, v_out, v_t, v_exit);
symm_dsl_wait_signal(__ctx, v_out, v_t, v_exit);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_input_ptr, symm_u64 v_input_len, const symm_u64* v_out_ptrs, const symm_u64* v_out_pads, symm_u32 v_out_rank, symm_u32 v_out_world, symm_u64 v_out_len, symm_u64 v_out_local, symm_u64 v_out_lpad, symm_u32 v_chunk, symm_u32 v_entry, symm_u32 v_exit) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_push_all_gather<$G_T$>(__ctx, symm_slice<$G_T$>{($G_T$*)v_input_ptr, v_input_len}, symm_buf<$G_T$>{v_out_ptrs, v_out_pads, v_out_rank, v_out_world, v_out_len, v_out_local, v_out_lpad}, v_chunk, v_entry, v_exit);
}
