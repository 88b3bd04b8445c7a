// CUDA C of #[symm_kernel] on `one_remote_store` in examples/bench_all_reduce.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_one_remote_store(const symm_kctx& __ctx, symm_buf<symm_u32> v_buf) {
f_grid_dependency_wait(__ctx);
f_launch_dependents(__ctx);
if (((f_block_idx_x(__ctx) == ((SYMM_TY(f_block_idx_x(__ctx)))0ULL)) && (f_thread_idx_x(__ctx) == ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL)))) {
auto v_next = symm_rem(((symm_rank(v_buf) + ((symm_u32)1ULL))), symm_world(v_buf));
symm_dsl_store<SYMM_RELAXED, SYMM_SYS>(symm_peer(v_buf, v_next), ((symm_u32)0ULL), ((symm_u32)1ULL));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_one_remote_store(__ctx, symm_buf<symm_u32>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad});
}
