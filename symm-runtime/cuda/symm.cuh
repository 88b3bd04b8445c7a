/* symm DSL device API: the contract.
 *
 * What code translated by #[symm_kernel] calls, on top of symm_core.cuh:
 * the kernel context, the handle types, the signal protocol and the
 * functions that DSL methods translate to, each declared with its
 * contract. The definitions live in symm_impl/ (signal, support, receive).
 * symm-runtime/src/dsl/support.rs assembles `DSL_SUPPORT`: PRELUDE, the
 * constants below, this file, then the implementations.
 *
 * Constants that come from Rust, #defined ahead of this file from the Rust
 * items themselves so the two sides cannot disagree (none is written here):
 *   SYMM_SIGNAL_BLOCKS, SYMM_MAX_DOMAIN,                 symm::layout
 *   SYMM_PAD_PEER_GROUP, SYMM_PAD_GROUP_SLOTS
 *   SYMM_KIND_PUT, SYMM_KIND_WAIT,                       symm::signal::SignalKind
 *   SYMM_KIND_BARRIER_PUT, SYMM_KIND_BARRIER_WAIT
 *   SYMM_KIND_OUT_OF_BOUNDS, SYMM_KIND_ASSERT,           symm::status (record kinds)
 *   SYMM_KIND_ABORTED, SYMM_KIND_MISMATCH
 *
 * And what the runtime #defines ahead of everything for each instantiation
 * it compiles (defaults below):
 *   SYMM_CHECKED     1: indexing is bounds-checked (a safe `launch`);
 *                    0: plain (`launch_unchecked`)
 *   SYMM_KERNEL_ID   the id a kernel records with a bad index or a failed
 *                    kernel_assert!
 * and ahead of each function of a kernel's source, SYMM_SITE_FN: which
 * function's indexing sites and assertions follow (0 the kernel, k its k-th
 * device function).
 *
 * Timeouts never trap (that would kill the CUDA context): the first failure
 * of a launch is recorded in the kernel's status record, which the runtime
 * reports at the next synchronize, and the waiting thread either returns
 * (the `_within` forms) or ends with `exit`. An index out of bounds in a
 * checked kernel is recorded the same way, and the thread goes on; a failed
 * kernel_assert! is recorded the same way, and the thread ends with `exit`.
 */
#ifndef SYMM_CUH
#define SYMM_CUH

#ifndef SYMM_CHECKED
#define SYMM_CHECKED 0
#endif
#ifndef SYMM_KERNEL_ID
#define SYMM_KERNEL_ID 0u
#endif
#ifndef SYMM_SITE_FN
#define SYMM_SITE_FN 0u
#endif

/* ======================================================================
   Types
   ====================================================================== */

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

/* The kernel context `symm_kctx` (where a kernel records a failure
   (`status`), how long its waits may take (`timeout_ns`), and its `rank`),
   and a symmetric buffer `symm_buf<T>` (`SymmBuf<T>`: device tables of
   every rank's buffer and signal pad, the rank, the world size, the
   elements per buffer, and this rank's own buffer and pad by value, so
   reaching them costs no table load). Both are the kernel ABI, described
   once in the symm-abi crate (its hidden parameters and buffer fields), from which the runtime
   generates these definitions: */
SYMM_ABI_STRUCTS

/* A slice of global memory (a kernel's `&[T]`, or one rank's buffer). */
template<typename T> struct symm_slice {
    T* ptr; symm_u64 len;
    __device__ __forceinline__ T& operator[](symm_u64 i) const { return ptr[i]; }
};

/* ======================================================================
   Signal protocol (symm_impl/signal.cuh)
   A pad holds one u32 slot per (channel, block, peer); slot (c, b, p) of
   rank r's pad is where peer p signals r on channel c from block b (the
   DSL's signal_slot computes its index).
   ====================================================================== */

/* Records a timeout of this thread (kind, rank, block, peer, channel,
   thread, timeout_ms) in the first 8 words of the 16-word status record,
   unless an earlier failure already did. */
static __device__ __attribute__((unused)) void symm_record_timeout(symm_u32* status, symm_u32 kind, symm_u32 rank, symm_u32 peer,
                                           symm_u32 channel, symm_u32 timeout_ms);
