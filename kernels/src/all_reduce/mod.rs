//! All-reduce (sum) over symmetric memory, for f32, bf16, f16 and the fp8
//! types f8e4m3 and f8e5m2, with f32 accumulation. [`all_reduce`] picks one of six kernels by world size and
//! message size ([`AllReducePath::choose`], from crossovers measured on H200s and
//! H100s and recorded in `bench/NOTES.md`):
//!
//! - [`AllReducePath::Ll`]: LL packets, each 4 bytes of data tagged with the call's
//!   epoch and pushed into every peer's staging area; one NVLink one-way
//!   trip and no barrier, at twice the bytes. The small-message path (up
//!   to [`LL_SMALL_BYTES`] on a grid of 128 threads with its own staging).
//! - [`AllReducePath::Lamport`]: raw 16-byte pushes into staging that reads as empty
//!   (a reserved NaN) until data lands; one one-way trip at half LL's
//!   bytes. Medium messages.
//! - [`AllReducePath::Push`]: raw 16-byte pushes into every peer's staging area,
//!   then one release/acquire flag per block (for comparison: Lamport is
//!   faster up to 4 MiB, and above that neither is picked).
//! - [`AllReducePath::LamportTwoShot`]: a two-shot whose reduce-scatter and
//!   all-gather both push like Lamport: no barrier, two one-way trips, and
//!   each rank pushes about 2n instead of (world − 1) × n. Large messages
//!   (to 16 MiB on two ranks, 64 MiB on more).
//! - [`AllReducePath::Pull`]: barrier, loads from every peer, barrier; larger
//!   messages on two ranks.
//! - [`AllReducePath::TwoShot`]: barrier, each rank loads one chunk from every peer
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
mod plan;
mod staging;

pub use device::*;
pub use elem::AllReduceElem;
pub use plan::{
    config, reads_peer_inputs, AllReducePath, LL_BLOCKS, LL_SMALL_BYTES, MAX_BLOCKS, PUSH_BLOCKS,
    THREADS,
};

use symm::{BoundSlice, Comm, DeviceSlice, Result, SymmBuffer, SymmetricMemory};

use crate::shared::checks::{
    capacity, in_place_advice, invalid, is_input, overlaps_input, unsupported, InPlace,
};
use identity::{state, Identity};
use launch::launch;
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
/// 16-byte aligned or overlapping `input` other than exactly, a path
/// unrolled for 8 ranks forced on a group of more, no free channels left
/// to reserve, and a rank where a
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
/// ([`AllReducePath::allows_alias`]), or overlaps it only in part.
pub fn all_reduce_with<T: AllReduceElem>(
    path: AllReducePath,
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
    path: Option<AllReducePath>,
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
        AllReducePath::choose_for(comm.world_size(), bytes, overlap == Overlap::Exact)
    });
    let local = check(comm, input, &out, n).and_then(|()| match overlap {
        Overlap::Partial => Err(invalid(
            comm,
            format!(
                "all_reduce's output overlaps its symmetric input without starting where \
                 it starts ({}; otherwise give the output memory of its own)",
                in_place_advice(InPlace::SameBuffer(Some(
                    "symm::kernels::all_reduce::all_reduce_in_place"
                )))
            ),
        )),
        _ if !chosen.general() && comm.world_size() > symm::layout::MAX_WORLD_SIZE => {
            Err(unsupported(
                comm,
                format!(
                    "the {chosen:?} kernel is unrolled for at most {} ranks, and this group has \
                     {} (one NVLink domain of more); the pull and two-shot kernels run there",
                    symm::layout::MAX_WORLD_SIZE,
                    comm.world_size()
                ),
            ))
        }
        Overlap::Exact if !chosen.allows_alias() => Err(unsupported(
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
    // Hashed once: the ledger and the kernels compare the same digest.
    let sig = identity.sig();
    // Every call, empty ones too (a rank with nothing to sum where its
    // peers launch would leave them waiting).
    comm.check_call(ch, sig, || format!("all_reduce of {identity}"))?;
    if n == 0 {
        return Ok(());
    }
    launch(chosen, comm, input, &mut out, n, ch, sig)
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
        return Err(capacity(
            comm,
            format!("all_reduce of {n} elements is more than the 2^32 - 1 its kernels index"),
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
    // The same on every rank: a view lies at the same offset everywhere.
    if !crate::shared::checks::vector_aligned(input) {
        return Err(invalid(
            comm,
            "all_reduce's input starts off 16 bytes (a view at such an offset): \
             symm::kernels::collectives::sum, all_reduce_op or the functional all_reduce \
             take any offset"
                .to_string(),
        ));
    }
    Ok(())
}
