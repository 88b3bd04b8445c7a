// CUDA C of #[symm_kernel] on `keep` in tests/support/calls.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_keep(const symm_kctx& __ctx, symm_slice<float> v_src, symm_slice<float> v_dst, symm_u32 v_offset, symm_u32 v_n) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
while ((v_i < v_n)) {
SYMM_AT(__ctx, v_dst, (v_offset + v_i), 3) = SYMM_AT(__ctx, v_src, v_i, 3);
v_i += (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_src_ptr, symm_u64 v_src_len, void* v_dst_ptr, symm_u64 v_dst_len, symm_u32 v_offset, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_keep(__ctx, symm_slice<float>{(float*)v_src_ptr, v_src_len}, symm_slice<float>{(float*)v_dst_ptr, v_dst_len}, v_offset, v_n);
}
