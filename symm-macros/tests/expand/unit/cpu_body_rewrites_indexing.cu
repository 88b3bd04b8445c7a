// CUDA C of #[symm_kernel] on the unit case `cpu_body_rewrites_indexing`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_k(const symm_kctx& __ctx, symm_slice<float> v_x, symm_slice<float> v_y) {
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 0) += SYMM_AT(__ctx, v_y, ((symm_u64)1ULL), 0);
SYMM_AT(__ctx, v_x, ((symm_u64)2ULL), 0) = ((SYMM_TY(SYMM_AT(__ctx, v_x, ((symm_u64)2ULL), 0)))3.0);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_y_ptr, symm_u64 v_y_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<float>{(float*)v_y_ptr, v_y_len});
}
