// CUDA C of #[symm_kernel] on `warp_moves` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_warp_moves(const symm_kctx& __ctx, symm_slice<symm_u64> v_x, symm_slice<symm_u64> v_down, symm_slice<symm_u32> v_up, symm_slice<symm_bf16> v_idx, symm_u32 v_delta, symm_u32 v_s) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
auto v_v = SYMM_AT(__ctx, v_x, v_i, 9);
SYMM_AT(__ctx, v_down, v_i, 10) = f_shfl_down(__ctx, v_v, v_delta);
SYMM_AT(__ctx, v_up, v_i, 11) = f_shfl_up(__ctx, symm_cast<symm_u32>(v_v), v_delta);
auto v_src = symm_rem((((f_lane_id(__ctx) * ((SYMM_TY(f_lane_id(__ctx)))7ULL)) + v_s)), ((symm_u32)37ULL));
SYMM_AT(__ctx, v_idx, v_i, 13) = f_shfl_idx(__ctx, symm_bf16_from_bits((symm_u16)(symm_cast<symm_u16>(((v_v >> 16))))), v_src);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_down_ptr, symm_u64 v_down_len, void* v_up_ptr, symm_u64 v_up_len, void* v_idx_ptr, symm_u64 v_idx_len, symm_u32 v_delta, symm_u32 v_s) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_warp_moves(__ctx, symm_slice<symm_u64>{(symm_u64*)v_x_ptr, v_x_len}, symm_slice<symm_u64>{(symm_u64*)v_down_ptr, v_down_len}, symm_slice<symm_u32>{(symm_u32*)v_up_ptr, v_up_len}, symm_slice<symm_bf16>{(symm_bf16*)v_idx_ptr, v_idx_len}, v_delta, v_s);
}
