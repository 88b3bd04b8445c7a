// CUDA C of #[symm_kernel] on the unit case `literals_take_the_type_of_their_partner`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_k(const symm_kctx& __ctx, symm_slice<symm_u32> v_x, symm_u32 v_n, float v_f) {
auto v_a = (v_n + ((symm_u32)1ULL));
auto v_b = (2.5f * v_f);
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 0) = v_a;
SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 0) = symm_cast<symm_u32>(v_b);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, symm_u32 v_n, float v_f) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k(__ctx, symm_slice<symm_u32>{(symm_u32*)v_x_ptr, v_x_len}, v_n, v_f);
}
