//! Handles to memory inside kernels: local slices, peers' buffers, symmetric
//! buffers and shared arrays.
//!
//! On the GPU each is a pointer (and a length). On the CPU each access is an
//! atomic on host memory (through [`crate::hostmem`]) with a bounds check,
//! because simulated threads touch the same memory concurrently.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use super::scalar::{AtomicAdd, AtomicMinMax, AtomicScalar, Scalar};
use super::thread::{current, fault, tick, wait_for};
use super::{LoadOrder, RmwOrder, Scope, StoreOrder};
use crate::hostmem;
use crate::layout::MAX_WORLD_SIZE;

/// An integer usable as an index in kernels (`u32`, `u64`, `usize`, `i32`, `i64`).
pub trait DslIndex: Copy {
    #[doc(hidden)]
    fn __index(self) -> Option<usize>;
}

macro_rules! dsl_index {
    ($($t:ty),*) => {$(
        impl DslIndex for $t {
            fn __index(self) -> Option<usize> { usize::try_from(self).ok() }
        }
    )*};
}
dsl_index!(u32, u64, usize, i32, i64);

#[track_caller]
fn index<I: DslIndex>(what: &str, i: I, len: usize) -> usize {
    match i.__index() {
        Some(i) if i < len => i,
        _ => fault(format!(
            "{what}: index {} is out of bounds for length {len}",
            fmt_index(i)
        )),
    }
}

fn fmt_index<I: DslIndex>(i: I) -> String {
    match i.__index() {
        Some(v) => v.to_string(),
        None => "negative or huge".to_string(),
    }
}

/// Rejects a vector access that does not move exactly 16 bytes. Each
/// public vector method calls it in a `const` block of its own body, so
/// that rustc's note on the failure ("encountered while instantiating
/// `load_vec_ready::<4>`") names the kernel's call, not a line of this file.
const fn sixteen_bytes<T>(n: usize) {
    assert!(
        n * std::mem::size_of::<T>() == 16,
        "a vector access (load_vec, store_vec, load_vec_ready, gather_ready) moves exactly 16 bytes: \
         write ::<N> with N * size_of::<T>() == 16 (16 for u8, f8e4m3 and f8e5m2, 8 for bf16 and f16, \
         4 for f32, u32 and i32, 2 for f64, u64 and i64); the note below names the call"
    )
}

/// Loads one element with `order`, through `hostmem` (see its docs).
fn load_raw<T: Scalar>(addr: u64, order: Ordering) -> T {
    T::__from_bits64(hostmem::load(addr, std::mem::size_of::<T>(), order))
}

/// Stores one element with `order`.
fn store_raw<T: Scalar>(addr: u64, v: T, order: Ordering) {
    hostmem::store(addr, std::mem::size_of::<T>(), v.__to_bits64(), order)
}

/// Read-modify-write of one element; `f` returns `None` to leave it.
fn rmw_raw<T: Scalar>(addr: u64, order: Ordering, f: impl Fn(T) -> Option<T>) -> T {
    let size = std::mem::size_of::<T>();
    T::__from_bits64(hostmem::rmw(addr, size, order, |old| {
        f(T::__from_bits64(old)).map(|n| n.__to_bits64())
    }))
}

fn load_order(o: LoadOrder) -> Ordering {
    match o {
        LoadOrder::Relaxed | LoadOrder::Volatile => Ordering::Relaxed,
        LoadOrder::Acquire => Ordering::Acquire,
    }
}

fn store_order(o: StoreOrder) -> Ordering {
    match o {
        StoreOrder::Relaxed | StoreOrder::Volatile => Ordering::Relaxed,
        StoreOrder::Release => Ordering::Release,
    }
}

fn rmw_order(o: RmwOrder) -> Ordering {
    match o {
        RmwOrder::Relaxed => Ordering::Relaxed,
        RmwOrder::Acquire => Ordering::Acquire,
        RmwOrder::Release => Ordering::Release,
        RmwOrder::AcqRel => Ordering::AcqRel,
    }
}

/// The handles whose elements lie at an address (slices and peers'
/// buffers): what [`vector_lag`](super::vector_lag) reads.
#[doc(hidden)]
pub trait Located<T> {
    /// The address of the first element (on the emulator, in its memory).
    fn __address(&self) -> u64;
}

