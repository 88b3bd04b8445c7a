//! The copies with equal parts: all-gather, broadcast and all-to-all, and
//! their in-place forms.

use symm::{Comm, DeviceSlice, Result, SymmBuffer, SymmetricMemory};

use super::call::{begin, channel, grid, threads, Call, Kind, Ready};
use super::elem::{CopyCall, CopyElem, Kernel};
use super::ll::{run_ll, LlArgs};
use super::path::CollectivePath;
use crate::shared::agree::Problem;
use crate::shared::checks::{
    disjoint, fits, out_fits, root_disjoint, root_problem, same_or_disjoint, InPlace,
};

/// Every rank's `n` elements of `input` (a rendezvoused symmetric buffer),
/// in rank order, into this rank's `out[0..world × n]`. `out` must not
/// overlap the input (for that, [`all_gather_in_place`]).
pub fn all_gather<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    all_gather_on(None, comm, input, out, n)
}

/// [`all_gather`] on `path` whatever the size ([`CollectivePath::CopyEngine`]
/// to leave the SMs to compute that overlaps it; LL past
/// [`LL_LIMIT_BYTES`](super::LL_LIMIT_BYTES) per peer pulls). Every rank
/// names the same path (it is part of what they agree on).
pub fn all_gather_with<T: CopyElem>(
    path: CollectivePath,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    all_gather_on(Some(path), comm, input, out, n)
}

fn all_gather_on<T: CopyElem>(
    path: Option<CollectivePath>,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    let world = comm.world_size();
    let call = Call {
        kind: Kind::AllGather { n },
        ll: Some(n),
        empty: n == 0,
        path,
    };
    let ready = begin(comm, input, ("out", out), call, |out| {
        fits::<T>(input, n, "the input")?;
        out_fits(out, n.checked_mul(world), "world × n")?;
        disjoint(
            input,
            out,
            InPlace::Form(
                "put this rank's part at `buf[rank × n..]` of one symmetric buffer and call \
                 `symm::kernels::collectives::all_gather_in_place`",
            ),
        )
    })?;
    match ready {
        None => Ok(()),
        // SAFETY: `n` fits every rank's input and `world × n` this rank's
        // `out` (checked on each rank, agreed by all).
        Some(r) => unsafe { launch_all_gather(comm, input, r, n, false) },
    }
}

/// All-gather in place: rank r's `n` elements at `buf[r × n..]` reach the
/// same place in every rank's `buf`.
pub fn all_gather_in_place<T: CopyElem>(comm: &Comm, buf: &SymmBuffer<T>, n: usize) -> Result<()> {
    // Reserved first, before any step that could fail on one rank alone.
    channel(comm)?;
    let smem = buf.rendezvous()?;
    let world = comm.world_size();
    let mut whole = buf.slice(..)?;
    let call = Call {
        kind: Kind::AllGatherInPlace { n },
        ll: Some(n),
        empty: n == 0,
        path: None,
    };
    let ready = begin(comm, &smem, ("buf", &mut whole), call, |_| {
        let total = n.checked_mul(world);
        match total {
            Some(t) if t <= buf.len() && t <= u32::MAX as usize => Ok(()),
            _ => Err(Problem::too_many(
                total,
                format!(
                    "an in-place all_gather of {n} elements per rank needs {world} × {n}, and \
                     the buffer holds {}",
                    buf.len()
                ),
            )),
        }
    })?;
    match ready {
        None => Ok(()),
        // SAFETY: `world × n` fits the buffer on every rank.
        Some(r) => unsafe { launch_all_gather(comm, &smem, r, n, true) },
    }
}

