/* Conversions: bf16/f16 storage types to and from f32 (through PTX, so no
   cuda_bf16.h / cuda_fp16.h is needed), f8e4m3/f8e5m2 ones (integer code),
   bit casts, and casts with the semantics of Rust `as`. Part of PRELUDE;
   see symm_core.cuh. */
#ifndef SYMM_IMPL_CONVERT_CUH
#define SYMM_IMPL_CONVERT_CUH

/* ---- bf16 / f16 storage conversions ---- */

SYMM_DEVICE_FN float symm_bf16_to_f32(symm_bf16 x) {
    /* bf16 is the high half of an f32, so widening is exact; packing with a
       zero low half works on every arch (cvt.f32.bf16 needs sm_90). */
    float r;
    asm("mov.b32 %0, {%1, %2};" : "=f"(r) : "h"((symm_u16)0), "h"(x.bits));
    return r;
}

SYMM_DEVICE_FN symm_bf16 symm_f32_to_bf16(float x) {
    symm_bf16 r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
    return r;
}

SYMM_DEVICE_FN float symm_f16_to_f32(symm_f16 x) {
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(x.bits));
    return r;
}

SYMM_DEVICE_FN symm_f16 symm_f32_to_f16(float x) {
    symm_f16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
    return r;
}

SYMM_DEVICE_FN symm_bf16 symm_bf16_from_bits(symm_u16 bits) {
    symm_bf16 r;
    r.bits = bits;
    return r;
}

SYMM_DEVICE_FN symm_f16 symm_f16_from_bits(symm_u16 bits) {
    symm_f16 r;
    r.bits = bits;
    return r;
}

/* ---- f8e4m3 / f8e5m2 storage conversions ----
   The reference: integer code, line for line symm-runtime/src/fp8.rs
   (which the emulator runs), so that both agree bit for bit. constexpr, so
   that a test can check every result against the Rust side with
   static_assert in NVRTC alone, no GPU needed. The conversions kernels
   call (below) use it where they need to and faster code elsewhere.
   EXP, MAN: field widths; IEEE: the all-ones exponent holds infinities and
   NaNs (e5m2), else only S.1111.111 is NaN (e4m3fn). */

namespace symm_detail {
/* The f32 bits of the fp8 value b, exactly; a NaN keeps its payload at the
   top of the f32 mantissa, as c10's conversions do. */
template<symm_u32 EXP, symm_u32 MAN, bool IEEE>
__device__ __forceinline__ constexpr symm_u32 f8_to_f32_bits(symm_u8 bits) {
    const symm_u32 b = bits;
    const symm_u32 sign = (b & 0x80u) << 24;
    const symm_u32 all = (1u << MAN) - 1u;
    const symm_u32 emax = (1u << EXP) - 1u;
    const symm_u32 bias = (1u << (EXP - 1u)) - 1u;
    const symm_u32 exp = (b >> MAN) & emax;
    symm_u32 man = b & all;
    if (exp == emax && (IEEE || man == all)) {
        return sign | 0x7f800000u | (man << (23u - MAN));
    }
    if (exp == 0u) {
        if (man == 0u) {
            return sign;
        }
        /* A subnormal, man * 2^(1 - bias - MAN): shift its leading one into
           the implicit bit. */
        symm_u32 e = 127u + 1u - bias;
        while ((man & (1u << MAN)) == 0u) {
            man <<= 1;
            e -= 1u;
        }
        return sign | (e << 23) | ((man & all) << (23u - MAN));
    }
    return sign | ((exp + 127u - bias) << 23) | (man << (23u - MAN));
}

/* The fp8 value nearest the f32 with bits u, ties to even, as c10 rounds: a
   NaN gives NaN (0x7F with the sign); an infinity, or a finite value that
   rounds past the largest finite one, gives NaN in e4m3fn (which has no
   infinity) and infinity in e5m2. */
template<symm_u32 EXP, symm_u32 MAN, bool IEEE>
__device__ __forceinline__ constexpr symm_u8 f8_from_f32_bits(symm_u32 u) {
    const symm_u8 sign = (symm_u8)((u >> 24) & 0x80u);
    const symm_u32 a = u & 0x7fffffffu;
    const symm_u8 nan = 0x7f;
    const symm_u8 over = IEEE ? (symm_u8)(((1u << EXP) - 1u) << MAN) : nan;
    const symm_u32 max_finite = (symm_u32)over - 1u;
    if (a > 0x7f800000u) {
        return sign | nan;
    }
    const symm_i32 e = (symm_i32)(a >> 23);
    if (e == 0) {
        /* Zero or an f32 subnormal: far below half the smallest fp8 one. */
        return sign;
    }
    const symm_i32 bias = (1 << (EXP - 1u)) - 1;
    /* The fp8 biased exponent: below 1 for subnormals. Past 1 << EXP (and
       for infinities) the value overflows whatever the rounding. */
    const symm_i32 te = e - 127 + bias;
    if (te > (1 << EXP)) {
        return sign | over;
    }
    const symm_u32 sig = (a & 0x7fffffu) | 0x800000u;
    const symm_u32 shift = (23u - MAN) + (te < 1 ? (symm_u32)(1 - te) : 0u);
    if (shift > 24u) {
        /* Below half the smallest subnormal (sig < 2^24 <= half). */
        return sign;
    }
    const symm_u32 half = 1u << (shift - 1u);
    const symm_u32 rem = sig & ((1u << shift) - 1u);
    symm_u32 q = sig >> shift;
    if (rem > half || (rem == half && (q & 1u) == 1u)) {
        q += 1u;
    }
    /* A normal's implicit bit lands in the exponent field (te - 1 + 1); a
       carry out of the mantissa moves it up one binade, as it must. */
    const symm_u32 r = te >= 1 ? (((symm_u32)te - 1u) << MAN) + q : q;
    if (r > max_finite) {
        return sign | over;
    }
    return sign | (symm_u8)r;
}
} /* namespace symm_detail */

