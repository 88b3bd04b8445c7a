//! The C++ layer between generated kernel code and the prelude: handle
//! types (`symm_slice`, `symm_buf`), the kernel context, and the wrappers
//! that DSL methods translate to.

use std::sync::LazyLock;

use crate::cuda_prelude::PRELUDE;
use crate::signal::{SignalKind, SIGNAL_DEVICE_FNS};

const SUPPORT: &str = r#"
/* The type of an expression without references or const: how generated code
   gives a literal the type of the value it combines with. */
template<class T> struct symm_rr { typedef T type; };
template<class T> struct symm_rr<T&> { typedef T type; };
template<class T> struct symm_rr<T&&> { typedef T type; };
template<class T> struct symm_rr<const T> { typedef T type; };
template<class T> struct symm_rr<const T&> { typedef T type; };
#define SYMM_TY(...) typename symm_rr<decltype(__VA_ARGS__)>::type
/* A non-deduced context: value arguments convert to the pointer's type. */
template<class T> struct symm_nd { typedef T type; };

/* Where a kernel records a failure, and how long its waits may take. */
struct symm_kctx { symm_u32* status; symm_u64 timeout_ns; symm_u32 rank; };

template<typename T> struct symm_slice {
    T* ptr; symm_u64 len;
    __device__ __forceinline__ T& operator[](symm_u64 i) const { return ptr[i]; }
};
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
/* `local` and `lpad`, this rank's own buffer and pad (ptrs[rank] and
   pads[rank]), come by value, so reaching them costs no table load. */
template<typename T> struct symm_buf { const symm_u64* ptrs; const symm_u64* pads; symm_u32 rank; symm_u32 world; symm_u64 len; symm_u64 local; symm_u64 lpad; };

template<typename T> __device__ __forceinline__ symm_u64 symm_len(const symm_slice<T>& s) { return s.len; }
template<typename T> __device__ __forceinline__ symm_u64 symm_len(const symm_buf<T>& b) { return b.len; }
template<typename T, symm_u64 N> __device__ __forceinline__ symm_u64 symm_len(const symm_array<T, N>&) { return N; }
template<typename T> __device__ __forceinline__ symm_slice<T> symm_peer(const symm_buf<T>& b, symm_u32 r) { return symm_slice<T>{(T*)symm_table_at(b.ptrs, r), b.len}; }
template<typename T> __device__ __forceinline__ symm_slice<T> symm_local(const symm_buf<T>& b) { return symm_slice<T>{(T*)b.local, b.len}; }
template<typename T> __device__ __forceinline__ symm_slice<symm_u32> symm_pad(const symm_buf<T>& b, symm_u32 r) { return symm_slice<symm_u32>{(symm_u32*)(r == b.rank ? b.lpad : symm_table_at(b.pads, r)), SYMM_PAD_SLOTS}; }
template<typename T> __device__ __forceinline__ symm_u32 symm_rank(const symm_buf<T>& b) { return b.rank; }
template<typename T> __device__ __forceinline__ symm_u32 symm_world(const symm_buf<T>& b) { return b.world; }

/* Rust's `!`: logical on bool, bitwise on integers. */
template<class T> __device__ __forceinline__ T symm_not(T x) { return ~x; }
static __device__ __forceinline__ __attribute__((unused)) bool symm_not(bool x) { return !x; }

/* Rust's `%`: truncating for integers, fmod for floats (exact, like Rust). */
template<class T> __device__ __forceinline__ T symm_rem(T a, T b) { return a % b; }
static __device__ __forceinline__ __attribute__((unused)) float symm_rem(float a, float b) { return fmodf(a, b); }
static __device__ __forceinline__ __attribute__((unused)) double symm_rem(double a, double b) { return fmod(a, b); }
static __device__ __forceinline__ __attribute__((unused)) symm_bf16 symm_rem(symm_bf16 a, symm_bf16 b) { return symm_f32_to_bf16(fmodf(symm_bf16_to_f32(a), symm_bf16_to_f32(b))); }
static __device__ __forceinline__ __attribute__((unused)) symm_f16 symm_rem(symm_f16 a, symm_f16 b) { return symm_f32_to_f16(fmodf(symm_f16_to_f32(a), symm_f16_to_f32(b))); }