/// Shared body of the pointer-like handles.
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        pub struct $name<T> {
            ptr: u64,
            len: usize,
            _t: PhantomData<T>,
        }

        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<T> {}

        impl<T> Located<T> for $name<T> {
            fn __address(&self) -> u64 {
                self.ptr
            }
        }

        impl<T: Scalar> $name<T> {
            /// The handle the emulator's kernel body sees for `len` elements
            /// at `ptr`.
            ///
            /// # Safety
            /// `ptr` must address `len` elements of emulator memory (a live
            /// host allocation of the emulator) for as long as any copy of
            /// the handle is used: every access reads or writes there,
            /// bounds-checked only against `len`.
            #[doc(hidden)]
            pub unsafe fn __new(ptr: u64, len: usize) -> Self {
                $name { ptr, len, _t: PhantomData }
            }

            /// Number of elements. On the GPU: the length passed at launch.
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether there are no elements.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            #[doc(hidden)]
            #[track_caller]
            pub fn __get<I: DslIndex>(&self, i: I) -> T {
                load_raw(self.addr($what, i), Ordering::Relaxed)
            }

            #[track_caller]
            fn addr<I: DslIndex>(&self, what: &str, i: I) -> u64 {
                self.ptr + (index(what, i, self.len) * std::mem::size_of::<T>()) as u64
            }
        }
    };
}

/// Loads available on every handle.
macro_rules! readable {
    ($name:ident, $what:literal) => {
        impl<T: Scalar> $name<T> {
            /// Loads element `i` with `order` at `scope`. `symm_ld<order, scope>`.
            #[track_caller]
            pub fn load(&self, i: impl DslIndex, order: LoadOrder, scope: Scope) -> T
            where
                T: AtomicScalar,
            {
                let _ = scope;
                tick();
                load_raw(self.addr($what, i), load_order(order))
            }

            /// Loads the 16 bytes at elements `i..i + N` in one access; `i`
            /// must be a multiple of `N`. `ld.global.v4.b32` (`.v2.b64` for
            /// 8-byte types, so each element is one single-copy-atomic access).
            #[track_caller]
            pub fn load_vec<const N: usize>(&self, i: impl DslIndex) -> [T; N] {
                const { sixteen_bytes::<T>(N) };
                load_vec_raw::<T, N>(self.vec_addr::<N>(i))
            }

            /// [`load_vec`](Self::load_vec) that always reads memory. `ld.volatile.global.v4.b32`.
            #[track_caller]
            pub fn load_vec_volatile<const N: usize>(&self, i: impl DslIndex) -> [T; N] {
                const { sixteen_bytes::<T>(N) };
                tick();
                load_vec_raw::<T, N>(self.vec_addr::<N>(i))
            }

            /// The addresses of the 16-byte slots `first + r * stride` for
            /// each rank r in `ranks` (a gather's slots), each checked like
            /// a vector access. (Read-only slices have no gather.)
            #[allow(dead_code)]
            #[track_caller]
            fn slot_addrs<const N: usize>(
                &self,
                first: impl DslIndex,
                stride: u32,
                ranks: u32,
            ) -> [Option<u64>; MAX_WORLD_SIZE] {
                if ranks >> MAX_WORLD_SIZE != 0 {
                    fault(format!(
                        "{}: rank mask {ranks:#x} names ranks beyond {}",
                        $what,
                        MAX_WORLD_SIZE - 1
                    ));
                }
                let Some(base) = first.__index() else {
                    self.vec_addr::<N>(first);
                    unreachable!("a negative index faults");
                };
                std::array::from_fn(|r| {
                    (ranks >> r & 1 == 1).then(|| {
                        let i = (stride as usize).checked_mul(r).and_then(|o| base.checked_add(o));
                        self.vec_addr::<N>(i.unwrap_or(usize::MAX))
                    })
                })
            }

            #[track_caller]
            fn vec_addr<const N: usize>(&self, i: impl DslIndex) -> u64 {
                let start = match i.__index() {
                    Some(s) if s.checked_add(N).is_some_and(|e| e <= self.len) => s,
                    _ => fault(format!(
                        "{}: vector access at {} of {N} elements is out of bounds for length {}",
                        $what,
                        fmt_index(i),
                        self.len
                    )),
                };
                let addr = self.ptr + (start * std::mem::size_of::<T>()) as u64;
                if !addr.is_multiple_of(16) {
                    fault(format!("{}: vector access at element {start} is not 16-byte aligned", $what));
                }
                addr
            }
        }
    };
}

