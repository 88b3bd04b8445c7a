//! All-reduce (sum) over symmetric memory, for f32, bf16, f16 and the fp8
//! types f8e4m3 and f8e5m2, with f32 accumulation. [`all_reduce`] picks one of six kernels by world size and
//! message size ([`Path::choose`], from crossovers measured on H200s and
//! H100s and recorded in `bench/NOTES.md`):
//!
//! - [`Path::Ll`]: LL packets, each 4 bytes of data tagged with the call's
//!   epoch and pushed into every peer's staging area; one NVLink one-way
//!   trip and no barrier, at twice the bytes. The small-message path (up
//!   to [`LL_SMALL_BYTES`] on a grid of 128 threads with its own staging).
//! - [`Path::Lamport`]: raw 16-byte pushes into staging that reads as empty
//!   (a reserved NaN) until data lands; one one-way trip at half LL's
//!   bytes. Medium messages.
//! - [`Path::Push`]: raw 16-byte pushes into every peer's staging area,
//!   then one release/acquire flag per block (for comparison: Lamport is
//!   faster up to 4 MiB, and above that neither is picked).
//! - [`Path::LamportTwoShot`]: a two-shot whose reduce-scatter and
//!   all-gather both push like Lamport: no barrier, two one-way trips, and
//!   each rank pushes about 2n instead of (world − 1) × n. Large messages
//!   (to 16 MiB on two ranks, 64 MiB on more).
//! - [`Path::Pull`]: barrier, loads from every peer, barrier; larger
//!   messages on two ranks.
//! - [`Path::TwoShot`]: barrier, each rank loads one chunk from every peer
//!   and pushes its sum to all, barrier; larger messages on more ranks.
//!
//! Every path gives every rank the same bits (a fixed rank order), may be
//! called back-to-back without host synchronisation, and can be captured
//! in a CUDA graph (see [`all_reduce`] for when). The kernels live in
//! `device.rs` (re-exported here).

mod device;
mod elem;
mod identity;
mod launch;

pub use device::*;
pub use elem::AllReduceElem;

use symm::{BoundSlice, Comm, DeviceSlice, LaunchConfig, Result, SymmBuffer, SymmetricMemory};

use crate::shared::checks::{invalid, is_input, overlaps_input};
use crate::shared::grid::{threads_for, vector_blocks};
use identity::{state, Identity};
use launch::launch;

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
const LL_SMALL_GRID: (u32, u32) = (2, 64);
/// Blocks of every push and Lamport two-shot launch, and of the Lamport
/// one-shot on 2 ranks (fixed, like [`LL_BLOCKS`]).
pub const PUSH_BLOCKS: u32 = 128;

/// Threads per block of the Lamport two-shot up to 4 MiB on 3+ ranks.
const LTS_SMALL_THREADS: u32 = 128;

/// Grid (blocks, threads) of every Lamport one-shot launch on 3+ ranks,
/// where it runs up to 128 KiB. Measured (`bench/NOTES.md` v11): 4096
/// threads, one per 16-byte vector at 64 KiB, beat 128 × 512 by 0.2–0.5 µs
/// at 16–128 KiB on 4 GPUs; on 2 GPUs, where it runs to 1 MiB, 128 × 512
/// is as fast to 64 KiB and faster above. Fixed per world size, so every
/// call of a group keeps the per-block epochs in step.
const LAMPORT_MANY_GRID: (u32, u32) = (16, 256);

/// Most elements one staged call may move (keeps every slot index in `u32`).
const MAX_STAGED: usize = 1 << 26;

/// The kernel [`all_reduce`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
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
    /// both push data that marks its own arrival, as [`Path::Lamport`].
    LamportTwoShot,
}

impl Path {
    /// Every path, for tests and benchmarks that try them all.
    pub const ALL: [Path; 6] = [
        Path::Ll,
        Path::Lamport,
        Path::Push,
        Path::Pull,
        Path::TwoShot,
        Path::LamportTwoShot,
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
    /// as regions round up to a power of two), then two-shot.
    pub fn choose(world: usize, bytes: usize) -> Path {
        let (ll, lamport, two_shot, large) = match world {
            0..=2 => (64 << 10, 1 << 20, 16 << 20, Path::Pull),
            3 | 4 => (16 << 10, 128 << 10, 64 << 20, Path::TwoShot),
            _ => (2 << 10, 128 << 10, 64 << 20, Path::TwoShot),
        };
        if bytes <= ll {
            Path::Ll
        } else if bytes <= lamport {
            Path::Lamport
        } else if bytes <= two_shot {
            Path::LamportTwoShot
        } else {
            large
        }
    }

    /// Whether `out` may be exactly this rank's part of the input (in
    /// place): true unless peers may still read this rank's input after this
    /// rank writes its output (the pull kernel). Partial overlaps are never
    /// allowed.
    pub fn allows_alias(self) -> bool {
        self != Path::Pull
    }

    /// Its name in explanations and tables.
    pub const fn name(self) -> &'static str {
        match self {
            Path::Ll => "LL",
            Path::Push => "push",
            Path::Lamport => "Lamport",
            Path::Pull => "pull",
            Path::TwoShot => "two-shot",
            Path::LamportTwoShot => "Lamport two-shot",
        }
    }

