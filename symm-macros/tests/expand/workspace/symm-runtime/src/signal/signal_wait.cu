// CUDA C of #[symm_kernel] on `signal_wait` in symm-runtime/src/signal.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_signal_wait(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_src, symm_u32 v_channel, symm_u64 v_timeout_ns) {
if ((f_thread_idx_x(__ctx) == ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL))) {
(void)(symm_dsl_wait_signal_within(__ctx, v_buf, v_src, v_channel, v_timeout_ns, false));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, symm_u32 v_src, symm_u32 v_channel, symm_u64 v_timeout_ns) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_signal_wait<$G_T$>(__ctx, symm_buf<$G_T$>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, v_src, v_channel, v_timeout_ns);
}
