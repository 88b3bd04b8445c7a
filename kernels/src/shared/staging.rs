//! Resources a family requests from the group: staging areas that grow
//! (and keep what they replaced alive for captured CUDA graphs), and the
//! family's reserved signal channels.

use std::marker::PhantomData;
use std::sync::Arc;

use symm::{Comm, Result, SymmetricMemory};

/// A rank's staging area of element type `E` for one family `K`, kept in
/// the rank's [`Comm::extension`] (rendezvoused memory only, no `Comm`, so
/// it is freed with the rank).
struct Staging<E, K> {
    smem: Arc<SymmetricMemory>,
    per_region: usize,
    /// The smaller areas this one replaced: CUDA graphs captured while one
    /// of them was current still point into it.
    _older: Option<Arc<Staging<E, K>>>,
    _k: PhantomData<(E, K)>,
}

/// The staging of family `K` on `comm`'s rank: `regions` regions of at
/// least `per_region` elements of `E` (rounded up to a power of two, at
/// least 1024), every byte `fill`, rendezvoused; a larger request replaces
/// it and keeps the older alive (graphs captured with it still use it).
/// Returns the area and its elements per region. A collective allocation:
/// every rank asks for the same size in the same call.
pub(crate) fn grow<E: symm::dsl::Scalar, K: Send + Sync + 'static>(
    comm: &Comm,
    per_region: usize,
    regions: usize,
    fill: u8,
) -> Result<(Arc<SymmetricMemory>, usize)> {
    grow_with_tail::<E, K>(comm, per_region, 0, regions, fill)
}

/// [`grow`] with `tail` more elements in every region, past the rounded
/// data part (so a power-of-two message does not double its staging).
pub(crate) fn grow_with_tail<E: symm::dsl::Scalar, K: Send + Sync + 'static>(
    comm: &Comm,
    per_region: usize,
    tail: usize,
    regions: usize,
    fill: u8,
) -> Result<(Arc<SymmetricMemory>, usize)> {
    let s = comm.extension(
        |s: &Staging<E, K>| s.per_region >= per_region + tail,
        |older| {
            let per_region = per_region.next_power_of_two().max(1024) + tail;
            let buf = comm.alloc::<E>(regions * per_region)?;
            // Every byte `fill` (a device memset, finished) before the
            // rendezvous hands the memory to any peer.
            buf.fill_bytes(fill)?;
            Ok(Staging::<E, K> {
                smem: buf.rendezvous()?,
                per_region,
                _older: older,
                _k: PhantomData,
            })
        },
    )?;
    Ok((s.smem.clone(), s.per_region))
}

/// The first of the channels a family of kernels reserved, kept in the
/// rank's extensions under the family's marker `M`.
struct FirstChannel<M>(u32, PhantomData<fn() -> M>);

/// The first of `N` adjacent channels that `owner` reserves from `comm`'s
/// group ([`symm::signal::Channel::reserve`]) on its first call, and the
/// same on every later one; `M` names the family. Call it first, before
/// any check that could fail on one rank alone, so that every rank
/// reserves at the same point of its sequence of requests.
pub(crate) fn reserved_channels<M: 'static, const N: usize>(
    comm: &Comm,
    owner: &'static str,
) -> Result<u32> {
    let r = comm.extension(
        |_: &FirstChannel<M>| true,
        |_| {
            let chans = symm::signal::Channel::reserve::<N>(comm, owner)?;
            Ok(FirstChannel(chans[0].index(), PhantomData))
        },
    )?;
    Ok(r.0)
}
