//! The one skeleton of every collective's host call, and what it agrees
//! on: the call's typed [`Key`].
//!
//! A call goes channel → path → output bound to the stream → this rank's
//! checks → agreement across ranks (the store on a new key, then the
//! ledger of calls) → nothing more if empty; the caller then launches the
//! LL form ([`run_ll`](super::ll::run_ll)) or the pull kernel on [`grid`].

use std::fmt;

use symm::{BoundSlice, Comm, DType, DeviceSlice, LaunchConfig, Result, SymmetricMemory};

use super::elem::{Ch, CopyElem, ReduceOp};
use super::path::{path_for, CollectivePath};
use super::{CHANNEL_OWNER, MAX_BLOCKS, THREADS};
use crate::shared::agree::{agree, Problem};
use crate::shared::checks::usable;
use crate::shared::grid::{emulated_at_most, fit_blocks, threads_for, vector_blocks, with_pdl};
use crate::shared::key::{call_digest, CallKey};
use crate::shared::staging::reserved_channels;

/// What kind of collective a call is, with the sizes, op and root that
/// every rank must pass alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    AllGather {
        n: usize,
    },
    AllGatherInPlace {
        n: usize,
    },
    Broadcast {
        n: usize,
        root: usize,
    },
    /// Its own kind: where it scatters and all-gathers, the parts go
    /// straight into every rank's buffer, so ranks must not mix it with
    /// the broadcast into another output.
    BroadcastInPlace {
        n: usize,
        root: usize,
    },
    ReduceScatter {
        n: usize,
        op: ReduceOp,
    },
    AllToAll {
        m: usize,
    },
    AllToAllSingle,
    AllToAllV,
    AllReduce {
        n: usize,
        op: ReduceOp,
    },
    /// `ranges`: a digest of the tensors' ranges.
    AllGatherCoalesced {
        tensors: usize,
        ranges: u64,
    },
    AllReduceCoalesced {
        tensors: usize,
        ranges: u64,
        op: ReduceOp,
    },
    Gather {
        n: usize,
        root: usize,
    },
    Scatter {
        n: usize,
        root: usize,
    },
    Reduce {
        n: usize,
        op: ReduceOp,
        root: usize,
    },
}

impl Kind {
    /// Whether the call has a copy-engine form ([`CollectivePath::CopyEngine`]).
    fn has_copy_engine(self) -> bool {
        matches!(self, Kind::AllGather { .. } | Kind::AllToAll { .. })
    }
}

/// One collective call as the ranks agree on it: its kind, element type
/// and, for a call with an LL form, its path (`None` otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Key {
    kind: Kind,
    dtype: DType,
    path: Option<CollectivePath>,
}

impl CallKey for Key {
    const FAMILY: &'static str = "symm_kernels::collectives";

    fn name(&self) -> &'static str {
        match self.kind {
            Kind::AllGather { .. } => "all_gather",
            Kind::AllGatherInPlace { .. } => "all_gather_in_place",
            Kind::Broadcast { .. } => "broadcast",
            Kind::BroadcastInPlace { .. } => "broadcast_in_place",
            Kind::ReduceScatter { .. } => "reduce_scatter",
            Kind::AllToAll { .. } => "all_to_all",
            Kind::AllToAllSingle => "all_to_all_single",
            Kind::AllToAllV => "all_to_all_v",
            Kind::AllReduce { .. } => "all_reduce_op",
            Kind::AllGatherCoalesced { .. } => "all_gather_coalesced",
            Kind::AllReduceCoalesced { .. } => "all_reduce_coalesced",
            Kind::Gather { .. } => "gather",
            Kind::Scatter { .. } => "scatter",
            Kind::Reduce { .. } => "reduce",
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, ty) = (self.name(), self.dtype);
        // The all-reduce by sum has no path of its own here: it runs the
        // built-in all-reduce, which chooses its kernel.
        let path = self.path.map_or("its own dispatch", CollectivePath::name);
        match self.kind {
            Kind::AllGather { n } | Kind::AllGatherInPlace { n } => {
                write!(f, "{name} of {n} elements of {ty} ({path})")
            }
            Kind::Gather { n, root } => {
                write!(f, "{name} of {n} elements of {ty} per rank to root {root}")
            }
            Kind::Scatter { n, root } => {
                write!(
                    f,
                    "{name} of {n} elements of {ty} per rank from root {root}"
                )
            }
            Kind::Reduce { n, op, root } => {
                write!(f, "{name} of {n} elements of {ty} by {op:?} to root {root}")
            }
            Kind::Broadcast { n, root } | Kind::BroadcastInPlace { n, root } => {
                write!(
                    f,
                    "{name} of {n} elements of {ty} from root {root} ({path})"
                )
            }
            Kind::ReduceScatter { n, op } => {
                write!(f, "{name} of {n} elements of {ty} by {op:?} ({path})")
            }
            Kind::AllReduce { n, op } => {
                write!(f, "all_reduce of {n} elements of {ty} by {op:?} ({path})")
            }
            Kind::AllToAll { m } => {
                write!(f, "{name} of {m} elements per peer of {ty} ({path})")
            }
            Kind::AllToAllSingle | Kind::AllToAllV => write!(f, "{name} of {ty}"),
            Kind::AllGatherCoalesced { tensors, ranges } => write!(
                f,
                "{name} of {tensors} tensors of {ty} (ranges digest {ranges:#x})"
            ),
            Kind::AllReduceCoalesced {
                tensors,
                ranges,
                op,
            } => write!(
                f,
                "{name} of {tensors} tensors of {ty} by {op:?} (ranges digest {ranges:#x})"
            ),
        }
    }
}

