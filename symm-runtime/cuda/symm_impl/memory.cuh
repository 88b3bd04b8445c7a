/* Memory operations with explicit ordering and scope: fixed-width u32
   accesses, the SEM/SCOPE templates, fences and 16-byte vectors. Part of
   PRELUDE; see symm_core.cuh. */
#ifndef SYMM_IMPL_MEMORY_CUH
#define SYMM_IMPL_MEMORY_CUH

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

#endif /* SYMM_IMPL_MEMORY_CUH */
