// CUDA C of #[symm_kernel] on `stage` in tests/ui/fail/shared_array_not_let.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void f_stage(const symm_kctx& __ctx, symm_array<float, 256ULL>& v_tile, float v_v) {
SYMM_AT(__ctx, v_tile, f_thread_idx_x(__ctx), 1) = v_v;
}
