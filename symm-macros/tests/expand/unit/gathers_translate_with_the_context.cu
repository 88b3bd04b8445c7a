// CUDA C of #[symm_kernel] on the unit case `gathers_translate_with_the_context`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_k(const symm_kctx& __ctx, symm_buf<float> v_st, symm_buf<symm_u64> v_ll, symm_slice<float> v_x, symm_slice<symm_u64> v_y) {
symm_array<symm_array<float, 4ULL>, 8ULL> v_g = symm_dsl_gather_ready<4ULL>(__ctx, symm_local(v_st), ((symm_u32)8ULL), ((symm_u32)16ULL), ((symm_u32)6ULL), 0.5f);
symm_array<symm_array<symm_u64, 2ULL>, 8ULL> v_p = symm_dsl_gather_tagged2(__ctx, symm_local(v_ll), ((symm_u32)0ULL), ((symm_u32)4ULL), ((symm_u32)3ULL), ((symm_u32)7ULL));
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 3) = SYMM_AT(__ctx, SYMM_AT(__ctx, v_g, ((symm_u64)1ULL), 3), ((symm_u64)2ULL), 3);
SYMM_AT(__ctx, v_y, ((symm_u64)0ULL), 4) = SYMM_AT(__ctx, SYMM_AT(__ctx, v_p, ((symm_u64)0ULL), 4), ((symm_u64)1ULL), 4);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_st_ptrs, const symm_u64* v_st_pads, symm_u32 v_st_rank, symm_u32 v_st_world, symm_u64 v_st_len, symm_u64 v_st_local, symm_u64 v_st_lpad, const symm_u64* v_ll_ptrs, const symm_u64* v_ll_pads, symm_u32 v_ll_rank, symm_u32 v_ll_world, symm_u64 v_ll_len, symm_u64 v_ll_local, symm_u64 v_ll_lpad, void* v_x_ptr, symm_u64 v_x_len, void* v_y_ptr, symm_u64 v_y_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k(__ctx, symm_buf<float>{v_st_ptrs, v_st_pads, v_st_rank, v_st_world, v_st_len, v_st_local, v_st_lpad}, symm_buf<symm_u64>{v_ll_ptrs, v_ll_pads, v_ll_rank, v_ll_world, v_ll_len, v_ll_local, v_ll_lpad}, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<symm_u64>{(symm_u64*)v_y_ptr, v_y_len});
}
