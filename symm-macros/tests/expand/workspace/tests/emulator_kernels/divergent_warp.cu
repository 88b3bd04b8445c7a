// CUDA C of #[symm_kernel] on `divergent_warp` in tests/emulator_kernels.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_divergent_warp(const symm_kctx& __ctx, symm_slice<symm_u32> v_out) {
auto v_t = f_thread_idx_x(__ctx);
if ((v_t < ((SYMM_TY(v_t))16ULL))) {
SYMM_AT(__ctx, v_out, v_t, 3) = f_ballot(__ctx, true);
}
else {
SYMM_AT(__ctx, v_out, v_t, 5) = f_shfl_xor(__ctx, v_t, 1);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_out_ptr, symm_u64 v_out_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_divergent_warp(__ctx, symm_slice<symm_u32>{(symm_u32*)v_out_ptr, v_out_len});
}