    /// [`Path::choose`] for a call whose output is (`in_place`) or is not
    /// exactly its input: the pull path becomes two-shot in place.
    pub fn choose_for(world: usize, bytes: usize, in_place: bool) -> Path {
        match Path::choose(world, bytes) {
            Path::Pull if in_place => Path::TwoShot,
            p => p,
        }
    }

    /// Whether the kernel reads its peers' inputs at their symmetric
    /// addresses while it runs (the barrier kernels), rather than data the
    /// peers pushed into staging.
    pub fn reads_peer_inputs(self) -> bool {
        matches!(self, Path::Pull | Path::TwoShot)
    }
}

/// Whether [`all_reduce`] of `bytes` on `world` ranks, out of place, reads
/// its peers' inputs at their symmetric addresses while it runs: a caller
/// whose ranks may pass inputs of different kinds (symmetric on one rank,
/// staged on another) must then stage them all.
pub fn reads_peer_inputs(world: usize, bytes: usize) -> bool {
    Path::choose_for(world, bytes, false).reads_peer_inputs()
}

/// The grid the barrier kernels use for `n` elements of `T`: one 16-byte
/// vector per thread (measured faster than four: more SMs issue loads),
/// at least one block, at most [`MAX_BLOCKS`]. The same `n` gives the same
/// grid on every rank.
pub fn config<T: AllReduceElem>(n: usize) -> LaunchConfig {
    let threads = threads_for::<T>(THREADS);
    LaunchConfig::linear(vector_blocks::<T>(n as u64, threads, MAX_BLOCKS), threads)
}

/// Sums the first `n` elements of every rank's `input` (a rendezvoused
/// symmetric buffer) into this rank's `out`, on `comm`'s stream. Collective:
/// every rank calls it with the same `n`. Back-to-back calls need no host
/// synchronisation. `out` may be exactly this rank's part of `input` (in
/// place). It may be symm memory of this rank or the user's cudarc memory
/// on this rank's GPU (a `CudaSlice` or `CudaViewMut`, used in cudarc's
/// stream order: see [`DeviceSlice`]).
///
/// CUDA graphs: run the captured sequence once eagerly first. Each kernel
/// family (LL up to 1 KiB, LL above, Lamport, push, Lamport two-shot,
/// two-shot) and element type has its own staging, which its first call
/// (or a larger one) allocates, and allocation cannot happen during
/// capture. Later growth keeps older
/// staging alive, so captured graphs stay valid. A rank's calls share its
/// staging and call counters, so they must be ordered on one stream (a
/// `Comm` from `with_cuda_stream` shares them too; concurrent streams need
/// separate groups).
///
/// Signal channels: the first call reserves [`CHANNELS`] adjacent ones of
/// the group ([`Channel::reserve`](symm::signal::Channel::reserve), from the top of the pad), which every
/// later call reuses on whatever buffers it is given; the application's
/// [`Channel::request`](symm::signal::Channel::request)s never get them.
///
/// Errors (never a hang or a wrong result) for: `n` larger than the buffer
/// or than `out`, `out` of another rank, device or CUDA context (or cudarc
/// memory on an emulated rank), an element type other than the buffer's, `out` not
/// 16-byte aligned or overlapping `input` other than exactly, a world
/// size above 8, no free channels left to reserve, and a rank where a
/// kernel already failed ([`Comm::kernel_failed`]).
pub fn all_reduce<T: AllReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    reduce(None, comm, input, out, n)
}

/// [`all_reduce`] on a chosen kernel, for tuning and comparison. Errors if
/// `out` is the input on a path that does not allow it
/// ([`Path::allows_alias`]), or overlaps it only in part.
pub fn all_reduce_with<T: AllReduceElem>(
    path: Path,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    reduce(Some(path), comm, input, out, n)
}