/* The conversions kernels call: faster code than the functions above that
   gives the same bits, which tests/gpu_dsl.rs checks against the Rust side
   on every fp8 value and 4M probes of f32 (and the emulator's fp8 tests
   check the Rust side). Widening: a normal's magnitude bits shifted into
   an f32's and rebiased by one integer add; a subnormal (mantissa m) is
   m * 2^-9 (e4m3) or m * 2^-16 (e5m2), exact in f32 without relying on
   f32 subnormals (which --use_fast_math would flush). */
SYMM_DEVICE_FN float symm_f8e4m3_to_f32(symm_f8e4m3 x) {
    const symm_u32 mag = x.bits & 0x7fu;
    const symm_u32 sign = (symm_u32)(x.bits & 0x80u) << 24;
    const float v = mag >= 8u ? symm_f32_from_bits((mag << 20) + (120u << 23))
                              : (float)mag * 0.001953125f;
    /* The one NaN, S.1111.111: c10's bits (the payload 111 at the top of
       the f32 mantissa), by select, not a call: this is inlined for every
       element of every rank in a reduction, and its code size counts. */
    return symm_f32_from_bits(mag == 0x7fu ? (sign | 0x7ff00000u) : (symm_to_bits(v) | sign));
}

SYMM_DEVICE_FN float symm_f8e5m2_to_f32(symm_f8e5m2 x) {
    const symm_u32 mag = x.bits & 0x7fu;
    const symm_u32 sign = (symm_u32)(x.bits & 0x80u) << 24;
    const float v = mag >= 4u ? symm_f32_from_bits((mag << 21) + (112u << 23))
                              : (float)mag * 0.0000152587890625f;
    /* Infinities and NaNs (exponent all ones): the f32 ones with the same
       mantissa bits at the top, as c10 gives. */
    return symm_f32_from_bits(mag >= 0x7cu ? (sign | 0x7f800000u | ((mag & 3u) << 21))
                                           : (symm_to_bits(v) | sign));
}

/* Narrowing: on sm_89 and later PTX's cvt (round to nearest even, as c10),
   which saturates where c10 overflows, so magnitudes past the last
   rounding boundary and NaNs are set as c10 sets them. e4m3fn: above 464
   is NaN (`>`: 464 itself is a tie that rounds to even, 448); e5m2: from
   61440 on is infinity (`>=`: that tie rounds to even, the infinity). */
SYMM_DEVICE_FN symm_f8e4m3 symm_f32_to_f8e4m3(float x) {
    symm_f8e4m3 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const symm_u32 u = symm_to_bits(x);
    unsigned short d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(0.0f), "f"(x));
    r.bits = (u & 0x7fffffffu) > 0x43e80000u ? (symm_u8)(((u >> 24) & 0x80u) | 0x7fu)
                                              : (symm_u8)(d & 0xffu);
#else
    r.bits = symm_detail::f8_from_f32_bits<4, 3, false>(symm_to_bits(x));
#endif
    return r;
}

