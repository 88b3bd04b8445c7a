//! The calls that the ranks of this process made on each signal channel
//! of their group, as numbered digests, so that ranks whose sequences of
//! calls part fail on the host at once ([`Comm::check_call`]), even where
//! the calls use different kernels that would otherwise wait on each other
//! until the kernel timeout.
//!
//! [`Comm::check_call`]: crate::Comm::check_call

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::layout::{MAX_WORLD_SIZE, SIGNAL_CHANNELS};

/// Calls remembered per rank and channel. A rank whose host runs more than
/// this many calls ahead of a peer's on one channel is not compared with
/// it for those calls (the kernels' own checks still are).
const RING: usize = 64;

/// Per rank and channel: how many calls it made, and the last [`RING`] of
/// them as [`WRITTEN`]` | number << 32 | digest` (the number's low 31
/// bits): a slot no call wrote (zero, as every rank of another process
/// leaves it here) never reads as a call, whatever the number.
pub(crate) struct Ledger {
    counts: Box<[AtomicU32]>,
    slots: Box<[AtomicU64]>,
}

impl Default for Ledger {
    fn default() -> Self {
        let lanes = MAX_WORLD_SIZE * SIGNAL_CHANNELS;
        Ledger {
            counts: (0..lanes).map(|_| AtomicU32::new(0)).collect(),
            slots: (0..lanes * RING).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// The bit every recorded call sets in its slot.
const WRITTEN: u64 = 1 << 63;

/// Two ranks of this process whose calls of the same number on a channel
/// differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parted {
    /// The call's number on the channel (1 for the first).
    pub(crate) number: u32,
    /// The peer whose call of that number has another digest.
    pub(crate) peer: usize,
}

impl Ledger {
    /// Records `rank`'s next call on channel `ch` with `digest`, and
    /// compares it with the call of the same number of every other rank of
    /// `world` that made one (ranks of other processes never do here).
    /// Whichever of two parted ranks records second sees the first's call:
    /// both record before they compare (sequentially consistent).
    pub(crate) fn record(
        &self,
        rank: usize,
        world: usize,
        ch: usize,
        digest: u32,
    ) -> Result<(), Parted> {
        if rank >= MAX_WORLD_SIZE || ch >= SIGNAL_CHANNELS {
            return Ok(());
        }
        let lane = |r: usize| r * SIGNAL_CHANNELS + ch;
        let number = self.counts[lane(rank)]
            .fetch_add(1, Ordering::SeqCst)
            .wrapping_add(1);
        let at = |r: usize| lane(r) * RING + number as usize % RING;
        // The number past its 31 bits wraps on every rank alike.
        let key = WRITTEN | u64::from(number & 0x7FFF_FFFF) << 32;
        let entry = key | u64::from(digest);
        self.slots[at(rank)].store(entry, Ordering::SeqCst);
        for peer in (0..world.min(MAX_WORLD_SIZE)).filter(|&p| p != rank) {
            let theirs = self.slots[at(peer)].load(Ordering::SeqCst);
            if theirs & !0xFFFF_FFFF == key && theirs != entry {
                return Err(Parted { number, peer });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_in_step_pass_and_a_parted_call_is_found_by_the_later_rank() {
        let l = Ledger::default();
        for d in [7, 8, 9] {
            assert_eq!(l.record(0, 2, 3, d), Ok(()));
            assert_eq!(l.record(1, 2, 3, d), Ok(()));
        }
        // Another channel counts apart.
        assert_eq!(l.record(1, 2, 4, 5), Ok(()));
        // Rank 0 makes call 4 with digest 1, rank 1 with digest 2.
        assert_eq!(l.record(0, 2, 3, 1), Ok(()));
        assert_eq!(l.record(1, 2, 3, 2), Err(Parted { number: 4, peer: 0 }));
    }

    #[test]
    fn a_rank_ahead_is_compared_once_its_peer_catches_up() {
        let l = Ledger::default();
        // Rank 0 runs 3 calls ahead; rank 1 then makes the same two and a
        // different third.
        for d in [1, 2, 3] {
            assert_eq!(l.record(0, 3, 0, d), Ok(()));
        }
        assert_eq!(l.record(1, 3, 0, 1), Ok(()));
        assert_eq!(l.record(1, 3, 0, 2), Ok(()));
        assert_eq!(l.record(1, 3, 0, 4), Err(Parted { number: 3, peer: 0 }));
        // A rank of another process (2) never records here: no verdict.
        assert_eq!(l.record(0, 3, 1, 9), Ok(()));
    }

    #[test]
    fn numbers_that_wrap_never_meet_a_rank_of_another_process() {
        let l = Ledger::default();
        // Rank 0 near the counter's end; rank 1 (another process) never
        // records here, so its slots stay zero, which must not read as a
        // call of number 0 (or any other) through the wrap.
        l.counts[0].store(u32::MAX - 2, Ordering::SeqCst);
        for d in 0..6 {
            assert_eq!(l.record(0, 2, 0, d + 1), Ok(()));
        }
        // Two ranks in step through the wrap still compare.
        let l = Ledger::default();
        l.counts[0].store(u32::MAX - 1, Ordering::SeqCst);
        l.counts[SIGNAL_CHANNELS].store(u32::MAX - 1, Ordering::SeqCst);
        for d in [5, 6, 7] {
            assert_eq!(l.record(0, 2, 0, d), Ok(()));
            assert_eq!(l.record(1, 2, 0, d), Ok(()));
        }
        assert_eq!(l.record(0, 2, 0, 8), Ok(()));
        assert_eq!(l.record(1, 2, 0, 9), Err(Parted { number: 2, peer: 0 }));
    }

    #[test]
    fn calls_further_apart_than_the_ring_are_not_compared() {
        let l = Ledger::default();
        for d in 0..RING as u32 + 1 {
            assert_eq!(l.record(0, 2, 0, d), Ok(()));
        }
        // Rank 1's first call finds rank 0's call RING + 1 in its slot,
        // not call 1: no comparison.
        assert_eq!(l.record(1, 2, 0, 12345), Ok(()));
    }
}
