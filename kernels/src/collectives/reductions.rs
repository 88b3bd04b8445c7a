//! The reductions by [`ReduceOp`]: reduce-scatter, and the all-reduce by
//! any op (sum runs the built-in all-reduce).

use symm::{BoundSlice, Comm, DeviceSlice, Result, SymmetricMemory};

use super::call::{begin, grid, threads, Call, Kind};
use super::elem::{op_problem, ReduceElem, ReduceOp};
use super::ll::{run_ll, LlArgs};
use super::path::CollectivePath;
use crate::shared::checks::{
    disjoint, fits, invalid, out_fits, root_disjoint, root_problem, same_or_disjoint,
    vector_aligned, InPlace,
};
use crate::shared::grid::fixed_grid;
use crate::shared::staging::grow;

/// The elements of a [`reduce_scatter`] of `n` that rank `rank` of `world`
/// gets: chunks of `ceil(n / world)` in rank order, so the last ranks get
/// less (the rest of `n`), or none.
pub fn reduce_scatter_chunk(n: usize, world: usize, rank: usize) -> std::ops::Range<usize> {
    let chunk = n.div_ceil(world.max(1));
    let start = (rank * chunk).min(n);
    start..(start + chunk).min(n)
}

/// Reduce-scatter: rank r gets, in `out`, the reduction by `op` of its
/// chunk ([`reduce_scatter_chunk`]) of every rank's first `n` elements of
/// `input`. `n` need not divide by the world size.
pub fn reduce_scatter<T: ReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    op: ReduceOp,
) -> Result<()> {
    let world = comm.world_size();
    let chunk = n.div_ceil(world);
    let mine = reduce_scatter_chunk(n, world, comm.rank());
    let call = Call {
        kind: Kind::ReduceScatter { n, op },
        ll: Some(chunk),
        empty: n == 0,
        path: None,
    };
    let ready = begin(comm, input, ("out", out), call, |out| {
        if let Some(p) = op_problem::<T>(op) {
            return Err(p);
        }
        fits::<T>(input, n, "the input")?;
        out_fits(out, Some(mine.len()), "this rank's chunk")?;
        disjoint(
            input,
            out,
            InPlace::Form(
                "call `symm::functional::Collectives::reduce_scatter_in_place`, which stages \
                 the input and writes this rank's chunk over the same elements",
            ),
        )
    })?;
    let Some(mut r) = ready else {
        return Ok(());
    };
    if r.path == CollectivePath::Ll {
        let args = LlArgs {
            op,
            kind: 0,
            root: chunk as u32,
            flag: 1,
        };
        // SAFETY: `n` fits every rank's input, and this rank's chunk `out`.
        return unsafe {
            run_ll(
                comm,
                input,
                &mut r.out,
                n,
                chunk,
                args,
                r.ch,
                T::__reduce_ll,
            )
        };
    }
    let cfg = grid::<T>(comm, chunk as u64, || {
        T::__rs_grid(op, comm, threads::<T>())
    })?;
    // SAFETY: `n` fits every rank's input, and this rank's chunk `out`.
    unsafe {
        T::__reduce_scatter(
            comm,
            cfg,
            op,
            input,
            &mut r.out,
            n as u32,
            chunk as u32,
            r.ch,
        )
    }
}

