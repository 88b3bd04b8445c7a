//! The signal protocol, written once in the DSL: a put, a wait and an
//! epoch flag are `#[symm_kernel(device)]` functions, so the GPU runs their
//! CUDA C and the emulator their Rust, from the same source. The handle
//! methods that kernels call resolve to [`super::methods`]: the flags are
//! these functions themselves, re-exported there, and `put_signal`,
//! `wait_signal` and their `_within` forms thin device functions over
//! [`signal_put`] and [`signal_take`].
//!
//! Below the protocol sit a few intrinsics that only it needs (hidden from
//! the DSL's reference): the signal pad's bounds, a wait's give-up check
//! (timeout, and on the GPU the host's abort), the marks that let the
//! emulator name a wait in a hang report (nothing on the GPU), the
//! kernel's wait timeout, and `exit`.
//!
//! A wait loop has one shape everywhere:
//!
//! ```text
//! while not ready {
//!     if wait_gives_up(start, timeout, kind, rank, peer, channel) { give up }
//!     wait_turn(buf, op, peer, channel, slot, expects, bounded);
//! }
//! wait_done();
//! ```

use std::panic::Location;

use super::intrinsics::intrinsic;
use super::memory::SymmBuf;
use super::scalar::Scalar;
use super::thread::{current, fault};
use crate::dsl::*;
use crate::layout::{
    MAX_DOMAIN_SIZE, PAD_GROUP_SLOTS, PAD_PEER_GROUP, SIGNAL_BLOCKS, SIGNAL_CHANNELS,
};
use crate::status::{SignalKind, StatusRecord};
use crate::symm_kernel;

// The functions below spell these codes as literals (kernels have no
// module constants); keep them in step.
const _: () = assert!(
    SignalKind::Put.code() == 1
        && SignalKind::Wait.code() == 2
        && SignalKind::BarrierPut.code() == 3
        && SignalKind::BarrierWait.code() == 4
);

/// What a wait or a signal is, as faults and hang reports name it (the
/// `op` argument of [`signal_ok`] and [`wait_turn`]).
#[derive(Clone, Copy)]
enum Op {
    PutSignal = 1,
    WaitSignal = 2,
    WaitFlag = 3,
    SignalFlag = 4,
}

// The DSL functions pass these codes as literals; keep them in step.
const _: () = assert!(
    Op::PutSignal as u32 == 1
        && Op::WaitSignal as u32 == 2
        && Op::WaitFlag as u32 == 3
        && Op::SignalFlag as u32 == 4
);

