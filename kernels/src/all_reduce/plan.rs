//! What the all-reduce runs: its [`AllReducePath`]s, chosen by the measured
//! crossovers, and the grid shapes each was measured with.

use symm::LaunchConfig;

use crate::shared::grid::{threads_for, vector_blocks};

/// Threads per block of every all-reduce kernel.
pub const THREADS: u32 = 512;
/// Largest grid (the signal pad has slots for 128 blocks).
pub const MAX_BLOCKS: u32 = 128;
/// Blocks of every LL launch above [`LL_SMALL_BYTES`] (a fixed grid keeps
/// the per-block epochs in step).
pub const LL_BLOCKS: u32 = 64;

/// Messages up to this size take the LL kernel on a grid of 2 blocks of 64
/// threads, with staging (and per-block epochs) of their own, since the
/// grid differs.
pub const LL_SMALL_BYTES: usize = 1 << 10;

/// Grid (blocks, threads) of LL launches up to [`LL_SMALL_BYTES`]: one
/// thread per packet pair at 1 KiB. Measured (`bench/NOTES.md` v12): 16 B
/// to 1 KiB take 0.2–0.4 µs less on 2 GPUs and ~0.1 less on 4 than on
/// 64 × 512, where every idle block still reads and commits its epoch;
/// from 2 KiB the large grid is faster.
pub(super) const LL_SMALL_GRID: (u32, u32) = (2, 64);
/// Blocks of every push and Lamport two-shot launch, and of the Lamport
/// one-shot on 2 ranks (fixed, like [`LL_BLOCKS`]).
pub const PUSH_BLOCKS: u32 = 128;

/// Threads per block of the Lamport two-shot up to 4 MiB on 3+ ranks.
pub(super) const LTS_SMALL_THREADS: u32 = 128;

/// Grid (blocks, threads) of every Lamport one-shot launch on 3+ ranks,
/// where it runs up to 128 KiB. Measured (`bench/NOTES.md` v11): 4096
/// threads, one per 16-byte vector at 64 KiB, beat 128 × 512 by 0.2–0.5 µs
/// at 16–128 KiB on 4 GPUs; on 2 GPUs, where it runs to 1 MiB, 128 × 512
/// is as fast to 64 KiB and faster above. Fixed per world size, so every
/// call of a group keeps the per-block epochs in step.
pub(super) const LAMPORT_MANY_GRID: (u32, u32) = (16, 256);

/// Most elements one staged call may move (keeps every slot index in `u32`).
pub(super) const MAX_STAGED: usize = 1 << 26;

/// The kernel [`all_reduce`](super::all_reduce) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllReducePath {
    /// LL packets: one NVLink one-way trip, twice the bytes.
    Ll,
    /// Raw pushes into peers' staging, then a flag per block.
    Push,
    /// Raw pushes into staging that reads as empty until data lands: one
    /// one-way trip like LL at half its bytes, and no flags.
    Lamport,
    /// Barrier, pull from every peer, barrier: reads `world × n`.
    Pull,
    /// Barrier, pull one chunk and push its sum, barrier.
    TwoShot,
    /// Two-shot without barriers: the reduce-scatter and the all-gather
    /// both push data that marks its own arrival, as [`AllReducePath::Lamport`].
    LamportTwoShot,
}

impl AllReducePath {
    /// Every path, for tests and benchmarks that try them all.
    pub const ALL: [AllReducePath; 6] = [
        AllReducePath::Ll,
        AllReducePath::Lamport,
        AllReducePath::Push,
        AllReducePath::Pull,
        AllReducePath::TwoShot,
        AllReducePath::LamportTwoShot,
    ];