/// Launches an agreed all-gather of `n` elements per rank, by LL or pull.
///
/// # Safety
///
/// `n` fits every rank's `input` and `world × n` fits `r.out` (or, in
/// place, the buffer that is the input).
unsafe fn launch_all_gather<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    mut r: Ready<'_, T>,
    n: usize,
    in_place: bool,
) -> Result<()> {
    // (The in-place all-gather has no copy-engine form: it pulls.)
    if r.path == CollectivePath::CopyEngine && !in_place {
        return copy_engine(comm, input, &mut r.out, r.ch, |p| (0, p * n, n));
    }
    let in_place = u32::from(in_place);
    if r.path == CollectivePath::Ll {
        let args = LlArgs::copy(0, 0, in_place);
        // SAFETY: the caller's promise.
        return unsafe { run_ll(comm, input, &mut r.out, n, n, args, r.ch, T::__copy_ll) };
    }
    let cfg = grid::<T>(comm, (n * comm.world_size()) as u64, || {
        T::__grid(Kernel::AllGather, comm, threads::<T>())
    })?;
    let call = CopyCall::AllGather {
        input,
        out: &mut r.out,
        n: n as u32,
        in_place,
        ch: r.ch,
    };
    // SAFETY: the caller's promise.
    unsafe { T::__copy(comm, cfg, call) }
}

/// Rank `root`'s first `n` elements of `input` into every rank's `out`
/// (the root's too, unless `out` is its input itself). Past
/// [`BROADCAST_SAG_MIN_BYTES`] on 3 or more ranks (with the inputs on a
/// 16-byte boundary) the pull path scatters the message over the
/// non-roots and all-gathers it ([`broadcast_sag`](super::broadcast_sag)),
/// so the root sends it once, not once a peer.
pub fn broadcast<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    root: usize,
) -> Result<()> {
    broadcast_on(comm, input, out, n, root, false)
}

/// The smallest broadcast (in bytes) that scatters and all-gathers on 3
/// or more ranks instead of every rank pulling the whole message from the
/// root. Not yet measured between GPUs (see `bench/NOTES.md` v50): the
/// size at which the all-reduce's two-shot pays for its two rounds.
pub const BROADCAST_SAG_MIN_BYTES: usize = 256 << 10;

/// [`broadcast`], or its in-place form (`in_place`: `out` is `input`'s
/// own buffer on every rank, its own kind of call).
fn broadcast_on<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    root: usize,
    in_place: bool,
) -> Result<()> {
    let world = comm.world_size();
    let call = Call {
        kind: match in_place {
            true => Kind::BroadcastInPlace { n, root },
            false => Kind::Broadcast { n, root },
        },
        ll: Some(n),
        empty: n == 0,
        path: None,
    };
    let ready = begin(comm, input, ("out", out), call, |out| {
        if let Some(why) = root_problem(root, world) {
            return Err(why.into());
        }
        fits::<T>(input, n, "the input")?;
        out_fits(out, Some(n), "n")?;
        // Exactly the input is fine: another rank writes only its own
        // buffer, which no peer reads, and the root skips the copy.
        same_or_disjoint(
            input,
            out,
            Some("symm::kernels::collectives::broadcast_in_place"),
        )
    })?;
    let Some(mut r) = ready else {
        return Ok(());
    };
    let own = input.buffer_ptrs()[input.rank()];
    let skip = u32::from(r.out.device_ptr() == own && comm.rank() == root);
    if r.path == CollectivePath::Ll {
        let args = LlArgs::copy(1, root as u32, skip);
        // SAFETY: `n` fits every rank's input and this rank's `out`.
        return unsafe { run_ll(comm, input, &mut r.out, n, n, args, r.ch, T::__copy_ll) };
    }
    // Every rank decides alike: the sizes and root are agreed, and every
    // rank's input lies at the same offset of its allocation.
    let sag = world >= 3
        && n * std::mem::size_of::<T>() >= BROADCAST_SAG_MIN_BYTES
        && crate::shared::checks::vector_aligned(input);
    if sag {
        struct Sag;
        // The in-place form's parts go straight into each rank's buffer.
        let scratch = match in_place {
            true => None,
            false => Some(crate::shared::staging::grow::<T, Sag>(comm, n, 1, 0)?.0),
        };
        // Sized by a part: each rank's threads walk one at a time.
        let part = n.div_ceil(world - 1);
        let cfg = grid::<T>(comm, part as u64, || {
            T::__grid(Kernel::BroadcastSag, comm, threads::<T>())
        })?;
        let call = CopyCall::BroadcastSag {
            input,
            scratch: scratch.as_deref().unwrap_or(input),
            out: &mut r.out,
            n: n as u32,
            root: root as u32,
            skip,
            direct: u32::from(in_place),
            ch: r.ch,
        };
        // SAFETY: `n` fits every rank's input, this rank's `out` and the
        // staging; the inputs start on a 16-byte boundary; every rank runs
        // `grid`'s one grid for the agreed size.
        return unsafe { T::__copy(comm, cfg, call) };
    }
    let cfg = grid::<T>(comm, n as u64, || {
        T::__grid(Kernel::Broadcast, comm, threads::<T>())
    })?;
    let call = CopyCall::Broadcast {
        input,
        out: &mut r.out,
        n: n as u32,
        root: root as u32,
        skip,
        ch: r.ch,
    };
    // SAFETY: `n` fits every rank's input and this rank's `out`.
    unsafe { T::__copy(comm, cfg, call) }
}

