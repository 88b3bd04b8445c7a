/* The layer between generated code and the core: handle accessors, Rust
   operators, memory wrappers and the signal pad's bounds check. Part of
   DSL_SUPPORT; see symm.cuh. */
#ifndef SYMM_IMPL_SUPPORT_CUH
#define SYMM_IMPL_SUPPORT_CUH

/* Entry `r` of a buffer's pointer table. The tables never change while a
   kernel runs, so this is a pure (non-volatile, no memory clobber) read-only
   load: the compiler may issue it early and reuse it, instead of reloading
   it after every ordered memory operation (each reload is an L2 round trip
   on the path of every small call). */
static __device__ __forceinline__ __attribute__((unused)) symm_u64 symm_table_at(const symm_u64* t, symm_u32 r) {
    symm_u64 v;
    asm("ld.global.nc.u64 %0, [%1];" : "=l"(v) : "l"(t + r));
    return v;
}

static __device__ __forceinline__ __attribute__((unused)) symm_u64 symm_pad_slots(symm_u32 world) {
    symm_u32 w = world < SYMM_MAX_DOMAIN ? world : SYMM_MAX_DOMAIN;
    symm_u32 groups = (w + SYMM_PAD_PEER_GROUP - 1u) / SYMM_PAD_PEER_GROUP;
    return (symm_u64)(groups == 0u ? 1u : groups) * SYMM_PAD_GROUP_SLOTS;
}

template<typename T> __device__ __forceinline__ symm_u64 symm_len(const symm_slice<T>& s) { return s.len; }
template<typename T> __device__ __forceinline__ symm_u64 symm_len(const symm_buf<T>& b) { return b.len; }
template<typename T, symm_u64 N> __device__ __forceinline__ symm_u64 symm_len(const symm_array<T, N>&) { return N; }
/* Checked indexing (SYMM_AT with SYMM_CHECKED 1). A failed check yields a
   dummy element: one zero-initialised __device__ object per element type
   that every failing thread shares (so its value is unspecified), never
   memory out of bounds. The check is marked likely and its record is out
   of line, so that a site costs a compare and a branch in the hot code. */
namespace symm_detail {
template<class E> __device__ E oob_sink;
} /* namespace symm_detail */
template<class B, class I>
__device__ __forceinline__ auto symm_at(const symm_kctx& c, B&& base, I index, symm_u32 fn, symm_u32 line) -> decltype(base[(symm_u64)index]) {
    const symm_u64 i = (symm_u64)index;
    const symm_u64 n = symm_len(base);
    if (__builtin_expect(i < n, 1)) return base[i];
    bool negative = false;
    if constexpr (symm_detail::is_signed_int<I>) negative = index < 0;
    symm_record_out_of_bounds(c.status, c.rank, i, negative, n, fn, line);
    return symm_detail::oob_sink<typename symm_rr<decltype(base[i])>::type>;
}
namespace symm_detail {
/* A template, as oob_sink is, so that only kernels that use it (checked
   ones) get it. */
template<int Bytes> __device__ __align__(16) unsigned char oob_block[Bytes];
} /* namespace symm_detail */
template<class T, class I>
__device__ __forceinline__ symm_slice<T> symm_slice_at(const symm_kctx& c, const symm_slice<T>& s, I index, symm_u64 elems, symm_u64 bytes, symm_u32 fn, symm_u32 line) {
    const symm_u64 i = (symm_u64)index;
    const symm_u64 need = elems * sizeof(T) > bytes ? elems * sizeof(T) : bytes;
    if (__builtin_expect(i < s.len && (s.len - i) * sizeof(T) >= need, 1)) return symm_slice<T>{s.ptr + i, s.len - i};
    bool negative = false;
    if constexpr (symm_detail::is_signed_int<I>) negative = index < 0;
    symm_record_out_of_bounds(c.status, c.rank, i, negative, s.len, fn, line);
    return symm_slice<T>{(T*)symm_detail::oob_block<64>, 64 / sizeof(T)};
}
/* A rank index r of b checked in a checked kernel (see symm_peer). */
template<typename T> __device__ __forceinline__ bool symm_rank_ok(const symm_kctx& c, const symm_buf<T>& b, symm_u32 r) {
#if SYMM_CHECKED
    if (r >= b.world) {
        symm_record_out_of_bounds(c.status, c.rank, r, false, b.world, SYMM_SITE_FN, 0);
        return false;
    }
#else
    (void)c; (void)b; (void)r;
#endif
    return true;
}
SYMM_DEVICE_FN bool symm_signal_ok(const symm_kctx& c, symm_u32 peer, symm_u32 world, symm_u32 channel) {
#if SYMM_CHECKED
    symm_u64 index = 0, len = 0;
    if (peer >= world) { index = peer; len = world; }
    else if (channel >= SYMM_SIGNAL_CHANNELS) { index = channel; len = SYMM_SIGNAL_CHANNELS; }
    else if (blockIdx.x >= SYMM_SIGNAL_BLOCKS) { index = blockIdx.x; len = SYMM_SIGNAL_BLOCKS; }
    else return true;
    symm_record_out_of_bounds(c.status, c.rank, index, false, len, SYMM_SITE_FN, 0);
    return false;
#else
    (void)c; (void)peer; (void)world; (void)channel;
    return true;
#endif
}
template<typename T> __device__ __forceinline__ symm_slice<T> symm_peer(const symm_kctx& c, const symm_buf<T>& b, symm_u32 r) {
#if SYMM_CHECKED
    if (!symm_rank_ok(c, b, r)) return symm_slice<T>{(T*)symm_detail::oob_block<64>, 0};
#else
    (void)c;
#endif
    return symm_slice<T>{(T*)(symm_table_at(b.ptrs, r) + b.off), b.len};
}
template<typename T> __device__ __forceinline__ symm_slice<T> symm_local(const symm_buf<T>& b) { return symm_slice<T>{(T*)b.local, b.len}; }
template<typename T> __device__ __forceinline__ symm_slice<symm_u32> symm_pad(const symm_kctx& c, const symm_buf<T>& b, symm_u32 r) {
#if SYMM_CHECKED
    if (!symm_rank_ok(c, b, r)) return symm_slice<symm_u32>{(symm_u32*)symm_detail::oob_block<64>, 0};
#else
    (void)c;
#endif
    return symm_slice<symm_u32>{(symm_u32*)(r == b.rank ? b.lpad : symm_table_at(b.pads, r)), symm_pad_slots(b.world)};
}
template<typename T> __device__ __forceinline__ symm_u32 symm_rank(const symm_buf<T>& b) { return b.rank; }
template<typename T> __device__ __forceinline__ symm_u32 symm_world(const symm_buf<T>& b) { return b.world; }

