//! The all-reduce's staging families: one growing area per family of
//! kernels that share a layout and an epoch counter, and the barrier
//! kernels' control allocation.

use std::marker::PhantomData;
use std::sync::Arc;

use symm::{Comm, Result, SymmetricMemory};

use super::plan::{AllReducePath, LL_SMALL_BYTES, MAX_STAGED};
use crate::shared::checks::capacity;
use crate::shared::staging::{grow, grow_with_tail};

// Staging areas (`shared::staging`): `2 × world` (parity, rank) regions
// for the LL, Lamport and push kernels, `4 × world` (parity, half, rank)
// regions of a chunk for the Lamport two-shot, one of n for the two-shot
// scratch.

/// Families that share a staging area (one layout and one epoch counter).
/// LL stages packets of any element type, but keeps one area per type: on
/// a GPU that ranks share, each type's kernel may fit a different grid,
/// and an area's grid must never change.
struct LlFamily<T>(PhantomData<T>);

struct LlSmallFamily<T>(PhantomData<T>);

struct PushFamily;

struct LamportFamily;

struct LamportTwoShotFamily;

struct ScratchFamily;

struct ControlFamily;

/// The barrier kernels' control allocation on `comm`'s rank: its pad holds
/// their call counters, barriers and identities, one pad for every buffer
/// and element type (so ranks in calls on different buffers meet, and
/// fail, at once). Its data is never touched.
pub(super) fn control(comm: &Comm) -> Result<Arc<SymmetricMemory>> {
    Ok(grow::<u32, ControlFamily>(comm, 1, 1, 0)?.0)
}

/// The staging area `path` needs for a call of `bytes` with `per_region`
/// elements per region, grown (a collective allocation and rendezvous, reached by every rank in
/// the same call, since every rank passes the same `n`) when a larger
/// message first needs it.
pub(super) fn staging<E: symm::dsl::Scalar, T: Send + Sync + 'static>(
    comm: &Comm,
    path: AllReducePath,
    bytes: usize,
    per_region: usize,
) -> Result<(Arc<SymmetricMemory>, usize)> {
    // The LL and push kernels index all regions in u32; the two-shot
    // scratch only needs n < 2^32, which `check` ensures.
    if per_region > MAX_STAGED
        && matches!(
            path,
            AllReducePath::Ll
                | AllReducePath::Push
                | AllReducePath::Lamport
                | AllReducePath::LamportTwoShot
        )
    {
        return Err(capacity(
            comm,
            format!(
                "the {path:?} kernel needs {per_region} staged elements per rank, more than \
                 {MAX_STAGED}; use all_reduce, which picks another kernel at this size"
            ),
        ));
    }
    let world = comm.world_size();
    // The identity takes one 16-byte vector; the tail is 128 bytes, so
    // every region stays aligned to a cache line (the regions' 16-byte
    // stores and polls would otherwise straddle lines).
    let id_tail = 128 / std::mem::size_of::<E>();
    match path {
        // Zeros, so no stale bits can look like a packet of epoch 1. The
        // smallest calls run on a grid of their own (`fixed_shape`), so
        // they keep their own staging and epochs.
        AllReducePath::Ll if bytes <= LL_SMALL_BYTES => {
            grow::<E, LlSmallFamily<T>>(comm, per_region, 2 * world, 0)
        }
        AllReducePath::Ll => grow::<E, LlFamily<T>>(comm, per_region, 2 * world, 0),
        // One more 16-byte vector per region, past any call's data, for
        // the call's identity, which travels as the message's last vector
        // (at the vector past the data in `one_shot_push` and
        // `one_shot_lamport`, `chunk` in `two_shot_lamport`).
        AllReducePath::Push => {
            grow_with_tail::<E, PushFamily>(comm, per_region, id_tail, 2 * world, 0)
        }
        // All ones: every slot starts empty.
        AllReducePath::Lamport => {
            grow_with_tail::<E, LamportFamily>(comm, per_region, id_tail, 2 * world, 0xFF)
        }
        AllReducePath::LamportTwoShot => {
            grow_with_tail::<E, LamportTwoShotFamily>(comm, per_region, id_tail, 4 * world, 0xFF)
        }
        AllReducePath::TwoShot | AllReducePath::Pull => {
            grow::<E, ScratchFamily>(comm, per_region, 1, 0)
        }
    }
}
