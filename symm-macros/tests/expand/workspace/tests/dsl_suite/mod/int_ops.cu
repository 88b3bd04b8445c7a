// CUDA C of #[symm_kernel] on `int_ops` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_int_ops(const symm_kctx& __ctx, symm_slice<symm_u32> v_x, symm_slice<symm_u32> v_out, symm_u32 v_n) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
if ((v_i < v_n)) {
auto v_a = SYMM_AT(__ctx, v_x, v_i, 3);
auto v_s = ((symm_cast<symm_i32>(v_a)) >> 3);
auto v_f = (symm_cast<float>((symm_rem(v_a, ((SYMM_TY(v_a))1000ULL)))) * 0.5f);
auto v_r = (((v_a ^ ((v_a << 3)))) >> 2);
v_r = symm_wrapping_add(v_r, (symm_rem(v_a, ((SYMM_TY(v_a))7ULL)) * (((v_a / ((SYMM_TY(v_a))13ULL)) + ((SYMM_TY((v_a / ((SYMM_TY(v_a))13ULL))))1ULL)))));
v_r |= (symm_not(v_a) & ((SYMM_TY(symm_not(v_a)))255ULL));
SYMM_AT(__ctx, v_out, v_i, 9) = (((v_r ^ (symm_cast<symm_u32>(v_s))) ^ (symm_cast<symm_u32>(v_f))) ^ symm_cast<symm_u32>(((((symm_cast<symm_u64>(v_a) * ((symm_u64)3ULL))) >> 33))));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_int_ops(__ctx, symm_slice<symm_u32>{(symm_u32*)v_x_ptr, v_x_len}, symm_slice<symm_u32>{(symm_u32*)v_out_ptr, v_out_len}, v_n);
}