static __device__ __noinline__ __attribute__((unused)) void symm_assert_failed(const symm_kctx& c, symm_u32 fn, symm_u32 index) {
    symm_record_assert(c.status, c.rank, fn, index);
    asm volatile("exit;");
}

/* Rust's `!`: logical on bool, bitwise on integers. */
template<class T> __device__ __forceinline__ T symm_not(T x) { return ~x; }
static __device__ __forceinline__ __attribute__((unused)) bool symm_not(bool x) { return !x; }

/* Rust's arithmetic on integers, whatever C++'s promotions: the result
   has the operands' type (a u8 sum is a u8, never an int), `+ - *` wrap as
   a release build of Rust does (computed unsigned, so signed overflow is no
   undefined behaviour), shifts take their amount modulo the width (Rust's
   release behaviour; a debug emulator reports the overflow instead), `>>`
   is arithmetic on signed types, and `MIN / -1` wraps (Rust: a panic).
   Floats and halves use their own operators. The right operand converts to
   the left's type: the macro types literals that way, and Rust allows no
   other mix. */
template<class T> struct symm_intop { static constexpr bool yes = false; };
#define SYMM_INTOP(T, U, B, S) template<> struct symm_intop<T> { static constexpr bool yes = true; typedef U u; static constexpr unsigned bits = B; static constexpr bool is_signed = S; };
SYMM_INTOP(symm_u8, symm_u32, 8, false)
SYMM_INTOP(symm_u16, symm_u32, 16, false)
SYMM_INTOP(symm_u32, symm_u32, 32, false)
SYMM_INTOP(symm_u64, symm_u64, 64, false)
SYMM_INTOP(symm_i8, symm_u32, 8, true)
SYMM_INTOP(symm_i16, symm_u32, 16, true)
SYMM_INTOP(symm_i32, symm_u32, 32, true)
SYMM_INTOP(symm_i64, symm_u64, 64, true)
#undef SYMM_INTOP
#define SYMM_WRAPOP(name, op) \
template<class A, class B> __device__ __forceinline__ A name(A a, B b) { \
    if constexpr (symm_intop<A>::yes) { \
        typedef typename symm_intop<A>::u U; \
        return (A)(U)((U)a op (U)(A)b); \
    } else { \
        return a op (A)b; \
    } \
}
SYMM_WRAPOP(symm_add, +)
SYMM_WRAPOP(symm_sub, -)
SYMM_WRAPOP(symm_mul, *)
#undef SYMM_WRAPOP
#define SYMM_BITOP(name, op) \
template<class A, class B> __device__ __forceinline__ A name(A a, B b) { return (A)(a op (A)b); }
SYMM_BITOP(symm_and, &)
SYMM_BITOP(symm_or, |)
SYMM_BITOP(symm_xor, ^)
#undef SYMM_BITOP
template<class A, class B> __device__ __forceinline__ A symm_div(A a, B b) {
    if constexpr (symm_intop<A>::yes) {
        if constexpr (symm_intop<A>::is_signed) {
            if ((A)b == (A)-1) return (A)(typename symm_intop<A>::u)(0u - (typename symm_intop<A>::u)a);
        }
        return (A)(a / (A)b);
    } else {
        return a / (A)b;
    }
}
template<class A, class S> __device__ __forceinline__ A symm_shl(A a, S s) {
    if constexpr (symm_intop<A>::yes) {
        typedef typename symm_intop<A>::u U;
        return (A)(U)((U)a << ((unsigned)s & (symm_intop<A>::bits - 1)));
    } else {
        return a << s;
    }
}
template<class A, class S> __device__ __forceinline__ A symm_shr(A a, S s) {
    if constexpr (symm_intop<A>::yes) {
        return (A)(a >> ((unsigned)s & (symm_intop<A>::bits - 1)));
    } else {
        return a >> s;
    }
}
template<class A> __device__ __forceinline__ A symm_neg(A a) {
    if constexpr (symm_intop<A>::yes) {
        typedef typename symm_intop<A>::u U;
        return (A)(U)((U)0 - (U)a);
    } else {
        return -a;
    }
}
/* The compound assignments, through the operators above; the place is
   evaluated once. */
