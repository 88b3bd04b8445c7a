// CUDA C of #[symm_kernel] on the unit case `if_values_become_ternaries_or_lambdas`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_k(const symm_kctx& __ctx, symm_slice<symm_i32> v_x, symm_i32 v_n) {
auto v_a = (((v_n > ((symm_i32)0ULL))) ? (v_n) : ((-v_n)));
symm_i32 v_b = ([&]() -> symm_i32 { if ((v_n > ((symm_i32)1ULL))) {
auto v_t = (v_n * ((symm_i32)2ULL));
return v_t;
} else {
return ((symm_i32)0ULL);
} }());
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 0) = (v_a + v_b);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, symm_i32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k(__ctx, symm_slice<symm_i32>{(symm_i32*)v_x_ptr, v_x_len}, v_n);
}
