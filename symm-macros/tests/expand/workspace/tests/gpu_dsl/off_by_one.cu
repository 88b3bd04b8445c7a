// CUDA C of #[symm_kernel] on `off_by_one` in tests/gpu_dsl.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_off_by_one(const symm_kctx& __ctx, symm_slice<float> v_x, symm_slice<float> v_y, symm_u32 v_n) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
if ((v_i <= v_n)) {
SYMM_AT(__ctx, v_y, v_i, 3) = (SYMM_AT(__ctx, v_x, v_i, 3) * 2.0f);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_y_ptr, symm_u64 v_y_len, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_off_by_one(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<float>{(float*)v_y_ptr, v_y_len}, v_n);
}