/* Records that this thread's index `index` (negative: a negative signed
   integer's bits) was out of bounds for length `len`, at Rust line `line`
   (relative to the function's name) of function `fn` of kernel
   SYMM_KERNEL_ID (see symm::signal::OutOfBounds for the layout), unless an
   earlier failure already did. Block and thread are linear. Out of line,
   as symm_assert_failed is: inlined at every checked index, its record
   (about 25 instructions a site) filled the instruction cache of large
   unrolled kernels, which then ran up to twice as long as with it out of
   line (bench/NOTES.md v47). */
static __device__ __noinline__ __attribute__((unused)) void symm_record_out_of_bounds(symm_u32* status, symm_u32 rank, symm_u64 index, bool negative,
                                                 symm_u64 len, symm_u32 fn, symm_u32 line);
/* Records that assertion `index` (its position in the Rust list of function
   `fn`'s kernel_assert!s) of kernel SYMM_KERNEL_ID failed in this thread
   (see symm::status::AssertFailed for the layout), unless an earlier failure
   already did. Block and thread are linear. */
static __device__ __attribute__((unused)) void symm_record_assert(symm_u32* status, symm_u32 rank, symm_u32 fn, symm_u32 index);
/* Records that this thread of kernel SYMM_KERNEL_ID took rank `peer`'s data
   of another call (see symm::status::CallMismatch for the layout), unless
   an earlier failure already did. */
static __device__ __attribute__((unused)) void symm_record_mismatch(symm_u32* status, symm_u32 rank, symm_u32 peer);
/* A wait's give-up check on each turn of its loop: past `timeout_ns` since
   `start` it records a timeout of `kind`, and once the host has stopped
   this rank's waits on `peer` (its abort word) it records
   SYMM_KIND_ABORTED; either way true, and the caller gives up. */
static __device__ __forceinline__ __attribute__((unused)) bool symm_wait_gives_up(symm_u32* status, symm_u64 start, symm_u64 timeout_ns,
                                                                              symm_u32 kind, symm_u32 rank, symm_u32 peer, symm_u32 channel);
/* Put, wait and the epoch flags themselves are DSL device functions, the
   same source for the GPU and the emulator (symm-runtime/src/dsl/
   protocol.rs); they call the timeout record above through
   symm_wait_gives_up and the pad's bounds through symm_signal_ok. */

/* ======================================================================
   Handles (symm_impl/support.cuh)
   ====================================================================== */

/* `base[index]` of a slice, a buffer view or a register or shared array, as
   generated code writes every indexing site (`line`: the Rust line relative
   to the function's name). With SYMM_CHECKED 0 exactly `(base)[index]`.
   With SYMM_CHECKED 1, symm_at: an index >= symm_len(base) is recorded
   (symm_record_out_of_bounds) and yields a per-type dummy element instead,
   so the thread goes on (no trap, which would lose the context; no exit,
   which could leave a block barrier waiting) and touches nothing out of
   bounds; what it reads there is unspecified. */
#if SYMM_CHECKED
#define SYMM_AT(ctx, base, index, line) (symm_at(ctx, base, index, SYMM_SITE_FN, line))
#else
#define SYMM_AT(ctx, base, index, line) (base)[index]
#endif
template<class B, class I>
__device__ __forceinline__ auto symm_at(const symm_kctx& c, B&& base, I index, symm_u32 fn, symm_u32 line) -> decltype(base[(symm_u64)index]);

/* The receiver and index of a method that takes an index (`load`, `store`,
   the atomics, the vector and tagged loads), as generated code writes them:
   `f(SYMM_SLICE_AT(ctx, s, i, elems, bytes, line), SYMM_SLICE_INDEX(i), ..)`,
   where the method touches `elems` elements or `bytes` bytes (the larger)
   at `i`. With SYMM_CHECKED 0 exactly `f(s, i, ..)`. With SYMM_CHECKED 1,
   symm_slice_at returns `s` from element `i` on (the index becomes 0, so
   that `i` is evaluated once) when all of it lies in `s`; otherwise it
   records the index as out of bounds, as symm_at does, and returns 64
   bytes of a dummy block, which the method touches instead. */