    /// The fastest path measured for `bytes` on `world` ranks
    /// (`bench/NOTES.md`: H200, v11; 4 H100s, v23). Two ranks: LL to
    /// 64 KiB, Lamport to 1 MiB, Lamport two-shot to 16 MiB, then pull (a
    /// 2-rank pull reads only 2n). Three and four: LL to 16 KiB (on 4 H100s
    /// LL beat Lamport there by 0.1–0.45 µs, where v11 had Lamport ahead on
    /// H200s: Lamport's times rose since, and whether the machine or the
    /// code did that is not yet known; 3 ranks follow 4, unmeasured), then
    /// as more. More: LL to 2 KiB, Lamport to 128 KiB, Lamport two-shot to
    /// 64 MiB (the largest size measured; its staging takes 4n to 8n bytes,
    /// as regions round up to a power of two), then two-shot. Past 8 ranks
    /// (a multi-node NVLink domain) only the pull kernels are general
    /// ([`AllReducePath::general`]): pull, two-shot in place.
    pub fn choose(world: usize, bytes: usize) -> AllReducePath {
        if world > symm::layout::MAX_WORLD_SIZE {
            return AllReducePath::Pull;
        }
        let (ll, lamport, two_shot, large) = match world {
            0..=2 => (64 << 10, 1 << 20, 16 << 20, AllReducePath::Pull),
            3 | 4 => (16 << 10, 128 << 10, 64 << 20, AllReducePath::TwoShot),
            _ => (2 << 10, 128 << 10, 64 << 20, AllReducePath::TwoShot),
        };
        if bytes <= ll {
            AllReducePath::Ll
        } else if bytes <= lamport {
            AllReducePath::Lamport
        } else if bytes <= two_shot {
            AllReducePath::LamportTwoShot
        } else {
            large
        }
    }

    /// Whether the kernel runs on any world (it reads its peers in groups
    /// of 8), rather than at most 8 ranks, which the LL, push and Lamport
    /// kernels unroll their staging and packets for.
    pub fn general(self) -> bool {
        self.reads_peer_inputs()
    }

    /// Whether `out` may be exactly this rank's part of the input (in
    /// place): true unless peers may still read this rank's input after this
    /// rank writes its output (the pull kernel). Partial overlaps are never
    /// allowed.
    pub fn allows_alias(self) -> bool {
        self != AllReducePath::Pull
    }

    /// Its name in explanations and tables.
    pub const fn name(self) -> &'static str {
        match self {
            AllReducePath::Ll => "LL",
            AllReducePath::Push => "push",
            AllReducePath::Lamport => "Lamport",
            AllReducePath::Pull => "pull",
            AllReducePath::TwoShot => "two-shot",
            AllReducePath::LamportTwoShot => "Lamport two-shot",
        }
    }

    /// [`AllReducePath::choose`] for a call whose output is (`in_place`) or is not
    /// exactly its input: the pull path becomes two-shot in place.
    pub fn choose_for(world: usize, bytes: usize, in_place: bool) -> AllReducePath {
        match AllReducePath::choose(world, bytes) {
            AllReducePath::Pull if in_place => AllReducePath::TwoShot,
            p => p,
        }
    }

    /// Whether the kernel reads its peers' inputs at their symmetric
    /// addresses while it runs (the barrier kernels), rather than data the
    /// peers pushed into staging.
    pub fn reads_peer_inputs(self) -> bool {
        matches!(self, AllReducePath::Pull | AllReducePath::TwoShot)
    }
}

/// Whether [`all_reduce`](super::all_reduce) of `bytes` on `world` ranks, out of place, reads
/// its peers' inputs at their symmetric addresses while it runs: a caller
/// whose ranks may pass inputs of different kinds (symmetric on one rank,
/// staged on another) must then stage them all.
pub fn reads_peer_inputs(world: usize, bytes: usize) -> bool {
    AllReducePath::choose_for(world, bytes, false).reads_peer_inputs()
}

/// The grid the barrier kernels use for `n` elements of `T`: one 16-byte
/// vector per thread (measured faster than four: more SMs issue loads),
/// at least one block, at most [`MAX_BLOCKS`]. The same `n` gives the same
/// grid on every rank.
pub fn config<T>(n: usize) -> LaunchConfig {
    let threads = threads_for::<T>(THREADS);
    LaunchConfig::linear(vector_blocks::<T>(n as u64, threads, MAX_BLOCKS), threads)
}