/* Half-precision square roots, through f32 like the Rust side. */
static __device__ __forceinline__ __attribute__((unused)) symm_bf16 symm_sqrt(symm_bf16 a) { return symm_f32_to_bf16(symm_sqrt(symm_bf16_to_f32(a))); }
static __device__ __forceinline__ __attribute__((unused)) symm_f16 symm_sqrt(symm_f16 a) { return symm_f32_to_f16(symm_sqrt(symm_f16_to_f32(a))); }

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

/* Epoch flags: a release store of a value, and an acquire spin until the
   slot reaches it (wrapping comparison, so epochs may wrap). No CAS round
   trips: the fast path of barriers that run every call. */
template<class T> __device__ __forceinline__ void symm_dsl_signal_flag(const symm_kctx& c, const symm_buf<T>& b, symm_u32 dst, symm_u32 channel, symm_u32 value) {
    (void)c;
    symm_st<SYMM_RELEASE, SYMM_SYS>(symm_slot(symm_table_at(b.pads, dst), channel, blockIdx.x, b.rank), value);
}
template<class T> __device__ __forceinline__ void symm_dsl_wait_flag(const symm_kctx& c, const symm_buf<T>& b, symm_u32 src, symm_u32 channel, symm_u32 value) {
    const symm_u32* slot = symm_slot(b.lpad, channel, blockIdx.x, src);
    if ((int)(symm_ld<SYMM_ACQUIRE, SYMM_SYS>(slot) - value) >= 0) return;
    symm_u64 start = symm_globaltimer();
    while ((int)(symm_ld<SYMM_ACQUIRE, SYMM_SYS>(slot) - value) < 0) {
        if (symm_globaltimer() - start > c.timeout_ns) {
            symm_record_timeout(c.status, SYMM_KIND_WAIT, b.rank, src, channel, (symm_u32)(c.timeout_ns / 1000000ull));
            asm volatile("exit;");
        }
    }
}

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

/* The wait loop of every receive of data that marks its own arrival (LL
   packets, sentinel-filled staging): fills v[r] for each r < 8 whose bit is
   set in `slots`, with `load(r)` (which may be called with a run-time r)
   until `ready(v[r])`. Every slot's load is issued before any is checked:
   one memory round trip when everything has arrived. Then it spins on the
   first slot still missing alone (a tight loop: one load and one check a
   turn, the shortest delay between an arrival and its detection), and once
   that one lands it loads the other missing slots again together, so
   waiting on several peers costs one more round trip after the first
   spin, not one per peer. v[] is only ever indexed by unrolled constants,
   so it stays in registers. A timeout records peer `from(r)` of the slot
   it spins on (data waits have no channel: 0xffffffff) and ends the
   thread. */
static __device__ __forceinline__ __attribute__((unused)) symm_u32 symm_lowest_bit(symm_u32 x) {
    symm_u32 r;
    asm("bfind.u32 %0, %1;" : "=r"(r) : "r"(x & (0u - x)));
    return r;
}
template<class V, class Load, class Ready, class From>
__device__ __forceinline__ void symm_wait_slots(const symm_kctx& c, symm_u32 slots, V (&v)[8], Load load, Ready ready, From from) {
#pragma unroll
    for (symm_u32 r = 0; r < 8; ++r) if (slots >> r & 1u) v[r] = load(r);
    symm_u32 pending = 0;
#pragma unroll
    for (symm_u32 r = 0; r < 8; ++r) if ((slots >> r & 1u) && !ready(v[r])) pending |= 1u << r;
    if (!pending) return;
    const symm_u64 start = symm_globaltimer();
    for (;;) {
        const symm_u32 first = symm_lowest_bit(pending);
        V cur = load(first);
        while (!ready(cur)) {
            if (symm_globaltimer() - start > c.timeout_ns) {
                symm_record_timeout(c.status, SYMM_KIND_WAIT, c.rank, from(first), 0xffffffffu, (symm_u32)(c.timeout_ns / 1000000ull));
                asm volatile("exit;");
            }
            cur = load(first);
        }
#pragma unroll
        for (symm_u32 r = 0; r < 8; ++r) if (r == first) v[r] = cur;
        pending &= ~(1u << first);
        if (!pending) return;
#pragma unroll
        for (symm_u32 r = 0; r < 8; ++r) if (pending >> r & 1u) v[r] = load(r);
#pragma unroll
        for (symm_u32 r = 0; r < 8; ++r) if ((pending >> r & 1u) && ready(v[r])) pending &= ~(1u << r);
        if (!pending) return;
    }
}