/// All-reduce by `op`: every rank's `out[0..n]` gets the reduction of
/// every rank's first `n` elements of `input`. [`ReduceOp::Sum`] of the
/// types that combine in f32, from an input that starts 16-byte aligned,
/// runs the built-in
/// [`all_reduce`](crate::all_reduce::all_reduce) (its kernels and
/// measured dispatch); the other ops and types run an LL kernel
/// ([`reduce_ll`](super::reduce_ll)) or a two-shot one
/// ([`all_reduce_op_two_shot`](super::all_reduce_op_two_shot)) through a
/// scratch buffer that the first call (or a larger one) allocates and
/// later growth keeps alive, as the all-reduce's staging. `out` may be
/// exactly this rank's `input` (in place) but may not overlap it
/// otherwise.
pub fn all_reduce_op<T: ReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    op: ReduceOp,
) -> Result<()> {
    // The built-in all-reduce loads 16-byte vectors from the input's start;
    // an input at another offset (the same on every rank) takes the op
    // kernels, which load vectors past its head.
    let builtin = op == ReduceOp::Sum && !T::__NATIVE && vector_aligned(input);
    let call = Call {
        kind: Kind::AllReduce { n, op },
        // Sum runs the built-in all-reduce, which chooses its own kernel.
        ll: (!builtin).then_some(n),
        empty: n == 0,
        path: None,
    };
    let check = |bound: &BoundSlice<'_, T>| {
        if let Some(p) = op_problem::<T>(op) {
            return Err(p);
        }
        fits::<T>(input, n, "the input")?;
        out_fits(bound, Some(n), "n")?;
        // A sum has an in-place function of its own; the other ops run in
        // place on the input's own buffer only.
        let form = builtin.then_some("symm::kernels::all_reduce::all_reduce_in_place");
        same_or_disjoint(input, bound, form)
    };
    let Some(mut r) = begin(comm, input, ("out", &mut *out), call, check)? else {
        return Ok(());
    };
    if builtin {
        // Agreed like every op (a rank calling Sum where another calls Max
        // would otherwise run another kernel, and allocate staging its
        // peers do not); then the built-in's own kernels and dispatch.
        drop(r);
        return sum(comm, input, out, n);
    }
    if r.path == CollectivePath::Ll {
        let args = LlArgs {
            op,
            kind: 0,
            root: 0,
            flag: 0,
        };
        // SAFETY: `n` fits every rank's input and this rank's `out`.
        return unsafe { run_ll(comm, input, &mut r.out, n, n, args, r.ch, T::__reduce_ll) };
    }
    let scratch = scratch::<T>(comm, n)?;
    let cfg = grid::<T>(comm, n.div_ceil(comm.world_size()) as u64, || {
        T::__ar_grid(op, comm, threads::<T>())
    })?;
    // SAFETY: `n` fits every rank's input and this rank's `out`, and the
    // scratch holds at least `n` elements.
    unsafe { T::__all_reduce(comm, cfg, op, input, &scratch, &mut r.out, n as u32, r.ch) }
}

/// `out`'s first `src.len() / rows` elements get the reduction by `op` of
/// the `rows` equal rows of `src` (row r, standing for rank r's), on
/// `comm`'s stream, with the same bits as the group's reductions give
/// where row r is rank r's input ([`fold_rows`](super::fold_rows)); the
/// rest of `out` is not written. Local: no peer takes part. What a
/// reduction across NVLink domains runs once an all-to-all has brought
/// every rank's chunk to one rank. `rows` must divide `src` (at most
/// 2^32 − 1 elements), and `out` hold a row.
pub fn fold<T: ReduceElem>(
    comm: &Comm,
    op: ReduceOp,
    src: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSlice<T> + ?Sized),
    rows: usize,
) -> Result<()> {
    if let Some(p) = op_problem::<T>(op) {
        return Err(comm.error(p.kind, p.text));
    }
    let s = comm.bind("src", src)?;
    let mut o = comm.bind_mut("out", out)?;
    let chunk = s.len().checked_div(rows).unwrap_or(0);
    if rows == 0 || rows * chunk != s.len() || s.len() > u32::MAX as usize || o.len() < chunk {
        return Err(invalid(
            comm,
            format!(
                "fold of {} elements in {rows} rows into {}: the rows must be at least one, \
                 divide the source (of at most {} elements), and fit the output",
                s.len(),
                o.len(),
                u32::MAX
            ),
        ));
    }
    if chunk == 0 {
        return Ok(());
    }
    let threads = 256u32;
    // One element per thread, grid-stride; the emulator's few blocks only
    // mean more steps per thread.
    let blocks = (chunk as u64).div_ceil(u64::from(threads)).clamp(1, 1024) as u32;
    let cfg = symm::LaunchConfig::linear(fixed_grid(comm, blocks), threads);
    T::__fold(comm, cfg, op, &s, &mut o, rows as u32, chunk as u32)
}