impl Op {
    fn of(code: u32) -> Op {
        match code {
            1 => Op::PutSignal,
            2 => Op::WaitSignal,
            3 => Op::WaitFlag,
            4 => Op::SignalFlag,
            _ => fault(format!("signal protocol: no operation has code {code}")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Op::PutSignal => "put_signal",
            Op::WaitSignal => "wait_signal",
            Op::WaitFlag => "wait_flag",
            Op::SignalFlag => "signal_flag",
        }
    }
}

intrinsic! {
    /// Whether rank `peer` and `channel` name a slot of the signal pad from
    /// this block, in a world of `world` ranks, for the operation `op`. A
    /// checked launch records a bad one as an index out of bounds (the
    /// emulator fails the launch, naming the operation); an unchecked
    /// launch does not check. `symm_signal_ok`.
    #[doc(hidden)]
    #[track_caller]
    pub fn signal_ok(op: u32, world: u32, peer: u32, channel: u32) -> bool {
        let what = Op::of(op).name();
        let block = current(what, |t| t.indices()[1][0]);
        if peer >= world {
            fault(format!("{what}: rank {peer} is out of range for world size {world}"));
        }
        if crate::layout::signal_slot(channel as usize, block as usize, peer as usize).is_none() {
            fault(format!(
                "{what}: channel {channel}, block {block}, peer {peer} is outside the signal pad \
                 ({SIGNAL_CHANNELS} channels, {SIGNAL_BLOCKS} blocks, {MAX_DOMAIN_SIZE} ranks)"
            ));
        }
        true
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) bool f_signal_ok(const symm_kctx& c, symm_u32, symm_u32 world, symm_u32 peer, symm_u32 channel) { return symm_signal_ok(c, peer, world, channel); }\n";
}

intrinsic! {
    /// A wait's give-up check, on each turn of its loop: past `timeout_ns`
    /// since `start` ([`globaltimer`]) it records a signal timeout of kind
    /// `kind` (a [`SignalKind`] code) for `rank`, this block and thread,
    /// `peer` and `channel`, and returns true. On the GPU it also gives up
    /// once the host has stopped this rank's waits on `peer` (the peer
    /// exited or a rank failed), recording that; the emulator's scheduler
    /// ends such a launch itself. `symm_wait_gives_up`.
    #[doc(hidden)]
    pub fn wait_gives_up(start: u64, timeout_ns: u64, kind: u32, rank: u32, peer: u32, channel: u32) -> bool {
        current("signal", |t| {
            if t.globaltimer().saturating_sub(start) <= timeout_ns {
                return false;
            }
            let Some(kind) = SignalKind::from_code(kind) else {
                fault(format!("signal protocol: no signal kind has code {kind}"))
            };
            let [thread, block, ..] = t.indices();
            t.record(StatusRecord {
                kind,
                rank: rank as usize,
                block: block[0],
                peer: peer as usize,
                channel,
                thread: thread[0],
                timeout_ms: timeout_ns / 1_000_000,
            });
            true
        })
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) bool f_wait_gives_up(const symm_kctx& c, symm_u64 start, symm_u64 timeout_ns, symm_u32 kind, symm_u32 rank, symm_u32 peer, symm_u32 channel) { return symm_wait_gives_up(c.status, start, timeout_ns, kind, rank, peer, channel); }\n";
}

intrinsic! {
    /// One failed turn of a wait loop on slot `slot` of `buf`'s pads, for
    /// the operation `op` with `peer` on `channel` (`expects`: the value a
    /// flag waits for). On the emulator an unbounded wait is registered
    /// until [`wait_done`], so a hang report names it, and yields to the
    /// other simulated threads as no progress; a `bounded` wait ends by its
    /// own timeout, so it only lets the others run. Nothing on the GPU.
    #[doc(hidden)]
    #[track_caller]
    pub fn wait_turn[T: Scalar](buf: SymmBuf<T>, op: u32, peer: u32, channel: u32, slot: u32, expects: u32, bounded: bool) {
        let loc = Location::caller();
        let op = Op::of(op);
        if bounded {
            // Other ranks are OS threads, on possibly fewer cores.
            std::thread::yield_now();
            return;
        }
        current(op.name(), |t| t.wait_turn(describe(buf, op, peer, channel, slot, expects), loc))
    }
    cuda: "template<typename T> __device__ __forceinline__ __attribute__((unused)) void f_wait_turn(const symm_kctx&, symm_buf<T>, symm_u32, symm_u32, symm_u32, symm_u32, symm_u32, bool) {}\n";
}

/// What a wait of the protocol waits for, as a hang report names it: `op`
/// with `peer` on `channel`, on slot `slot` (of `peer`'s pad for a put,
/// this rank's otherwise), `expects` the value a flag waits for. The pad
/// addresses in a flag's report let a hang from mismatched pointer tables
/// (a rank signalling where its peer does not look) be told from one
/// where a peer never signalled.
#[track_caller]
fn describe<T: Scalar>(
    buf: SymmBuf<T>,
    op: Op,
    peer: u32,
    channel: u32,
    slot: u32,
    expects: u32,
) -> Box<dyn Fn() -> String> {
    let rank = buf.rank();
    match op {
        Op::PutSignal => Box::new(move || {
            format!(
                "put_signal to peer {peer} on channel {channel} (slot {slot} of rank {peer}'s pad still \
                 holds the previous signal; it must be 0)"
            )
        }),
        Op::WaitFlag => {
            let (own, theirs, pad) = (buf.pad_address(rank), buf.pad_address(peer), buf.pad(rank));
            Box::new(move || {
                let holds = pad.load(slot, LoadOrder::Relaxed, Scope::System);
                format!(
                    "wait_flag from peer {peer} on channel {channel} (slot {slot} of rank {rank}'s pad at \
                     {own:#x}, holding {holds}; expects {expects} or later; this rank signals peer {peer}'s \
                     pad at {theirs:#x})"
                )
            })
        }
        Op::WaitSignal | Op::SignalFlag => Box::new(move || {
            format!(
                "{} from peer {peer} on channel {channel} (slot {slot} of rank {rank}'s pad; expects \
                 {expects})",
                op.name()
            )
        }),
    }
}

intrinsic! {
    /// Ends the wait loop whose turns [`wait_turn`] marked (the emulator
    /// counts it as progress). Nothing on the GPU.
    #[doc(hidden)]
    pub fn wait_done() {
        current("signal", |t| t.end_wait())
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) void f_wait_done(const symm_kctx&) {}\n";
}

intrinsic! {
    /// The launch's timeout for in-kernel waits, in nanoseconds
    /// ([`CommOptions::kernel_timeout`](crate::CommOptions::kernel_timeout)).
    #[doc(hidden)]
    pub fn kernel_timeout_ns() -> u64 {
        current("kernel_timeout_ns", |t| t.timeout_ns())
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) symm_u64 f_kernel_timeout_ns(const symm_kctx& c) { return c.timeout_ns; }\n";
}

intrinsic! {
    /// Ends this thread (a wait that recorded its timeout): the block's
    /// other threads go on. Never a trap, which would kill the CUDA
    /// context. `exit`.
    #[doc(hidden)]
    pub fn exit_thread() {
        current("exit_thread", |t| t.exit())
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) void f_exit_thread(const symm_kctx&) { asm volatile(\"exit;\"); }\n";
}

// `signal_slot` spells the pad's sizes as literals; keep them in step.
const _: () = assert!(SIGNAL_BLOCKS == 128 && PAD_PEER_GROUP == 8 && PAD_GROUP_SLOTS == 32768);

/// Index of the signal-pad slot through which rank `peer` signals on
/// `channel` from block `block` (see [`crate::layout`]), wrapping: pure
/// arithmetic, `(peer / 8) * PAD_GROUP_SLOTS + (channel * SIGNAL_BLOCKS +
/// block) * 8 + peer % 8`, so 8 peers' slots of one block are adjacent and
/// worlds of up to 8 use the first group alone. The one formula of kernels,
/// GPU and emulator alike; the host's [`crate::layout::signal_slot`] is
/// checked against it for every slot.
#[symm_kernel(device)]
pub fn signal_slot(channel: u32, block: u32, peer: u32) -> u32 {
    let row = channel
        .wrapping_mul(128u32)
        .wrapping_add(block)
        .wrapping_mul(8u32);
    // The first group by itself: the formula of up to 8 ranks, one add
    // (on 2 H200s the LL all-reduce's minimum 0.01 to 0.02 µs below the
    // general form's, bench/NOTES.md v40).
    if peer < 8u32 {
        row.wrapping_add(peer)
    } else {
        (peer / 8u32)
            .wrapping_mul(32768u32)
            .wrapping_add(row.wrapping_add(peer % 8u32))
    }
}

/// One signal from this block to rank `dst` on `channel`: waits until this
/// rank's slot in `dst`'s pad is free (0), then makes it 1 with
/// system-scope release, so everything this thread wrote before is
/// visible to the wait that takes it. Gives up after `timeout_ns`,
/// recording a timeout of kind `kind` (false). `bounded`: a host's
/// operation with its own timeout, which the emulator never takes for a
/// hang. The caller has checked `dst` and `channel` ([`signal_ok`]).
#[symm_kernel(device)]
#[track_caller]
pub fn signal_put<T: Scalar>(
    buf: SymmBuf<T>,
    dst: u32,
    channel: u32,
    timeout_ns: u64,
    kind: u32,
    bounded: bool,
) -> bool {
    let rank = buf.rank();
    let pad = buf.pad(dst);
    let slot = signal_slot(channel, block_idx_x(), rank);
    let start = globaltimer();
    fence(Scope::System);
    let mut done = true;
    while pad.atomic_cas(slot, 0u32, 1u32, RmwOrder::Release, Scope::System) != 0u32 {
        if wait_gives_up(start, timeout_ns, kind, rank, dst, channel) {
            done = false;
            break;
        }
        wait_turn(buf, 1u32, dst, channel, slot, 1u32, bounded);
    }
    wait_done();
    done
}

/// Takes rank `src`'s signal to this block on `channel`: waits until the
/// slot holds it (1), then makes it 0 with system-scope acquire. Gives up
/// as [`signal_put`] does; the caller has checked `src` and `channel`.
#[symm_kernel(device)]
#[track_caller]
pub fn signal_take<T: Scalar>(
    buf: SymmBuf<T>,
    src: u32,
    channel: u32,
    timeout_ns: u64,
    kind: u32,
    bounded: bool,
) -> bool {
    let rank = buf.rank();
    let pad = buf.pad(rank);
    let slot = signal_slot(channel, block_idx_x(), src);
    let start = globaltimer();
    let mut done = true;
    while pad.atomic_cas(slot, 1u32, 0u32, RmwOrder::Acquire, Scope::System) != 1u32 {
        if wait_gives_up(start, timeout_ns, kind, rank, src, channel) {
            done = false;
            break;
        }
        wait_turn(buf, 2u32, src, channel, slot, 1u32, bounded);
    }
    wait_done();
    done
}

/// `buf.signal_flag(dst, channel, value)`: stores `value` in this rank's
/// flag slot of rank `dst`'s pad for this block on `channel`, with
/// system-scope release. No read-modify-write.
#[symm_kernel(device)]
#[track_caller]
pub fn signal_flag<T: Scalar>(buf: SymmBuf<T>, dst: u32, channel: u32, value: u32) {
    if signal_ok(4u32, buf.world_size(), dst, channel) {
        buf.pad(dst).store(
            signal_slot(channel, block_idx_x(), buf.rank()),
            value,
            StoreOrder::Release,
            Scope::System,
        );
    }
}

/// `buf.wait_flag(src, channel, value)`: waits, with system-scope
/// acquire, until rank `src`'s flag slot of this rank's pad for this block
/// on `channel` has reached `value` (a wrapping comparison, so epochs may
/// wrap). One load when it already has; past the kernel's timeout it
/// records a wait's timeout and ends the thread.
#[symm_kernel(device)]
#[track_caller]
pub fn wait_flag<T: Scalar>(buf: SymmBuf<T>, src: u32, channel: u32, value: u32) {
    if signal_ok(3u32, buf.world_size(), src, channel) {
        let rank = buf.rank();
        let pad = buf.pad(rank);
        let slot = signal_slot(channel, block_idx_x(), src);
        // `slot - value` read as signed is negative: not reached yet (the
        // wrapping comparison, in unsigned terms).
        if pad
            .load(slot, LoadOrder::Acquire, Scope::System)
            .wrapping_sub(value)
            >= 0x8000_0000u32
        {
            let start = globaltimer();
            let timeout_ns = kernel_timeout_ns();
            while pad
                .load(slot, LoadOrder::Acquire, Scope::System)
                .wrapping_sub(value)
                >= 0x8000_0000u32
            {
                if wait_gives_up(start, timeout_ns, 2u32, rank, src, channel) {
                    exit_thread();
                }
                wait_turn(buf, 3u32, src, channel, slot, value, false);
            }
            wait_done();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::{slot_index, MAX_DOMAIN_SIZE, SIGNAL_BLOCKS, SIGNAL_CHANNELS};

    /// The kernels' formula and the host's agree on every slot of the pad,
    /// and, wrapping, on arguments past it.
    #[test]
    fn the_kernels_slot_formula_is_the_hosts() {
        for c in 0..SIGNAL_CHANNELS {
            for b in 0..SIGNAL_BLOCKS {
                for p in 0..MAX_DOMAIN_SIZE {
                    let host = crate::layout::signal_slot(c, b, p).expect("in range");
                    assert_eq!(
                        super::signal_slot(c as u32, b as u32, p as u32) as usize,
                        host
                    );
                }
            }
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (c, b, p) = (x as u32, (x >> 32) as u32, (x >> 16) as u32);
            assert_eq!(super::signal_slot(c, b, p), slot_index(c, b, p));
        }
    }
}
