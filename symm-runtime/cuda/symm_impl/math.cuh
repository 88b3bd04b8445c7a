/* Arithmetic that must round exactly as Rust does on the CPU: IEEE f32
   operations in inline PTX, bf16/f16/f8e4m3/f8e5m2 operators,
   min/max/abs/fma/sqrt. Part of PRELUDE; see symm_core.cuh. */
#ifndef SYMM_IMPL_MATH_CUH
#define SYMM_IMPL_MATH_CUH

/* ---- IEEE f32 arithmetic in inline PTX ----
   An explicit rounding mode keeps ptxas from contracting mul+add into fma,
   and inline PTX ignores --use_fast_math / --ftz / --prec-div, so these
   always round like Rust on the CPU (subnormals kept). */

namespace symm_detail {
SYMM_DEVICE_FN float add_rn(float a, float b) {
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
SYMM_DEVICE_FN float sub_rn(float a, float b) {
    float r;
    asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
SYMM_DEVICE_FN float mul_rn(float a, float b) {
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
SYMM_DEVICE_FN float div_rn(float a, float b) {
    float r;
    asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
} /* namespace symm_detail */

/* ---- bf16 / f16 operators, as Rust's `half` crate defines them (and the
   fp8 ones as symm's Rust types do): widen to f32 (exact), compute in f32,
   round to nearest even. Negation flips the sign bit (SIGN, of the bits'
   type U); comparisons are f32 comparisons (NaN unordered, -0 == +0). ---- */

#define SYMM_HALF_ARITH(H, FROM_F32, OP, F32_OP)                                         \
    SYMM_DEVICE_FN H operator OP(H a, H b) {                                             \
        return FROM_F32(symm_detail::F32_OP(symm_detail::to_f32(a), symm_detail::to_f32(b))); \
    }                                                                                    \
    SYMM_DEVICE_FN H& operator OP##=(H& a, H b) { return a = a OP b; }
#define SYMM_HALF_CMP(H, OP)                                                             \
    SYMM_DEVICE_FN bool operator OP(H a, H b) {                                          \
        return symm_detail::to_f32(a) OP symm_detail::to_f32(b);                         \
    }
#define SYMM_HALF_OPERATORS(H, FROM_F32, U, SIGN)                                        \
    SYMM_HALF_ARITH(H, FROM_F32, +, add_rn)                                              \
    SYMM_HALF_ARITH(H, FROM_F32, -, sub_rn)                                              \
    SYMM_HALF_ARITH(H, FROM_F32, *, mul_rn)                                              \
    SYMM_HALF_ARITH(H, FROM_F32, /, div_rn)                                              \
    SYMM_DEVICE_FN H operator-(H a) {                                                    \
        H r;                                                                             \
        r.bits = (U)(a.bits ^ SIGN);                                                     \
        return r;                                                                        \
    }                                                                                    \
    SYMM_HALF_CMP(H, ==)                                                                 \
    SYMM_HALF_CMP(H, !=)                                                                 \
    SYMM_HALF_CMP(H, <)                                                                  \
    SYMM_HALF_CMP(H, <=)                                                                 \
    SYMM_HALF_CMP(H, >)                                                                  \
    SYMM_HALF_CMP(H, >=)

SYMM_HALF_OPERATORS(symm_bf16, symm_f32_to_bf16, symm_u16, 0x8000u)
SYMM_HALF_OPERATORS(symm_f16, symm_f32_to_f16, symm_u16, 0x8000u)
SYMM_HALF_OPERATORS(symm_f8e4m3, symm_f32_to_f8e4m3, symm_u8, 0x80u)
SYMM_HALF_OPERATORS(symm_f8e5m2, symm_f32_to_f8e5m2, symm_u8, 0x80u)
#undef SYMM_HALF_OPERATORS
#undef SYMM_HALF_CMP
#undef SYMM_HALF_ARITH

/* ---- Math ---- */

/* f32/f64 min and max are IEEE minNum/maxNum like Rust's f32::min/max: a
   NaN operand yields the other operand (PTX min/max without .NaN). Of two
   zeros, min is -0.0 and max +0.0, whatever their order (Rust leaves this
   open; the emulator does the same): PTX's choice is not relied on. */
SYMM_DEVICE_FN float symm_min(float a, float b) {
    float r;
    asm("min.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    if (a == b) r = symm_f32_from_bits(symm_to_bits(a) | symm_to_bits(b));
    return r;
}
SYMM_DEVICE_FN float symm_max(float a, float b) {
    float r;
    asm("max.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    if (a == b) r = symm_f32_from_bits(symm_to_bits(a) & symm_to_bits(b));
    return r;
}
SYMM_DEVICE_FN double symm_min(double a, double b) {
    double r;
    asm("min.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b));
    if (a == b) r = symm_f64_from_bits(symm_to_bits(a) | symm_to_bits(b));
    return r;
}
SYMM_DEVICE_FN double symm_max(double a, double b) {
    double r;
    asm("max.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b));
    if (a == b) r = symm_f64_from_bits(symm_to_bits(a) & symm_to_bits(b));
    return r;
}

/* The sign bit of an f32, for min and max of zeros. */
SYMM_DEVICE_FN bool symm_signbit(float x) { return (symm_to_bits(x) >> 31) != 0u; }
/* bf16/f16 (and fp8) min and max return one operand unchanged:
   max(a, b) = (a is NaN || b > a || (b == a && a is -0.0)) ? b : a, and min
   likewise with < and +0.0, so that of two zeros min is -0.0 and max +0.0,
   as for f32 (the emulator does the same). */
#define SYMM_HALF_MINMAX(H)                                                    \
    SYMM_DEVICE_FN H symm_min(H a, H b) {                                      \
        float x = symm_detail::to_f32(a), y = symm_detail::to_f32(b);          \
        return (x != x || y < x || (y == x && !symm_signbit(x))) ? b : a;      \
    }                                                                          \
    SYMM_DEVICE_FN H symm_max(H a, H b) {                                      \
        float x = symm_detail::to_f32(a), y = symm_detail::to_f32(b);          \
        return (x != x || y > x || (y == x && symm_signbit(x))) ? b : a;       \
    }
SYMM_HALF_MINMAX(symm_bf16)
SYMM_HALF_MINMAX(symm_f16)
SYMM_HALF_MINMAX(symm_f8e4m3)
SYMM_HALF_MINMAX(symm_f8e5m2)
#undef SYMM_HALF_MINMAX

#define SYMM_INT_MINMAX(T)                                                     \
    SYMM_DEVICE_FN T symm_min(T a, T b) { return b < a ? b : a; }              \
    SYMM_DEVICE_FN T symm_max(T a, T b) { return b > a ? b : a; }
SYMM_INT_MINMAX(symm_u8)
SYMM_INT_MINMAX(symm_u16)
SYMM_INT_MINMAX(symm_u32)
SYMM_INT_MINMAX(symm_u64)
SYMM_INT_MINMAX(symm_i8)
SYMM_INT_MINMAX(symm_i16)
SYMM_INT_MINMAX(symm_i32)
SYMM_INT_MINMAX(symm_i64)
#undef SYMM_INT_MINMAX

/* abs clears the sign bit of floats (NaN payloads kept, like Rust); signed
   integers wrap like Rust's wrapping_abs (MIN stays MIN). */
SYMM_DEVICE_FN float symm_abs(float x) { return symm_f32_from_bits(symm_to_bits(x) & 0x7fffffffu); }
SYMM_DEVICE_FN double symm_abs(double x) {
    return symm_f64_from_bits(symm_to_bits(x) & 0x7fffffffffffffffull);
}
SYMM_DEVICE_FN symm_bf16 symm_abs(symm_bf16 x) {
    return symm_bf16_from_bits((symm_u16)(x.bits & 0x7fffu));
}
SYMM_DEVICE_FN symm_f16 symm_abs(symm_f16 x) {
    return symm_f16_from_bits((symm_u16)(x.bits & 0x7fffu));
}
SYMM_DEVICE_FN symm_f8e4m3 symm_abs(symm_f8e4m3 x) {
    return symm_f8e4m3_from_bits((symm_u8)(x.bits & 0x7fu));
}
SYMM_DEVICE_FN symm_f8e5m2 symm_abs(symm_f8e5m2 x) {
    return symm_f8e5m2_from_bits((symm_u8)(x.bits & 0x7fu));
}
/* Unsigned integers are their own absolute value. */
#define SYMM_UINT_ABS(T) SYMM_DEVICE_FN T symm_abs(T x) { return x; }
SYMM_UINT_ABS(symm_u8)
SYMM_UINT_ABS(symm_u16)
SYMM_UINT_ABS(symm_u32)
SYMM_UINT_ABS(symm_u64)
#undef SYMM_UINT_ABS
#define SYMM_INT_ABS(T, U)                                                     \
    SYMM_DEVICE_FN T symm_abs(T x) { return x < 0 ? (T)(U)(0u - (U)x) : x; }
SYMM_INT_ABS(symm_i8, symm_u8)
SYMM_INT_ABS(symm_i16, symm_u16)
SYMM_INT_ABS(symm_i32, symm_u32)
SYMM_INT_ABS(symm_i64, symm_u64)
#undef SYMM_INT_ABS

/* Integer fma: a * b + c, wrapping (Num::fma of the integers). */
#define SYMM_INT_FMA(T, U)                                                     \
    SYMM_DEVICE_FN T symm_fma(T a, T b, T c) { return (T)(U)((U)a * (U)b + (U)c); }
SYMM_INT_FMA(symm_u8, symm_u32)
SYMM_INT_FMA(symm_u16, symm_u32)
SYMM_INT_FMA(symm_u32, symm_u32)
SYMM_INT_FMA(symm_u64, symm_u64)
SYMM_INT_FMA(symm_i32, symm_u32)
SYMM_INT_FMA(symm_i64, symm_u64)
#undef SYMM_INT_FMA
/* Fused multiply-add a * b + c with one rounding (Rust mul_add); bf16/f16
   and fp8 fuse in f32 and round the f32 result once more. */
SYMM_DEVICE_FN float symm_fma(float a, float b, float c) {
    float r;
    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
    return r;
}
SYMM_DEVICE_FN double symm_fma(double a, double b, double c) {
    double r;
    asm("fma.rn.f64 %0, %1, %2, %3;" : "=d"(r) : "d"(a), "d"(b), "d"(c));
    return r;
}
SYMM_DEVICE_FN symm_bf16 symm_fma(symm_bf16 a, symm_bf16 b, symm_bf16 c) {
    return symm_f32_to_bf16(symm_fma(symm_bf16_to_f32(a), symm_bf16_to_f32(b), symm_bf16_to_f32(c)));
}
SYMM_DEVICE_FN symm_f16 symm_fma(symm_f16 a, symm_f16 b, symm_f16 c) {
    return symm_f32_to_f16(symm_fma(symm_f16_to_f32(a), symm_f16_to_f32(b), symm_f16_to_f32(c)));
}
SYMM_DEVICE_FN symm_f8e4m3 symm_fma(symm_f8e4m3 a, symm_f8e4m3 b, symm_f8e4m3 c) {
    return symm_f32_to_f8e4m3(
        symm_fma(symm_f8e4m3_to_f32(a), symm_f8e4m3_to_f32(b), symm_f8e4m3_to_f32(c)));
}
SYMM_DEVICE_FN symm_f8e5m2 symm_fma(symm_f8e5m2 a, symm_f8e5m2 b, symm_f8e5m2 c) {
    return symm_f32_to_f8e5m2(
        symm_fma(symm_f8e5m2_to_f32(a), symm_f8e5m2_to_f32(b), symm_f8e5m2_to_f32(c)));
}

/* Correctly rounded square roots, like Rust's sqrt. */
SYMM_DEVICE_FN float symm_sqrt(float x) {
    float r;
    asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
SYMM_DEVICE_FN double symm_sqrt(double x) {
    double r;
    asm("sqrt.rn.f64 %0, %1;" : "=d"(r) : "d"(x));
    return r;
}

#endif /* SYMM_IMPL_MATH_CUH */
