//! What makes a kernel safe to launch back to back and to replay in a CUDA
//! graph, as device functions a kernel calls instead of writing by hand.
//!
//! A kernel that is launched again before its peers have finished the
//! previous launch must tell one call's signals and data from the next
//! one's, without the host resetting anything between calls (a CUDA graph
//! replays launches with no host code in between). Four pieces do that:
//!
//! - **A call counter** per block, kept in the caller's slot of a signal
//!   channel that the kernel requested from the group (a
//!   [`Channel`](crate::signal::Channel), or the one a
//!   [`Stage`](crate::Stage) holds): [`call_begin`] returns this call's
//!   number, [`call_end`] stores it. Every rank runs the same launches, so
//!   the numbers agree across ranks without any exchange.
//! - **Barriers** that need no reset: [`enter_barrier`] and
//!   [`exit_barrier`] exchange flags whose value is derived from the call
//!   number, so each call waits for a value no earlier call wrote. Both
//!   fit in the same channel as the counter (the counter uses the slot a
//!   rank never signals itself on).
//!   [`enter_barrier_sending`] and [`exit_barrier_checking`] also carry
//!   the call's identity ([`call_word`]) to every peer on a second channel
//!   and compare it, so ranks in different calls fail instead of pairing.
//! - **Parity staging**: a stage holds two halves, and call `c` uses half
//!   `c & 1` ([`stage_at`]), so a fast rank's next call never overwrites
//!   data that a slow peer is still reading from this one.
//! - **Sentinel messages** ([`sentinel_send`], [`sentinel_take`]): a
//!   [`Stage`](crate::Stage) made with [`Stage::sentinel`](crate::Stage::sentinel)
//!   reads as empty (all bits one, a NaN) until data lands, so a receiver
//!   polls the data itself, no flag needed; taking a message marks its
//!   slots empty again for the call after next.
//!
//! Every piece takes the kernel's grid as given: a one-dimensional grid of
//! at most [`SIGNAL_BLOCKS`](crate::layout::SIGNAL_BLOCKS) blocks
//! (`call_begin` asserts it), and the same sequence of grids on every rank
//! among the calls that share a counter, so that each block's counter
//! counts the same calls everywhere. Barrier kernels may change their grid
//! from call to call that way; kernels whose staging halves or sentinel
//! slots carry per-block state from one call to the next keep one grid.
//!
//! Parity staging and sentinel messages are safe back to back under one
//! rule: each call waits, before it ends, on every rank it sent to (it
//! takes that rank's message, or passes a barrier with it), and takes every
//! message sent to it. Then a rank starts call `c + 2`, which writes half
//! `c & 1` again, only after every peer it writes to finished call `c`,
//! the last reader of that half. A rank that only sends could instead lap
//! a peer that only receives, and overwrite what it has not read. Each
//! barrier runs at most once per call (a second `enter_barrier` in the
//! same call would wait for a value already reached); a kernel that needs
//! more barriers takes another channel for them.

use crate::dsl::*;
use crate::symm_kernel;

// The pieces spell the pad's sizes as literals (kernels have no module
// constants); keep them in step.
const _: () = assert!(crate::layout::SIGNAL_BLOCKS == 128 && crate::layout::SIGNAL_CHANNELS == 32);

/// This block's number for the current call on channel `ch` of `buf`: 1
/// on the first call, then one more on each (wrapping). Read by every
/// thread; [`call_end`] stores it. A kernel launched with programmatic
/// dependent launch calls [`grid_dependency_wait`] first, so the previous
/// call's [`call_end`] is visible.
#[symm_kernel(device)]
pub fn call_begin<T: Scalar>(buf: SymmBuf<T>, ch: u32) -> u32 {
    // Past the pad's blocks or channels the slot would be another's (an
    // unchecked launch does not check indices).
    kernel_assert!(
        grid_dim_x() <= 128u32 && grid_dim_y() == 1u32 && grid_dim_z() == 1u32 && ch < 32u32,
        "call_begin: a one-dimensional grid of at most 128 blocks (SIGNAL_BLOCKS), and a channel below 32 (SIGNAL_CHANNELS)"
    );
    let rank = buf.rank();
    buf.pad(rank)
        .load(
            signal_slot(ch, block_idx_x(), rank),
            LoadOrder::Relaxed,
            Scope::Gpu,
        )
        .wrapping_add(1)
}

/// Stores `call` as this block's last call on channel `ch` of `buf`, once
/// every thread of the block has read the old one. The last thing a call
/// does.
#[symm_kernel(device)]
pub fn call_end<T: Scalar>(buf: SymmBuf<T>, ch: u32, call: u32) {
    sync_threads();
    if thread_idx_x() == 0 {
        let rank = buf.rank();
        buf.pad(rank).store(
            signal_slot(ch, block_idx_x(), rank),
            call,
            StoreOrder::Relaxed,
            Scope::Gpu,
        );
    }
}

