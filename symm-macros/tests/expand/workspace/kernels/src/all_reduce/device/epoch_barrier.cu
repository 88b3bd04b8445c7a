// CUDA C of #[symm_kernel] on `epoch_barrier` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void f_epoch_barrier(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_channel, symm_u32 v_epoch) {
auto v_t = f_thread_idx_x(__ctx);
if (((v_t < symm_world(v_buf)) && (v_t != symm_rank(v_buf)))) {
symm_dsl_signal_flag(__ctx, v_buf, v_t, v_channel, v_epoch);
symm_dsl_wait_flag(__ctx, v_buf, v_t, v_channel, v_epoch);
}
f_sync_threads(__ctx);
}