#if SYMM_CHECKED
#define SYMM_SLICE_AT(ctx, s, index, elems, bytes, line) (symm_slice_at(ctx, s, index, elems, bytes, SYMM_SITE_FN, line))
#define SYMM_SLICE_INDEX(index) (0ull)
#else
#define SYMM_SLICE_AT(ctx, s, index, elems, bytes, line) (s)
#define SYMM_SLICE_INDEX(index) (index)
#endif
template<class T, class I>
__device__ __forceinline__ symm_slice<T> symm_slice_at(const symm_kctx& c, const symm_slice<T>& s, I index, symm_u64 elems, symm_u64 bytes, symm_u32 fn, symm_u32 line);
/* The gathers' slots (first + r * stride, `bytes` each) checked alike: the
   bits of `ranks` whose slot lies in `s` (each other one recorded as out of
   bounds, and read as zeros); `ranks` unchecked. */
template<class X> __device__ __forceinline__ symm_u32 symm_slots_in(const symm_kctx& c, const symm_slice<X>& s, symm_u64 first, symm_u64 stride, symm_u32 ranks, symm_u64 bytes);
/* Whether `s` is the dummy block of a failed check (the receives return
   zeros at once from it rather than wait for their timeout); false
   unchecked. */
template<class X> __device__ __forceinline__ bool symm_is_dummy(const symm_slice<X>& s);

/* Number of elements. */
template<typename T> __device__ __forceinline__ symm_u64 symm_len(const symm_slice<T>& s);
template<typename T> __device__ __forceinline__ symm_u64 symm_len(const symm_buf<T>& b);
template<typename T, symm_u64 N> __device__ __forceinline__ symm_u64 symm_len(const symm_array<T, N>&);
/* Rank r's buffer (`buf.peer(r)`), and this rank's (`buf.local()`). In a
   checked kernel a rank r >= world is recorded as out of bounds (with the
   function's line) and gives an empty slice. */
template<typename T> __device__ __forceinline__ symm_slice<T> symm_peer(const symm_kctx& c, const symm_buf<T>& b, symm_u32 r);
template<typename T> __device__ __forceinline__ symm_slice<T> symm_local(const symm_buf<T>& b);
/* u32 slots in the signal pad of a group of `world` ranks: one
   SYMM_PAD_GROUP_SLOTS per SYMM_PAD_PEER_GROUP peers (symm::layout::pad_slots). */
static __device__ __forceinline__ __attribute__((unused)) symm_u64 symm_pad_slots(symm_u32 world);
/* Rank r's signal pad as symm_pad_slots(world) u32 slots (checked as symm_peer). */
template<typename T> __device__ __forceinline__ symm_slice<symm_u32> symm_pad(const symm_kctx& c, const symm_buf<T>& b, symm_u32 r);
/* In a checked kernel: whether a signal with `peer` of `world` on `channel`
   from this block has a slot (peer < world, channel < SYMM_SIGNAL_CHANNELS,
   block < SYMM_SIGNAL_BLOCKS); if not, the offending index is recorded as
   out of bounds (with the function's line) and the signal op does nothing.
   Always true in an unchecked one. */
SYMM_DEVICE_FN bool symm_signal_ok(const symm_kctx& c, symm_u32 peer, symm_u32 world, symm_u32 channel);
/* This rank, and the number of ranks. */
template<typename T> __device__ __forceinline__ symm_u32 symm_rank(const symm_buf<T>& b);
template<typename T> __device__ __forceinline__ symm_u32 symm_world(const symm_buf<T>& b);

/* A failed kernel_assert!, as generated code writes each one:
   `if (!(cond)) symm_assert_failed(__ctx, SYMM_SITE_FN, index);`. Records
   it (symm_record_assert) and ends the thread with `exit`, in checked and
   unchecked kernels alike: never `trap`, which would kill the context. An
   exited thread no longer holds up sync_threads; a warp collective after
   it is undefined, as for any exited lane. Not inlined: the passing path
   is one compare and branch. */
static __device__ __noinline__ __attribute__((unused)) void symm_assert_failed(const symm_kctx& c, symm_u32 fn, symm_u32 index);

/* ======================================================================
   Rust operators (symm_impl/support.cuh)
   ====================================================================== */