/// Waits until this block of every rank has entered call `call` (and made
/// visible what it wrote before): the first of a call's two barriers on
/// channel `ch`. Needs at least `world_size` threads per block.
#[symm_kernel(device)]
pub fn enter_barrier<T: Scalar>(buf: SymmBuf<T>, ch: u32, call: u32) {
    flag_barrier(buf, ch, call.wrapping_mul(2));
}

/// Waits until this block of every rank has reached the end of call `call`
/// (and made visible what it wrote before): the second of a call's two
/// barriers on channel `ch`. Needs at least `world_size` threads per block.
#[symm_kernel(device)]
pub fn exit_barrier<T: Scalar>(buf: SymmBuf<T>, ch: u32, call: u32) {
    flag_barrier(buf, ch, call.wrapping_mul(2).wrapping_add(1));
}

/// The word a barrier kernel sends its peers as its call's identity: the
/// digest `id` mixed with the call's number (times an odd constant, so
/// the words of one digest in any 2^32 consecutive calls all differ). A
/// word an earlier call left in a slot is then never taken for this
/// call's ([`enter_barrier_sending`], [`exit_barrier_checking`]). Every
/// call on a counter must send one on the identity channel: a slot that no
/// call rewrites holds an old word.
#[symm_kernel(device)]
pub fn call_word(id: u32, call: u32) -> u32 {
    id ^ call.wrapping_mul(0x9E37_79B9u32)
}

/// The first thread of the identity barriers' checkers: past the whole
/// warps whose thread `r` handshakes with rank `r` (32 up to a world of 32,
/// so that handshakes and checks run in different warps).
#[symm_kernel(device)]
pub fn identity_checkers(world: u32) -> u32 {
    let warps = (world + 31u32) / 32u32;
    if warps == 0u32 {
        32u32
    } else {
        warps * 32u32
    }
}

/// What both identity barriers need: first warps that handshake (thread
/// `r` with rank `r`) and then threads that check the words (thread
/// [`identity_checkers`]` + r` rank `r`'s), so `identity_checkers(world) +
/// world_size` threads per block (`32 + world_size` up to 32 ranks), and an
/// identity channel inside the pad (an unchecked launch does not check its
/// slots).
#[symm_kernel(device)]
fn identity_barrier_shape<T: Scalar>(buf: SymmBuf<T>, id_ch: u32) {
    kernel_assert!(
        block_dim_x() >= identity_checkers(buf.world_size()) + buf.world_size() && id_ch < 32u32,
        "an identity barrier needs at least identity_checkers(world_size) + world_size threads per block (32 + world_size up to 32 ranks), and a channel below 32 (SIGNAL_CHANNELS)"
    );
}

/// [`enter_barrier`] that also sends this call's identity to each peer, in
/// block 0: its thread `r` stores [`call_word`]`(id, call)` into this
/// rank's slot of channel `id_ch` on rank `r`, just after it raises its
/// flag, so the barrier waits for nothing more than it did (a store before
/// the flag would hold the flag's release until the store landed, a round
/// trip over NVLink: 0.3 to 0.5 µs a call on 2 H200s, `bench/NOTES.md`
/// v30). [`exit_barrier_checking`] compares it. Calls alternate between
/// two slots by parity, so a peer's next call never overwrites a word
/// before this rank has read it. Needs at least
/// [`identity_checkers`]`(world_size) + world_size` threads per block (as
/// [`exit_barrier_checking`]); channel `id_ch` holds nothing else.
#[symm_kernel(device)]
pub fn enter_barrier_sending<T: Scalar>(buf: SymmBuf<T>, ch: u32, call: u32, id_ch: u32, id: u32) {
    identity_barrier_shape(buf, id_ch);
    let value = call.wrapping_mul(2);
    sync_threads();
    let t = thread_idx_x();
    let rank = buf.rank();
    if t < buf.world_size() && t != rank {
        buf.signal_flag(t, ch, value);
        if block_idx_x() == 0u32 {
            buf.pad(t).store(
                signal_slot(id_ch, call & 1u32, rank),
                call_word(id, call),
                StoreOrder::Relaxed,
                Scope::System,
            );
        }
        buf.wait_flag(t, ch, value);
    }
    sync_threads();
}

