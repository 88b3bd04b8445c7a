// CUDA C of #[symm_kernel] on `one_shot_sum` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_one_shot_sum(const symm_kctx& __ctx, symm_buf<float> v_buf, symm_slice<float> v_out, symm_u32 v_n, symm_u32 v_entry, symm_u32 v_exit) {
auto v_rank = symm_rank(v_buf);
auto v_world = symm_world(v_buf);
auto v_t = f_thread_idx_x(__ctx);
if (((v_t < v_world) && (v_t != v_rank))) {
symm_dsl_put_signal(__ctx, v_buf, v_t, v_entry);
symm_dsl_wait_signal(__ctx, v_buf, v_t, v_entry);
}
f_sync_threads(__ctx);
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + v_t);
while ((v_i < v_n)) {
float v_acc = 0.0f;
{
const symm_u32 t_end1 = v_world;
for (symm_u32 v_r = ((symm_u32)0ULL); v_r < t_end1; v_r += 1) {
v_acc += SYMM_AT(__ctx, symm_peer(v_buf, v_r), v_i, 13);
}
}
SYMM_AT(__ctx, v_out, v_i, 15) = v_acc;
v_i += (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
}
f_sync_threads(__ctx);
if (((v_t < v_world) && (v_t != v_rank))) {
symm_dsl_put_signal(__ctx, v_buf, v_t, v_exit);
symm_dsl_wait_signal(__ctx, v_buf, v_t, v_exit);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n, symm_u32 v_entry, symm_u32 v_exit) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_one_shot_sum(__ctx, symm_buf<float>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, symm_slice<float>{(float*)v_out_ptr, v_out_len}, v_n, v_entry, v_exit);
}
