// CUDA C of #[symm_kernel] on `enter_call` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void f_enter_call(const symm_kctx& __ctx) {
f_grid_dependency_wait(__ctx);
f_launch_dependents(__ctx);
}