/// A gather's slots when only the first is waited on (the one-slot
/// receives).
fn one_slot(addr: u64) -> [Option<u64>; MAX_WORLD_SIZE] {
    let mut a = [None; MAX_WORLD_SIZE];
    a[0] = Some(addr);
    a
}

/// Two LL packets at `a`, as two 8-byte loads (each single-copy atomic).
fn load_pair(a: u64) -> [u64; 2] {
    [
        load_raw::<u64>(a, Ordering::Relaxed),
        load_raw::<u64>(a + 8, Ordering::Relaxed),
    ]
}

/// The `N` elements of type `T` at `a`.
fn load_vec_raw<T: Scalar, const N: usize>(a: u64) -> [T; N] {
    let size = std::mem::size_of::<T>();
    std::array::from_fn(|k| load_raw::<T>(a + (k * size) as u64, Ordering::Relaxed))
}

/// The emulator's side of a gather: polls the slot at `addrs[r]` of every
/// rank r that has one until `ready` holds for all of them; `what(r)` names
/// what rank r sends, for the wait report and the timeout. A slot that is
/// not ready but `wrong` (another call's data) stops the thread's kernel
/// with a call mismatch naming rank r, as the device's wait loop does;
/// receives without that check pass [`never`].
#[track_caller]
fn gather<V: Copy>(
    name: &str,
    what: &dyn Fn(usize) -> String,
    addrs: [Option<u64>; MAX_WORLD_SIZE],
    zero: V,
    load: impl Fn(u64) -> V,
    ready: impl Fn(&V) -> bool,
    wrong: impl Fn(&V) -> bool,
) -> [V; MAX_WORLD_SIZE] {
    let loc = std::panic::Location::caller();
    let missing = std::cell::Cell::new(0usize);
    current(name, |t| {
        wait_for(
            t,
            &|| format!("{name}: {}", what(missing.get())),
            loc,
            |_| format!("{} never arrived (timeout)", what(missing.get())),
            || {
                let mut out = [zero; MAX_WORLD_SIZE];
                let mut first_missing = None;
                for (r, a) in addrs.iter().enumerate() {
                    if let Some(a) = *a {
                        out[r] = load(a);
                        if !ready(&out[r]) {
                            if wrong(&out[r]) {
                                t.call_mismatch(r);
                            }
                            if first_missing.is_none() {
                                first_missing = Some(r);
                            }
                        }
                    }
                }
                match first_missing {
                    Some(r) => {
                        missing.set(r);
                        None
                    }
                    None => Some(out),
                }
            },
        )
    })
}

/// The `wrong` of a receive that takes no other call's data for a mismatch.
fn never<V>(_: &V) -> bool {
    false
}

/// The emulator's side of the sentinel receives (`load_vec_ready`,
/// `gather_ready`): each slot is ready once no element has `empty`'s bits.
/// Each element is loaded by one atomic access of its own width, as the GPU
/// loads it (8-byte elements by `.v2.b64`), so an element reads either as
/// it was stored or as it was before, never half of each.
#[track_caller]
fn sentinel_gather<T: Scalar, const N: usize>(
    name: &str,
    what: &dyn Fn(usize) -> String,
    addrs: [Option<u64>; MAX_WORLD_SIZE],
    empty: T,
) -> [[T; N]; MAX_WORLD_SIZE] {
    let empty = empty.__to_bits64();
    gather(
        name,
        what,
        addrs,
        [T::__from_bits64(0); N],
        load_vec_raw::<T, N>,
        |v: &[T; N]| v.iter().all(|x| x.__to_bits64() != empty),
        never,
    )
}

/// The 8 data bytes of an 8-byte LL packet pair (see `load_tagged64`):
/// the low 32 bits of each word, the first word's low.
fn untag64([lo, hi]: [u64; 2]) -> u64 {
    (lo & 0xFFFF_FFFF) | (hi << 32)
}