/* Whether no element (of T's width) of the 16 bytes `w` has `empty`'s bits.
   Checked on the raw words, so nothing is unpacked between a slot's load
   and the next one. */
template<class T> __device__ __forceinline__ bool symm_words_ready(const symm_array<symm_u32, 4>& w, T empty) {
    static_assert(sizeof(T) <= 4, "sentinel receives take elements of at most 4 bytes");
    const symm_u32 e = symm_to_bits32(empty);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if constexpr (sizeof(T) == 4) {
            if (w[k] == e) return false;
        } else {
#pragma unroll
            for (int h = 0; h < 4 / (int)sizeof(T); ++h)
                if ((w[k] >> (h * 8 * sizeof(T)) & ((1u << (8 * sizeof(T))) - 1u)) == e) return false;
        }
    }
    return true;
}

/* LL receive: 8-byte volatile loads polled until the high word is `tag`.
   Data and tag travel in one single-copy-atomic store, so no fence is
   needed. */
template<class X> __device__ __forceinline__ symm_u64 symm_dsl_load_tagged(const symm_kctx& c, symm_slice<X> s, symm_u64 i, symm_u32 tag, symm_u32 from) {
    const symm_u64* p = (const symm_u64*)(s.ptr + i);
    symm_u64 v[8] = {};
    symm_wait_slots(c, 1u, v, [&](symm_u32) { return symm_ld<SYMM_VOLATILE, SYMM_SYS>(p); },
                    [&](symm_u64 x) { return (symm_u32)(x >> 32) == tag; }, [&](symm_u32) { return from; });
    return v[0];
}

/* Two LL packets at once: a 16-byte volatile load (two 8-byte elements, each
   single-copy atomic) polled until both tags are `tag`. */
static __device__ __forceinline__ __attribute__((unused)) bool symm_tagged2_ready(const symm_array<symm_u64, 2>& v, symm_u32 tag) {
    return (symm_u32)(v[0] >> 32) == tag && (symm_u32)(v[1] >> 32) == tag;
}
template<class X> __device__ __forceinline__ symm_array<symm_u64, 2> symm_dsl_load_tagged2(const symm_kctx& c, symm_slice<X> s, symm_u64 i, symm_u32 tag, symm_u32 from) {
    const symm_u64* p = (const symm_u64*)(s.ptr + i);
    symm_array<symm_u64, 2> v[8] = {};
    symm_wait_slots(c, 1u, v, [&](symm_u32) { return symm_ld_vec_volatile<symm_u64, 2>(p); },
                    [&](const symm_array<symm_u64, 2>& x) { return symm_tagged2_ready(x, tag); }, [&](symm_u32) { return from; });
    return v[0];
}

/* Packet pairs of several ranks: slot r (for each bit r of `ranks`) at
   `first + r * stride`, all polled together; a timeout names rank r. */
template<class X> __device__ __forceinline__ symm_array<symm_array<symm_u64, 2>, 8> symm_dsl_gather_tagged2(const symm_kctx& c, symm_slice<X> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, symm_u32 tag) {
    symm_array<symm_u64, 2> v[8] = {};
    symm_wait_slots(c, ranks, v, [&](symm_u32 r) { return symm_ld_vec_volatile<symm_u64, 2>((const symm_u64*)(s.ptr + first + r * stride)); },
                    [&](const symm_array<symm_u64, 2>& x) { return symm_tagged2_ready(x, tag); }, [](symm_u32 r) { return r; });
    symm_array<symm_array<symm_u64, 2>, 8> out;
#pragma unroll
    for (int r = 0; r < 8; ++r) out[r] = v[r];
    return out;
}

