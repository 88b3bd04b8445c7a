//! The calls that the ranks of a group made on each signal channel, as
//! numbered digests, so that ranks whose sequences of calls part fail on
//! the host at once ([`Comm::check_call`]), even where the calls use
//! different kernels that would otherwise wait on each other until the
//! kernel timeout. Ranks that are threads of one process share a ledger on
//! the heap; a group whose ranks span processes (all on one host, as
//! symmetric memory is) shares one in a memfd that every process maps
//! ([`Ledger::create_shared`], [`Ledger::open_shared`]).
//!
//! [`Comm::check_call`]: crate::Comm::check_call

use std::num::NonZeroUsize;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::layout::{MAX_DOMAIN_SIZE, SIGNAL_CHANNELS};

/// Calls remembered per rank and channel. A rank whose host runs more than
/// this many calls ahead of a peer's on one channel is not compared with
/// it for those calls (the kernels' own checks still are).
const RING: usize = 64;

/// One count per rank and channel: a domain's ranks (a group's own
/// touch only their lanes' pages).
const LANES: usize = MAX_DOMAIN_SIZE * SIGNAL_CHANNELS;

/// The ledger's words: [`LANES`] counts (how many calls each rank made on
/// each channel, of which the low 32 bits number them), then [`RING`] slots
/// per lane holding the last calls as [`WRITTEN`]` | number << 32 | digest`
/// (the number's low 31 bits): a slot that no call wrote (zero) never reads
/// as a call, whatever the number.
const WORDS: usize = LANES + LANES * RING;

/// Where the words live.
enum Backing {
    /// This process's ranks only.
    Heap(Box<[AtomicU64]>),
    /// A shared mapping of a memfd of [`WORDS`] words, which the ranks of
    /// every process of the group map.
    Mapped(NonNull<AtomicU64>),
}

// SAFETY: the mapping is only ever read and written through atomics, and
// stays mapped until the ledger drops; a raw pointer is what keeps the
// type from being Send and Sync on its own.
unsafe impl Send for Backing {}
// SAFETY: as for Send: every access is atomic.
unsafe impl Sync for Backing {}

/// A group's record of calls ([`Ledger::record`]).
pub(crate) struct Ledger {
    backing: Backing,
}

// A `u64` array reads as `AtomicU64`s only where the two align alike.
const _: () = assert!(std::mem::align_of::<AtomicU64>() == std::mem::align_of::<u64>());

impl Default for Ledger {
    fn default() -> Self {
        // Zeroed by the allocator, whose pages of this size are mapped on
        // first touch: a group touches only its own ranks' lanes, not the
        // whole 72 ranks' 1.2 MB.
        let zeros: Box<[u64]> = vec![0u64; WORDS].into_boxed_slice();
        // SAFETY: `AtomicU64` has the size and bit validity of `u64`, and
        // (checked above) its alignment, so the allocation holds WORDS
        // valid atomics, and is freed with the same layout.
        let words = unsafe { Box::from_raw(Box::into_raw(zeros) as *mut [AtomicU64]) };
        Ledger {
            backing: Backing::Heap(words),
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        if let Backing::Mapped(p) = self.backing {
            // SAFETY: `p` is the start of a mapping of `BYTES` bytes that
            // this ledger made and nothing else unmaps; no reference into
            // it outlives `&self`.
            if let Err(e) = unsafe { nix::sys::mman::munmap(p.cast(), BYTES) } {
                tracing::warn!("symm: could not unmap a call ledger: {e}");
            }
        }
    }
}

/// The size of a shared ledger's file and mapping.
const BYTES: usize = WORDS * std::mem::size_of::<AtomicU64>();

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
    /// A ledger in a fresh memfd, zeroed, mapped here, and the file to
    /// hand to the group's other processes ([`open_shared`](Self::open_shared)).
    pub(crate) fn create_shared() -> std::io::Result<(Ledger, OwnedFd)> {
        use nix::fcntl::{fcntl, FcntlArg, SealFlag};
        use nix::sys::memfd::{memfd_create, MFdFlags};
        let fd = memfd_create(
            c"symm-call-ledger",
            MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
        )?;
        let file = std::fs::File::from(fd);
        // A memfd grows zero-filled: every count and slot starts at zero.
        file.set_len(BYTES as u64)?;
        // Sealed at that size: a process that maps it can never have it
        // shrink under its mapping (a SIGBUS), whoever else holds the file.
        fcntl(
            &file,
            FcntlArg::F_ADD_SEALS(
                SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
            ),
        )?;
        let fd = OwnedFd::from(file);
        let ledger = Ledger::open_shared(&fd)?;
        Ok((ledger, fd))
    }