/// Whether both words of a packet pair carry `tag` in their high 32 bits.
fn tagged_pair(v: &[u64; 2], tag: u32) -> bool {
    v.iter().all(|w| (w >> 32) as u32 == tag)
}

/// The LL receives, and the 8-byte LL send, on handles of `u64` packets.
macro_rules! tagged {
    ($name:ident, $what:literal) => {
        impl $name<u64> {
            /// Polls packet `i` (volatile 8-byte loads) until its high 32 bits
            /// equal `tag`, and returns it; `from` names the sending rank in a
            /// timeout report. Data and tag arrive in one single-copy-atomic
            /// store, so no fence is needed. `ld.volatile.global.b64` in a loop.
            #[track_caller]
            pub fn load_tagged(&self, i: impl DslIndex, tag: u32, from: u32) -> u64 {
                gather(
                    "load_tagged",
                    &|_| format!("LL packet from rank {from} with tag {tag}"),
                    one_slot(self.addr($what, i)),
                    0u64,
                    |a| load_raw::<u64>(a, Ordering::Relaxed),
                    |v| (v >> 32) as u32 == tag,
                    never,
                )[0]
            }

            /// Two packets at `i` (even) in one 16-byte volatile load, polled
            /// until both tags equal `tag`. `ld.volatile.global.v2.b64`.
            #[track_caller]
            pub fn load_tagged2(&self, i: impl DslIndex, tag: u32, from: u32) -> [u64; 2] {
                gather(
                    "load_tagged2",
                    &|_| format!("LL packets from rank {from} with tag {tag}"),
                    one_slot(self.vec_addr::<2>(i)),
                    [0u64; 2],
                    load_pair,
                    |v| tagged_pair(v, tag),
                    never,
                )[0]
            }

            /// Packet pairs from several ranks at once: for each rank r
            /// whose bit is set in `ranks`, the pair at `first + r * stride`
            /// (even), polled until both its tags equal `tag`, in `[r]`
            /// (zeros where the bit is clear). Waits as
            /// [`gather_ready`](Self::gather_ready) does.
            /// `ld.volatile.global.v2.b64` for each slot, in a loop.
            #[track_caller]
            pub fn gather_tagged2(
                &self,
                first: impl DslIndex,
                stride: u32,
                ranks: u32,
                tag: u32,
            ) -> [[u64; 2]; MAX_WORLD_SIZE] {
                gather(
                    "gather_tagged2",
                    &|r| format!("LL packets from rank {r} with tag {tag}"),
                    self.slot_addrs::<2>(first, stride, ranks),
                    [0u64; 2],
                    load_pair,
                    |v| tagged_pair(v, tag),
                    never,
                )
            }

            /// [`gather_tagged2`](Self::gather_tagged2) that fails the call
            /// on a pair from another call: one whose tags agree with `tag`
            /// in the bits of `round` (those that say "this round", such as
            /// an epoch's low bits) but not whole (a caller that folds more
            /// into its tags, such as a call's identity). The thread records
            /// a call mismatch naming the rank
            /// ([`Error::CallMismatch`](crate::Error::CallMismatch)) and
            /// stops, as a failed `kernel_assert!` does, where a plain wait
            /// would wait for the kernel timeout. Checked only while
            /// waiting, so a pair that arrived whole costs what
            /// `gather_tagged2` costs. `round` must hold a bit that every
            /// tag sets and the staging's empty state (and every cleared
            /// slot) does not, or an empty slot reads as another call's.
            /// The device checks every missing slot when it starts waiting
            /// and after each arrival, and the slot it spins on each turn;
            /// the emulator checks every missing slot on each poll (a
            /// mismatch behind a peer that never arrives is a timeout on a
            /// GPU). `ld.volatile.global.v2.b64` for each slot, in a loop.
            #[track_caller]
            pub fn gather_tagged2_checked(
                &self,
                first: impl DslIndex,
                stride: u32,
                ranks: u32,
                tag: u32,
                round: u32,
            ) -> [[u64; 2]; MAX_WORLD_SIZE] {
                let addrs = self.slot_addrs::<2>(first, stride, ranks);
                gather(
                    "gather_tagged2_checked",
                    &|r| format!("LL packets from rank {r} with tag {tag}"),
                    addrs,
                    [0u64; 2],
                    load_pair,
                    |v| tagged_pair(v, tag),
                    |v| {
                        v.iter().any(|w| {
                            let t = (w >> 32) as u32;
                            (t ^ tag) & round == 0 && t != tag
                        })
                    },
                )
            }

            /// Sends the 8 bytes `data` as one LL packet of 16 bytes at `i`
            /// (even): two words `tag << 32 | 32 bits of data`, low half
            /// first, in one volatile 16-byte store. Each word is one
            /// single-copy-atomic access but the 16 bytes together are not,
            /// so each word carries the tag: [`load_tagged64`](Self::load_tagged64)
            /// takes the packet only when both do. Other 8-byte types travel
            /// as their bits (`x.to_bits()`, `f64::from_bits`, `as i64`).
            /// `st.volatile.global.v2.b64`.
            #[track_caller]
            pub fn store_tagged64(&self, i: impl DslIndex, data: u64, tag: u32) {
                let t = u64::from(tag) << 32;
                let words = [t | (data & 0xFFFF_FFFF), t | (data >> 32)];
                tick();
                let base = self.vec_addr::<2>(i);
                store_raw(base, words[0], Ordering::Relaxed);
                store_raw(base + 8, words[1], Ordering::Relaxed);
            }

            /// Receives the 8 data bytes of the LL packet at `i` (even) that
            /// [`store_tagged64`](Self::store_tagged64) sent with `tag`:
            /// polls the 16 bytes (volatile 16-byte loads, two
            /// single-copy-atomic words) until both words carry `tag`. A
            /// torn read, one word of this packet and one of an older one,
            /// has an older tag in a word and is polled again; so no fence
            /// is needed, and a slot may be reused with a new tag each
            /// round. Slots must not hold `tag` before the packet comes
            /// (start tags at 1 on zeroed memory). `from` names the sending
            /// rank in a timeout report. `ld.volatile.global.v2.b64` in a loop.
            #[track_caller]
            pub fn load_tagged64(&self, i: impl DslIndex, tag: u32, from: u32) -> u64 {
                untag64(
                    gather(
                        "load_tagged64",
                        &|_| format!("8-byte LL packet from rank {from} with tag {tag}"),
                        one_slot(self.vec_addr::<2>(i)),
                        [0u64; 2],
                        load_pair,
                        |v| tagged_pair(v, tag),
                        never,
                    )[0],
                )
            }

            /// [`load_tagged64`](Self::load_tagged64) from several ranks at
            /// once: for each rank r whose bit is set in `ranks`, the data of
            /// the packet at `first + r * stride` (even) in `[r]`, 0 where the
            /// bit is clear. Waits as [`gather_ready`](Self::gather_ready)
            /// does. `ld.volatile.global.v2.b64` for each slot, in a loop.
            #[track_caller]
            pub fn gather_tagged64(
                &self,
                first: impl DslIndex,
                stride: u32,
                ranks: u32,
                tag: u32,
            ) -> [u64; MAX_WORLD_SIZE] {
                let addrs = self.slot_addrs::<2>(first, stride, ranks);
                gather(
                    "gather_tagged64",
                    &|r| format!("8-byte LL packet from rank {r} with tag {tag}"),
                    addrs,
                    [0u64; 2],
                    load_pair,
                    |v| tagged_pair(v, tag),
                    never,
                )
                .map(untag64)
            }
        }
    };
}
tagged!(Remote, "remote buffer");
tagged!(SliceMut, "mutable slice");

