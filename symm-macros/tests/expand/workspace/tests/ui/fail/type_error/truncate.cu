// CUDA C of #[symm_kernel] on `truncate` in tests/ui/fail/type_error.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_truncate(const symm_kctx& __ctx, symm_slice<float> v_x, symm_slice<symm_u32> v_out, symm_u32 v_n) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
if ((v_i < v_n)) {
symm_u32 v_v = SYMM_AT(__ctx, v_x, v_i, 3);
SYMM_AT(__ctx, v_out, v_i, 4) = v_v;
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_truncate(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<symm_u32>{(symm_u32*)v_out_ptr, v_out_len}, v_n);
}
