// CUDA C of #[symm_kernel] on `spread_first` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) symm_u32 f_spread_first(const symm_kctx& __ctx) {
auto v_t = f_thread_idx_x(__ctx);
return (((((((v_t / ((SYMM_TY(v_t))32ULL))) * f_grid_dim_x(__ctx)) + f_block_idx_x(__ctx))) * ((SYMM_TY((((((v_t / ((SYMM_TY(v_t))32ULL))) * f_grid_dim_x(__ctx)) + f_block_idx_x(__ctx)))))32ULL)) + symm_rem(v_t, ((SYMM_TY(v_t))32ULL)));
}