/// The sentinel receive (pushed data that carries its own arrival).
macro_rules! ready {
    ($name:ident) => {
        impl<T: Scalar> $name<T> {
            /// Polls the 16 bytes at elements `i..i + N` (volatile vector
            /// loads) until no element has `empty`'s bits, and returns them;
            /// `from` names the sending rank in a timeout report. Elements
            /// of 1, 2, 4 or 8 bytes. Arrival is per element: each is read
            /// by one single-copy-atomic access of at least its width (8-byte
            /// elements by `.v2.b64`, so never half of one), and has arrived
            /// once its bits differ from `empty`'s; the vector is ready when
            /// every element has. A 16-byte store is not atomic as a whole,
            /// so a vector that arrived only in part reads as not ready, as
            /// long as the sender writes each element in one access of its
            /// width or wider (`store_vec`, `store`, never an f64 as two
            /// u32 halves) and never sends `empty`'s bits as data.
            /// `ld.volatile.global.v4.b32` (`.v2.b64` for 8-byte elements)
            /// in a loop.
            #[track_caller]
            pub fn load_vec_ready<const N: usize>(
                &self,
                i: impl DslIndex,
                empty: T,
                from: u32,
            ) -> [T; N] {
                const { sixteen_bytes::<T>(N) };
                sentinel_gather(
                    "load_vec_ready",
                    &|_| format!("pushed data from rank {from}"),
                    one_slot(self.vec_addr::<N>(i)),
                    empty,
                )[0]
            }

            /// [`load_vec_ready`](Self::load_vec_ready) from several ranks at
            /// once: for each rank r whose bit is set in `ranks`, the 16 bytes
            /// at elements `first + r * stride`, polled until none of its
            /// elements has `empty`'s bits, in `[r]` (zeros where the bit is
            /// clear). Every slot's load is issued before any is checked; then
            /// the first slot still missing is polled alone (a tight loop),
            /// and once it lands the others still missing are loaded again
            /// together, so waiting on several peers costs one round trip
            /// after the first wait, not one per peer. A timeout names the
            /// rank polled. Arrival is per element, as for
            /// [`load_vec_ready`](Self::load_vec_ready).
            /// `ld.volatile.global.v4.b32` (`.v2.b64` for 8-byte elements)
            /// for each slot.
            #[track_caller]
            pub fn gather_ready<const N: usize>(
                &self,
                first: impl DslIndex,
                stride: u32,
                ranks: u32,
                empty: T,
            ) -> [[T; N]; MAX_WORLD_SIZE] {
                const { sixteen_bytes::<T>(N) };
                sentinel_gather(
                    "gather_ready",
                    &|r| format!("pushed data from rank {r}"),
                    self.slot_addrs::<N>(first, stride, ranks),
                    empty,
                )
            }
        }
    };
}
ready!(Remote);
ready!(SliceMut);

