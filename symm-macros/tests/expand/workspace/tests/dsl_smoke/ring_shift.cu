// CUDA C of #[symm_kernel] on `ring_shift` in tests/dsl_smoke.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_ring_shift(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_n) {
auto v_next = symm_rem(((symm_rank(v_buf) + ((symm_u32)1ULL))), symm_world(v_buf));
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
if ((v_i < v_n)) {
SYMM_AT(__ctx, symm_peer(v_buf, v_next), v_i, 4) = SYMM_AT(__ctx, symm_local(v_buf), v_i, 4);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_ring_shift<$G_T$>(__ctx, symm_buf<$G_T$>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, v_n);
}
