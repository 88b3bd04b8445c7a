/* Conversions: bf16/f16 storage types to and from f32 (through PTX, so no
   cuda_bf16.h / cuda_fp16.h is needed), bit casts, and casts with the
   semantics of Rust `as`. Part of PRELUDE; see symm_core.cuh. */
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
SYMM_DEVICE_FN float symm_f32_from_bits(symm_u32 bits) { return symm_bitcast<float>(bits); }
SYMM_DEVICE_FN double symm_f64_from_bits(symm_u64 bits) { return symm_bitcast<double>(bits); }

/* Widening of either half type, for the templates below and math.cuh. */
namespace symm_detail {
SYMM_DEVICE_FN float to_f32(symm_bf16 x) { return symm_bf16_to_f32(x); }
SYMM_DEVICE_FN float to_f32(symm_f16 x) { return symm_f16_to_f32(x); }
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
   symm_bf16, symm_f16} (any other spelling of an integer type works too):
   - integer -> integer: truncate, or sign-/zero-extend;
   - float/double/bf16/f16 -> integer: truncate toward zero, saturate to the
     destination range, NaN -> 0 (bf16/f16 widen to f32 first, exactly);
   - integer -> float/double: round to nearest even;
   - double -> float: round to nearest even; float -> double exact;
   - bool -> number: 0 or 1;
   - to bf16/f16 (the DSL's definition; Rust has no `as` to them): the
     value is first converted to f32 as above (`x as f32`), then rounded to
     nearest even with from_f32. From double, or from an integer wider than
     24 bits, this rounds twice and may differ from half's from_f64;
   - bf16 <-> f16: through f32 (exact widening, then one rounding);
   - number -> bool: rejected at compile time, as Rust rejects it. */
template<typename To, typename From> __device__ __forceinline__ To symm_cast(From x) {
    static_assert(symm_detail::is_numeric<To> && symm_detail::is_numeric<From>,
                  "symm_cast: unsupported type");
    if constexpr (symm_detail::same<To, From>) {
        return x;
    } else if constexpr (symm_detail::same<To, bool>) {
        static_assert(symm_detail::always_false<From>, "symm_cast: Rust has no cast to bool");
        return false;
    } else if constexpr (symm_detail::is_half<From>) {
        return symm_cast<To>(symm_detail::to_f32(x));
    } else if constexpr (symm_detail::same<To, symm_bf16>) {
        return symm_f32_to_bf16(symm_cast<float>(x));
    } else if constexpr (symm_detail::same<To, symm_f16>) {
        return symm_f32_to_f16(symm_cast<float>(x));
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
