// CUDA C of #[symm_kernel] on `next_epoch` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ symm_u32 f_next_epoch(const symm_kctx& __ctx, symm_buf<G_T> v_buf, symm_u32 v_ch) {
auto v_rank = symm_rank(v_buf);
return symm_wrapping_add(symm_dsl_load<SYMM_RELAXED, SYMM_GPU>(symm_pad(v_buf, v_rank), f_signal_slot(__ctx, (v_ch + ((symm_u32)2ULL)), f_block_idx_x(__ctx), v_rank)), ((SYMM_TY(symm_dsl_load<SYMM_RELAXED, SYMM_GPU>(symm_pad(v_buf, v_rank), f_signal_slot(__ctx, (v_ch + ((symm_u32)2ULL)), f_block_idx_x(__ctx), v_rank))))1ULL));
}