/* Rust's operators on integers: `symm_add`, `symm_sub`, `symm_mul` (wrap),
   `symm_div` (`MIN / -1` wraps; division by zero is undefined: the emulator
   reports it, as Rust panics), `symm_and`, `symm_or`, `symm_xor`,
   `symm_shl`, `symm_shr` (amount modulo the width), `symm_neg` (wraps),
   and `symm_<op>_assign`; each returns the left operand's type, never a
   promoted `int`. Floats and halves use their own operators. */
template<class A, class B> __device__ __forceinline__ A symm_add(A a, B b);
template<class A, class B> __device__ __forceinline__ A symm_sub(A a, B b);
template<class A, class B> __device__ __forceinline__ A symm_mul(A a, B b);
template<class A, class B> __device__ __forceinline__ A symm_div(A a, B b);
template<class A, class B> __device__ __forceinline__ A symm_and(A a, B b);
template<class A, class B> __device__ __forceinline__ A symm_or(A a, B b);
template<class A, class B> __device__ __forceinline__ A symm_xor(A a, B b);
template<class A, class S> __device__ __forceinline__ A symm_shl(A a, S s);
template<class A, class S> __device__ __forceinline__ A symm_shr(A a, S s);
template<class A> __device__ __forceinline__ A symm_neg(A a);
/* `!`: logical on bool, bitwise on integers. */
template<class T> __device__ __forceinline__ T symm_not(T x);
static __device__ __forceinline__ __attribute__((unused)) bool symm_not(bool x);
/* `%`: truncating for integers, fmod for floats (exact, like Rust). */
template<class T> __device__ __forceinline__ T symm_rem(T a, T b);
static __device__ __forceinline__ __attribute__((unused)) float symm_rem(float a, float b);
static __device__ __forceinline__ __attribute__((unused)) double symm_rem(double a, double b);
static __device__ __forceinline__ __attribute__((unused)) symm_bf16 symm_rem(symm_bf16 a, symm_bf16 b);
static __device__ __forceinline__ __attribute__((unused)) symm_f16 symm_rem(symm_f16 a, symm_f16 b);
static __device__ __forceinline__ __attribute__((unused)) symm_f8e4m3 symm_rem(symm_f8e4m3 a, symm_f8e4m3 b);
static __device__ __forceinline__ __attribute__((unused)) symm_f8e5m2 symm_rem(symm_f8e5m2 a, symm_f8e5m2 b);
/* `%=`: `a = symm_rem(a, b)`, the place evaluated once. */
template<class T> __device__ __forceinline__ T& symm_rem_assign(T& a, typename symm_nd<T>::type b);
/* Half-precision and fp8 square roots, through f32 like the Rust side. */
static __device__ __forceinline__ __attribute__((unused)) symm_bf16 symm_sqrt(symm_bf16 a);
static __device__ __forceinline__ __attribute__((unused)) symm_f16 symm_sqrt(symm_f16 a);
static __device__ __forceinline__ __attribute__((unused)) symm_f8e4m3 symm_sqrt(symm_f8e4m3 a);
static __device__ __forceinline__ __attribute__((unused)) symm_f8e5m2 symm_sqrt(symm_f8e5m2 a);
/* wrapping_add / _sub / _mul: wrap exactly as Rust's. */
template<class T> __device__ __forceinline__ T symm_wrapping_add(T a, typename symm_nd<T>::type b);
template<class T> __device__ __forceinline__ T symm_wrapping_sub(T a, typename symm_nd<T>::type b);
template<class T> __device__ __forceinline__ T symm_wrapping_mul(T a, typename symm_nd<T>::type b);
/* Element bits zero-extended to 32 bits, and back (elements of at most 4
   bytes). */
template<class T> __device__ __forceinline__ symm_u32 symm_to_bits32(T x);
template<class T> __device__ __forceinline__ T symm_from_bits32(symm_u32 b);

/* ======================================================================
   Memory methods (symm_impl/support.cuh): element i of a slice, with
   order S and scope C as symm_ld / symm_st / symm_atom_* (symm_core.cuh)
   ====================================================================== */