/// [`exit_barrier`] that also checks the identity rank `r` sent in this
/// call's [`enter_barrier_sending`] on channel `id_ch`: whether it is
/// [`call_word`]`(id, call)`, in thread [`identity_checkers`]` + r` of
/// block 0 (`32 + r` up to 32 ranks; true in every other thread). Fail
/// the call unless it holds, before the call returns what it computed
/// from its peers' data.
///
/// The word is loaded by the checkers' warp while the first awaits the
/// flags, so that neither the flag's release nor its poll waits on the
/// load: on 2 H200s the check then costs the pull and two-shot all-reduce
/// 0.02 to 0.05 µs a call, against 0.05 to 0.08 when the thread that
/// awaits the flag also loads the word (`bench/NOTES.md` v32). The peer
/// stored it a barrier ago, so it is there unless the load was early, and
/// a word other than the expected one is loaded again once the flag (whose
/// release covers it) arrived, and only that one counts. Needs at least
/// `identity_checkers(world_size) + world_size` threads per block. Every call on this counter must
/// send its word on `id_ch` ([`call_word`]).
#[symm_kernel(device)]
pub fn exit_barrier_checking<T: Scalar>(
    buf: SymmBuf<T>,
    ch: u32,
    call: u32,
    id_ch: u32,
    id: u32,
) -> bool {
    identity_barrier_shape(buf, id_ch);
    let value = call.wrapping_mul(2).wrapping_add(1);
    let want = call_word(id, call);
    sync_threads();
    let t = thread_idx_x();
    let rank = buf.rank();
    let world = buf.world_size();
    let base = identity_checkers(world);
    let checks = block_idx_x() == 0u32 && t >= base && t < base + world && t - base != rank;
    let mut word = want;
    if t < world && t != rank {
        buf.signal_flag(t, ch, value);
        buf.wait_flag(t, ch, value);
    } else if checks {
        word = buf.pad(rank).load(
            signal_slot(id_ch, call & 1u32, t - base),
            LoadOrder::Relaxed,
            Scope::System,
        );
    }
    sync_threads();
    let mut same = true;
    if checks && word != want {
        word = buf.pad(rank).load(
            signal_slot(id_ch, call & 1u32, t - base),
            LoadOrder::Relaxed,
            Scope::System,
        );
        same = word == want;
    }
    same
}

/// Block-wide barrier with the same block of every rank: thread `r` raises
/// this rank's flag on rank `r` to `value` (a system-scope release) and
/// waits for rank `r`'s to reach it. Flags only grow (wrapping), so no call
/// resets them, and a peer already past this barrier satisfies it.
#[symm_kernel(device)]
pub fn flag_barrier<T: Scalar>(buf: SymmBuf<T>, ch: u32, value: u32) {
    // Thread r handshakes with rank r: with fewer threads some rank would
    // never hear from this block, and wait until it timed out.
    kernel_assert!(
        block_dim_x() >= buf.world_size(),
        "a barrier needs at least world_size threads per block"
    );
    sync_threads();
    let t = thread_idx_x();
    if t < buf.world_size() && t != buf.rank() {
        buf.signal_flag(t, ch, value);
        buf.wait_flag(t, ch, value);
    }
    sync_threads();
}

/// Elements per region of `stage` laid out as two parity halves of one
/// region per rank: its length over `2 × world_size` (a [`Stage`] is
/// below 2^32 elements, which kernels index).
///
/// [`Stage`]: crate::Stage
#[symm_kernel(device)]
pub fn stage_cap<T: Scalar>(stage: SymmBuf<T>) -> u32 {
    stage.len() as u32 / (2 * stage.world_size())
}

/// Where rank `from`'s region of call `call` starts in `stage` (two parity
/// halves of [`stage_cap`] elements per rank): half `call & 1`, so calls
/// alternate halves.
#[symm_kernel(device)]
pub fn stage_at<T: Scalar>(stage: SymmBuf<T>, call: u32, from: u32) -> u32 {
    ((call & 1) * stage.world_size() + from) * stage_cap(stage)
}

/// The bits a sentinel stage's empty slots hold: all ones (a NaN).
#[symm_kernel(device)]
pub fn sentinel_empty<T: DslFloat>() -> T {
    T::from_bits64(0xFFFF_FFFF_FFFF_FFFFu64)
}

/// `v` with every element that has the empty bits replaced by the same NaN
/// with its sign bit cleared: still a NaN, so a sum stays a NaN, but it
/// cannot read as "not arrived".
#[symm_kernel(device)]
pub fn sentinel_scrub<T: DslFloat, const V: usize>(v: [T; V]) -> [T; V] {
    let empty = sentinel_empty::<T>().to_bits64();
    let mut w = v;
    for k in 0..V {
        if w[k].to_bits64() == empty {
            w[k] = T::from_bits64(empty >> 1);
        }
    }
    w
}