#define SYMM_ASSIGNOP(name, fn) \
template<class A, class B> __device__ __forceinline__ A& name(A& a, B b) { return a = fn(a, b); }
SYMM_ASSIGNOP(symm_add_assign, symm_add)
SYMM_ASSIGNOP(symm_sub_assign, symm_sub)
SYMM_ASSIGNOP(symm_mul_assign, symm_mul)
SYMM_ASSIGNOP(symm_div_assign, symm_div)
SYMM_ASSIGNOP(symm_and_assign, symm_and)
SYMM_ASSIGNOP(symm_or_assign, symm_or)
SYMM_ASSIGNOP(symm_xor_assign, symm_xor)
SYMM_ASSIGNOP(symm_shl_assign, symm_shl)
SYMM_ASSIGNOP(symm_shr_assign, symm_shr)
#undef SYMM_ASSIGNOP

/* Rust's `%`: truncating for integers, fmod for floats (exact, like Rust). */
template<class T> __device__ __forceinline__ T symm_rem(T a, T b) {
    /* `MIN % -1` is 0 (C++: undefined; Rust: a panic, which the emulator
       reports); the branch folds away for unsigned types. */
    if constexpr (symm_intop<T>::yes && symm_intop<T>::is_signed) {
        if (b == (T)-1) return (T)0;
    }
    return (T)(a % b);
}
static __device__ __forceinline__ __attribute__((unused)) float symm_rem(float a, float b) { return fmodf(a, b); }
static __device__ __forceinline__ __attribute__((unused)) double symm_rem(double a, double b) { return fmod(a, b); }
static __device__ __forceinline__ __attribute__((unused)) symm_bf16 symm_rem(symm_bf16 a, symm_bf16 b) { return symm_f32_to_bf16(fmodf(symm_bf16_to_f32(a), symm_bf16_to_f32(b))); }
static __device__ __forceinline__ __attribute__((unused)) symm_f16 symm_rem(symm_f16 a, symm_f16 b) { return symm_f32_to_f16(fmodf(symm_f16_to_f32(a), symm_f16_to_f32(b))); }
static __device__ __forceinline__ __attribute__((unused)) symm_f8e4m3 symm_rem(symm_f8e4m3 a, symm_f8e4m3 b) { return symm_f32_to_f8e4m3(fmodf(symm_f8e4m3_to_f32(a), symm_f8e4m3_to_f32(b))); }
static __device__ __forceinline__ __attribute__((unused)) symm_f8e5m2 symm_rem(symm_f8e5m2 a, symm_f8e5m2 b) { return symm_f32_to_f8e5m2(fmodf(symm_f8e5m2_to_f32(a), symm_f8e5m2_to_f32(b))); }
/* Rust's `%=`, through symm_rem: C++ has no `%=` for floats or halves. The
   place is evaluated once. */
template<class T> __device__ __forceinline__ T& symm_rem_assign(T& a, typename symm_nd<T>::type b) { return a = symm_rem(a, b); }

