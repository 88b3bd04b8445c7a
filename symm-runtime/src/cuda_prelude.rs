//! Header-free CUDA C prelude prepended to generated kernels.
//!
//! NVRTC ships without the CUDA toolkit headers when installed from PyPI, so
//! the prelude includes nothing and implements what kernels need (fixed-width
//! integers, bf16/f16 storage types, scoped memory operations) directly with
//! inline PTX. Every operation used here exists on sm_80 and later.

/// CUDA C source that generated kernels place before their own code.
///
/// It defines `symm_*` integer typedefs, `symm_bf16`/`symm_f16` storage types
/// with conversions, `symm_globaltimer()`, and memory-ordered loads, stores,
/// atomics and fences with explicit scope. All functions are declared with
/// `SYMM_DEVICE_FN` (`static __device__ __forceinline__`, marked unused so
/// that helpers a kernel does not call raise no warning), which generated
/// code may use for its own helpers. The prelude contains no `#include`.
///
/// For code translated from the kernel DSL it further provides (function
/// templates are `__device__ __forceinline__`; templates never instantiated
/// raise no warning):
///
/// - `symm_array<T, N>`, an aggregate array (usable in `__shared__` and
///   brace-initialised), and `symm_array_fill<T, N>(x)`;
/// - bf16/f16 arithmetic, compound assignment and comparison operators that
///   round like Rust's `half` crate (compute in f32, round to nearest even);
/// - `symm_cast<To>(x)` with the semantics of Rust `as` (saturating
///   float-to-integer casts, NaN to 0), `symm_to_f32`, `symm_from_f32<T>`;
/// - `symm_min`, `symm_max`, `symm_abs`, `symm_fma`, `symm_sqrt` matching
///   Rust's results on the CPU;
/// - bit casts: `symm_bitcast<To>`, `symm_to_bits`, `symm_f32_from_bits`,
///   `symm_f64_from_bits`;
/// - `symm_ld`, `symm_st`, `symm_atom_{add,exch,cas,max,min}` templated on
///   the memory order (`SYMM_RELAXED`, `SYMM_ACQUIRE`, `SYMM_RELEASE`,
///   `SYMM_ACQ_REL`, `SYMM_VOLATILE`) and scope (`SYMM_CTA`, `SYMM_GPU`,
///   `SYMM_SYS`), `symm_fence<SCOPE>()` and `symm_fence_sc<SCOPE>()`;
/// - 16-byte vector accesses `symm_ld_vec`, `symm_st_vec` and their
///   `_volatile` forms;
/// - warp primitives `symm_shfl_xor`, `symm_ballot`, `symm_lane_id`.
///
/// Where results can differ from Rust on the CPU: NaN payloads and signs
/// (GPU arithmetic and PTX conversions may produce the canonical NaN where
/// the CPU and `half` keep the payload), and casts to bf16/f16 from f64 or
/// from integers wider than 24 bits, which round twice (through f32) where
/// `half`'s `from_f64` rounds once. Internal helpers live in `namespace
/// symm_detail`.
pub const PRELUDE: &str = r#"
#ifndef SYMM_PRELUDE_INCLUDED
#define SYMM_PRELUDE_INCLUDED

/* Prelude helpers are static so every kernel gets its own copy; marking them
   unused keeps NVRTC from warning (#177-D) about each one a kernel skips. */
#define SYMM_DEVICE_FN static __device__ __forceinline__ __attribute__((unused))

typedef unsigned char symm_u8;
typedef unsigned short symm_u16;
typedef unsigned int symm_u32;
typedef unsigned long long symm_u64;
typedef int symm_i32;
typedef long long symm_i64;
typedef signed char symm_i8;
typedef short symm_i16;

/* Storage-only half-precision types: the raw bits, converted through PTX so
   that no cuda_bf16.h / cuda_fp16.h is needed. */
struct symm_bf16 { symm_u16 bits; };
struct symm_f16 { symm_u16 bits; };

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

/* Nanoseconds of the global timer, comparable across SMs of one GPU. */
SYMM_DEVICE_FN symm_u64 symm_globaltimer() {
    symm_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) : : "memory");
    return t;
}

/* Programmatic dependent launch (sm_90+; nothing to wait for before): wait
   until the previous grid on the stream has finished and its memory is
   visible, and let the next grid start launching. */
SYMM_DEVICE_FN void symm_grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" : : : "memory");
#endif
}