/// Checks the arguments once, picks the path unless the caller did, and
/// launches.
fn reduce<T: AllReduceElem>(
    path: Option<Path>,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    // First, before any check that could fail on one rank alone, so every
    // rank reserves at the same point of its sequence of requests.
    let state = state(comm)?;
    let ch = state.ch;
    if comm.kernel_failed() {
        return Err(invalid(
            comm,
            "a kernel on this rank failed earlier (see the error it reported); the \
             all-reduce's staging may hold data that arrived after a wait gave up, and its \
             call counters may be out of step with the peers', so it no longer runs on this \
             group; make a new group"
                .into(),
        ));
    }
    // Bound to the rank's stream once, here (cudarc memory waits there for
    // its earlier uses, and records this call's as `out` drops, after the
    // launch); the launch takes the bound slice as it is.
    let mut out = comm.bind_mut("out", out)?;
    let overlap = overlap_of(input, &out);
    let chosen = path.unwrap_or_else(|| {
        let bytes = n * std::mem::size_of::<T>();
        Path::choose_for(comm.world_size(), bytes, overlap == Overlap::Exact)
    });
    let local = check(comm, input, &out, n).and_then(|()| match overlap {
        Overlap::Partial => Err(invalid(
            comm,
            "all_reduce's output overlaps its symmetric input without starting where \
             it starts; pass either the input itself (in place) or separate memory"
                .into(),
        )),
        Overlap::Exact if !chosen.allows_alias() => Err(invalid(
            comm,
            format!(
                "the {chosen:?} kernel cannot reduce in place (peers still read this rank's \
                 input after it writes); use all_reduce or all_reduce_in_place"
            ),
        )),
        _ => Ok(()),
    });
    // The call's identity (which buffer, where, how many elements, which
    // kernel): ranks that are in different calls fail here, all alike,
    // instead of summing each other's wrong data.
    let identity = Identity {
        dtype: T::DTYPE,
        n,
        path: chosen,
        alloc: input.alloc_id(),
        offset: input.buffer_offset(),
        in_place: overlap == Overlap::Exact,
    };
    state.agree(comm, identity, local.as_ref().err())?;
    local?;
    // Every call, empty ones too (a rank with nothing to sum where its
    // peers launch would leave them waiting).
    comm.check_call(ch, identity.sig(), || format!("all_reduce of {identity}"))?;
    if n == 0 {
        return Ok(());
    }
    launch(chosen, comm, input, &mut out, n, ch, identity.sig())
}

/// In-place all-reduce: the sum of every rank's first `n` elements of
/// `buf` replaces them on every rank. Graph-safe, like [`all_reduce`]; the
/// path is [`all_reduce`]'s, or two-shot where that one would pull.
pub fn all_reduce_in_place<T: AllReduceElem>(
    comm: &Comm,
    buf: &SymmBuffer<T>,
    n: usize,
) -> Result<()> {
    // The whole buffer as the output is exactly the input: `all_reduce`
    // sees the alias, checks `n`, and picks its in-place path.
    let smem = buf.rendezvous()?;
    all_reduce(comm, &smem, &mut buf.slice(..)?, n)
}

/// How `out` lies against this rank's buffer of `input`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overlap {
    None,
    /// Both start at the same address: in place.
    Exact,
    /// Any other overlap: some thread would overwrite input that another
    /// still has to send.
    Partial,
}

fn overlap_of<T: AllReduceElem>(input: &SymmetricMemory, out: &BoundSlice<'_, T>) -> Overlap {
    if is_input(input, out) {
        Overlap::Exact
    } else if overlaps_input(input, out) {
        Overlap::Partial
    } else {
        Overlap::None
    }
}

fn check<T: AllReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &BoundSlice<'_, T>,
    n: usize,
) -> Result<()> {
    let cap = input.buffer_size() / std::mem::size_of::<T>();
    if n > cap || n > out.len() {
        return Err(invalid(
            comm,
            format!(
                "all_reduce of {n} elements, but the input holds {cap} and the output {}",
                out.len()
            ),
        ));
    }
    if n > u32::MAX as usize {
        return Err(invalid(
            comm,
            format!("all_reduce of {n} elements is more than 2^32 - 1"),
        ));
    }
    if !out.device_ptr().is_multiple_of(16) {
        return Err(invalid(
            comm,
            format!(
                "all_reduce's output at {:#x} is not 16-byte aligned",
                out.device_ptr()
            ),
        ));
    }
    Ok(())
}
