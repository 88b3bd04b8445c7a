// CUDA C of #[symm_kernel] on `block_barrier` in kernels/src/tutorial.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void f_block_barrier(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_channel) {
f_sync_threads(__ctx);
auto v_p = f_thread_idx_x(__ctx);
if (((v_p < symm_world(v_buf)) && (v_p != symm_rank(v_buf)))) {
symm_dsl_put_signal(__ctx, v_buf, v_p, v_channel);
symm_dsl_wait_signal(__ctx, v_buf, v_p, v_channel);
}
f_sync_threads(__ctx);
}