SYMM_DEVICE_FN void symm_launch_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" : : : "memory");
#endif
}

/* Backoff for spin loops on a flag. */
SYMM_DEVICE_FN void symm_nanosleep(symm_u32 ns) {
    asm volatile("nanosleep.u32 %0;" : : "r"(ns) : "memory");
}

/* Scoped memory operations. Pointers always refer to global memory (local
   buffers or peers' symmetric buffers), hence the .global state space. The
   "memory" clobbers keep the compiler from moving ordinary accesses across
   them, matching the ordering the PTX instruction gives the hardware. */

SYMM_DEVICE_FN symm_u32 symm_ld_acquire_sys_u32(const symm_u32* p) {
    symm_u32 v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

SYMM_DEVICE_FN symm_u32 symm_ld_acquire_gpu_u32(const symm_u32* p) {
    symm_u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

SYMM_DEVICE_FN symm_u32 symm_ld_relaxed_sys_u32(const symm_u32* p) {
    symm_u32 v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

SYMM_DEVICE_FN symm_u32 symm_ld_volatile_u32(const symm_u32* p) {
    symm_u32 v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

SYMM_DEVICE_FN void symm_st_release_sys_u32(symm_u32* p, symm_u32 v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

SYMM_DEVICE_FN void symm_st_release_gpu_u32(symm_u32* p, symm_u32 v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

SYMM_DEVICE_FN void symm_st_relaxed_sys_u32(symm_u32* p, symm_u32 v) {
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

SYMM_DEVICE_FN void symm_st_volatile_u32(symm_u32* p, symm_u32 v) {
    asm volatile("st.volatile.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

/* Compare-and-swap: stores val if *p == cmp; returns the previous value. */
SYMM_DEVICE_FN symm_u32 symm_atom_cas_acq_rel_sys_u32(symm_u32* p, symm_u32 cmp, symm_u32 val) {
    symm_u32 old;
    asm volatile("atom.acq_rel.sys.global.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(old) : "l"(p), "r"(cmp), "r"(val) : "memory");
    return old;
}

SYMM_DEVICE_FN symm_u32 symm_atom_cas_release_sys_u32(symm_u32* p, symm_u32 cmp, symm_u32 val) {
    symm_u32 old;
    asm volatile("atom.release.sys.global.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(old) : "l"(p), "r"(cmp), "r"(val) : "memory");
    return old;
}

SYMM_DEVICE_FN symm_u32 symm_atom_cas_acquire_sys_u32(symm_u32* p, symm_u32 cmp, symm_u32 val) {
    symm_u32 old;
    asm volatile("atom.acquire.sys.global.cas.b32 %0, [%1], %2, %3;"
                 : "=r"(old) : "l"(p), "r"(cmp), "r"(val) : "memory");
    return old;
}

/* Fetch-and-add; returns the previous value. */
SYMM_DEVICE_FN symm_u32 symm_atom_add_release_sys_u32(symm_u32* p, symm_u32 v) {
    symm_u32 old;
    asm volatile("atom.release.sys.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

SYMM_DEVICE_FN symm_u32 symm_atom_add_relaxed_sys_u32(symm_u32* p, symm_u32 v) {
    symm_u32 old;
    asm volatile("atom.relaxed.sys.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

SYMM_DEVICE_FN symm_u32 symm_atom_add_relaxed_gpu_u32(symm_u32* p, symm_u32 v) {
    symm_u32 old;
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

SYMM_DEVICE_FN void symm_fence_acq_rel_sys() {
    asm volatile("fence.acq_rel.sys;" : : : "memory");
}

SYMM_DEVICE_FN void symm_fence_acq_rel_gpu() {
    asm volatile("fence.acq_rel.gpu;" : : : "memory");
}

SYMM_DEVICE_FN void symm_fence_acq_rel_cta() {
    asm volatile("fence.acq_rel.cta;" : : : "memory");
}

/* ======================================================================
   Everything below serves code that the kernel DSL translates: templates,
   bf16/f16 arithmetic, Rust `as` conversions, math, bit casts, ordered
   memory operations, 16-byte vectors and warp primitives. Function
   templates are `__device__ __forceinline__` (an uninstantiated template
   raises no unused warning); plain functions use SYMM_DEVICE_FN.
   ====================================================================== */

/* Memory orders and scopes: template arguments of symm_ld, symm_st,
   symm_atom_* and symm_fence. SYMM_VOLATILE ignores the scope. */
#define SYMM_RELAXED 0
#define SYMM_ACQUIRE 1
#define SYMM_RELEASE 2
#define SYMM_ACQ_REL 3
#define SYMM_VOLATILE 4
#define SYMM_CTA 0
#define SYMM_GPU 1
#define SYMM_SYS 2

/* ---- Type traits (no <type_traits> without headers) ---- */

namespace symm_detail {
template<typename A, typename B> struct same_t { static constexpr bool value = false; };
template<typename A> struct same_t<A, A> { static constexpr bool value = true; };
template<typename A, typename B> inline constexpr bool same = same_t<A, B>::value;

/* Integer types other than bool, whatever their spelling (size_t included). */
template<typename T> struct int_t { static constexpr bool value = false; };
template<> struct int_t<char> { static constexpr bool value = true; };
template<> struct int_t<signed char> { static constexpr bool value = true; };
template<> struct int_t<unsigned char> { static constexpr bool value = true; };
template<> struct int_t<short> { static constexpr bool value = true; };
template<> struct int_t<unsigned short> { static constexpr bool value = true; };
template<> struct int_t<int> { static constexpr bool value = true; };
template<> struct int_t<unsigned int> { static constexpr bool value = true; };
template<> struct int_t<long> { static constexpr bool value = true; };
template<> struct int_t<unsigned long> { static constexpr bool value = true; };
template<> struct int_t<long long> { static constexpr bool value = true; };
template<> struct int_t<unsigned long long> { static constexpr bool value = true; };
template<typename T> inline constexpr bool is_int = int_t<T>::value;
template<typename T, bool = int_t<T>::value> struct signed_t { static constexpr bool value = false; };
template<typename T> struct signed_t<T, true> { static constexpr bool value = (T)(-1) < (T)0; };
template<typename T> inline constexpr bool is_signed_int = signed_t<T>::value;
template<typename T> inline constexpr bool is_float = same<T, float> || same<T, double>;
template<typename T> inline constexpr bool is_half = same<T, symm_bf16> || same<T, symm_f16>;
template<typename T> inline constexpr bool is_numeric =
    same<T, bool> || is_int<T> || is_float<T> || is_half<T>;
/* For static_assert in an `if constexpr` branch that must not be taken. */
template<typename T> inline constexpr bool always_false = false;
/* Keeps a parameter out of template argument deduction. */
template<typename T> struct identity_t { typedef T type; };
template<typename T> using nondeduced = typename identity_t<T>::type;
} /* namespace symm_detail */

/* ---- Fixed-size array (aggregate: usable in __shared__, brace-initialised) ---- */

template<typename T, symm_u64 N> struct symm_array {
    T v[N];
    __device__ __forceinline__ T& operator[](symm_u64 i) { return v[i]; }
    __device__ __forceinline__ const T& operator[](symm_u64 i) const { return v[i]; }
};

template<typename T, symm_u64 N> __device__ __forceinline__ symm_array<T, N> symm_array_fill(T x) {
    symm_array<T, N> r;
    for (symm_u64 i = 0; i < N; ++i) {
        r.v[i] = x;
    }
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
SYMM_DEVICE_FN float to_f32(symm_bf16 x) { return symm_bf16_to_f32(x); }
SYMM_DEVICE_FN float to_f32(symm_f16 x) { return symm_f16_to_f32(x); }
} /* namespace symm_detail */

/* ---- bf16 / f16 operators, as Rust's `half` crate defines them: widen to
   f32 (exact), compute in f32, round to nearest even. Negation flips the
   sign bit; comparisons are f32 comparisons (NaN unordered, -0 == +0). ---- */

#define SYMM_HALF_ARITH(H, FROM_F32, OP, F32_OP)                                         \
    SYMM_DEVICE_FN H operator OP(H a, H b) {                                             \
        return FROM_F32(symm_detail::F32_OP(symm_detail::to_f32(a), symm_detail::to_f32(b))); \
    }                                                                                    \
    SYMM_DEVICE_FN H& operator OP##=(H& a, H b) { return a = a OP b; }
#define SYMM_HALF_CMP(H, OP)                                                             \
    SYMM_DEVICE_FN bool operator OP(H a, H b) {                                          \
        return symm_detail::to_f32(a) OP symm_detail::to_f32(b);                         \
    }
#define SYMM_HALF_OPERATORS(H, FROM_F32)                                                 \
    SYMM_HALF_ARITH(H, FROM_F32, +, add_rn)                                              \
    SYMM_HALF_ARITH(H, FROM_F32, -, sub_rn)                                              \
    SYMM_HALF_ARITH(H, FROM_F32, *, mul_rn)                                              \
    SYMM_HALF_ARITH(H, FROM_F32, /, div_rn)                                              \
    SYMM_DEVICE_FN H operator-(H a) {                                                    \
        H r;                                                                             \
        r.bits = (symm_u16)(a.bits ^ 0x8000u);                                           \
        return r;                                                                        \
    }                                                                                    \
    SYMM_HALF_CMP(H, ==)                                                                 \
    SYMM_HALF_CMP(H, !=)                                                                 \
    SYMM_HALF_CMP(H, <)                                                                  \
    SYMM_HALF_CMP(H, <=)                                                                 \
    SYMM_HALF_CMP(H, >)                                                                  \
    SYMM_HALF_CMP(H, >=)

SYMM_HALF_OPERATORS(symm_bf16, symm_f32_to_bf16)
SYMM_HALF_OPERATORS(symm_f16, symm_f32_to_f16)
#undef SYMM_HALF_OPERATORS
#undef SYMM_HALF_CMP
#undef SYMM_HALF_ARITH

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

/* ---- Math ---- */

/* f32/f64 min and max are IEEE minNum/maxNum like Rust's f32::min/max: a
   NaN operand yields the other operand (PTX min/max without .NaN). */
SYMM_DEVICE_FN float symm_min(float a, float b) {
    float r;
    asm("min.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
SYMM_DEVICE_FN float symm_max(float a, float b) {
    float r;
    asm("max.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
SYMM_DEVICE_FN double symm_min(double a, double b) {
    double r;
    asm("min.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b));
    return r;
}
SYMM_DEVICE_FN double symm_max(double a, double b) {
    double r;
    asm("max.f64 %0, %1, %2;" : "=d"(r) : "d"(a), "d"(b));
    return r;
}

/* bf16/f16 min and max return one operand unchanged, exactly as `half`
   does: max(a, b) = (a is NaN || b > a) ? b : a, and min likewise with <. */
#define SYMM_HALF_MINMAX(H)                                                    \
    SYMM_DEVICE_FN H symm_min(H a, H b) {                                      \
        float x = symm_detail::to_f32(a), y = symm_detail::to_f32(b);          \
        return (x != x || y < x) ? b : a;                                      \
    }                                                                          \
    SYMM_DEVICE_FN H symm_max(H a, H b) {                                      \
        float x = symm_detail::to_f32(a), y = symm_detail::to_f32(b);          \
        return (x != x || y > x) ? b : a;                                      \
    }
SYMM_HALF_MINMAX(symm_bf16)
SYMM_HALF_MINMAX(symm_f16)
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
#define SYMM_INT_ABS(T, U)                                                     \
    SYMM_DEVICE_FN T symm_abs(T x) { return x < 0 ? (T)(U)(0u - (U)x) : x; }
SYMM_INT_ABS(symm_i8, symm_u8)
SYMM_INT_ABS(symm_i16, symm_u16)
SYMM_INT_ABS(symm_i32, symm_u32)
SYMM_INT_ABS(symm_i64, symm_u64)
#undef SYMM_INT_ABS

/* Fused multiply-add a * b + c with one rounding (Rust mul_add); bf16/f16
   fuse in f32 and round the f32 result once more. */
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

/* ---- Ordered loads, stores and atomics on global memory ----
   SEM is one of the SYMM_* orders, SCOPE one of SYMM_CTA/GPU/SYS. T is
   deduced from the pointer alone; value operands convert to it. Each
   (SEM, SCOPE) pair is its own `if constexpr` branch with its own asm
   string; only the instantiated one reaches ptxas. The "memory" clobbers
   keep the compiler from moving other memory accesses across them. */

/* Runs STMT(Q, ...) where Q is the PTX qualifier string for SEM and SCOPE
   ("volatile", "relaxed.cta", ..., "acq_rel.sys"). */
#define SYMM_ORDERED(STMT, ...)                                                          \
    if constexpr (SEM == SYMM_VOLATILE) { STMT("volatile", __VA_ARGS__); }               \
    else if constexpr (SEM == SYMM_RELAXED && SCOPE == SYMM_CTA) { STMT("relaxed.cta", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_RELAXED && SCOPE == SYMM_GPU) { STMT("relaxed.gpu", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_RELAXED && SCOPE == SYMM_SYS) { STMT("relaxed.sys", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_ACQUIRE && SCOPE == SYMM_CTA) { STMT("acquire.cta", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_ACQUIRE && SCOPE == SYMM_GPU) { STMT("acquire.gpu", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_ACQUIRE && SCOPE == SYMM_SYS) { STMT("acquire.sys", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_RELEASE && SCOPE == SYMM_CTA) { STMT("release.cta", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_RELEASE && SCOPE == SYMM_GPU) { STMT("release.gpu", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_RELEASE && SCOPE == SYMM_SYS) { STMT("release.sys", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_ACQ_REL && SCOPE == SYMM_CTA) { STMT("acq_rel.cta", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_ACQ_REL && SCOPE == SYMM_GPU) { STMT("acq_rel.gpu", __VA_ARGS__); } \
    else if constexpr (SEM == SYMM_ACQ_REL && SCOPE == SYMM_SYS) { STMT("acq_rel.sys", __VA_ARGS__); }

#define SYMM_CHECK_ORDER(WHAT, SEM_OK)                                                   \
    static_assert(SEM_OK, WHAT ": memory order not supported by this operation");        \
    static_assert(SEM == SYMM_VOLATILE || SCOPE == SYMM_CTA || SCOPE == SYMM_GPU ||      \
                      SCOPE == SYMM_SYS,                                                 \
                  WHAT ": SCOPE must be SYMM_CTA, SYMM_GPU or SYMM_SYS")

#define SYMM_CHECK_ATOMIC_ORDER(WHAT)                                                    \
    SYMM_CHECK_ORDER(WHAT, SEM == SYMM_RELAXED || SEM == SYMM_ACQUIRE ||                 \
                               SEM == SYMM_RELEASE || SEM == SYMM_ACQ_REL)

#define SYMM_LD_ASM(Q, B, C, R)                                                          \
    asm volatile("ld." Q ".global.b" B " %0, [%1];" : "=" C(R) : "l"(p) : "memory")
#define SYMM_ST_ASM(Q, B, C, V)                                                          \
    asm volatile("st." Q ".global.b" B " [%0], %1;" : : "l"(p), C(V) : "memory")
#define SYMM_ATOM_ASM(Q, OP, TY, C, OLD, V)                                              \
    asm volatile("atom." Q ".global." OP "." TY " %0, [%1], %2;"                         \
                 : "=" C(OLD) : "l"(p), C(V) : "memory")
#define SYMM_CAS_ASM(Q, TY, C, OLD, CMP, V)                                              \
    asm volatile("atom." Q ".global.cas." TY " %0, [%1], %2, %3;"                        \
                 : "=" C(OLD) : "l"(p), C(CMP), C(V) : "memory")

/* Load of any 4- or 8-byte T. SEM: SYMM_RELAXED, SYMM_ACQUIRE, SYMM_VOLATILE. */
template<int SEM, int SCOPE, typename T> __device__ __forceinline__ T symm_ld(const T* p) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "symm_ld: T must have 4 or 8 bytes");
    SYMM_CHECK_ORDER("symm_ld", SEM == SYMM_RELAXED || SEM == SYMM_ACQUIRE || SEM == SYMM_VOLATILE);
    if constexpr (sizeof(T) == 4) {
        symm_u32 r = 0;
        SYMM_ORDERED(SYMM_LD_ASM, "32", "r", r)
        return symm_bitcast<T>(r);
    } else {
        symm_u64 r = 0;
        SYMM_ORDERED(SYMM_LD_ASM, "64", "l", r)
        return symm_bitcast<T>(r);
    }
}

/* Store of any 4- or 8-byte T. SEM: SYMM_RELAXED, SYMM_RELEASE, SYMM_VOLATILE. */
template<int SEM, int SCOPE, typename T>
__device__ __forceinline__ void symm_st(T* p, symm_detail::nondeduced<T> v) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "symm_st: T must have 4 or 8 bytes");
    SYMM_CHECK_ORDER("symm_st", SEM == SYMM_RELAXED || SEM == SYMM_RELEASE || SEM == SYMM_VOLATILE);
    if constexpr (sizeof(T) == 4) {
        symm_u32 w = symm_bitcast<symm_u32>(v);
        SYMM_ORDERED(SYMM_ST_ASM, "32", "r", w)
    } else {
        symm_u64 w = symm_bitcast<symm_u64>(v);
        SYMM_ORDERED(SYMM_ST_ASM, "64", "l", w)
    }
}

/* Fetch-and-add returning the old value, for 32/64-bit integers (signed
   64-bit adds as .u64: two's complement wraps alike), float and double.
   SEM: SYMM_RELAXED, SYMM_ACQUIRE, SYMM_RELEASE, SYMM_ACQ_REL. */
template<int SEM, int SCOPE, typename T>
__device__ __forceinline__ T symm_atom_add(T* p, symm_detail::nondeduced<T> v) {
    SYMM_CHECK_ATOMIC_ORDER("symm_atom_add");
    constexpr bool int32 = symm_detail::is_int<T> && sizeof(T) == 4;
    constexpr bool int64 = symm_detail::is_int<T> && sizeof(T) == 8;
    T old = T();
    if constexpr (symm_detail::same<T, float>) {
        SYMM_ORDERED(SYMM_ATOM_ASM, "add", "f32", "f", old, v)
    } else if constexpr (symm_detail::same<T, double>) {
        SYMM_ORDERED(SYMM_ATOM_ASM, "add", "f64", "d", old, v)
    } else if constexpr (int32 && symm_detail::is_signed_int<T>) {
        SYMM_ORDERED(SYMM_ATOM_ASM, "add", "s32", "r", old, v)
    } else if constexpr (int32) {
        SYMM_ORDERED(SYMM_ATOM_ASM, "add", "u32", "r", old, v)
    } else if constexpr (int64) {
        SYMM_ORDERED(SYMM_ATOM_ASM, "add", "u64", "l", old, v)
    } else {
        static_assert(symm_detail::always_false<T>,
                      "symm_atom_add: T must be a 32/64-bit integer, float or double");
    }
    return old;
}

/* Atomic max / min returning the old value, for 32/64-bit integers. */
#define SYMM_ATOM_MINMAX(NAME, OP)                                                       \
    template<int SEM, int SCOPE, typename T>                                             \
    __device__ __forceinline__ T NAME(T* p, symm_detail::nondeduced<T> v) {              \
        SYMM_CHECK_ATOMIC_ORDER(#NAME);                                                  \
        constexpr bool int32 = symm_detail::is_int<T> && sizeof(T) == 4;                 \
        constexpr bool int64 = symm_detail::is_int<T> && sizeof(T) == 8;                 \
        T old = T();                                                                     \
        if constexpr (int32 && symm_detail::is_signed_int<T>) {                          \
            SYMM_ORDERED(SYMM_ATOM_ASM, OP, "s32", "r", old, v)                          \
        } else if constexpr (int32) {                                                    \
            SYMM_ORDERED(SYMM_ATOM_ASM, OP, "u32", "r", old, v)                          \
        } else if constexpr (int64 && symm_detail::is_signed_int<T>) {                   \
            SYMM_ORDERED(SYMM_ATOM_ASM, OP, "s64", "l", old, v)                          \
        } else if constexpr (int64) {                                                    \
            SYMM_ORDERED(SYMM_ATOM_ASM, OP, "u64", "l", old, v)                          \
        } else {                                                                         \
            static_assert(symm_detail::always_false<T>, #NAME ": T must be a 32/64-bit integer"); \
        }                                                                                \
        return old;                                                                      \
    }
SYMM_ATOM_MINMAX(symm_atom_max, "max")
SYMM_ATOM_MINMAX(symm_atom_min, "min")
#undef SYMM_ATOM_MINMAX

/* Exchange of any 4- or 8-byte T, returning the old value. */
template<int SEM, int SCOPE, typename T>
__device__ __forceinline__ T symm_atom_exch(T* p, symm_detail::nondeduced<T> v) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "symm_atom_exch: T must have 4 or 8 bytes");
    SYMM_CHECK_ATOMIC_ORDER("symm_atom_exch");
    if constexpr (sizeof(T) == 4) {
        symm_u32 old = 0, w = symm_bitcast<symm_u32>(v);
        SYMM_ORDERED(SYMM_ATOM_ASM, "exch", "b32", "r", old, w)
        return symm_bitcast<T>(old);
    } else {
        symm_u64 old = 0, w = symm_bitcast<symm_u64>(v);
        SYMM_ORDERED(SYMM_ATOM_ASM, "exch", "b64", "l", old, w)
        return symm_bitcast<T>(old);
    }
}

/* Compare-and-swap of any 4- or 8-byte T: stores v if the bits of *p equal
   those of cmp; returns the old value. */
template<int SEM, int SCOPE, typename T>
__device__ __forceinline__ T symm_atom_cas(T* p, symm_detail::nondeduced<T> cmp,
                                           symm_detail::nondeduced<T> v) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "symm_atom_cas: T must have 4 or 8 bytes");
    SYMM_CHECK_ATOMIC_ORDER("symm_atom_cas");
    if constexpr (sizeof(T) == 4) {
        symm_u32 old = 0, c = symm_bitcast<symm_u32>(cmp), w = symm_bitcast<symm_u32>(v);
        SYMM_ORDERED(SYMM_CAS_ASM, "b32", "r", old, c, w)
        return symm_bitcast<T>(old);
    } else {
        symm_u64 old = 0, c = symm_bitcast<symm_u64>(cmp), w = symm_bitcast<symm_u64>(v);
        SYMM_ORDERED(SYMM_CAS_ASM, "b64", "l", old, c, w)
        return symm_bitcast<T>(old);
    }
}

#undef SYMM_LD_ASM
#undef SYMM_ST_ASM
#undef SYMM_ATOM_ASM
#undef SYMM_CAS_ASM
#undef SYMM_CHECK_ATOMIC_ORDER
#undef SYMM_CHECK_ORDER
#undef SYMM_ORDERED

/* fence.acq_rel at SCOPE. */
template<int SCOPE> __device__ __forceinline__ void symm_fence() {
    static_assert(SCOPE == SYMM_CTA || SCOPE == SYMM_GPU || SCOPE == SYMM_SYS,
                  "symm_fence: SCOPE must be SYMM_CTA, SYMM_GPU or SYMM_SYS");
    if constexpr (SCOPE == SYMM_CTA) {
        asm volatile("fence.acq_rel.cta;" : : : "memory");
    } else if constexpr (SCOPE == SYMM_GPU) {
        asm volatile("fence.acq_rel.gpu;" : : : "memory");
    } else {
        asm volatile("fence.acq_rel.sys;" : : : "memory");
    }
}

/* fence.sc at SCOPE (a sequentially consistent fence, for SeqCst). */
template<int SCOPE> __device__ __forceinline__ void symm_fence_sc() {
    static_assert(SCOPE == SYMM_CTA || SCOPE == SYMM_GPU || SCOPE == SYMM_SYS,
                  "symm_fence_sc: SCOPE must be SYMM_CTA, SYMM_GPU or SYMM_SYS");
    if constexpr (SCOPE == SYMM_CTA) {
        asm volatile("fence.sc.cta;" : : : "memory");
    } else if constexpr (SCOPE == SYMM_GPU) {
        asm volatile("fence.sc.gpu;" : : : "memory");
    } else {
        asm volatile("fence.sc.sys;" : : : "memory");
    }
}

/* ---- 16-byte vector loads and stores of global memory ----
   One ld/st .v4.b32 (.v2.b64 for 8-byte elements) moves sizeof(T) * N ==
   16 bytes; p must be 16-byte aligned. The PTX memory model treats a vector
   access as one access per element of the vector's element width, so
   8-byte elements (LL packets: data and tag) go as .b64, each then a
   single-copy-atomic access. Plain variants are weak accesses, the
   _volatile ones ld/st.volatile. */

#define SYMM_VEC_LD(NAME, Q)                                                             \
    template<typename T, symm_u64 N>                                                     \
    __device__ __forceinline__ symm_array<T, N> NAME(const T* p) {                       \
        static_assert(sizeof(T) * N == 16 && sizeof(symm_array<T, N>) == 16,             \
                      #NAME ": sizeof(T) * N must be 16");                               \
        if constexpr (sizeof(T) == 8) {                                                  \
            symm_array<symm_u64, 2> w;                                                   \
            asm volatile("ld" Q ".global.v2.b64 {%0, %1}, [%2];"                         \
                         : "=l"(w.v[0]), "=l"(w.v[1]) : "l"(p) : "memory");              \
            return symm_bitcast<symm_array<T, N>>(w);                                    \
        } else {                                                                         \
            symm_array<symm_u32, 4> w;                                                   \
            asm volatile("ld" Q ".global.v4.b32 {%0, %1, %2, %3}, [%4];"                 \
                         : "=r"(w.v[0]), "=r"(w.v[1]), "=r"(w.v[2]), "=r"(w.v[3])        \
                         : "l"(p) : "memory");                                           \
            return symm_bitcast<symm_array<T, N>>(w);                                    \
        }                                                                                \
    }
#define SYMM_VEC_ST(NAME, Q)                                                             \
    template<typename T, symm_u64 N>                                                     \
    __device__ __forceinline__ void NAME(T* p, symm_array<T, N> v) {                     \
        static_assert(sizeof(T) * N == 16 && sizeof(symm_array<T, N>) == 16,             \
                      #NAME ": sizeof(T) * N must be 16");                               \
        if constexpr (sizeof(T) == 8) {                                                  \
            symm_array<symm_u64, 2> w = symm_bitcast<symm_array<symm_u64, 2>>(v);        \
            asm volatile("st" Q ".global.v2.b64 [%0], {%1, %2};"                         \
                         : : "l"(p), "l"(w.v[0]), "l"(w.v[1]) : "memory");               \
        } else {                                                                         \
            symm_array<symm_u32, 4> w = symm_bitcast<symm_array<symm_u32, 4>>(v);        \
            asm volatile("st" Q ".global.v4.b32 [%0], {%1, %2, %3, %4};"                 \
                         : : "l"(p), "r"(w.v[0]), "r"(w.v[1]), "r"(w.v[2]), "r"(w.v[3])  \
                         : "memory");                                                    \
        }                                                                                \
    }
SYMM_VEC_LD(symm_ld_vec, "")
SYMM_VEC_LD(symm_ld_vec_volatile, ".volatile")
SYMM_VEC_ST(symm_st_vec, "")
SYMM_VEC_ST(symm_st_vec_volatile, ".volatile")
#undef SYMM_VEC_LD
#undef SYMM_VEC_ST

/* ---- Warp primitives (whole warp converged: member mask 0xffffffff) ---- */

namespace symm_detail {
SYMM_DEVICE_FN symm_u32 shfl_bfly(symm_u32 x, symm_u32 lane_mask) {
    symm_u32 r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                 : "=r"(r) : "r"(x), "r"(lane_mask));
    return r;
}
} /* namespace symm_detail */

/* The value of v held by lane (lane_id ^ lane_mask). T of 1, 2, 4 or 8
   bytes (narrow values travel widened to 32 bits, 8 bytes as two halves). */
template<typename T> __device__ __forceinline__ T symm_shfl_xor(T v, symm_u32 lane_mask) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                  "symm_shfl_xor: T must have 1, 2, 4 or 8 bytes");
    if constexpr (sizeof(T) == 8) {
        symm_array<symm_u32, 2> w = symm_bitcast<symm_array<symm_u32, 2>>(v);
        w.v[0] = symm_detail::shfl_bfly(w.v[0], lane_mask);
        w.v[1] = symm_detail::shfl_bfly(w.v[1], lane_mask);
        return symm_bitcast<T>(w);
    } else if constexpr (sizeof(T) == 4) {
        return symm_bitcast<T>(symm_detail::shfl_bfly(symm_bitcast<symm_u32>(v), lane_mask));
    } else if constexpr (sizeof(T) == 2) {
        symm_u32 w = symm_bitcast<symm_u16>(v);
        return symm_bitcast<T>((symm_u16)symm_detail::shfl_bfly(w, lane_mask));
    } else {
        symm_u32 w = symm_bitcast<symm_u8>(v);
        return symm_bitcast<T>((symm_u8)symm_detail::shfl_bfly(w, lane_mask));
    }
}

/* Bit i set iff lane i's pred is true. */
SYMM_DEVICE_FN symm_u32 symm_ballot(bool pred) {
    symm_u32 r;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "setp.ne.u32 p, %1, 0;\n\t"
                 "vote.sync.ballot.b32 %0, p, 0xffffffff;\n\t}"
                 : "=r"(r) : "r"((symm_u32)pred));
    return r;
}

/* This thread's lane in its warp, 0..31. */
SYMM_DEVICE_FN symm_u32 symm_lane_id() {
    symm_u32 r;
    asm("mov.u32 %0, %%laneid;" : "=r"(r));
    return r;
}

#endif /* SYMM_PRELUDE_INCLUDED */
"#;