/// Broadcast in place: rank `root`'s first `n` elements of `buf` replace
/// the first `n` of every rank's `buf`. Its own call: every rank makes
/// it, not [`broadcast`] into the buffer.
pub fn broadcast_in_place<T: CopyElem>(
    comm: &Comm,
    buf: &SymmBuffer<T>,
    n: usize,
    root: usize,
) -> Result<()> {
    let smem = buf.rendezvous()?;
    broadcast_on(comm, &smem, &mut buf.slice(..)?, n, root, true)
}

/// Gather: rank p's first `n` elements of `input` land at
/// `out[p × n..]` of rank `root` only (which needs `world × n` elements
/// there); the other ranks' `out` is not touched and may be empty. Always
/// the pull kernel ([`gather_pull`](super::gather_pull)): the root reads
/// every peer's input between the barriers.
pub fn gather<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    root: usize,
) -> Result<()> {
    let world = comm.world_size();
    let total = n.checked_mul(world);
    let call = Call {
        kind: Kind::Gather { n, root },
        ll: None,
        empty: n == 0,
        path: None,
    };
    let is_root = comm.rank() == root;
    let ready = begin(comm, input, ("out", out), call, |out| {
        if let Some(why) = root_problem(root, world) {
            return Err(why.into());
        }
        fits::<T>(input, n, "the input")?;
        if is_root {
            out_fits(out, total, "world × n on the root")?;
            root_disjoint(input, out)?;
        }
        Ok(())
    })?;
    let Some(mut r) = ready else {
        return Ok(());
    };
    let cfg = grid::<T>(comm, total.unwrap_or(0) as u64, || {
        T::__grid(Kernel::Gather, comm, threads::<T>())
    })?;
    let call = CopyCall::Gather {
        input,
        out: &mut r.out,
        n: n as u32,
        root: root as u32,
        ch: r.ch,
    };
    // SAFETY: `n` fits every rank's input, and `world × n` the root's
    // `out` (the only one written).
    unsafe { T::__copy(comm, cfg, call) }
}

/// Scatter: every rank r's `out` gets elements `r × n..(r + 1) × n` of
/// rank `root`'s `input` (which holds `world × n` on every rank, as
/// symmetric memory does). Always the pull kernel
/// ([`scatter_pull`](super::scatter_pull)).
pub fn scatter<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    root: usize,
) -> Result<()> {
    let world = comm.world_size();
    let total = n.checked_mul(world);
    let call = Call {
        kind: Kind::Scatter { n, root },
        ll: None,
        empty: n == 0,
        path: None,
    };
    let ready = begin(comm, input, ("out", out), call, |out| {
        if let Some(why) = root_problem(root, world) {
            return Err(why.into());
        }
        match total {
            Some(t) => fits::<T>(input, t, "the input")?,
            None => {
                return Err(Problem::capacity(format!(
                    "{world} × {n} elements overflow"
                )))
            }
        }
        out_fits(out, Some(n), "n")?;
        disjoint(input, out, InPlace::No)
    })?;
    let Some(mut r) = ready else {
        return Ok(());
    };
    let cfg = grid::<T>(comm, n as u64, || {
        T::__grid(Kernel::Scatter, comm, threads::<T>())
    })?;
    let call = CopyCall::Scatter {
        input,
        out: &mut r.out,
        n: n as u32,
        root: root as u32,
        ch: r.ch,
    };
    // SAFETY: `world × n` fits every rank's input, and `n` this rank's `out`.
    unsafe { T::__copy(comm, cfg, call) }
}