/// Reduce: rank `root`'s `out` gets the reduction by `op` of every rank's
/// first `n` elements of `input`, combined as every reduction is
/// ([`ReduceOp`]); the other ranks' `out` is not touched and may be
/// empty. Always the pull kernel ([`reduce_pull`](super::reduce_pull)):
/// the root reads every peer's input between the barriers.
pub fn reduce<T: ReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    op: ReduceOp,
    root: usize,
) -> Result<()> {
    let world = comm.world_size();
    let call = Call {
        kind: Kind::Reduce { n, op, root },
        ll: None,
        empty: n == 0,
        path: None,
    };
    let is_root = comm.rank() == root;
    let ready = begin(comm, input, ("out", out), call, |out| {
        if let Some(p) = op_problem::<T>(op) {
            return Err(p);
        }
        if let Some(why) = root_problem(root, world) {
            return Err(why.into());
        }
        fits::<T>(input, n, "the input")?;
        if is_root {
            out_fits(out, Some(n), "n on the root")?;
            root_disjoint(input, out)?;
        }
        Ok(())
    })?;
    let Some(mut r) = ready else {
        return Ok(());
    };
    let cfg = grid::<T>(comm, n as u64, || {
        T::__reduce_grid(op, comm, threads::<T>())
    })?;
    // SAFETY: `n` fits every rank's input, and the root's `out` (the only
    // one written).
    unsafe {
        T::__reduce(
            comm,
            cfg,
            op,
            input,
            &mut r.out,
            n as u32,
            root as u32,
            r.ch,
        )
    }
}

/// The all-reduce by sum: the built-in
/// [`all_reduce`](crate::all_reduce::all_reduce) (its kernels and measured
/// dispatch) for the types that combine in f32, and [`all_reduce_op`]'s
/// kernels for the others (integers and f64) and for an input that does
/// not start 16-byte aligned (a view at another offset). Any output
/// works: where this rank's does not start 16-byte aligned, the built-in
/// writes a scratch of this rank's, copied out after (the same bits: both
/// sum in f32 in rank order).
pub fn sum<T: ReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    if T::__NATIVE || !vector_aligned(input) {
        return all_reduce_op(comm, input, out, n, ReduceOp::Sum);
    }
    let off_vector = comm
        .bind_mut("out", &mut *out)
        .is_ok_and(|b| !b.device_ptr().is_multiple_of(16) && b.len() >= n && n > 0);
    if !off_vector {
        return T::__builtin_sum(comm, input, out, n)
            .unwrap_or_else(|| all_reduce_op(comm, input, out, n, ReduceOp::Sum));
    }
    let scratch = sum_scratch::<T>(comm, n)?;
    let mut scratch = scratch.buf.lock().unwrap_or_else(|p| p.into_inner());
    T::__builtin_sum(comm, input, &mut *scratch, n)
        .unwrap_or_else(|| all_reduce_op(comm, input, &mut *scratch, n, ReduceOp::Sum))?;
    let short =
        |what: &str| crate::shared::checks::invalid(comm, format!("the sum's {what} is too short"));
    let all = comm.bind("scratch", &*scratch)?;
    let src = all.sub(0..n).ok_or_else(|| short("scratch"))?;
    let mut dst = comm.bind_mut("out", out)?;
    let mut dst = dst.sub_mut(0..n).ok_or_else(|| short("output"))?;
    comm.copy(&src, &mut dst)
}

/// This rank's scratch of at least `n` elements for [`sum`] into an
/// output off 16 bytes: plain memory of its own, grown as needed (older
/// ones kept for graphs captured with them).
fn sum_scratch<T: ReduceElem>(comm: &Comm, n: usize) -> Result<std::sync::Arc<SumScratch<T>>> {
    comm.extension(
        |s: &SumScratch<T>| s.len >= n,
        |older| {
            let len = n.next_power_of_two().max(4096);
            Ok(SumScratch {
                buf: std::sync::Mutex::new(comm.device_buffer::<T>(len)?),
                len,
                _older: older,
            })
        },
    )
}

/// [`sum_scratch`]'s memory.
struct SumScratch<T: symm::Element> {
    buf: std::sync::Mutex<symm::DeviceBuffer<T>>,
    len: usize,
    _older: Option<std::sync::Arc<SumScratch<T>>>,
}

/// A rank's scratch of at least `n` elements of `T` for
/// [`all_reduce_op`]: a growing staging ([`grow`]), which keeps older
/// areas alive for captured CUDA graphs, as a family of its own (no other
/// kernel's calls are ordered with these by a shared barrier, so none may
/// share it).
fn scratch<T: ReduceElem>(comm: &Comm, n: usize) -> Result<std::sync::Arc<SymmetricMemory>> {
    struct OpScratch;
    let (smem, _) = grow::<T, OpScratch>(comm, n, 1, 0)?;
    Ok(smem)
}