/* Sentinel receive: a 16-byte volatile load polled until no element has
   `empty`'s bits (each element is single-copy atomic, so a partly arrived
   vector still shows the sentinel). */
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<T, N> symm_dsl_load_vec_ready(const symm_kctx& c, symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type empty, symm_u32 from) {
    static_assert(sizeof(T) * N == 16, "load_vec_ready: sizeof(T) * N must be 16");
    const symm_u32* p = (const symm_u32*)(s.ptr + i);
    symm_array<symm_u32, 4> w[8] = {};
    symm_wait_slots(c, 1u, w, [&](symm_u32) { return symm_ld_vec_volatile<symm_u32, 4>(p); },
                    [&](const symm_array<symm_u32, 4>& x) { return symm_words_ready<T>(x, empty); }, [&](symm_u32) { return from; });
    return symm_bitcast<symm_array<T, N>>(w[0]);
}

/* Sentinel receive from several ranks: slot r (for each bit r of `ranks`)
   at `first + r * stride`, all polled together; zeros where a bit is
   clear; a timeout names rank r. */
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<symm_array<T, N>, 8> symm_dsl_gather_ready(const symm_kctx& c, symm_slice<T> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, typename symm_nd<T>::type empty) {
    static_assert(sizeof(T) * N == 16, "gather_ready: sizeof(T) * N must be 16");
    symm_array<symm_u32, 4> w[8] = {};
    symm_wait_slots(c, ranks, w, [&](symm_u32 r) { return symm_ld_vec_volatile<symm_u32, 4>((const symm_u32*)(s.ptr + first + r * stride)); },
                    [&](const symm_array<symm_u32, 4>& x) { return symm_words_ready<T>(x, empty); }, [](symm_u32 r) { return r; });
    symm_array<symm_array<T, N>, 8> v;
#pragma unroll
    for (int r = 0; r < 8; ++r) v[r] = symm_bitcast<symm_array<T, N>>(w[r]);
    return v;
}

/* In-kernel signals. A timeout records who failed and ends this thread with
   `exit` (never `trap`, which would kill the context); the runtime reports
   the record at the next synchronize. */
template<class T> __device__ __forceinline__ void symm_dsl_put_signal(const symm_kctx& c, const symm_buf<T>& b, symm_u32 dst, symm_u32 channel) {
    if (!symm_put(b.pads, b.rank, dst, channel, c.timeout_ns, (symm_u32)(c.timeout_ns / 1000000ull), c.status, SYMM_KIND_PUT)) asm volatile("exit;");
}
/* Host-requested signal ops carry their own timeout and report their kind;
   they return (leaving the record) instead of exiting, so the caller's
   thread can finish the barrier's other half. */
template<class T> __device__ __forceinline__ bool symm_dsl_put_signal_within(const symm_kctx& c, const symm_buf<T>& b, symm_u32 dst, symm_u32 channel, symm_u64 timeout_ns, symm_u32 kind) {
    return symm_put(b.pads, b.rank, dst, channel, timeout_ns, (symm_u32)(timeout_ns / 1000000ull), c.status, kind);
}
template<class T> __device__ __forceinline__ bool symm_dsl_wait_signal_within(const symm_kctx& c, const symm_buf<T>& b, symm_u32 src, symm_u32 channel, symm_u64 timeout_ns, symm_u32 kind) {
    return symm_wait(b.pads, b.rank, src, channel, timeout_ns, (symm_u32)(timeout_ns / 1000000ull), c.status, kind);
}
template<class T> __device__ __forceinline__ void symm_dsl_wait_signal(const symm_kctx& c, const symm_buf<T>& b, symm_u32 src, symm_u32 channel) {
    if (!symm_wait(b.pads, b.rank, src, channel, c.timeout_ns, (symm_u32)(c.timeout_ns / 1000000ull), c.status, SYMM_KIND_WAIT)) asm volatile("exit;");
}
"#;

/// Everything generated kernel code is compiled against: the prelude, the
/// signal protocol, and [`SUPPORT`].
pub(crate) static DSL_SUPPORT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{PRELUDE}\n#define SYMM_KIND_PUT {}u\n#define SYMM_KIND_WAIT {}u\n{}\n{SUPPORT}",
        SignalKind::Put.code(),
        SignalKind::Wait.code(),
        &*SIGNAL_DEVICE_FNS
    )
});