SYMM_DEVICE_FN symm_f8e5m2 symm_f32_to_f8e5m2(float x) {
    symm_f8e5m2 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const symm_u32 u = symm_to_bits(x);
    const symm_u32 a = u & 0x7fffffffu;
    const symm_u8 sign = (symm_u8)((u >> 24) & 0x80u);
    unsigned short d;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(0.0f), "f"(x));
    r.bits = a > 0x7f800000u ? (symm_u8)(sign | 0x7fu)
           : a >= 0x47700000u ? (symm_u8)(sign | 0x7cu)
           : (symm_u8)(d & 0xffu);
#else
    r.bits = symm_detail::f8_from_f32_bits<5, 2, true>(symm_to_bits(x));
#endif
    return r;
}

SYMM_DEVICE_FN symm_f8e4m3 symm_f8e4m3_from_bits(symm_u8 bits) {
    symm_f8e4m3 r;
    r.bits = bits;
    return r;
}

SYMM_DEVICE_FN symm_f8e5m2 symm_f8e5m2_from_bits(symm_u8 bits) {
    symm_f8e5m2 r;
    r.bits = bits;
    return r;
}

/* ---- Bit casts ---- */

/* Reinterprets the bytes of x (same size, trivially copyable). */
template<typename To, typename From> __device__ __forceinline__ To symm_bitcast(From x) {
    static_assert(sizeof(To) == sizeof(From), "symm_bitcast: sizes differ");
    return __builtin_bit_cast(To, x);
}

SYMM_DEVICE_FN symm_u32 symm_to_bits(float x) { return symm_bitcast<symm_u32>(x); }
SYMM_DEVICE_FN symm_u64 symm_to_bits(double x) { return symm_bitcast<symm_u64>(x); }
SYMM_DEVICE_FN symm_u16 symm_to_bits(symm_bf16 x) { return x.bits; }
SYMM_DEVICE_FN symm_u16 symm_to_bits(symm_f16 x) { return x.bits; }
SYMM_DEVICE_FN symm_u8 symm_to_bits(symm_f8e4m3 x) { return x.bits; }
SYMM_DEVICE_FN symm_u8 symm_to_bits(symm_f8e5m2 x) { return x.bits; }
SYMM_DEVICE_FN float symm_f32_from_bits(symm_u32 bits) { return symm_bitcast<float>(bits); }
SYMM_DEVICE_FN double symm_f64_from_bits(symm_u64 bits) { return symm_bitcast<double>(bits); }

/* Widening of the half and fp8 types, for the templates below and math.cuh. */
namespace symm_detail {
SYMM_DEVICE_FN float to_f32(symm_bf16 x) { return symm_bf16_to_f32(x); }
SYMM_DEVICE_FN float to_f32(symm_f16 x) { return symm_f16_to_f32(x); }
SYMM_DEVICE_FN float to_f32(symm_f8e4m3 x) { return symm_f8e4m3_to_f32(x); }
SYMM_DEVICE_FN float to_f32(symm_f8e5m2 x) { return symm_f8e5m2_to_f32(x); }
} /* namespace symm_detail */

/* ---- Float to integer, as Rust `as`: truncate toward zero, saturate,
   NaN -> 0. cvt.rzi saturates by itself, but it maps NaN to 0 only from
   .f32 to a 32-bit integer; from .f64, or to a 64-bit integer, NaN gives
   1 << (width - 1), hence the setp.nan. ---- */

namespace symm_detail {
#define SYMM_FLOAT_TO_INT(NAME, RT, RC, RTY, W, FT, FC, FTY)                      \
    SYMM_DEVICE_FN RT NAME(FT x) {                                                \
        RT r;                                                                     \
        asm("{\n\t.reg .pred nan;\n\t"                                            \
            "setp.nan." FTY " nan, %1, %1;\n\t"                                   \
            "cvt.rzi." RTY "." FTY " %0, %1;\n\t"                                 \
            "@nan mov.b" W " %0, 0;\n\t}"                                         \
            : "=" RC(r) : FC(x));                                                 \
        return r;                                                                 \
    }
SYMM_FLOAT_TO_INT(f2i_s32, symm_i32, "r", "s32", "32", float, "f", "f32")
SYMM_FLOAT_TO_INT(f2i_u32, symm_u32, "r", "u32", "32", float, "f", "f32")
SYMM_FLOAT_TO_INT(f2i_s64, symm_i64, "l", "s64", "64", float, "f", "f32")
SYMM_FLOAT_TO_INT(f2i_u64, symm_u64, "l", "u64", "64", float, "f", "f32")
SYMM_FLOAT_TO_INT(f2i_s32, symm_i32, "r", "s32", "32", double, "d", "f64")
SYMM_FLOAT_TO_INT(f2i_u32, symm_u32, "r", "u32", "32", double, "d", "f64")
SYMM_FLOAT_TO_INT(f2i_s64, symm_i64, "l", "s64", "64", double, "d", "f64")
SYMM_FLOAT_TO_INT(f2i_u64, symm_u64, "l", "u64", "64", double, "d", "f64")
#undef SYMM_FLOAT_TO_INT

template<typename To, typename F> __device__ __forceinline__ To float_to_int(F x) {
    constexpr bool sig = is_signed_int<To>;
    if constexpr (sizeof(To) == 8) {
        if constexpr (sig) {
            return (To)f2i_s64(x);
        } else {
            return (To)f2i_u64(x);
        }
    } else if constexpr (sizeof(To) == 4) {
        if constexpr (sig) {
            return (To)f2i_s32(x);
        } else {
            return (To)f2i_u32(x);
        }
    } else {
        /* 8 and 16 bits: saturate to 32 bits, then clamp to To's range. */
        static_assert(sizeof(To) == 1 || sizeof(To) == 2, "float_to_int: unsupported width");
        constexpr symm_i32 bits = (symm_i32)(8 * sizeof(To));
        constexpr symm_i32 hi = sig ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
        constexpr symm_i32 lo = sig ? -hi - 1 : 0;
        symm_i32 i = f2i_s32(x);
        return (To)(i < lo ? lo : (i > hi ? hi : i));
    }
}
} /* namespace symm_detail */

