// CUDA C of #[symm_kernel] on the unit case `shadowing_gets_fresh_cpp_names`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_k(const symm_kctx& __ctx, symm_slice<symm_u32> v_x, symm_u32 v_n) {
auto v_a = v_n;
auto v_a_2 = (v_a + v_n);
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 0) = v_a_2;
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k(__ctx, symm_slice<symm_u32>{(symm_u32*)v_x_ptr, v_x_len}, v_n);
}
