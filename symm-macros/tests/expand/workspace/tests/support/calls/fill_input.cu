// CUDA C of #[symm_kernel] on `fill_input` in tests/support/calls.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_fill_input(const symm_kctx& __ctx, symm_buf<float> v_buf, symm_u32 v_n, symm_u32 v_k, symm_u32 v_seed) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
auto v_r = symm_rank(v_buf);
auto v_mine = symm_local(v_buf);
while ((v_i < v_n)) {
auto v_h = (((symm_wrapping_mul(v_i, ((symm_u32)2654435761ULL)) ^ symm_wrapping_mul(v_k, ((symm_u32)40503ULL))) ^ symm_wrapping_mul(v_r, ((symm_u32)2246822519ULL))) ^ v_seed);
auto v_x = (v_h ^ ((v_h >> 15)));
SYMM_AT(__ctx, v_mine, v_i, 10) = (((symm_cast<float>((symm_rem(v_x, ((symm_u32)2001ULL)))) - 1000.0f)) / 1000.0f);
v_i += (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, symm_u32 v_n, symm_u32 v_k, symm_u32 v_seed) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_fill_input(__ctx, symm_buf<float>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, v_n, v_k, v_seed);
}