/* Half-precision and fp8 square roots, through f32 like the Rust side. */
static __device__ __forceinline__ __attribute__((unused)) symm_bf16 symm_sqrt(symm_bf16 a) { return symm_f32_to_bf16(symm_sqrt(symm_bf16_to_f32(a))); }
static __device__ __forceinline__ __attribute__((unused)) symm_f16 symm_sqrt(symm_f16 a) { return symm_f32_to_f16(symm_sqrt(symm_f16_to_f32(a))); }
static __device__ __forceinline__ __attribute__((unused)) symm_f8e4m3 symm_sqrt(symm_f8e4m3 a) { return symm_f32_to_f8e4m3(symm_sqrt(symm_f8e4m3_to_f32(a))); }
static __device__ __forceinline__ __attribute__((unused)) symm_f8e5m2 symm_sqrt(symm_f8e5m2 a) { return symm_f32_to_f8e5m2(symm_sqrt(symm_f8e5m2_to_f32(a))); }

/* Rust's wrapping_*: computed on 64-bit unsigned values, so signed overflow
   (undefined in C++) wraps exactly as in Rust. */
template<class T> __device__ __forceinline__ T symm_wrapping_add(T a, typename symm_nd<T>::type b) { return (T)((symm_u64)a + (symm_u64)b); }
template<class T> __device__ __forceinline__ T symm_wrapping_sub(T a, typename symm_nd<T>::type b) { return (T)((symm_u64)a - (symm_u64)b); }
template<class T> __device__ __forceinline__ T symm_wrapping_mul(T a, typename symm_nd<T>::type b) { return (T)((symm_u64)a * (symm_u64)b); }

template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_load(symm_slice<T> s, symm_u64 i) { return symm_ld<S, C>(s.ptr + i); }
template<int S, int C, class T> __device__ __forceinline__ void symm_dsl_store(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v) { symm_st<S, C>(s.ptr + i, v); }
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_add(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v) { return symm_atom_add<S, C>(s.ptr + i, v); }
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_exch(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v) { return symm_atom_exch<S, C>(s.ptr + i, v); }
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_max(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v) { return symm_atom_max<S, C>(s.ptr + i, v); }
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_min(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v) { return symm_atom_min<S, C>(s.ptr + i, v); }
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_cas(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type c, typename symm_nd<T>::type v) { return symm_atom_cas<S, C>(s.ptr + i, c, v); }
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<T, N> symm_dsl_load_vec(symm_slice<T> s, symm_u64 i) { return symm_ld_vec<T, N>(s.ptr + i); }
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<T, N> symm_dsl_load_vec_volatile(symm_slice<T> s, symm_u64 i) { return symm_ld_vec_volatile<T, N>(s.ptr + i); }
template<class T, symm_u64 N> __device__ __forceinline__ void symm_dsl_store_vec(symm_slice<T> s, symm_u64 i, symm_array<T, N> v) { symm_st_vec<T, N>(s.ptr + i, v); }
template<class T, symm_u64 N> __device__ __forceinline__ void symm_dsl_store_vec_volatile(symm_slice<T> s, symm_u64 i, symm_array<T, N> v) { symm_st_vec_volatile<T, N>(s.ptr + i, v); }

/* Element bits zero-extended to 32 bits, and back (LL packing). */
template<class T> __device__ __forceinline__ symm_u32 symm_to_bits32(T x) {
    if constexpr (sizeof(T) == 4) return symm_bitcast<symm_u32>(x);
    else if constexpr (sizeof(T) == 2) return (symm_u32)symm_bitcast<symm_u16>(x);
    else return (symm_u32)symm_bitcast<symm_u8>(x);
}
template<class T> __device__ __forceinline__ T symm_from_bits32(symm_u32 b) {
    if constexpr (sizeof(T) == 4) return symm_bitcast<T>(b);
    else if constexpr (sizeof(T) == 2) return symm_bitcast<T>((symm_u16)b);
    else return symm_bitcast<T>((symm_u8)b);
}

/* Element bits zero-extended to 64 bits, and back (sentinels of any width). */
template<class T> __device__ __forceinline__ symm_u64 symm_to_bits64(T x) {
    if constexpr (sizeof(T) == 8) return symm_bitcast<symm_u64>(x);
    else return (symm_u64)symm_to_bits32(x);
}
template<class T> __device__ __forceinline__ T symm_from_bits64(symm_u64 b) {
    if constexpr (sizeof(T) == 8) return symm_bitcast<T>(b);
    else return symm_from_bits32<T>((symm_u32)b);
}

#endif /* SYMM_IMPL_SUPPORT_CUH */