/// Stores and atomics, on the writable handles.
macro_rules! writable {
    ($name:ident, $what:literal) => {
        impl<T: Scalar> $name<T> {
            #[doc(hidden)]
            #[track_caller]
            pub fn __set<I: DslIndex>(&self, i: I, v: T) {
                store_raw(self.addr($what, i), v, Ordering::Relaxed)
            }

            /// Stores `v` to element `i` with `order` at `scope`. `symm_st<order, scope>`.
            #[track_caller]
            pub fn store(&self, i: impl DslIndex, v: T, order: StoreOrder, scope: Scope)
            where
                T: AtomicScalar,
            {
                let _ = scope;
                tick();
                store_raw(self.addr($what, i), v, store_order(order))
            }

            /// Atomically adds `v` to element `i`; returns the old value. `atom.add`.
            #[track_caller]
            pub fn atomic_add(&self, i: impl DslIndex, v: T, order: RmwOrder, scope: Scope) -> T
            where
                T: AtomicAdd + std::ops::Add<Output = T>,
            {
                let _ = scope;
                tick();
                rmw_raw(self.addr($what, i), rmw_order(order), |old: T| {
                    Some(wrapping_add(old, v))
                })
            }

            /// Atomically replaces element `i` with `v`; returns the old value. `atom.exch`.
            #[track_caller]
            pub fn atomic_exch(&self, i: impl DslIndex, v: T, order: RmwOrder, scope: Scope) -> T
            where
                T: AtomicScalar,
            {
                let _ = scope;
                tick();
                rmw_raw(self.addr($what, i), rmw_order(order), |_| Some(v))
            }

            /// Atomically sets element `i` to `new` if it equals `cmp`; returns
            /// the old value. `atom.cas`.
            #[track_caller]
            pub fn atomic_cas(
                &self,
                i: impl DslIndex,
                cmp: T,
                new: T,
                order: RmwOrder,
                scope: Scope,
            ) -> T
            where
                T: AtomicScalar,
            {
                let _ = scope;
                tick();
                let cmp_bits = cmp.__to_bits64();
                rmw_raw(self.addr($what, i), rmw_order(order), |old: T| {
                    (old.__to_bits64() == cmp_bits).then_some(new)
                })
            }

            /// Atomic maximum; returns the old value. `atom.max`.
            #[track_caller]
            pub fn atomic_max(&self, i: impl DslIndex, v: T, order: RmwOrder, scope: Scope) -> T
            where
                T: AtomicMinMax,
            {
                let _ = scope;
                tick();
                rmw_raw(self.addr($what, i), rmw_order(order), |old: T| {
                    Some(Ord::max(old, v))
                })
            }

            /// Atomic minimum; returns the old value. `atom.min`.
            #[track_caller]
            pub fn atomic_min(&self, i: impl DslIndex, v: T, order: RmwOrder, scope: Scope) -> T
            where
                T: AtomicMinMax,
            {
                let _ = scope;
                tick();
                rmw_raw(self.addr($what, i), rmw_order(order), |old: T| {
                    Some(Ord::min(old, v))
                })
            }

            /// Stores 16 bytes to elements `i..i + N` in one access; `i` must
            /// be a multiple of `N`. `st.global.v4.b32` (`.v2.b64` for 8-byte
            /// types).
            #[track_caller]
            pub fn store_vec<const N: usize>(&self, i: impl DslIndex, v: [T; N]) {
                const { sixteen_bytes::<T>(N) };
                self.store_vec_raw(i, v)
            }

            #[track_caller]
            fn store_vec_raw<const N: usize>(&self, i: impl DslIndex, v: [T; N]) {
                let base = self.vec_addr::<N>(i);
                for (k, x) in v.into_iter().enumerate() {
                    store_raw(
                        base + (k * std::mem::size_of::<T>()) as u64,
                        x,
                        Ordering::Relaxed,
                    );
                }
            }

            /// [`store_vec`](Self::store_vec) that always writes memory. `st.volatile.global.v4.b32`.
            #[track_caller]
            pub fn store_vec_volatile<const N: usize>(&self, i: impl DslIndex, v: [T; N]) {
                const { sixteen_bytes::<T>(N) };
                tick();
                self.store_vec_raw(i, v)
            }
        }
    };
}