/// One call, as the skeleton takes it.
pub(super) struct Call {
    pub kind: Kind,
    /// The elements sent to each peer, which choose the path, for a call
    /// with an LL form; `None` for a call that always pulls (or, for the
    /// all-reduce by sum, dispatches on its own).
    pub ll: Option<usize>,
    /// Whether the call moves nothing (it still agrees, so that every rank
    /// takes part in every call).
    pub empty: bool,
    /// The path its caller named (the `*_with` forms), for a call with an
    /// LL form; `None`: forced or by size.
    pub path: Option<CollectivePath>,
}

/// An agreed call, ready to launch.
pub(super) struct Ready<'o, T: symm::Element> {
    /// [`CollectivePath::Pull`] for a call with no LL form.
    pub path: CollectivePath,
    pub out: BoundSlice<'o, T>,
    pub ch: Ch,
}

/// The skeleton every collective's host function runs before its launch:
/// the collectives' channel, the call's path, `out` bound to the rank's
/// stream (as `name`), this rank's checks (its binding, a failed kernel
/// before, then `check`), then agreement on the call's [`Key`] across
/// ranks with every rank's problem, and the ledger of calls (the key's
/// digest with the input's identity, which the kernels compare too).
/// `Ok(None)` for an empty call, after all of that.
pub(super) fn begin<'o, T: CopyElem>(
    comm: &'o Comm,
    input: &SymmetricMemory,
    (name, out): (&'static str, &'o mut (impl DeviceSlice<T> + ?Sized)),
    call: Call,
    check: impl FnOnce(&BoundSlice<'_, T>) -> std::result::Result<(), Problem>,
) -> Result<Option<Ready<'o, T>>> {
    // First, before any check that could fail on one rank alone.
    let index = channel(comm)?;
    let (path, path_problem) = match call.ll {
        Some(per_peer) => path_for::<T>(comm, per_peer, call.path, call.kind.has_copy_engine())?,
        None => (CollectivePath::Pull, None),
    };
    let bound = comm.bind_mut(name, out);
    let problem = match &bound {
        Err(e) => Some(Problem::from(e)),
        Ok(out) => usable(comm).and_then(|()| check(out)).err(),
    }
    .or(path_problem.map(Problem::from));
    let key = Key {
        kind: call.kind,
        dtype: T::DTYPE,
        path: call.ll.map(|_| path),
    };
    let key_hash = agree(comm, &key, problem)?;
    let ch = Ch {
        index,
        sig: call_digest(key_hash, input),
    };
    comm.check_call(ch.index, ch.sig, || {
        format!(
            "{key}, from allocation #{} at byte {}",
            input.alloc_id(),
            input.buffer_offset()
        )
    })?;
    let out = bound?;
    if call.empty {
        return Ok(None);
    }
    Ok(Some(Ready { path, out, ch }))
}

/// The collectives' three adjacent channels (the pull kernels' counters
/// and barriers on the first, their calls' digests on the second, the LL
/// calls' counters on the third), reserved on the first call and
/// remembered in the rank's extensions.
pub(super) fn channel(comm: &Comm) -> Result<u32> {
    struct Collectives;
    reserved_channels::<Collectives, 3>(comm, CHANNEL_OWNER)
}

/// A pull kernel's grid for `elems` elements of `T` per rank: one 16-byte
/// vector per thread, 1 to [`MAX_BLOCKS`] blocks of [`THREADS`] (at most 4
/// on the emulator, so its tests step through the grid-stride loops), fewer
/// where ranks share a GPU (`limit` asks the driver for the kernel's
/// co-resident grid), with programmatic dependent launch unless the comm
/// turned it off. The same on every rank for one call.
pub(super) fn grid<T: CopyElem>(
    comm: &Comm,
    elems: u64,
    limit: impl FnOnce() -> Result<Option<u32>>,
) -> Result<LaunchConfig> {
    let blocks = vector_blocks::<T>(elems, threads::<T>(), MAX_BLOCKS);
    fitted::<T>(comm, emulated_at_most(comm, blocks), limit)
}

/// `blocks` blocks of [`threads`], or fewer where ranks share a GPU, with
/// programmatic dependent launch unless the comm turned it off.
pub(super) fn fitted<T: CopyElem>(
    comm: &Comm,
    blocks: u32,
    limit: impl FnOnce() -> Result<Option<u32>>,
) -> Result<LaunchConfig> {
    let blocks = fit_blocks(comm, "collective", blocks, std::iter::once_with(limit))?;
    Ok(with_pdl(comm, LaunchConfig::linear(blocks, threads::<T>())))
}

/// Threads per block for elements of `T`: [`THREADS`], limited for
/// one-byte types as the all-reduce's are.
pub(super) fn threads<T>() -> u32 {
    threads_for::<T>(THREADS)
}
