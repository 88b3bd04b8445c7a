// CUDA C of #[symm_kernel] on `sum_in_rank_order` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V>
__device__ __forceinline__ symm_array<G_T, G_V> f_sum_in_rank_order(const symm_kctx& __ctx, symm_array<symm_array<G_T, G_V>, 8ULL> v_vals, symm_u32 v_world) {
return f_sum_with_own<G_T, G_V>(__ctx, v_vals, SYMM_AT(__ctx, v_vals, ((symm_u64)0ULL), 1), 8, v_world);
}