template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_load(symm_slice<T> s, symm_u64 i);
template<int S, int C, class T> __device__ __forceinline__ void symm_dsl_store(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v);
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_add(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v);
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_exch(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v);
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_max(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v);
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_min(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type v);
template<int S, int C, class T> __device__ __forceinline__ T symm_dsl_cas(symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type c, typename symm_nd<T>::type v);
/* Elements i..i+N as one 16-byte access (symm_ld_vec and friends). */
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<T, N> symm_dsl_load_vec(symm_slice<T> s, symm_u64 i);
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<T, N> symm_dsl_load_vec_volatile(symm_slice<T> s, symm_u64 i);
template<class T, symm_u64 N> __device__ __forceinline__ void symm_dsl_store_vec(symm_slice<T> s, symm_u64 i, symm_array<T, N> v);
template<class T, symm_u64 N> __device__ __forceinline__ void symm_dsl_store_vec_volatile(symm_slice<T> s, symm_u64 i, symm_array<T, N> v);

/* ======================================================================
   Receives of data that marks its own arrival (symm_impl/receive.cuh).
   Each polls until the data is there; a timeout records peer `from` (or
   rank r of a gather) with channel 0xffffffff and ends the thread.
   ====================================================================== */

/* LL packet at element i (8 bytes): the packet once its high word is `tag`. */
template<class X> __device__ __forceinline__ symm_u64 symm_dsl_load_tagged(const symm_kctx& c, symm_slice<X> s, symm_u64 i, symm_u32 tag, symm_u32 from);
/* Two LL packets at element i (16 bytes), once both tags are `tag`. */
template<class X> __device__ __forceinline__ symm_array<symm_u64, 2> symm_dsl_load_tagged2(const symm_kctx& c, symm_slice<X> s, symm_u64 i, symm_u32 tag, symm_u32 from);
/* Packet pairs of every rank r in the bit set `ranks`, at first + r * stride. */
template<class X> __device__ __forceinline__ symm_array<symm_array<symm_u64, 2>, 8> symm_dsl_gather_tagged2(const symm_kctx& c, symm_slice<X> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, symm_u32 tag);
/* gather_tagged2 that fails the call when a pair's tags agree with `tag` in
   the bits of `round` but not whole (a peer's packets of this round, of
   another call): records SYMM_KIND_MISMATCH naming the rank and ends the
   thread. Checked only while waiting, so a pair that arrived whole costs
   what gather_tagged2 costs. */
template<class X> __device__ __forceinline__ symm_array<symm_array<symm_u64, 2>, 8> symm_dsl_gather_tagged2_checked(const symm_kctx& c, symm_slice<X> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, symm_u32 tag, symm_u32 round);
/* 8-byte LL data at element i (16 bytes: two words of tag << 32 | 32 data
   bits, low half first): sent in one volatile 16-byte store; received once
   both words carry `tag`; and of every rank r in `ranks`, at
   first + r * stride (0 for the others). */
template<class X> __device__ __forceinline__ void symm_dsl_store_tagged64(symm_slice<X> s, symm_u64 i, symm_u64 data, symm_u32 tag);
template<class X> __device__ __forceinline__ symm_u64 symm_dsl_load_tagged64(const symm_kctx& c, symm_slice<X> s, symm_u64 i, symm_u32 tag, symm_u32 from);
template<class X> __device__ __forceinline__ symm_array<symm_u64, 8> symm_dsl_gather_tagged64(const symm_kctx& c, symm_slice<X> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, symm_u32 tag);
/* Elements i..i+N (16 bytes; elements of 1, 2, 4 or 8 bytes) once none has
   `empty`'s bits, each element read by one single-copy-atomic access. */
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<T, N> symm_dsl_load_vec_ready(const symm_kctx& c, symm_slice<T> s, symm_u64 i, typename symm_nd<T>::type empty, symm_u32 from);
/* The same for every rank r in `ranks`, at first + r * stride; zeros for
   the others. */
template<symm_u64 N, class T> __device__ __forceinline__ symm_array<symm_array<T, N>, 8> symm_dsl_gather_ready(const symm_kctx& c, symm_slice<T> s, symm_u64 first, symm_u64 stride, symm_u32 ranks, typename symm_nd<T>::type empty);

#endif /* SYMM_CUH */