/// Integer atomic adds wrap, as on the GPU; float adds are plain adds.
fn wrapping_add<T: Scalar + std::ops::Add<Output = T>>(a: T, b: T) -> T {
    if T::DTYPE.is_float() {
        a + b
    } else {
        T::__from_bits64(a.__to_bits64().wrapping_add(b.__to_bits64()))
    }
}

handle!(
    /// A read-only local device slice; a kernel parameter written `x: &[T]`.
    /// On the GPU: a pointer and a length.
    Slice,
    "slice"
);
handle!(
    /// A writable local device slice; a kernel parameter written `y: &mut [T]`.
    /// On the GPU: a pointer and a length.
    SliceMut,
    "mutable slice"
);
handle!(
    /// One rank's symmetric buffer as mapped for this rank, from
    /// [`SymmBuf::peer`] or [`SymmBuf::local`]. On the GPU: a pointer and a length.
    Remote,
    "remote buffer"
);
readable!(Slice, "slice");
readable!(SliceMut, "mutable slice");
readable!(Remote, "remote buffer");
writable!(SliceMut, "mutable slice");
writable!(Remote, "remote buffer");

/// A symmetric buffer: every rank's copy, plus signal pads. A kernel
/// parameter written `buf: SymmBuf<T>`; launch passes a `&SymmetricMemory`.
pub struct SymmBuf<T> {
    /// What the GPU's `symm_buf<T>` holds, from the same fill.
    abi: symm_abi::SymmBufArg,
    _t: PhantomData<T>,
}

impl<T> Clone for SymmBuf<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SymmBuf<T> {}

impl<T: Scalar> SymmBuf<T> {
    /// The handle the emulator's kernel body sees for a symmetric buffer.
    ///
    /// # Safety
    /// `a.ptrs` and `a.pads` must each address `a.world` addresses of
    /// emulator memory: rank `r`'s buffer, whose `a.len` elements start
    /// `a.off` bytes after its address, and its signal pad of at least
    /// [`pad_slots`](crate::layout::pad_slots)`(a.world)` slots, all live
    /// for as long as any copy of the handle is used.
    #[doc(hidden)]
    pub unsafe fn __from_abi(a: symm_abi::SymmBufArg) -> Self {
        SymmBuf {
            abi: a,
            _t: PhantomData,
        }
    }

