// CUDA C of #[symm_kernel] on `stash_reversed` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) symm_u32 f_stash_reversed(const symm_kctx& __ctx, symm_u32 v_v) {
__shared__ symm_array<symm_u32, 32ULL> v_s;
auto v_t = f_thread_idx_x(__ctx);
SYMM_AT(__ctx, v_s, v_t, 3) = v_v;
f_sync_threads(__ctx);
return SYMM_AT(__ctx, v_s, (((SYMM_TY(v_t))31ULL) - v_t), 5);
}
