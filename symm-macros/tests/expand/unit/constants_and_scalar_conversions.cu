// CUDA C of #[symm_kernel] on the unit case `constants_and_scalar_conversions`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T>
__device__ __forceinline__ void k_k(const symm_kctx& __ctx, symm_slice<float> v_x, symm_slice<double> v_w, symm_slice<symm_u64> v_y, symm_slice<symm_u32> v_b, symm_slice<G_T> v_t) {
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 1) = (((symm_f32_from_bits(0x7f800000u) + symm_f32_from_bits(0xff7fffffu)) + symm_f32_from_bits(0x7fc00000u)) + symm_f32_from_bits((symm_u32)(SYMM_AT(__ctx, v_b, ((symm_u64)0ULL), 1))));
SYMM_AT(__ctx, v_w, ((symm_u64)0ULL), 2) = (((symm_f64_from_bits(0xfff0000000000000ULL) + symm_f64_from_bits(0x7fefffffffffffffULL)) + symm_f64_from_bits(0x3cb0000000000000ULL)) + symm_f64_from_bits((symm_u64)(SYMM_AT(__ctx, v_y, ((symm_u64)0ULL), 2))));
auto v_h = ((symm_i64)(-9223372036854775807LL - 1));
auto v_i = ((symm_i32)(-2147483648LL));
auto v_j = (((((symm_cast<symm_u64>(((symm_u8)255ULL)) + symm_cast<symm_u64>(((symm_u16)65535ULL))) + symm_cast<symm_u64>(((symm_u64)18446744073709551615ULL))) + symm_cast<symm_u64>(((symm_i64)9223372036854775807ULL))) + symm_cast<symm_u64>(v_h)) + symm_cast<symm_u64>(v_i));
SYMM_AT(__ctx, v_y, ((symm_u64)1ULL), 6) = v_j;
auto v_o = symm_bf16_from_bits((symm_u16)(((symm_u16)3ULL)));
auto v_p = symm_f16_from_bits((symm_u16)(((symm_u16)4ULL)));
SYMM_AT(__ctx, v_t, ((symm_u64)0ULL), 9) = (((symm_from_f32<G_T>(0.0f) + symm_from_f32<G_T>(1.0f)) + symm_from_f32<G_T>(SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 9))) + symm_from_bits32<G_T>((symm_u32)(SYMM_AT(__ctx, v_b, ((symm_u64)1ULL), 9))));
SYMM_AT(__ctx, v_x, ((symm_u64)2ULL), 10) = ((symm_to_f32(v_o) + symm_to_f32(v_p)) + symm_to_f32(SYMM_AT(__ctx, v_t, ((symm_u64)1ULL), 10)));
SYMM_AT(__ctx, v_b, ((symm_u64)2ULL), 11) = (symm_to_bits32(SYMM_AT(__ctx, v_t, ((symm_u64)2ULL), 11)) + symm_to_bits(SYMM_AT(__ctx, v_x, ((symm_u64)3ULL), 11)));
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_w_ptr, symm_u64 v_w_len, void* v_y_ptr, symm_u64 v_y_len, void* v_b_ptr, symm_u64 v_b_len, void* v_t_ptr, symm_u64 v_t_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k<$G_T$>(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<double>{(double*)v_w_ptr, v_w_len}, symm_slice<symm_u64>{(symm_u64*)v_y_ptr, v_y_len}, symm_slice<symm_u32>{(symm_u32*)v_b_ptr, v_b_len}, symm_slice<$G_T$>{($G_T$*)v_t_ptr, v_t_len});
}
