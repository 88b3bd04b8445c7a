// CUDA C of #[symm_kernel] on `all_arrive` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_all_arrive(const symm_kctx& __ctx, symm_buf<symm_u32> v_buf, symm_u64 v_timeout_ns) {
if ((f_thread_idx_x(__ctx) == ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL))) {
auto v_total = (symm_world(v_buf) * f_grid_dim_x(__ctx));
auto v_home = symm_peer(v_buf, ((symm_u32)0ULL));
symm_dsl_add<SYMM_RELAXED, SYMM_SYS>(v_home, ((symm_u64)0ULL), 1);
auto v_t0 = f_globaltimer(__ctx);
while ((symm_dsl_load<SYMM_RELAXED, SYMM_SYS>(v_home, ((symm_u64)0ULL)) < v_total)) {
if (((f_globaltimer(__ctx) - v_t0) > v_timeout_ns)) {
symm_dsl_add<SYMM_RELAXED, SYMM_SYS>(symm_local(v_buf), ((symm_u64)1ULL), 1);
return;
}
}
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, symm_u64 v_timeout_ns) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_all_arrive(__ctx, symm_buf<symm_u32>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, v_timeout_ns);
}
