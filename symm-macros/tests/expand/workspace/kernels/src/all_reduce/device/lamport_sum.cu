// CUDA C of #[symm_kernel] on `lamport_sum` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_V>
__device__ __forceinline__ symm_array<G_T, G_V> f_lamport_sum(const symm_kctx& __ctx, symm_array<G_T, G_V> v_own, symm_slice<G_T> v_stage, symm_u32 v_base, symm_u32 v_cap, symm_u32 v_j, symm_u32 v_rank, symm_u32 v_world) {
auto v_peers = (((((((symm_u32)1ULL) << v_world)) - ((symm_u32)1ULL))) & symm_not(((((symm_u32)1ULL) << v_rank))));
auto v_vals = f_lamport_take<G_T, G_V>(__ctx, v_stage, (v_base + v_j), v_cap, v_peers, v_world);
return f_sum_with_own<G_T, G_V>(__ctx, v_vals, v_own, v_rank, v_world);
}
