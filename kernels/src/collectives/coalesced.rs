//! The coalesced forms: one launch for several tensors, each a range of
//! one symmetric buffer (the same ranges on every rank).

use std::hash::{Hash, Hasher};
use std::ops::Range;

use symm::{Comm, DeviceSlice, Result, SymmBuffer, SymmetricMemory};

use super::call::{begin, channel, grid, threads, Call, Kind};
use super::elem::{CopyCall, CopyElem, Kernel, ReduceElem, ReduceOp};
use crate::shared::agree::Problem;
use crate::shared::checks::{disjoint, out_fits, ranges_overlap, InPlace};
use crate::shared::key::Fnv64;

/// Coalesced all-gather: one launch for several tensors, each a range of
/// the symmetric `input` (the same ranges on every rank). Tensor t's
/// gathered result, every rank's range in rank order, lands in `out` after
/// those of the tensors before it: at `world × (sum of the earlier
/// lengths)`. The first call with a set of ranges uploads their table
/// (kept for later calls with the same set), so capture a CUDA graph after
/// an eager call with the same ranges.
pub fn all_gather_coalesced<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    ranges: &[Range<usize>],
    out: &mut (impl DeviceSlice<T> + ?Sized),
) -> Result<()> {
    // Declared before the output's binding, which borrows for as long as
    // it (the launch takes both with one lifetime).
    let table_buf;
    let world = comm.world_size();
    let cap = input.buffer_size() / std::mem::size_of::<T>();
    let mut rows = Vec::with_capacity(ranges.len());
    let mut at = 0usize;
    let mut problem: Option<Problem> = None;
    for r in ranges {
        problem = problem.or_else(|| range_problem(r, cap, "the input's"));
        rows.push([r.start, r.len(), at]);
        at = at.saturating_add(r.len().saturating_mul(world));
    }
    let call = Call {
        kind: Kind::AllGatherCoalesced {
            tensors: ranges.len(),
            ranges: ranges_digest(ranges),
        },
        ll: None,
        empty: at == 0,
        path: None,
    };
    let ready = begin(comm, input, ("out", out), call, |out| match problem {
        Some(p) => Err(p),
        None => {
            out_fits(out, Some(at), "world × the ranges' lengths")?;
            disjoint(input, out, InPlace::No)
        }
    })?;
    let Some(mut r) = ready else {
        return Ok(());
    };
    table_buf = table(comm, &rows)?;
    let table = comm.bind("table", &*table_buf)?;
    let cfg = grid::<T>(comm, at as u64, || {
        T::__grid(Kernel::AllGatherCoalesced, comm, threads::<T>())
    })?;
    let call = CopyCall::AllGatherCoalesced {
        input,
        out: &mut r.out,
        table: &table,
        count: rows.len() as u32,
        ch: r.ch,
    };
    // SAFETY: every range fits every rank's input (the same ranges on
    // every rank, agreed), and `out` holds world × their lengths.
    unsafe { T::__copy(comm, cfg, call) }
}

