// CUDA C of #[symm_kernel] on `signal_barrier` in symm-runtime/src/signal.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_signal_barrier(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_channel, symm_u64 v_timeout_ns) {
auto v_p = f_thread_idx_x(__ctx);
if ((((v_p < symm_world(v_buf)) && (v_p != symm_rank(v_buf))) && symm_dsl_put_signal_within(__ctx, v_buf, v_p, v_channel, v_timeout_ns, true))) {
(void)(symm_dsl_wait_signal_within(__ctx, v_buf, v_p, v_channel, v_timeout_ns, true));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, symm_u32 v_channel, symm_u64 v_timeout_ns) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_signal_barrier<$G_T$>(__ctx, symm_buf<$G_T$>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, v_channel, v_timeout_ns);
}