    /// The shared ledger in `fd` (made by [`create_shared`](Self::create_shared)
    /// in some process of the group), mapped here. Refused unless the file
    /// is sealed at a ledger's size.
    pub(crate) fn open_shared(fd: &OwnedFd) -> std::io::Result<Ledger> {
        use nix::fcntl::{fcntl, FcntlArg, SealFlag};
        let sealed = SealFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GET_SEALS)?)
            .contains(SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW);
        let len = std::fs::File::from(fd.try_clone()?).metadata()?.len();
        if !sealed || len != BYTES as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "not a call ledger: {len} bytes{} (a ledger is {BYTES}, sealed; another \
                     symm version?)",
                    if sealed { "" } else { ", not sealed" }
                ),
            ));
        }
        use nix::sys::mman::{mmap, MapFlags, ProtFlags};
        // SAFETY: a fresh shared mapping of the whole file at an address the
        // kernel picks: it aliases no Rust object. Its words are only
        // accessed as atomics (any bits are a valid AtomicU64), and it is
        // unmapped once, when the ledger drops.
        let p = unsafe {
            mmap(
                None,
                NonZeroUsize::new(BYTES).expect("a ledger has words"),
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd,
                0,
            )
        }?;
        Ok(Ledger {
            backing: Backing::Mapped(p.cast()),
        })
    }

    /// Whether the ledger is shared with other processes.
    #[cfg(test)]
    fn is_shared(&self) -> bool {
        matches!(self.backing, Backing::Mapped(_))
    }

    fn words(&self) -> &[AtomicU64] {
        match &self.backing {
            Backing::Heap(w) => w,
            // SAFETY: the mapping holds WORDS page-aligned (so aligned)
            // words, mapped as long as `self` lives; AtomicU64 has the
            // layout of a u64 and allows shared mutation.
            Backing::Mapped(p) => unsafe { std::slice::from_raw_parts(p.as_ptr(), WORDS) },
        }
    }

    /// Records `rank`'s next call on channel `ch` with `digest`, and
    /// compares it with the call of the same number of every other rank of
    /// `world` that made one (a rank of another process records here only
    /// in a shared ledger).
    /// Whichever of two parted ranks records second sees the first's call:
    /// both record before they compare (sequentially consistent).
    pub(crate) fn record(
        &self,
        rank: usize,
        world: usize,
        ch: usize,
        digest: u32,
    ) -> Result<(), Parted> {
        if rank >= MAX_DOMAIN_SIZE || ch >= SIGNAL_CHANNELS {
            return Ok(());
        }
        let words = self.words();
        let (counts, slots) = words.split_at(LANES);
        let lane = |r: usize| r * SIGNAL_CHANNELS + ch;
        // The low 32 bits of the count, as every rank numbers its calls.
        let number = (counts[lane(rank)].fetch_add(1, Ordering::SeqCst) as u32).wrapping_add(1);
        let at = |r: usize| lane(r) * RING + number as usize % RING;
        // The number past its 31 bits wraps on every rank alike.
        let key = WRITTEN | u64::from(number & 0x7FFF_FFFF) << 32;
        let entry = key | u64::from(digest);
        slots[at(rank)].store(entry, Ordering::SeqCst);
        for peer in (0..world.min(MAX_DOMAIN_SIZE)).filter(|&p| p != rank) {
            let theirs = slots[at(peer)].load(Ordering::SeqCst);
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
        // Rank 0 near the counter's end; rank 1 (another process, with
        // this ledger not shared) never records here, so its slots stay zero, which must not read as a
        // call of number 0 (or any other) through the wrap.
        l.words()[0].store(u64::from(u32::MAX - 2), Ordering::SeqCst);
        for d in 0..6 {
            assert_eq!(l.record(0, 2, 0, d + 1), Ok(()));
        }
        // Two ranks in step through the wrap still compare.
        let l = Ledger::default();
        l.words()[0].store(u64::from(u32::MAX - 1), Ordering::SeqCst);
        l.words()[SIGNAL_CHANNELS].store(u64::from(u32::MAX - 1), Ordering::SeqCst);
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

    /// Two mappings of one shared ledger (as two processes hold it) see
    /// each other's calls: a parted call is found through either.
    #[test]
    fn a_shared_ledger_compares_calls_across_its_mappings() {
        let (a, fd) = Ledger::create_shared().expect("memfd ledger");
        let b = Ledger::open_shared(&fd).expect("second mapping");
        assert!(a.is_shared() && b.is_shared());
        for d in [3, 4] {
            assert_eq!(a.record(0, 2, 5, d), Ok(()));
            assert_eq!(b.record(1, 2, 5, d), Ok(()));
        }
        assert_eq!(b.record(1, 2, 5, 9), Ok(()));
        assert_eq!(a.record(0, 2, 5, 8), Err(Parted { number: 3, peer: 1 }));
        // Its size is sealed: no holder of the file can shrink it under
        // the mappings.
        let file = std::fs::File::from(fd.try_clone().unwrap());
        assert!(file.set_len(64).is_err());
        // An unsealed file of a ledger's size, or a sealed one of another
        // size, is refused.
        let unsealed =
            nix::sys::memfd::memfd_create(c"x", nix::sys::memfd::MFdFlags::empty()).unwrap();
        let file = std::fs::File::from(unsealed.try_clone().unwrap());
        file.set_len(BYTES as u64).unwrap();
        assert!(Ledger::open_shared(&unsealed).is_err());
        use nix::fcntl::{fcntl, FcntlArg, SealFlag};
        let small =
            nix::sys::memfd::memfd_create(c"y", nix::sys::memfd::MFdFlags::MFD_ALLOW_SEALING)
                .unwrap();
        let file = std::fs::File::from(small.try_clone().unwrap());
        file.set_len(64).unwrap();
        fcntl(
            &small,
            FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW),
        )
        .unwrap();
        assert!(Ledger::open_shared(&small).is_err());
    }
}