/// Coalesced all-reduce by `op`, in place: one launch reduces several
/// tensors, each a range of the symmetric `buf` (the same ranges on every
/// rank). A one-shot kernel: each rank reads every tensor from every peer
/// (suited to many small tensors), reduces into a scratch of its own and
/// writes the results back once no peer reads its buffer. Tables and
/// scratch are made on first use, as for [`all_gather_coalesced`].
pub fn all_reduce_coalesced<T: ReduceElem>(
    comm: &Comm,
    buf: &SymmBuffer<T>,
    ranges: &[Range<usize>],
    op: ReduceOp,
) -> Result<()> {
    // Reserved first, before any step that could fail on one rank alone.
    channel(comm)?;
    let smem = buf.rendezvous()?;
    let mut rows = Vec::with_capacity(ranges.len());
    let mut at = 0usize;
    let mut problem: Option<Problem> = super::elem::op_problem::<T>(op);
    let per_vec = crate::shared::elem::vector::<T>().max(1);
    for r in ranges {
        problem = problem.or_else(|| range_problem(r, buf.len(), "the buffer's"));
        // Each tensor's scratch starts where the buffer's range does
        // modulo a vector, so an aligned tensor moves in vectors.
        at = at.next_multiple_of(per_vec) + r.start % per_vec;
        rows.push([r.start, r.len(), at]);
        at = at.saturating_add(r.len());
    }
    if ranges_overlap(ranges) {
        problem.get_or_insert("the ranges overlap".into());
    }
    if at > u32::MAX as usize {
        problem.get_or_insert(Problem::capacity(
            "the ranges hold 2^32 elements or more".into(),
        ));
    }
    let call = Call {
        kind: Kind::AllReduceCoalesced {
            tensors: ranges.len(),
            ranges: ranges_digest(ranges),
            op,
        },
        ll: None,
        empty: at == 0,
        path: None,
    };
    // The buffer is the output: bound like any, and written by the kernel
    // through the symmetric memory.
    let mut whole = buf.slice(..)?;
    let ready = begin(comm, &smem, ("buf", &mut whole), call, |_| {
        problem.map_or(Ok(()), Err)
    })?;
    let Some(r) = ready else {
        return Ok(());
    };
    let table = table(comm, &rows)?;
    let table = comm.bind("table", &*table)?;
    let scratch = local_scratch::<T>(comm, at)?;
    let mut scratch = scratch.buf.lock().unwrap_or_else(|p| p.into_inner());
    let mut scratch = comm.bind_mut("scratch", &mut *scratch)?;
    let cfg = grid::<T>(comm, at as u64, || T::__arc_grid(op, comm, threads::<T>()))?;
    // SAFETY: every range fits every rank's buffer (the same ranges on
    // every rank, agreed), and the scratch holds `at` elements, past every
    // entry's offset plus its length.
    unsafe {
        T::__all_reduce_coalesced(
            comm,
            cfg,
            op,
            &smem,
            &mut scratch,
            &table,
            rows.len() as u32,
            r.ch,
        )
    }
}

/// A digest of a coalesced call's ranges: equal ranges give equal digests
/// on every rank; a mismatch shows as different digests.
fn ranges_digest(ranges: &[Range<usize>]) -> u64 {
    let mut h = Fnv64::default();
    for r in ranges {
        (r.start, r.end).hash(&mut h);
    }
    h.finish()
}

/// The device table of `rows` (three u32 each), uploaded on first use and
/// kept for later calls with the same rows.
fn table(comm: &Comm, rows: &[[usize; 3]]) -> Result<std::sync::Arc<symm::DeviceBuffer<u32>>> {
    type Tables = Vec<(Vec<u32>, std::sync::Arc<symm::DeviceBuffer<u32>>)>;
    struct Cache(std::sync::Mutex<Tables>);
    let flat: Vec<u32> = rows.iter().flatten().map(|&x| x as u32).collect();
    let cache = comm.extension(|_: &Cache| true, |_| Ok(Cache(Default::default())))?;
    let mut tables = cache.0.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, t)) = tables.iter().find(|(k, _)| *k == flat) {
        return Ok(t.clone());
    }
    // Kept for the rank's life (a few bytes each): a CUDA graph captured
    // with a table reads it at every replay.
    let t = std::sync::Arc::new(comm.device_buffer_from(&flat)?);
    tables.push((flat, t.clone()));
    Ok(t)
}

/// This rank's scratch of at least `len` elements of `T` (not symmetric:
/// only the rank itself touches it), kept in its extensions; a larger
/// call makes a new one and keeps the older alive (CUDA graphs captured
/// with it still use it).
struct LocalScratch<T: symm::Element> {
    buf: std::sync::Mutex<symm::DeviceBuffer<T>>,
    len: usize,
    _older: Option<std::sync::Arc<LocalScratch<T>>>,
}

fn local_scratch<T: ReduceElem>(
    comm: &Comm,
    len: usize,
) -> Result<std::sync::Arc<LocalScratch<T>>> {
    comm.extension(
        |s: &LocalScratch<T>| s.len >= len,
        |older| {
            let len = len.next_power_of_two().max(4096);
            Ok(LocalScratch {
                buf: std::sync::Mutex::new(comm.device_buffer::<T>(len)?),
                len,
                _older: older,
            })
        },
    )
}

/// A problem unless range `r` lies within the `cap` elements of `what`
/// (`"the input's"`), and ends within the 2^32 - 1 elements the kernels
/// index (past that, a capacity problem).
fn range_problem(r: &Range<usize>, cap: usize, what: &str) -> Option<Problem> {
    if r.start > r.end || r.end > cap {
        Some(format!("the range {r:?} is not within {what} {cap} elements").into())
    } else if r.end > u32::MAX as usize {
        Some(Problem::capacity(format!(
            "the range {r:?} ends past the 2^32 - 1 elements the kernels index"
        )))
    } else {
        None
    }
}