    #[track_caller]
    fn table(&self, table: u64, r: u32, what: &str) -> u64 {
        if r >= self.abi.world {
            fault(format!(
                "{what}: rank {r} is out of range for world size {}",
                self.abi.world
            ));
        }
        load_raw::<u64>(table + 8 * u64::from(r), Ordering::Relaxed)
    }

    /// Rank `r`'s buffer. `(T*)(ptrs[r] + off)`.
    #[track_caller]
    pub fn peer(&self, r: u32) -> Remote<T> {
        let ptr = self.table(self.abi.ptrs, r, "SymmBuf::peer") + self.abi.off;
        // SAFETY: rank `r`'s buffer holds `len` elements, and outlives this
        // handle (`__from_abi`'s contract).
        unsafe { Remote::__new(ptr, self.len()) }
    }

    /// This rank's own buffer. `(T*)local` on the GPU (the table's entry
    /// for this rank plus `off` here, the same address).
    #[track_caller]
    pub fn local(&self) -> Remote<T> {
        self.peer(self.abi.rank)
    }

    /// Rank `r`'s signal pad as `u32` slots (see [`super::signal_slot`]).
    #[track_caller]
    pub fn pad(&self, r: u32) -> Remote<u32> {
        let ptr = self.table(self.abi.pads, r, "SymmBuf::pad");
        // SAFETY: rank `r`'s pad holds pad_slots(world) slots, and outlives
        // this handle (`__from_abi`'s contract).
        unsafe { Remote::__new(ptr, crate::layout::pad_slots(self.abi.world as usize)) }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.abi.rank
    }

    /// Number of ranks.
    pub fn world_size(&self) -> u32 {
        self.abi.world
    }

    /// Elements in each rank's buffer.
    pub fn len(&self) -> usize {
        self.abi.len as usize
    }

    /// Whether the buffers are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where rank `r`'s signal pad is mapped in this process (what a hang
    /// report prints, to tell pointer tables that disagree).
    #[track_caller]
    pub(crate) fn pad_address(&self, r: u32) -> u64 {
        self.table(self.abi.pads, r, "SymmBuf::pad")
    }
}

/// A block-shared array of `N` elements, from [`shared_array`].
/// On the GPU: `__shared__ symm_array<T, N>`.
pub struct Shared<T, const N: usize> {
    ptr: u64,
    _t: PhantomData<T>,
}

impl<T, const N: usize> Clone for Shared<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for Shared<T, N> {}

impl<T: Scalar, const N: usize> Shared<T, N> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        N
    }

    /// Always false for `N > 0`.
    pub fn is_empty(&self) -> bool {
        N == 0
    }

    #[doc(hidden)]
    #[track_caller]
    pub fn __get<I: DslIndex>(&self, i: I) -> T {
        load_raw(
            self.ptr + (index("shared array", i, N) * std::mem::size_of::<T>()) as u64,
            Ordering::Relaxed,
        )
    }

    #[doc(hidden)]
    #[track_caller]
    pub fn __set<I: DslIndex>(&self, i: I, v: T) {
        store_raw(
            self.ptr + (index("shared array", i, N) * std::mem::size_of::<T>()) as u64,
            v,
            Ordering::Relaxed,
        )
    }
}

/// Declares a block-shared array. Only valid as `let s = shared_array::<T, N>();`
/// at the top of a kernel or device function. `__shared__ symm_array<T, N> s;`.
pub fn shared_array<T: Scalar, const N: usize>() -> Shared<T, N> {
    __shared_array_at::<T, N>("", 0)
}

#[doc(hidden)]
pub fn __shared_array_at<T: Scalar, const N: usize>(
    func: &'static str,
    index: u32,
) -> Shared<T, N> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (func, index).hash(&mut h);
    let site = h.finish();
    let ptr = current("shared_array", |t| {
        t.shared(site, N * std::mem::size_of::<T>())
    });
    Shared {
        ptr,
        _t: PhantomData,
    }
}