/// All-to-all with equal splits: rank p's `input[r × m..(r + 1) × m]`
/// lands at `out[p × m..]` of rank r, for every pair (p, r).
pub fn all_to_all<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    m: usize,
) -> Result<()> {
    all_to_all_on(None, comm, input, out, m)
}

/// [`all_to_all`] on `path` whatever the size, as
/// [`all_gather_with`] is.
pub fn all_to_all_with<T: CopyElem>(
    path: CollectivePath,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    m: usize,
) -> Result<()> {
    all_to_all_on(Some(path), comm, input, out, m)
}

fn all_to_all_on<T: CopyElem>(
    path: Option<CollectivePath>,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    m: usize,
) -> Result<()> {
    let world = comm.world_size();
    let total = m.checked_mul(world);
    let call = Call {
        kind: Kind::AllToAll { m },
        ll: Some(m),
        empty: m == 0,
        path,
    };
    let ready = begin(comm, input, ("out", out), call, |out| {
        match total {
            Some(t) => fits::<T>(input, t, "the input")?,
            None => {
                return Err(Problem::capacity(format!(
                    "{world} × {m} elements overflow"
                )))
            }
        }
        out_fits(out, total, "world × m")?;
        disjoint(input, out, InPlace::No)
    })?;
    let Some(mut r) = ready else {
        return Ok(());
    };
    if r.path == CollectivePath::CopyEngine {
        let me = comm.rank();
        return copy_engine(comm, input, &mut r.out, r.ch, |p| (me * m, p * m, m));
    }
    if r.path == CollectivePath::Ll {
        let args = LlArgs::copy(2, 0, 0);
        // SAFETY: `world × m` fits every rank's input and this rank's `out`.
        return unsafe { run_ll(comm, input, &mut r.out, m, m, args, r.ch, T::__copy_ll) };
    }
    let cfg = grid::<T>(comm, (m * world) as u64, || {
        T::__grid(Kernel::AllToAll, comm, threads::<T>())
    })?;
    let call = CopyCall::AllToAll {
        input,
        out: &mut r.out,
        m: m as u32,
        ch: r.ch,
    };
    // SAFETY: `world × m` fits every rank's input and this rank's `out`.
    unsafe { T::__copy(comm, cfg, call) }
}

/// The copy-engine form of an agreed copy ([`CollectivePath::CopyEngine`]):
/// [`ce_sync`](super::ce_sync)'s entry barrier, then for each rank p,
/// from this one on (so that the peers' links share the load),
/// `part(p)`'s elements (`(offset in p's input; offset in out; length)`)
/// copied by the copy engines from p's symmetric input into `out`, then
/// its exit barrier. All on the comm's stream.
///
/// Once the entry barrier is enqueued the exit barrier always follows it,
/// even where a copy could not be enqueued (whose error the call then
/// returns): the exit stores the call's number, so this rank's next call
/// is not taken for this one, and its peers are not left waiting for it.
fn copy_engine<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut symm::BoundSlice<'_, T>,
    ch: super::elem::Ch,
    part: impl Fn(usize) -> (usize, usize, usize),
) -> Result<()> {
    let world = comm.world_size();
    let sync = |exit: u32| {
        // The identity barriers' threads (`identity_checkers` + a thread
        // per rank), in whole warps.
        let checkers = (world as u32).div_ceil(32).max(1) * 32;
        let threads = (checkers + world as u32).div_ceil(32) * 32;
        let cfg = crate::shared::grid::with_pdl(comm, symm::LaunchConfig::linear(1, threads));
        super::ce_sync::launch::<T>(comm, cfg, input, ch.index, ch.sig, exit)
    };
    sync(0)?;
    let mut copies = || -> Result<()> {
        for k in 0..world {
            let p = (comm.rank() + k) % world;
            let (from, at, len) = part(p);
            // (Every part fits: checked on each rank before the agreement.)
            let Some(mut dst) = out.sub_mut(at..at + len) else {
                return Err(crate::shared::checks::invalid(
                    comm,
                    format!("the output holds no elements {at}..{}", at + len),
                ));
            };
            input.copy_from_peer_on(comm, p, from, &mut dst)?;
        }
        Ok(())
    };
    let copied = copies();
    let ended = sync(1);
    copied.and(ended)
}
