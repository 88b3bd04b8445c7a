// CUDA C of #[symm_kernel] on `naive_all_reduce` in kernels/src/tutorial.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_naive_all_reduce(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_slice<G_T> v_out, symm_u32 v_n, symm_u32 v_entry, symm_u32 v_exit) {
f_block_barrier(__ctx, v_buf, v_entry);
auto v_stride = (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
while ((v_i < v_n)) {
float v_acc = 0.0f;
{
const symm_u32 t_end1 = symm_world(v_buf);
for (symm_u32 v_r = ((symm_u32)0ULL); v_r < t_end1; v_r += 1) {
v_acc += symm_to_f32(SYMM_AT(__ctx, symm_peer(v_buf, v_r), v_i, 7));
}
}
SYMM_AT(__ctx, v_out, v_i, 9) = symm_from_f32<G_T>(v_acc);
v_i += v_stride;
}
f_block_barrier(__ctx, v_buf, v_exit);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n, symm_u32 v_entry, symm_u32 v_exit) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_naive_all_reduce<$G_T$>(__ctx, symm_buf<$G_T$>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, symm_slice<$G_T$>{($G_T$*)v_out_ptr, v_out_len}, v_n, v_entry, v_exit);
}
