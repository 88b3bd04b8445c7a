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

#endif /* SYMM_PRELUDE_INCLUDED */
"#;