/* ---- Conversions with the semantics of Rust `as` ----
   symm_cast<To>(x) for To, From in {bool, symm_u8, symm_u16, symm_u32,
   symm_u64, symm_i8, symm_i16, symm_i32, symm_i64, float, double,
   symm_bf16, symm_f16, symm_f8e4m3, symm_f8e5m2} (any other spelling of an
   integer type works too):
   - integer -> integer: truncate, or sign-/zero-extend;
   - float/double/bf16/f16/fp8 -> integer: truncate toward zero, saturate to
     the destination range, NaN -> 0 (bf16/f16/fp8 widen to f32 first,
     exactly);
   - integer -> float/double: round to nearest even;
   - double -> float: round to nearest even; float -> double exact;
   - bool -> number: 0 or 1;
   - to bf16/f16 (the DSL's definition; Rust has no `as` to them): the
     value is first converted to f32 as above (`x as f32`), then rounded to
     nearest even with from_f32. From double, or from an integer wider than
     24 bits, this rounds twice and may differ from half's from_f64;
   - to f8e4m3/f8e5m2 likewise: to f32, then from_f32 (which rounds to
     nearest even and overflows to NaN or infinity, see symm_core.cuh);
   - between bf16, f16 and the fp8 types: through f32 (exact widening,
     then one rounding);
   - number -> bool: rejected at compile time, as Rust rejects it. */
template<typename To, typename From> __device__ __forceinline__ To symm_cast(From x) {
    static_assert(symm_detail::is_numeric<To> && symm_detail::is_numeric<From>,
                  "symm_cast: unsupported type");
    if constexpr (symm_detail::same<To, From>) {
        return x;
    } else if constexpr (symm_detail::same<To, bool>) {
        static_assert(symm_detail::always_false<From>, "symm_cast: Rust has no cast to bool");
        return false;
    } else if constexpr (symm_detail::is_half<From> || symm_detail::is_f8<From>) {
        return symm_cast<To>(symm_detail::to_f32(x));
    } else if constexpr (symm_detail::same<To, symm_bf16>) {
        return symm_f32_to_bf16(symm_cast<float>(x));
    } else if constexpr (symm_detail::same<To, symm_f16>) {
        return symm_f32_to_f16(symm_cast<float>(x));
    } else if constexpr (symm_detail::same<To, symm_f8e4m3>) {
        return symm_f32_to_f8e4m3(symm_cast<float>(x));
    } else if constexpr (symm_detail::same<To, symm_f8e5m2>) {
        return symm_f32_to_f8e5m2(symm_cast<float>(x));
    } else if constexpr (symm_detail::is_int<To> && symm_detail::is_float<From>) {
        return symm_detail::float_to_int<To>(x);
    } else {
        /* int <-> int, int -> float, float <-> double, bool -> number: the
           C++ conversion is Rust's here (cvt.rn for int -> float and
           double -> float). */
        return (To)x;
    }
}

/* x as f32, for every numeric type (see symm_cast). */
template<typename T> __device__ __forceinline__ float symm_to_f32(T x) { return symm_cast<float>(x); }

/* An f32 converted to T as symm_cast does (integers saturate, NaN -> 0). */
template<typename T> __device__ __forceinline__ T symm_from_f32(float x) { return symm_cast<T>(x); }

#endif /* SYMM_IMPL_CONVERT_CUH */
