/* Receives of data that marks its own arrival (LL packets, sentinel-filled
   staging): one shared wait loop and its wrappers, and the send of 8-byte LL
   packets, whose format is defined here beside its receive. Part of
   DSL_SUPPORT; see symm.cuh. */
#ifndef SYMM_IMPL_RECEIVE_CUH
#define SYMM_IMPL_RECEIVE_CUH

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
   so it stays in registers. A timeout, or the host stopping waits on the
   peer (symm_wait_gives_up), records peer `from(r)` of the slot it spins on
   (data waits have no channel: 0xffffffff) and ends the thread. A slot
   that is `wrong` (another call's data: see gather_tagged2_checked),
   checked for every missing slot once the wait starts and after each
   reload, and for the spun slot on each turn, records a mismatch naming
   its peer and ends the thread. Receives without a check pass a `wrong`
   that is always false, and compile to the loop without it. */
static __device__ __forceinline__ __attribute__((unused)) symm_u32 symm_lowest_bit(symm_u32 x) {
    symm_u32 r;
    asm("bfind.u32 %0, %1;" : "=r"(r) : "r"(x & (0u - x)));
    return r;
}
template<class V, class Load, class Ready, class From, class Wrong>
__device__ __forceinline__ void symm_wait_slots(const symm_kctx& c, symm_u32 slots, V (&v)[8], Load load, Ready ready, From from, Wrong wrong) {
#pragma unroll
    for (symm_u32 r = 0; r < 8; ++r) if (slots >> r & 1u) v[r] = load(r);
    symm_u32 pending = 0;
#pragma unroll
    for (symm_u32 r = 0; r < 8; ++r) if ((slots >> r & 1u) && !ready(v[r])) pending |= 1u << r;
    if (!pending) return;
    const symm_u64 start = symm_globaltimer();
    for (;;) {
#pragma unroll
        for (symm_u32 r = 0; r < 8; ++r) {
            if ((pending >> r & 1u) && wrong(v[r])) {
                symm_record_mismatch(c.status, c.rank, from(r));
                asm volatile("exit;");
            }
        }
        const symm_u32 first = symm_lowest_bit(pending);
        V cur = load(first);
        while (!ready(cur)) {
            if (wrong(cur)) {
                symm_record_mismatch(c.status, c.rank, from(first));
                asm volatile("exit;");
            }
            if (symm_wait_gives_up(c.status, start, c.timeout_ns, SYMM_KIND_WAIT, c.rank, from(first), 0xffffffffu)) asm volatile("exit;");
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
template<class V, class Load, class Ready, class From>
__device__ __forceinline__ void symm_wait_slots(const symm_kctx& c, symm_u32 slots, V (&v)[8], Load load, Ready ready, From from) {
    symm_wait_slots(c, slots, v, load, ready, from, [](const V&) { return false; });
}

/* The words a sentinel receive polls for elements of type T: two 8-byte
   words for 8-byte elements, four 4-byte words otherwise. Each word is one
   single-copy-atomic access and holds whole elements, so an element is
   never read half as sent and half as before (as an 8-byte element read as
   two 4-byte words could be, and then differ from `empty` without having
   arrived). */
template<class T, bool Wide = sizeof(T) == 8> struct symm_sentinel_words { typedef symm_array<symm_u32, 4> type; };
template<class T> struct symm_sentinel_words<T, true> { typedef symm_array<symm_u64, 2> type; };
template<class T> __device__ __forceinline__ typename symm_sentinel_words<T>::type symm_sentinel_load(const T* p) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                  "sentinel receives take elements of 1, 2, 4 or 8 bytes");
    if constexpr (sizeof(T) == 8) return symm_ld_vec_volatile<symm_u64, 2>((const symm_u64*)p);
    else return symm_ld_vec_volatile<symm_u32, 4>((const symm_u32*)p);
}

/* Whether no element (of T's width) of the 16 bytes `w` has `empty`'s bits.
   Checked on the raw words, so nothing is unpacked between a slot's load
   and the next one. */
template<class T> __device__ __forceinline__ bool symm_words_ready(const typename symm_sentinel_words<T>::type& w, T empty) {
    if constexpr (sizeof(T) == 8) {
        const symm_u64 e = symm_bitcast<symm_u64>(empty);
        return w[0] != e && w[1] != e;
    } else {
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
}

/* In a checked kernel: the bits of `ranks` whose slot (`bytes` bytes at
   element first + r * stride of `s`) lies in `s`; every other bit is
   recorded as out of bounds (the first failure wins) and dropped, so its
   slot reads as zeros. `ranks` itself in an unchecked one. */
template<class X> __device__ __forceinline__ symm_u32 symm_slots_in(const symm_kctx& c, const symm_slice<X>& s, symm_u64 first, symm_u64 stride, symm_u32 ranks, symm_u64 bytes) {
#if SYMM_CHECKED
    symm_u32 ok = 0;
#pragma unroll
    for (symm_u32 r = 0; r < 8; ++r) {
        if (!((ranks >> r) & 1u)) continue;
        const symm_u64 i = first + r * stride;
        if (i < s.len && (s.len - i) * sizeof(X) >= bytes) ok |= 1u << r;
        else symm_record_out_of_bounds(c.status, c.rank, i, false, s.len, SYMM_SITE_FN, 0);
    }
    return ok;
#else
    (void)c; (void)s; (void)first; (void)stride; (void)bytes;
    return ranks;
#endif
}

/* In a checked kernel: whether `s` is the dummy block a failed check gave
   (a receive from it would wait for its timeout: it returns zeros now). */
template<class X> __device__ __forceinline__ bool symm_is_dummy(const symm_slice<X>& s) {
#if SYMM_CHECKED
    return (const void*)s.ptr == (const void*)symm_detail::oob_block<64>;
#else
    (void)s;
    return false;
#endif
}

/* LL receive: 8-byte volatile loads polled until the high word is `tag`.
   Data and tag travel in one single-copy-atomic store, so no fence is
   needed. */
template<class X> __device__ __forceinline__ symm_u64 symm_dsl_load_tagged(const symm_kctx& c, symm_slice<X> s, symm_u64 i, symm_u32 tag, symm_u32 from) {
    if (symm_is_dummy(s)) return 0;
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
    if (symm_is_dummy(s)) return symm_array<symm_u64, 2>{};
    const symm_u64* p = (const symm_u64*)(s.ptr + i);
    symm_array<symm_u64, 2> v[8] = {};
    symm_wait_slots(c, 1u, v, [&](symm_u32) { return symm_ld_vec_volatile<symm_u64, 2>(p); },
                    [&](const symm_array<symm_u64, 2>& x) { return symm_tagged2_ready(x, tag); }, [&](symm_u32) { return from; });
    return v[0];
}

/* Packet pairs of several ranks: slot r (for each bit r of `ranks`) at
   `first + r * stride`, all polled together; a timeout names rank r. */
template<class X> __device__ __forceinline__ symm_array<symm_array<symm_u64, 2>, 8> symm_dsl_gather_tagged2(const symm_kctx& c, symm_slice<X> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, symm_u32 tag) {
    ranks = symm_slots_in(c, s, first, stride, ranks, 16);
    symm_array<symm_u64, 2> v[8] = {};
    symm_wait_slots(c, ranks, v, [&](symm_u32 r) { return symm_ld_vec_volatile<symm_u64, 2>((const symm_u64*)(s.ptr + first + r * stride)); },
                    [&](const symm_array<symm_u64, 2>& x) { return symm_tagged2_ready(x, tag); }, [](symm_u32 r) { return r; });
    symm_array<symm_array<symm_u64, 2>, 8> out;
#pragma unroll
    for (int r = 0; r < 8; ++r) out[r] = v[r];
    return out;
}

/* gather_tagged2 that fails the call on a pair whose tags agree with `tag`
   in the bits of `round` but not whole. The check runs only in the wait
   loop, on a slot that is not (yet) the awaited pair: the path of a pair
   that arrived on the first load is gather_tagged2's. */
template<class X> __device__ __forceinline__ symm_array<symm_array<symm_u64, 2>, 8> symm_dsl_gather_tagged2_checked(const symm_kctx& c, symm_slice<X> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, symm_u32 tag, symm_u32 round) {
    ranks = symm_slots_in(c, s, first, stride, ranks, 16);
    symm_array<symm_u64, 2> v[8] = {};
    symm_wait_slots(c, ranks, v, [&](symm_u32 r) { return symm_ld_vec_volatile<symm_u64, 2>((const symm_u64*)(s.ptr + first + r * stride)); },
                    [&](const symm_array<symm_u64, 2>& x) { return symm_tagged2_ready(x, tag); }, [](symm_u32 r) { return r; },
                    [&](const symm_array<symm_u64, 2>& x) {
                        const symm_u32 t0 = (symm_u32)(x[0] >> 32), t1 = (symm_u32)(x[1] >> 32);
                        return (((t0 ^ tag) & round) == 0u && t0 != tag) || (((t1 ^ tag) & round) == 0u && t1 != tag);
                    });
    symm_array<symm_array<symm_u64, 2>, 8> out;
#pragma unroll
    for (int r = 0; r < 8; ++r) out[r] = v[r];
    return out;
}

/* 8-byte LL packets: the 8 data bytes as two 8-byte words, `tag << 32`
   over 32 data bits each (low half first), sent in one 16-byte volatile
   store. Only each word is single-copy atomic (the PTX memory model makes a
   .v2.b64 access two 8-byte accesses; a 16-byte access is not guaranteed
   atomic, on Hopper neither, least of all over NVLink), so each word
   carries the tag and a packet is taken only when both words do: a word
   with the tag was written by this round's one store to the slot, so a
   torn read (one word from an older round) has an older tag and is polled
   again. No fence: data and tag travel in the same atomic words. */
static __device__ __forceinline__ __attribute__((unused)) symm_u64 symm_untag64(const symm_array<symm_u64, 2>& v) {
    return (v[0] & 0xffffffffull) | (v[1] << 32);
}
template<class X> __device__ __forceinline__ void symm_dsl_store_tagged64(symm_slice<X> s, symm_u64 i, symm_u64 data, symm_u32 tag) {
    const symm_u64 t = (symm_u64)tag << 32;
    symm_array<symm_u64, 2> w;
    w.v[0] = t | (data & 0xffffffffull);
    w.v[1] = t | (data >> 32);
    symm_st_vec_volatile<symm_u64, 2>((symm_u64*)(s.ptr + i), w);
}
template<class X> __device__ __forceinline__ symm_u64 symm_dsl_load_tagged64(const symm_kctx& c, symm_slice<X> s, symm_u64 i, symm_u32 tag, symm_u32 from) {
    return symm_untag64(symm_dsl_load_tagged2(c, s, i, tag, from));
}
template<class X> __device__ __forceinline__ symm_array<symm_u64, 8> symm_dsl_gather_tagged64(const symm_kctx& c, symm_slice<X> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, symm_u32 tag) {
    const symm_array<symm_array<symm_u64, 2>, 8> v = symm_dsl_gather_tagged2(c, s, first, stride, ranks, tag);
    symm_array<symm_u64, 8> out;
#pragma unroll
    for (int r = 0; r < 8; ++r) out[r] = symm_untag64(v[r]);
    return out;
}

/* Sentinel receive: a 16-byte volatile load polled until no element has
   `empty`'s bits (each element is single-copy atomic, so a partly arrived
   vector still shows the sentinel). */
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<T, N> symm_dsl_load_vec_ready(const symm_kctx& c, symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type empty, symm_u32 from) {
    static_assert(sizeof(T) * N == 16, "load_vec_ready: sizeof(T) * N must be 16");
    typedef typename symm_sentinel_words<T>::type W;
    if (symm_is_dummy(s)) return symm_array<T, N>{};
    const T* p = s.ptr + i;
    W w[8] = {};
    symm_wait_slots(c, 1u, w, [&](symm_u32) { return symm_sentinel_load(p); },
                    [&](const W& x) { return symm_words_ready<T>(x, empty); }, [&](symm_u32) { return from; });
    return symm_bitcast<symm_array<T, N>>(w[0]);
}

/* Sentinel receive from several ranks: slot r (for each bit r of `ranks`)
   at `first + r * stride`, all polled together; zeros where a bit is
   clear; a timeout names rank r. */
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<symm_array<T, N>, 8> symm_dsl_gather_ready(const symm_kctx& c, symm_slice<T> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, typename symm_nd<T>::type empty) {
    static_assert(sizeof(T) * N == 16, "gather_ready: sizeof(T) * N must be 16");
    typedef typename symm_sentinel_words<T>::type W;
    ranks = symm_slots_in(c, s, first, stride, ranks, 16);
    W w[8] = {};
    symm_wait_slots(c, ranks, w, [&](symm_u32 r) { return symm_sentinel_load(s.ptr + first + r * stride); },
                    [&](const W& x) { return symm_words_ready<T>(x, empty); }, [](symm_u32 r) { return r; });
    symm_array<symm_array<T, N>, 8> v;
#pragma unroll
    for (int r = 0; r < 8; ++r) v[r] = symm_bitcast<symm_array<T, N>>(w[r]);
    return v;
}

#endif /* SYMM_IMPL_RECEIVE_CUH */