/// Sends `v`, elements `at..at + V` of this rank's message of call `call`,
/// to rank `to` (this rank too) through `stage`, a
/// [`Stage::sentinel`](crate::Stage::sentinel): one volatile 16-byte store
/// into this rank's region of the call's half. `V` elements make 16 bytes,
/// `at` is a multiple of `V`, and `at + V` must not pass [`stage_cap`].
#[symm_kernel(device)]
pub fn sentinel_send<T: DslFloat, const V: usize>(
    stage: SymmBuf<T>,
    call: u32,
    to: u32,
    at: u32,
    v: [T; V],
) {
    kernel_assert!(
        at + V as u32 <= stage_cap(stage),
        "sentinel_send: elements at..at + V pass the stage's region (Stage::cap)"
    );
    let region = stage_at(stage, call, stage.rank());
    stage
        .peer(to)
        .store_vec_volatile::<V>(region + at, sentinel_scrub::<T, V>(v));
}

/// Elements `at..at + V` (16 bytes, `at` a multiple of `V`) of the
/// call-`call` message of every rank whose
/// bit is set in `from`, from this rank's `stage` once each has arrived
/// (all polled together: one memory round trip after the last lands), and
/// each slot marked empty again for the call after next. Entry `r` holds
/// rank `r`'s; ranks not in `from` read as zeros.
#[symm_kernel(device)]
pub fn sentinel_take<T: DslFloat, const V: usize>(
    stage: SymmBuf<T>,
    call: u32,
    from: u32,
    at: u32,
) -> [[T; V]; 8] {
    let cap = stage_cap(stage);
    kernel_assert!(
        at + V as u32 <= cap,
        "sentinel_take: elements at..at + V pass the stage's region (Stage::cap)"
    );
    let first = stage_at(stage, call, 0) + at;
    sentinel_take_at::<T, V>(stage.local(), first, cap, from, stage.world_size())
}

/// [`sentinel_take`] at explicit positions: the slots `mine[first + r *
/// stride..]` of every rank `r` in `from` (of `world`).
#[symm_kernel(device)]
pub fn sentinel_take_at<T: DslFloat, const V: usize>(
    mine: Remote<T>,
    first: u32,
    stride: u32,
    from: u32,
    world: u32,
) -> [[T; V]; 8] {
    let empty = sentinel_empty::<T>();
    let cleared: [T; V] = [empty; V];
    let got: [[T; V]; 8] = mine.gather_ready::<V>(first, stride, from, empty);
    // A gather covers ranks 0 to 7 (its mask's bits past them fault).
    let n = if world < 8u32 { world } else { 8u32 };
    for r in 0..n {
        if ((from >> r) & 1u32) == 1u32 {
            mine.store_vec::<V>(first + r * stride, cleared);
        }
    }
    got
}

/// The bit mask of every rank of `buf`'s group: the `from` of a
/// [`sentinel_take`] that hears from all, in a group of at most 8 ranks (a
/// gather covers 8, [`MAX_WORLD_SIZE`](crate::layout::MAX_WORLD_SIZE); the
/// emulator faults on a mask that names more, and the built-in kernels
/// that call this are refused past 8 on the host).
#[symm_kernel(device)]
pub fn all_ranks<T: Scalar>(buf: SymmBuf<T>) -> u32 {
    (1u32 << buf.world_size()) - 1
}

/// This thread's index in the whole grid (x only): the first element of a
/// grid-stride loop.
#[symm_kernel(device)]
pub fn grid_thread() -> u32 {
    block_idx_x() * block_dim_x() + thread_idx_x()
}

/// Threads in the whole grid (x only): the step of a grid-stride loop.
#[symm_kernel(device)]
pub fn grid_threads() -> u32 {
    grid_dim_x() * block_dim_x()
}

/// Elements `at..at + V` of `src` (16 bytes, `at` a multiple of `V`), with
/// zeros for those at or past `n`: one vector load when all are below `n`.
#[symm_kernel(device)]
pub fn load_padded<T: Scalar, const V: usize>(src: Slice<T>, at: u32, n: u32) -> [T; V] {
    let mut v: [T; V] = [T::from_f32(0.0f32); V];
    if at + V as u32 <= n {
        v = src.load_vec::<V>(at);
    } else {
        for k in 0..V {
            if at + (k as u32) < n {
                v[k] = src[at + k as u32];
            }
        }
    }
    v
}

/// Stores `v` at elements `at..at + V` of `dst` (16 bytes, `at` a multiple
/// of `V`), only those below `n`: one vector store when all are.
#[symm_kernel(device)]
pub fn store_padded<T: Scalar, const V: usize>(dst: SliceMut<T>, at: u32, n: u32, v: [T; V]) {
    if at + V as u32 <= n {
        dst.store_vec::<V>(at, v);
    } else {
        for k in 0..V {
            if at + (k as u32) < n {
                dst[at + k as u32] = v[k];
            }
        }
    }
}
