//! Which kernel a collective runs: LL packets or a pull between barriers,
//! by the bytes each rank sends to each peer, or as forced.

use symm::{Comm, Result};

use super::{LL_LIMIT_BYTES, LL_MAX_BYTES};

/// The kernel a collective runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollectivePath {
    /// LL packets pushed into each receiver's stage: 8 bytes of data and
    /// the call's tag (epoch and digest) in each 16-byte store, so data crosses NVLink once
    /// and no barrier is needed ([`copy_ll`](super::copy_ll),
    /// [`reduce_ll`](super::reduce_ll)). For small messages: it moves twice
    /// the bytes.
    Ll,
    /// Barrier, pull from every peer's symmetric input, barrier
    /// (`*_pull`, and the two-shot
    /// [`all_reduce_op_two_shot`](super::all_reduce_op_two_shot)).
    Pull,
    /// The pull's barriers as one-block kernels ([`ce_sync`](super::ce_sync)),
    /// and between them each peer's part copied by the copy engines
    /// (`cuMemcpyAsync` from its symmetric input, stream-ordered and
    /// capturable): the SMs stay free for compute that overlaps the call.
    /// The all-gather and all-to-all have it; another call asked for it
    /// pulls. Never chosen by size: asked for by name
    /// ([`all_gather_with`](super::all_gather_with),
    /// [`all_to_all_with`](super::all_to_all_with), [`force_path`]) or by
    /// the functional layer's rule where calls overlap compute.
    CopyEngine,
}

impl CollectivePath {
    /// Every path, for tests and benchmarks.
    pub const ALL: [CollectivePath; 3] = [
        CollectivePath::Ll,
        CollectivePath::Pull,
        CollectivePath::CopyEngine,
    ];

    /// The path for a call that sends `bytes` to each peer: LL up to
    /// [`LL_MAX_BYTES`], then pull (the same crossover on 2, 3 and 4 ranks).
    pub fn choose(bytes: usize) -> CollectivePath {
        if bytes <= LL_MAX_BYTES {
            CollectivePath::Ll
        } else {
            CollectivePath::Pull
        }
    }

    /// Its name in errors.
    pub const fn name(self) -> &'static str {
        match self {
            CollectivePath::Ll => "LL",
            CollectivePath::Pull => "pull",
            CollectivePath::CopyEngine => "copy engine",
        }
    }
}

/// Forces every later collective of this rank that has an LL form
/// ([`all_gather`](super::all_gather), [`broadcast`](super::broadcast),
/// [`all_to_all`](super::all_to_all),
/// [`reduce_scatter`](super::reduce_scatter),
/// [`all_reduce_op`](super::all_reduce_op) but for sum) onto `path`
/// (`None`: [`CollectivePath::choose`]), for tests and benchmarks; LL still stops
/// at [`LL_LIMIT_BYTES`] (such a call pulls), and a call with no copy-engine
/// form pulls where [`CollectivePath::CopyEngine`] is forced. Every rank must force the
/// same: a call's path is part of what the ranks agree on, so a mismatch
/// fails the call on every rank. The environment variable
/// `SYMM_COLLECTIVES_PATH` (`ll`, `pull` or `ce`) sets the default.
pub fn force_path(comm: &Comm, path: Option<CollectivePath>) -> Result<()> {
    *forced(comm)?.0.lock().unwrap_or_else(|p| p.into_inner()) = Ok(path);
    Ok(())
}

/// The forced path, or the problem with `SYMM_COLLECTIVES_PATH`.
struct Forced(std::sync::Mutex<std::result::Result<Option<CollectivePath>, String>>);

fn forced(comm: &Comm) -> Result<std::sync::Arc<Forced>> {
    comm.extension(
        |_: &Forced| true,
        |_| {
            let env = std::env::var("SYMM_COLLECTIVES_PATH").ok();
            let path = match env.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("") | Some("auto") => Ok(None),
                Some("ll") => Ok(Some(CollectivePath::Ll)),
                Some("pull") => Ok(Some(CollectivePath::Pull)),
                Some("ce") => Ok(Some(CollectivePath::CopyEngine)),
                Some(other) => Err(format!(
                    "SYMM_COLLECTIVES_PATH={other}: expected ll, pull, ce or auto"
                )),
            };
            Ok(Forced(std::sync::Mutex::new(path)))
        },
    )
}

/// The path of a call that sends `elems` elements of `T` to each peer
/// (`asked`: the path its caller named, else the forced one, else by
/// size; `ce`: whether it has a copy-engine form), and a problem to agree
/// on where `SYMM_COLLECTIVES_PATH` is invalid. A domain of more than 8
/// ranks never takes LL: its kernels unroll their packets for at most 8
/// ([`symm::layout::MAX_WORLD_SIZE`]).
pub(super) fn path_for<T>(
    comm: &Comm,
    elems: usize,
    asked: Option<CollectivePath>,
    ce: bool,
) -> Result<(CollectivePath, Option<String>)> {
    let bytes = elems.saturating_mul(std::mem::size_of::<T>());
    let forced = match asked {
        Some(p) => Ok(Some(p)),
        None => forced(comm)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
    };
    let general = comm.world_size() > symm::layout::MAX_WORLD_SIZE;
    Ok(match forced {
        Err(problem) => (CollectivePath::Pull, Some(problem)),
        Ok(Some(CollectivePath::CopyEngine)) if ce => (CollectivePath::CopyEngine, None),
        Ok(Some(CollectivePath::CopyEngine)) => (CollectivePath::Pull, None),
        _ if general => (CollectivePath::Pull, None),
        Ok(Some(CollectivePath::Ll)) if bytes > LL_LIMIT_BYTES => (CollectivePath::Pull, None),
        Ok(Some(p)) => (p, None),
        Ok(None) => (CollectivePath::choose(bytes), None),
    })
}
