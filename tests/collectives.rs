//! The collective set (all_gather, broadcast, reduce_scatter with every
//! op, all_to_all in its three forms): exact references, bitwise agreement
//! across ranks, odd sizes, uneven and zero splits, mismatched calls, and
//! back-to-back mixed calls with changing data and no host
//! synchronisation. On the emulator by default (CI); on GPU ranks with
//! `SYMM_KERNEL_TESTS_ON=gpu`.

use std::time::Duration;

use rand::Rng;
#[path = "support/targets.rs"]
mod targets;
use targets::{on_gpu, ranks};
#[path = "support/calls.rs"]
mod calls;
#[path = "support/data.rs"]
mod data;
#[path = "support/native.rs"]
mod native;
#[path = "support/tier.rs"]
mod tier;
use calls::{fill_input, fill_ref, keep};
use native::{native_ops, native_values, Native};

use symm::dsl::*;
use symm::kernels::collectives::{
    all_gather, all_gather_coalesced, all_gather_in_place, all_reduce_coalesced, all_reduce_op,
    all_to_all, all_to_all_single, all_to_all_v, broadcast, broadcast_in_place, fold, force_path,
    reduce_scatter, reduce_scatter_chunk, CollectivePath, CopyElem, ReduceElem, ReduceOp,
    BROADCAST_SAG_MIN_BYTES,
};
use symm::{compare_bits, run, Comm, CommOptions, ErrorKind, LaunchConfig};

const WORLDS: [usize; 5] = [1, 2, 3, 4, 8];

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(30))
}

/// Whether a case of `world` ranks and `n` elements is in the quick tier's
/// sample: the quick world sizes, below 64 Ki (the rest tier runs four and
/// eight ranks and the large sizes).
fn quick(world: usize, n: usize) -> bool {
    tier::quick_world(world) && n < 65536
}

/// The sizes a world runs: odd ones, and one above 64 Ki but on the
/// emulator only for small worlds and 4-byte types (time).
fn sizes<T: Scalar>(world: usize) -> Vec<usize> {
    let mut v = vec![1, 7, 4095];
    if on_gpu() || (world <= 4 && std::mem::size_of::<T>() == 4) {
        v.push(65536 + 3);
    }
    v
}

/// `n` elements of random bits (NaNs with payloads, infinities and
/// subnormals included for float types): copies must move them exactly.
fn random_bits<T: Scalar>(n: usize) -> Vec<T> {
    let mut rng = rand::rng();
    (0..n)
        .map(|_| T::__from_bits64(rng.random::<u64>()))
        .collect()
}

/// `n` finite values for reductions, full-mantissa and of mixed magnitude
/// (so a different order of operations shows), as `T`.
fn random_values<T: Scalar>(n: usize) -> Vec<T> {
    data::mixed_f32s(n).into_iter().map(T::from_f32).collect()
}

/// A value no result should hold: all bits set.
fn poison<T: Scalar>() -> T {
    T::__from_bits64(u64::MAX)
}

fn assert_bits<T: Scalar>(what: &str, got: &[T], want: &[T]) {
    if let Err(m) = compare_bits(got, want) {
        panic!("{what}: {m:?}");
    }
}

/// As [`assert_bits`], but any NaN matches any NaN: arithmetic on a NaN
/// gives a NaN whose payload is the hardware's (a GPU returns its
/// canonical NaN, a CPU propagates an operand's), so results computed by
/// arithmetic match a host reference only up to that. Across ranks the
/// bits still agree exactly (checked with [`assert_bits`]).
fn assert_values<T: Scalar>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let nan = |x: &T| x.to_f32().is_nan();
        if !(g.to_bits64() == w.to_bits64() || (nan(g) && nan(w))) {
            panic!(
                "{what}: element {i}: {:#x} vs {:#x}",
                g.to_bits64(),
                w.to_bits64()
            );
        }
    }
}

std::thread_local! {
    /// The path the calls of this test thread's cases are forced onto
    /// (`None`: each call's own dispatch).
    static FORCED: std::cell::Cell<Option<CollectivePath>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every case in it forced onto `path`.
fn on_path(path: Option<CollectivePath>, f: impl FnOnce()) {
    FORCED.set(path);
    f();
    FORCED.set(None);
}

/// Every rank's result (each rank's calls forced onto this thread's
/// [`FORCED`] path), or a panic naming `what` and the path.
fn on_ranks<R: Send>(
    world: usize,
    what: &str,
    f: impl Fn(&Comm) -> symm::Result<R> + Sync,
) -> Option<Vec<R>> {
    let ranks = ranks(world)?;
    let path = FORCED.get();
    Some(
        run(ranks, options(), |c| {
            force_path(c, path)?;
            f(c)
        })
        .unwrap_or_else(|e| panic!("{what} (path {path:?}): {e}")),
    )
}

fn all_gather_case<T: CopyElem>(world: usize, n: usize, in_place: bool) {
    let inputs: Vec<Vec<T>> = (0..world).map(|_| random_bits::<T>(n)).collect();
    let want: Vec<T> = inputs.concat();
    let what = format!(
        "all_gather {} world {world} n {n} in_place {in_place}",
        T::DTYPE
    );
    let Some(outs) = on_ranks(world, &what, |c| {
        if in_place {
            let buf = c.alloc::<T>(world * n)?;
            let mut init = vec![poison::<T>(); world * n];
            init[c.rank() * n..(c.rank() + 1) * n].copy_from_slice(&inputs[c.rank()]);
            buf.copy_from_host(&init)?;
            all_gather_in_place(c, &buf, n)?;
            c.synchronize()?;
            return buf.to_host();
        }
        let buf = c.alloc::<T>(n)?;
        buf.copy_from_host(&inputs[c.rank()])?;
        let s = buf.rendezvous()?;
        // One more element than needed: it must stay poisoned.
        let mut out = c.device_buffer_from(&vec![poison::<T>(); world * n + 1])?;
        all_gather(c, &s, &mut out, n)?;
        c.synchronize()?;
        out.to_host()
    }) else {
        return;
    };
    for (r, o) in outs.iter().enumerate() {
        assert_bits(&format!("{what}, rank {r}"), &o[..world * n], &want);
        if !in_place {
            assert_bits(
                &format!("{what}, rank {r}, past the end"),
                &o[world * n..],
                &[poison::<T>()],
            );
        }
    }
}

/// Every size and world for `T`; in the quick tier only where
/// `quick_type` (a sample of the types) and [`quick`] say.
fn all_gather_every_size<T: CopyElem>(quick_type: bool) {
    for world in WORLDS {
        for n in sizes::<T>(world) {
            if tier::runs(quick_type && quick(world, n)) {
                all_gather_case::<T>(world, n, false);
            }
        }
        if tier::runs(quick_type && quick(world, 7)) {
            all_gather_case::<T>(world, 7, true);
        }
    }
}

#[test]
fn all_gather_moves_every_type_bit_for_bit() {
    // The quick tier: one type of each width, and fp8.
    all_gather_every_size::<f32>(true);
    all_gather_every_size::<f64>(false);
    all_gather_every_size::<bf16>(true);
    all_gather_every_size::<f16>(false);
    all_gather_every_size::<u8>(true);
    all_gather_every_size::<u32>(false);
    all_gather_every_size::<u64>(true);
    all_gather_every_size::<i32>(false);
    all_gather_every_size::<i64>(false);
    all_gather_every_size::<f8e4m3>(true);
    all_gather_every_size::<f8e5m2>(false);
    for world in WORLDS {
        if tier::runs(quick(world, 4095)) {
            all_gather_case::<f32>(world, 4095, true);
        }
    }
}

fn broadcast_case<T: CopyElem>(world: usize, n: usize, root: usize, in_place: bool) {
    broadcast_case_at::<T>(world, n, root, in_place, 0);
}

/// [`broadcast_case`], out of place into an output `off` elements past the
/// start of its buffer (which holds poison before it).
fn broadcast_case_at<T: CopyElem>(world: usize, n: usize, root: usize, in_place: bool, off: usize) {
    let inputs: Vec<Vec<T>> = (0..world).map(|_| random_bits::<T>(n)).collect();
    let what = format!(
        "broadcast {} world {world} n {n} root {root} in_place {in_place} off {off}",
        T::DTYPE
    );
    let Some(outs) = on_ranks(world, &what, |c| {
        let buf = c.alloc::<T>(n)?;
        buf.copy_from_host(&inputs[c.rank()])?;
        if in_place {
            broadcast_in_place(c, &buf, n, root)?;
            c.synchronize()?;
            return buf.to_host();
        }
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer_from(&vec![poison::<T>(); off + n + 1])?;
        {
            let mut whole = c.bind_mut("out", &mut out)?;
            let mut at = whole.sub_mut(off..off + n + 1).expect("in bounds");
            broadcast(c, &s, &mut at, n, root)?;
        }
        c.synchronize()?;
        let mut o = out.to_host()?;
        assert!(o[..off]
            .iter()
            .all(|x| x.__to_bits64() == poison::<T>().__to_bits64()));
        o.drain(..off);
        // The root's input must be untouched.
        o.extend(buf.to_host()?);
        Ok(o)
    }) else {
        return;
    };
    for (r, o) in outs.iter().enumerate() {
        assert_bits(&format!("{what}, rank {r}"), &o[..n], &inputs[root]);
        if !in_place {
            assert_bits(
                &format!("{what}, rank {r}, past the end"),
                &o[n..n + 1],
                &[poison::<T>()],
            );
            assert_bits(
                &format!("{what}, rank {r}'s input"),
                &o[n + 1..],
                &inputs[r],
            );
        }
    }
}

#[test]
fn broadcast_from_every_root() {
    for world in WORLDS {
        if tier::runs(quick(world, 4095)) {
            for root in 0..world {
                broadcast_case::<f32>(world, 4095, root, false);
                broadcast_case::<u8>(world, 7, root, true);
            }
        }
        for n in sizes::<f32>(world) {
            if tier::runs(quick(world, n)) {
                broadcast_case::<bf16>(world, n, world - 1, false);
                broadcast_case::<i64>(world, n, 0, true);
            }
        }
    }
}

/// Past `BROADCAST_SAG_MIN_BYTES` on 3 or more ranks the broadcast
/// scatters over the non-roots and all-gathers: from the first and last
/// roots (every root at 3 ranks), in place and not, ending mid-vector, and
/// into an output one element past a 16-byte boundary (element by
/// element). The rest tier's: the emulator's worlds 3 and 4 only (time).
#[test]
fn a_large_broadcast_scatters_and_all_gathers() {
    let n = BROADCAST_SAG_MIN_BYTES / 4 + 3;
    for world in WORLDS.into_iter().filter(|&w| w >= 3) {
        if !tier::runs(quick(world, n)) || (world > 4 && !on_gpu()) {
            continue;
        }
        let roots: Vec<usize> = match world {
            3 => (0..3).collect(),
            _ => vec![0, world - 1],
        };
        for root in roots {
            broadcast_case::<f32>(world, n, root, false);
            broadcast_case::<f32>(world, n, root, true);
        }
        broadcast_case_at::<f32>(world, n, 1, false, 1);
        broadcast_case::<bf16>(world, 2 * n, world - 1, true);
        broadcasts_in_one_group(world, &[n, 2 * n + 5, n]);
    }
}

/// Out-of-place broadcasts of `sizes` (f32, from rank 1) back to back in
/// one group with no host synchronisation: the staging reused, then grown
/// (the next call pushes into it while the last's parts may still be
/// copied out), every output exact.
fn broadcasts_in_one_group(world: usize, sizes: &[usize]) {
    let inputs: Vec<Vec<f32>> = sizes.iter().map(|&n| random_bits::<f32>(n)).collect();
    let what = format!("broadcasts of {sizes:?} back to back, world {world}");
    let Some(outs) = on_ranks(world, &what, |c| {
        let bufs = sizes
            .iter()
            .zip(&inputs)
            .map(|(&n, x)| {
                let buf = c.alloc::<f32>(n)?;
                // The non-roots' inputs hold junk the output must not get.
                if c.rank() == 1 {
                    buf.copy_from_host(x)?;
                } else {
                    buf.copy_from_host(&vec![poison::<f32>(); n])?;
                }
                let s = buf.rendezvous()?;
                let out = c.device_buffer_from(&vec![poison::<f32>(); n])?;
                Ok((buf, s, out))
            })
            .collect::<symm::Result<Vec<_>>>()?;
        c.synchronize()?;
        let mut bufs = bufs;
        for ((_, s, out), &n) in bufs.iter_mut().zip(sizes) {
            broadcast(c, s, out, n, 1)?;
        }
        c.synchronize()?;
        bufs.iter()
            .map(|(_, _, out)| out.to_host())
            .collect::<symm::Result<Vec<Vec<f32>>>>()
    }) else {
        return;
    };
    for (r, o) in outs.iter().enumerate() {
        for (k, want) in inputs.iter().enumerate() {
            assert_bits(&format!("{what}, rank {r}, call {k}"), &o[k], want);
        }
    }
}

/// The reduce-scatter result of rank `rank`, computed as the kernels
/// compute it (f32, rank order, one rounding), so compared bit for bit.
fn rs_reference<T: Scalar>(inputs: &[Vec<T>], n: usize, rank: usize, op: ReduceOp) -> Vec<T> {
    let world = inputs.len();
    reduce_scatter_chunk(n, world, rank)
        .map(|i| {
            let mut acc = inputs[0][i].to_f32();
            for inp in &inputs[1..] {
                acc = op.combine(acc, inp[i].to_f32());
            }
            if op == ReduceOp::Avg {
                acc /= world as f32;
            }
            T::from_f32(acc)
        })
        .collect()
}

fn reduce_scatter_case<T: ReduceElem>(world: usize, n: usize, op: ReduceOp, inputs: &[Vec<T>]) {
    let what = format!("reduce_scatter {} {op:?} world {world} n {n}", T::DTYPE);
    let Some(outs) = on_ranks(world, &what, |c| {
        let buf = c.alloc::<T>(n)?;
        buf.copy_from_host(&inputs[c.rank()])?;
        let s = buf.rendezvous()?;
        let len = reduce_scatter_chunk(n, world, c.rank()).len();
        let mut out = c.device_buffer_from(&vec![poison::<T>(); len + 1])?;
        reduce_scatter(c, &s, &mut out, n, op)?;
        c.synchronize()?;
        out.to_host()
    }) else {
        return;
    };
    for (r, o) in outs.iter().enumerate() {
        let want = rs_reference(inputs, n, r, op);
        assert_values(&format!("{what}, rank {r}"), &o[..want.len()], &want);
        assert_bits(
            &format!("{what}, rank {r}, past its chunk"),
            &o[want.len()..],
            &[poison::<T>()],
        );
        // Against float64 too, for the sum: the reference above shares the
        // kernels' arithmetic, so it cannot catch a wrong formula alone.
        if op == ReduceOp::Sum && std::mem::size_of::<T>() == 4 {
            for (k, i) in reduce_scatter_chunk(n, world, r).enumerate() {
                let exact: f64 = inputs.iter().map(|v| f64::from(v[i].to_f32())).sum();
                let got = f64::from(o[k].to_f32());
                // Only where f32 cannot overflow: with infinities or
                // values near f32::MAX the two differ by design (the
                // bitwise reference above covers those).
                let tame = inputs.iter().all(|v| v[i].to_f32().abs() < 1e30);
                let close = !tame || (got - exact).abs() <= 1e-5 * exact.abs().max(1.0);
                assert!(close, "{what}, rank {r}, element {i}: {got} vs {exact}");
            }
        }
    }
}

/// `fold` of the rows that every rank's chunk would be (rank q's chunk r
/// as row q, gathered on the host) gives, bit for bit, what the group's
/// reduce-scatter gives rank r from the ranks' own memory: every op and
/// type it takes, random data with poisoned outputs. Bad shapes are
/// errors.
fn fold_case<T: ReduceElem>(world: usize, n: usize) {
    let inputs: Vec<Vec<T>> = (0..world).map(|_| random_values::<T>(n)).collect();
    for op in ReduceOp::ALL {
        let what = format!("fold {} {op:?} world {world} n {n}", T::DTYPE);
        let Some(outs) = on_ranks(world, &what, |c| {
            let buf = c.alloc::<T>(n)?;
            buf.copy_from_host(&inputs[c.rank()])?;
            let s = buf.rendezvous()?;
            let mine = reduce_scatter_chunk(n, world, c.rank());
            let mut rs = c.device_buffer_from(&vec![poison::<T>(); mine.len()])?;
            if let Err(e) = reduce_scatter(c, &s, &mut rs, n, op) {
                // (An op the type does not take: fold refuses it alike.)
                let rows = c.device_buffer::<T>(world * mine.len())?;
                let mut out = c.device_buffer::<T>(mine.len())?;
                let f = fold(c, op, &rows, &mut out, world).expect_err("fold refuses it too");
                assert_eq!(f.kind(), e.kind(), "{f} vs {e}");
                return Ok(None);
            }
            c.synchronize()?;
            let rows: Vec<T> = inputs
                .iter()
                .flat_map(|v| v[mine.clone()].to_vec())
                .collect();
            let len = rows.len();
            let rows = c.device_buffer_from(&rows)?;
            // An output longer than a row: only its first row's worth is
            // written.
            let mut out = c.device_buffer_from(&vec![poison::<T>(); mine.len() + 3])?;
            fold(c, op, &rows, &mut out, world)?;
            c.synchronize()?;
            let out = out.to_host()?;
            assert_bits(&what, &out[mine.len()..], &[poison::<T>(); 3]);
            // No rows, rows that do not divide the source, and an output
            // shorter than a row.
            let mut short = c.device_buffer::<T>(mine.len().saturating_sub(1))?;
            let mut bad = vec![0];
            if len > 0 {
                let e = fold(c, op, &rows, &mut short, world).expect_err("a short output");
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
                bad.push(len + 1);
            }
            for r in bad {
                let e = fold(c, op, &rows, &mut short, r).expect_err("a bad shape");
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            }
            Ok(Some((rs.to_host()?, out[..mine.len()].to_vec())))
        }) else {
            return;
        };
        for (r, got) in outs.iter().enumerate() {
            if let Some((rs, folded)) = got {
                assert_bits(&format!("{what}, rank {r}"), folded, rs);
            }
        }
    }
}

#[test]
fn fold_matches_the_reductions() {
    // Every world 1-8: the fold's rows are a world's ranks.
    for world in 1..=8 {
        let q = world == 3;
        if tier::runs(q) {
            fold_case::<f32>(world, 4099);
            fold_case::<bf16>(world, 37);
            fold_case::<i32>(world, 100);
        }
        if tier::runs(false) {
            fold_case::<f16>(world, 333);
            fold_case::<f8e4m3>(world, 64);
            fold_case::<f64>(world, 65);
            fold_case::<u64>(world, 65);
        }
    }
}

/// Every op, size and world for `T`; in the quick tier only where
/// `quick_type` and [`quick`] say.
fn reduce_scatter_every_op<T: ReduceElem>(quick_type: bool) {
    for world in WORLDS {
        for n in sizes::<T>(world) {
            if !tier::runs(quick_type && quick(world, n)) {
                continue;
            }
            let inputs: Vec<Vec<T>> = (0..world).map(|_| random_values::<T>(n)).collect();
            for op in ReduceOp::ALL {
                reduce_scatter_case::<T>(world, n, op, &inputs);
            }
        }
    }
}

#[test]
fn reduce_scatter_every_op_and_type() {
    reduce_scatter_every_op::<f32>(true);
    reduce_scatter_every_op::<bf16>(true);
    reduce_scatter_every_op::<f16>(false);
    reduce_scatter_every_op::<f8e4m3>(true);
    reduce_scatter_every_op::<f8e5m2>(false);
}

fn all_reduce_op_case<T: ReduceElem + symm::kernels::all_reduce::AllReduceElem>(
    world: usize,
    n: usize,
    op: ReduceOp,
    in_place: bool,
    inputs: &[Vec<T>],
) {
    let what = format!(
        "all_reduce_op {} {op:?} world {world} n {n} in_place {in_place}",
        T::DTYPE
    );
    let Some(outs) = on_ranks(world, &what, |c| {
        let buf = c.alloc::<T>(n)?;
        buf.copy_from_host(&inputs[c.rank()])?;
        let s = buf.rendezvous()?;
        if in_place {
            all_reduce_op(c, &s, &mut buf.slice(..)?, n, op)?;
            c.synchronize()?;
            return buf.to_host();
        }
        let mut out = c.device_buffer_from(&vec![poison::<T>(); n + 1])?;
        all_reduce_op(c, &s, &mut out, n, op)?;
        c.synchronize()?;
        out.to_host()
    }) else {
        return;
    };
    for (r, o) in outs.iter().enumerate() {
        assert_bits(
            &format!("{what}: rank {r} against rank 0"),
            &o[..n],
            &outs[0][..n],
        );
        if !in_place {
            assert_bits(
                &format!("{what}, rank {r}, past the end"),
                &o[n..],
                &[poison::<T>()],
            );
        }
    }
    if op == ReduceOp::Sum {
        // The built-in all-reduce's own order (tests/all_reduce.rs covers
        // it bit for bit); here against float64.
        for i in 0..n {
            let exact: f64 = inputs.iter().map(|v| f64::from(v[i].to_f32())).sum();
            let got = f64::from(outs[0][i].to_f32());
            assert!(
                (got - exact).abs() <= tolerance(T::DTYPE, exact),
                "{what}, element {i}: {got} vs {exact}"
            );
        }
    } else {
        let want: Vec<T> = (0..n)
            .map(|i| {
                let mut acc = inputs[0][i].to_f32();
                for inp in &inputs[1..] {
                    acc = op.combine(acc, inp[i].to_f32());
                }
                if op == ReduceOp::Avg {
                    acc /= world as f32;
                }
                T::from_f32(acc)
            })
            .collect();
        assert_values(&what, &outs[0][..n], &want);
    }
}

/// How far a sum of a few values in (-1, 1), exact in f32 and rounded once
/// to `dtype`, may be from the float64 sum: half an ulp of the type's
/// mantissa, and its smallest subnormal's half near zero.
fn tolerance(dtype: symm::DType, want: f64) -> f64 {
    let (mantissa, tiny) = match dtype {
        symm::DType::BF16 => (7, 2f64.powi(-133)),
        symm::DType::F16 => (10, 2f64.powi(-24)),
        symm::DType::F8E4M3 => (3, 2f64.powi(-9)),
        symm::DType::F8E5M2 => (2, 2f64.powi(-16)),
        _ => return 1e-5,
    };
    want.abs() * 2f64.powi(-mantissa - 1) + tiny / 2.0 + 1e-6
}

/// Every op, size and world for `T`; in the quick tier only where
/// `quick_type` and [`quick`] say.
fn all_reduce_every_op<T: ReduceElem + symm::kernels::all_reduce::AllReduceElem>(quick_type: bool) {
    for world in WORLDS {
        for n in sizes::<T>(world) {
            if !tier::runs(quick_type && quick(world, n)) {
                continue;
            }
            let inputs: Vec<Vec<T>> = (0..world).map(|_| random_values::<T>(n)).collect();
            for op in ReduceOp::ALL {
                all_reduce_op_case::<T>(world, n, op, false, &inputs);
            }
            all_reduce_op_case::<T>(world, n, ReduceOp::Max, true, &inputs);
        }
    }
}

#[test]
fn all_reduce_every_op_and_type() {
    all_reduce_every_op::<f32>(true);
    all_reduce_every_op::<bf16>(true);
    all_reduce_every_op::<f16>(false);
    all_reduce_every_op::<f8e4m3>(false);
    all_reduce_every_op::<f8e5m2>(true);
}

/// `T`'s reduce-scatter, all-reduce (out of place and in place) and
/// coalesced all-reduce by every op on `world` ranks: each element exact
/// against the reference, every rank's bits the same, nothing written past
/// the output; and avg of an integer the same `Unsupported` error on every
/// rank.
fn native_case<T: Native>(world: usize, n: usize) {
    let inputs: Vec<Vec<T>> = (0..world).map(|_| native_values::<T>(n, true)).collect();
    let at = |op: ReduceOp, i: usize| {
        let vals: Vec<T> = inputs.iter().map(|v| v[i]).collect();
        T::reduce(op, &vals)
    };
    let ranges = [0..n / 3, n / 2..n];
    for op in native_ops::<T>() {
        let what = format!("{} {op:?} world {world} n {n}", T::DTYPE);
        let Some(outs) = on_ranks(world, &what, |c| {
            let buf = c.alloc::<T>(n)?;
            buf.copy_from_host(&inputs[c.rank()])?;
            let s = buf.rendezvous()?;
            let len = reduce_scatter_chunk(n, world, c.rank()).len();
            let mut rs = c.device_buffer_from(&vec![poison::<T>(); len + 1])?;
            reduce_scatter(c, &s, &mut rs, n, op)?;
            let mut ar = c.device_buffer_from(&vec![poison::<T>(); n + 1])?;
            all_reduce_op(c, &s, &mut ar, n, op)?;
            let rs = rs.to_host()?;
            let ar = ar.to_host()?;
            all_reduce_op(c, &s, &mut buf.slice(..)?, n, op)?;
            let in_place = buf.to_host()?;
            buf.copy_from_host(&inputs[c.rank()])?;
            all_reduce_coalesced(c, &buf, &ranges, op)?;
            c.synchronize()?;
            Ok([rs, ar, in_place, buf.to_host()?])
        }) else {
            return;
        };
        for (r, [rs, ar, in_place, coalesced]) in outs.iter().enumerate() {
            let mut want: Vec<T> = reduce_scatter_chunk(n, world, r)
                .map(|i| at(op, i))
                .collect();
            want.push(poison::<T>());
            assert_values(&format!("{what}: reduce_scatter, rank {r}"), rs, &want);
            let mut want: Vec<T> = (0..n).map(|i| at(op, i)).collect();
            assert_values(
                &format!("{what}: in-place all_reduce_op, rank {r}"),
                in_place,
                &want,
            );
            let mut merged = inputs[r].clone();
            for i in ranges.iter().flat_map(|r| r.clone()) {
                merged[i] = want[i];
            }
            assert_values(
                &format!("{what}: all_reduce_coalesced, rank {r}"),
                coalesced,
                &merged,
            );
            want.push(poison::<T>());
            assert_values(&format!("{what}: all_reduce_op, rank {r}"), ar, &want);
            // A NaN that arithmetic made carries the hardware's payload:
            // against the host's reference any NaN matches, between ranks
            // every bit.
            assert_bits(&format!("{what}: rank {r} against rank 0"), ar, &outs[0][1]);
            let chunk_of = |k: usize| reduce_scatter_chunk(n, world, k);
            assert_bits(
                &format!("{what}: reduce_scatter, rank {r} against all_reduce_op"),
                &rs[..chunk_of(r).len()],
                &outs[0][1][chunk_of(r)],
            );
        }
    }
    if !T::DTYPE.is_float() {
        let what = format!("{} Avg world {world}", T::DTYPE);
        let errs = on_ranks(world, &what, |c| {
            let buf = c.alloc::<T>(n)?;
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer::<T>(n)?;
            let e = all_reduce_op(c, &s, &mut out, n, ReduceOp::Avg).expect_err("avg of integers");
            let f = reduce_scatter(c, &s, &mut out, n, ReduceOp::Avg).expect_err("avg of integers");
            Ok([e, f])
        });
        for e in errs.into_iter().flatten().flatten() {
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{what}: {e}");
            let text = e.to_string();
            assert!(
                text.contains("ReduceOp::Avg takes floating-point elements")
                    && text.contains("Sum, Min, Max and Prod"),
                "{what}: {text}"
            );
        }
    }
}

/// The integer and f64 reductions: every op, path and odd size at every
/// world (i64 and u32 at 2 and 8 on the emulator), exact and bitwise
/// across ranks.
#[test]
fn native_reductions_every_op_type_and_path() {
    fn each<T: Native>(quick_type: bool) {
        for world in WORLDS {
            // (The rest tier's extra types, i64 and u32, at 2 and 8 ranks on
            // the emulator, for CI's time: each has the width of a type that
            // runs every world (u64, i32) and differs only in sign.)
            if !quick_type && !on_gpu() && !matches!(world, 2 | 8) {
                continue;
            }
            for path in [CollectivePath::Ll, CollectivePath::Pull] {
                for n in [1, 7, 4095] {
                    if !tier::runs(
                        quick_type && quick(world, n) && (n < 4095 || path == CollectivePath::Pull),
                    ) {
                        continue;
                    }
                    on_path(Some(path), || native_case::<T>(world, n));
                }
            }
        }
        // Past one LL stage and the pull kernels' first vectors, on its own dispatch.
        for world in [2, 3] {
            if tier::runs(false) && (on_gpu() || quick_type) {
                native_case::<T>(world, 65536 + 5);
            }
        }
    }
    each::<i32>(true);
    each::<u64>(true);
    each::<f64>(true);
    each::<i64>(false);
    each::<u32>(false);
}

/// The reduction by `op` of every rank's element `i`, as the kernels
/// compute it for a type that combines in f32 (rank order, one rounding).
fn f32_reduce_at<T: Scalar>(inputs: &[Vec<T>], i: usize, op: ReduceOp) -> T {
    let mut acc = inputs[0][i].to_f32();
    for inp in &inputs[1..] {
        acc = op.combine(acc, inp[i].to_f32());
    }
    if op == ReduceOp::Avg {
        acc /= inputs.len() as f32;
    }
    T::from_f32(acc)
}

/// Gather, scatter and reduce with `root` on `world` ranks, `n` elements
/// per rank: the root's (or each rank's) result exact, every other
/// rank's output untouched (poisoned before, still poisoned after).
fn root_case<T: CopyElem, R: ReduceElem>(
    world: usize,
    n: usize,
    root: usize,
    reduce_inputs: &[Vec<R>],
    reduce_ref: &dyn Fn(usize, ReduceOp) -> R,
    ops: &[ReduceOp],
) {
    let what = format!(
        "{} / {} world {world} n {n} root {root}",
        T::DTYPE,
        R::DTYPE
    );
    let inputs: Vec<Vec<T>> = (0..world).map(|_| random_bits::<T>(world * n)).collect();
    let Some(outs) = on_ranks(world, &what, |c| {
        let me = c.rank();
        let buf = c.alloc::<T>(world * n)?;
        buf.copy_from_host(&inputs[me])?;
        let s = buf.rendezvous()?;
        let mut g = c.device_buffer_from(&vec![poison::<T>(); world * n + 1])?;
        symm::kernels::collectives::gather(c, &s.clone(), &mut g, n, root)?;
        let mut sc = c.device_buffer_from(&vec![poison::<T>(); n + 1])?;
        symm::kernels::collectives::scatter(c, &s, &mut sc, n, root)?;
        let rbuf = c.alloc::<R>(n)?;
        rbuf.copy_from_host(&reduce_inputs[me])?;
        let rs = rbuf.rendezvous()?;
        let mut reduced = Vec::new();
        for &op in ops {
            let mut o = c.device_buffer_from(&vec![poison::<R>(); n + 1])?;
            symm::kernels::collectives::reduce(c, &rs, &mut o, n, op, root)?;
            reduced.push(o.to_host()?);
        }
        c.synchronize()?;
        Ok((g.to_host()?, sc.to_host()?, reduced))
    }) else {
        return;
    };
    for (r, (g, sc, reduced)) in outs.iter().enumerate() {
        let mut want: Vec<T> = if r == root {
            inputs.iter().flat_map(|v| v[..n].to_vec()).collect()
        } else {
            vec![poison::<T>(); world * n]
        };
        want.push(poison::<T>());
        assert_bits(&format!("{what}: gather, rank {r}"), g, &want);
        let mut want = inputs[root][r * n..(r + 1) * n].to_vec();
        want.push(poison::<T>());
        assert_bits(&format!("{what}: scatter, rank {r}"), sc, &want);
        for (&op, o) in ops.iter().zip(reduced) {
            let mut want: Vec<R> = if r == root {
                (0..n).map(|i| reduce_ref(i, op)).collect()
            } else {
                vec![poison::<R>(); n]
            };
            want.push(poison::<R>());
            assert_values(&format!("{what}: reduce {op:?}, rank {r}"), o, &want);
        }
    }
}

/// Gather, scatter and reduce to and from every root (a sample of them at
/// eight ranks), at odd sizes, for copies of any type and reductions of
/// floats and integers; a root out of range, or roots that differ, fail
/// every rank.
#[test]
fn root_collectives_from_and_to_every_root() {
    for world in WORLDS {
        for n in [1, 7, 4095] {
            if !tier::runs(quick(world, n) && n < 4095) {
                continue;
            }
            let roots: Vec<usize> = if world == 8 {
                vec![0, 3, 7]
            } else {
                (0..world).collect()
            };
            for root in roots {
                let f: Vec<Vec<bf16>> = (0..world).map(|_| random_values::<bf16>(n)).collect();
                root_case::<f32, bf16>(
                    world,
                    n,
                    root,
                    &f,
                    &|i, op| f32_reduce_at(&f, i, op),
                    &ReduceOp::ALL,
                );
                let x: Vec<Vec<i64>> = (0..world).map(|_| native_values::<i64>(n, true)).collect();
                let at = |i: usize, op: ReduceOp| {
                    let vals: Vec<i64> = x.iter().map(|v| v[i]).collect();
                    i64::reduce(op, &vals)
                };
                root_case::<u8, i64>(world, n, root, &x, &at, &native_ops::<i64>());
            }
        }
    }
    if !tier::quick_test() {
        return;
    }
    for world in [2, 3] {
        let Some(fails) = every_rank_fails(world, |c| {
            let buf = c.alloc::<f32>(8 * world)?;
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer::<f32>(8 * world)?;
            symm::kernels::collectives::gather(c, &s, &mut out, 8, world)
        }) else {
            return;
        };
        for f in &fails {
            assert_eq!(f.kind, ErrorKind::InvalidArgument, "{f}");
            assert!(
                f.contains(&format!("root {world} is not a rank of {world}")),
                "{f}"
            );
        }
        let Some(fails) = every_rank_fails(world, |c| {
            let buf = c.alloc::<f32>(8)?;
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer::<f32>(8)?;
            let root = c.rank().min(1);
            symm::kernels::collectives::reduce(c, &s, &mut out, 8, ReduceOp::Sum, root)
        }) else {
            return;
        };
        for f in &fails {
            assert_eq!(f.kind, ErrorKind::Mismatch, "{f}");
            assert!(
                f.contains("reduce of 8 elements of f32 by Sum to root 0")
                    && f.contains("to root 1"),
                "{f}"
            );
        }
    }
}

/// Every collective on a view of a symmetric allocation at element offset
/// `k` (`SymmView::symmetric`), into an output at element offset `j` of
/// another: for 4-byte elements every offset modulo a 16-byte vector, for
/// 8-byte ones both, so the kernels take vectors where the two reach a
/// boundary together and single elements elsewhere (the emulator faults
/// on a misaligned vector). Each result exact, every element outside the
/// output's range untouched.
fn sub_range_case<T: Native + CopyElem>(world: usize, n: usize, k: usize, j: usize) {
    let what = format!(
        "{} world {world} n {n} input at +{k} output at +{j}",
        T::DTYPE
    );
    let len = world * n;
    let inputs: Vec<Vec<T>> = (0..world)
        .map(|_| native_values::<T>(k + len + 3, false))
        .collect();
    let at = |op: ReduceOp, i: usize| {
        let vals: Vec<T> = inputs.iter().map(|v| v[k + i]).collect();
        T::reduce(op, &vals)
    };
    let Some(outs) = on_ranks(world, &what, |c| {
        let me = c.rank();
        let buf = c.alloc::<T>(k + len + 3)?;
        buf.copy_from_host(&inputs[me])?;
        let view = buf.slice(k..k + len)?;
        let s = view.symmetric()?;
        let short = buf.slice(k..k + n)?.symmetric()?;
        let out = c.alloc::<T>(j + len + 2)?;
        let mut results = Vec::new();
        let mut run_into = |f: &mut dyn FnMut(&mut symm::SymmView<'_, T>) -> symm::Result<()>,
                            m: usize|
         -> symm::Result<()> {
            out.copy_from_host(&vec![poison::<T>(); j + len + 2])?;
            // One element longer than the call writes: it stays.
            f(&mut out.slice(j..j + m + 1)?)?;
            c.synchronize()?;
            results.push(out.to_host()?);
            Ok(())
        };
        run_into(&mut |o| all_gather(c, &short, o, n), len)?;
        run_into(&mut |o| broadcast(c, &s, o, len, world - 1), len)?;
        run_into(&mut |o| all_to_all(c, &s, o, n), len)?;
        run_into(&mut |o| reduce_scatter(c, &s, o, len, ReduceOp::Sum), n)?;
        run_into(&mut |o| all_reduce_op(c, &s, o, len, ReduceOp::Sum), len)?;
        run_into(&mut |o| all_reduce_op(c, &s, o, len, ReduceOp::Max), len)?;
        run_into(
            &mut |o| symm::kernels::collectives::gather(c, &short, o, n, 0),
            len,
        )?;
        run_into(
            &mut |o| symm::kernels::collectives::scatter(c, &s, o, n, world - 1),
            n,
        )?;
        run_into(
            &mut |o| symm::kernels::collectives::reduce(c, &s, o, len, ReduceOp::Min, 0),
            len,
        )?;
        // In place, on the view itself; what lies around it stays.
        all_reduce_op(c, &s, &mut buf.slice(k..k + len)?, len, ReduceOp::Sum)?;
        c.synchronize()?;
        results.push(buf.to_host()?);
        Ok(results)
    }) else {
        return;
    };
    let sum: Vec<T> = (0..len).map(|i| at(ReduceOp::Sum, i)).collect();
    for (r, res) in outs.iter().enumerate() {
        let expect = |name: &str, got: &[T], body: Vec<T>| {
            let mut want = vec![poison::<T>(); j];
            let m = body.len();
            want.extend(body);
            want.extend(vec![poison::<T>(); got.len() - j - m]);
            assert_values(&format!("{what}: {name}, rank {r}"), got, &want);
        };
        expect(
            "all_gather",
            &res[0],
            inputs.iter().flat_map(|v| v[k..k + n].to_vec()).collect(),
        );
        expect("broadcast", &res[1], inputs[world - 1][k..k + len].to_vec());
        expect(
            "all_to_all",
            &res[2],
            (0..world)
                .flat_map(|p| inputs[p][k + r * n..k + (r + 1) * n].to_vec())
                .collect(),
        );
        expect("reduce_scatter", &res[3], sum[r * n..(r + 1) * n].to_vec());
        expect("all_reduce_op sum", &res[4], sum.clone());
        expect(
            "all_reduce_op max",
            &res[5],
            (0..len).map(|i| at(ReduceOp::Max, i)).collect(),
        );
        if r == 0 {
            expect(
                "gather",
                &res[6],
                inputs.iter().flat_map(|v| v[k..k + n].to_vec()).collect(),
            );
            expect(
                "reduce",
                &res[8],
                (0..len).map(|i| at(ReduceOp::Min, i)).collect(),
            );
        } else {
            expect("gather (not the root)", &res[6], vec![poison::<T>(); len]);
            expect("reduce (not the root)", &res[8], vec![poison::<T>(); len]);
        }
        let sc = inputs[world - 1][k + r * n..k + (r + 1) * n].to_vec();
        expect("scatter", &res[7], sc);
        let mut whole = inputs[r].clone();
        whole[k..k + len].copy_from_slice(&sum);
        assert_values(&format!("{what}: in place, rank {r}"), &res[9], &whole);
    }
}

/// The copies on sub-ranges of 1- and 2-byte elements, whose vectors hold
/// 16 and 8 (heads up to 15 elements long): bits moved exactly, nothing
/// written outside the output's range.
fn sub_range_copies<T: CopyElem>(world: usize, n: usize, k: usize, j: usize) {
    let what = format!(
        "{} world {world} n {n} input at +{k} output at +{j}",
        T::DTYPE
    );
    let len = world * n;
    let inputs: Vec<Vec<T>> = (0..world).map(|_| random_bits::<T>(k + len + 3)).collect();
    let Some(outs) = on_ranks(world, &what, |c| {
        let buf = c.alloc::<T>(k + len + 3)?;
        buf.copy_from_host(&inputs[c.rank()])?;
        let s = buf.slice(k..k + len)?.symmetric()?;
        let short = buf.slice(k..k + n)?.symmetric()?;
        let out = c.alloc::<T>(j + len + 2)?;
        let mut results = Vec::new();
        for call in 0..4 {
            out.copy_from_host(&vec![poison::<T>(); j + len + 2])?;
            let mut o = out.slice(j..j + len + 1)?;
            match call {
                0 => all_gather(c, &short, &mut o, n)?,
                1 => broadcast(c, &s, &mut o, len, world - 1)?,
                2 => all_to_all(c, &s, &mut o, n)?,
                _ => symm::kernels::collectives::scatter(c, &s, &mut o, n, 0)?,
            }
            c.synchronize()?;
            results.push(out.to_host()?);
        }
        Ok(results)
    }) else {
        return;
    };
    for (r, res) in outs.iter().enumerate() {
        let bodies: [Vec<T>; 4] = [
            inputs.iter().flat_map(|v| v[k..k + n].to_vec()).collect(),
            inputs[world - 1][k..k + len].to_vec(),
            (0..world)
                .flat_map(|p| inputs[p][k + r * n..k + (r + 1) * n].to_vec())
                .collect(),
            inputs[0][k + r * n..k + (r + 1) * n].to_vec(),
        ];
        for (call, body) in bodies.into_iter().enumerate() {
            let mut want = vec![poison::<T>(); j];
            let m = body.len();
            want.extend(body);
            want.extend(vec![poison::<T>(); j + len + 2 - j - m]);
            assert_bits(&format!("{what}: call {call}, rank {r}"), &res[call], &want);
        }
    }
}

/// Collectives on sub-ranges at every offset class, 4- and 8-byte types,
/// on both paths (the root calls always pull). The small sizes take every
/// pair of offsets; 1031 elements (vectors and a rest) three of them, for
/// CI's time: both aligned, both off alike, and off by different amounts
/// (at both widths).
#[test]
fn collectives_on_sub_ranges_at_any_offset() {
    for world in WORLDS {
        for n in [1, 5, 1031] {
            if !tier::runs(quick(world, n) && n < 1031) {
                continue;
            }
            let large = n == 1031;
            for path in [CollectivePath::Ll, CollectivePath::Pull] {
                on_path(Some(path), || {
                    for (k, j) in [(0, 0), (1, 0), (0, 1), (1, 1), (2, 3), (3, 2)] {
                        if large && !matches!((k, j), (0, 0) | (1, 1) | (1, 0)) {
                            continue;
                        }
                        sub_range_case::<i32>(world, n, k, j);
                        sub_range_case::<f32>(world, n, k, j);
                        if k < 2 && j < 2 {
                            sub_range_case::<f64>(world, n, k, j);
                            sub_range_case::<u64>(world, n, k, j);
                        }
                    }
                    for (k, j) in [(0, 0), (1, 0), (0, 3), (5, 7), (15, 1), (9, 9)] {
                        if large && !matches!((k, j), (0, 0) | (9, 9) | (5, 7)) {
                            continue;
                        }
                        sub_range_copies::<u8>(world, n, k, j);
                        sub_range_copies::<bf16>(world, n, k, j);
                    }
                });
            }
        }
    }
}

/// The built-in all-reduce and the fused kernel load vectors from their
/// input's start: a view off 16 bytes is the same clear error on every
/// rank, naming what takes any offset; the op kernels' sum of the same
/// view is exact.
#[test]
fn built_ins_that_need_an_aligned_input_say_so() {
    if !tier::quick_test() {
        return;
    }
    let world = 2;
    let Some(fails) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.slice(1..33)?.symmetric()?;
        let mut out = c.device_buffer::<f32>(32)?;
        symm::kernels::all_reduce::all_reduce(c, &s, &mut out, 32)
    }) else {
        return;
    };
    for f in &fails {
        assert_eq!(f.kind, ErrorKind::InvalidArgument, "{f}");
        assert!(
            f.contains("starts off 16 bytes") && f.contains("all_reduce_op"),
            "{f}"
        );
    }
    let Some(fails) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.slice(2..34)?.symmetric()?;
        let mut res = c.device_buffer::<f32>(32)?;
        let w = c.device_buffer_from(&[1.0f32; 32])?;
        let mut out = c.device_buffer::<f32>(32)?;
        symm::kernels::fused::all_reduce_residual_rms_norm(
            c, &s, &mut res, &w, &mut out, 1, 32, 1e-6,
        )
    }) else {
        return;
    };
    for f in &fails {
        assert_eq!(f.kind, ErrorKind::InvalidArgument, "{f}");
        assert!(f.contains("starts off 16 bytes"), "{f}");
    }
    let Some(outs) = on_ranks(world, "the op kernels' sum of a view", |c| {
        let buf = c.alloc::<f32>(64)?;
        buf.copy_from_host(&(0..64).map(|i| (i + c.rank()) as f32).collect::<Vec<_>>())?;
        let s = buf.slice(1..33)?.symmetric()?;
        let mut out = c.device_buffer::<f32>(40)?;
        symm::kernels::collectives::sum(c, &s, &mut out, 32)?;
        c.synchronize()?;
        out.to_host()
    }) else {
        return;
    };
    for o in &outs {
        let want: Vec<f32> = (1..33).map(|i| (2 * i + 1) as f32).collect();
        assert_eq!(&o[..32], &want[..]);
    }
}

/// An application that holds all of its signal channels still runs every
/// built-in (the all-reduce, the collectives, the fused kernel, point to
/// point, the group barrier, the functional layer), whose channels come
/// from the libraries' part of the pad; and its own channels still work
/// after them.
#[test]
fn an_application_holding_all_its_channels_runs_every_built_in() {
    if !tier::quick_test() {
        return;
    }
    use symm::layout::APP_CHANNELS;
    use symm::signal::Channel;
    for world in [2, 3] {
        let Some(outs) = on_ranks(world, "all channels held", |c| {
            let mine: Vec<Channel> = (0..APP_CHANNELS)
                .map(|_| Channel::request(c))
                .collect::<symm::Result<_>>()?;
            let extra = Channel::request(c).expect_err("a 17th application channel");
            assert_eq!(extra.kind(), ErrorKind::Capacity, "{extra}");
            let n = 64;
            let buf = c.alloc::<f32>(n * world)?;
            buf.copy_from_host(&vec![c.rank() as f32 + 1.0; n * world])?;
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer::<f32>(n * world)?;
            symm::kernels::all_reduce::all_reduce(c, &s, &mut out, n)?;
            all_reduce_op(c, &s, &mut out, n, ReduceOp::Max)?;
            all_gather(c, &s, &mut out, n)?;
            let mut res = c.device_buffer_from(&vec![0.0f32; n])?;
            let w = c.device_buffer_from(&vec![1.0f32; n])?;
            let mut normed = c.device_buffer::<f32>(n)?;
            symm::kernels::fused::all_reduce_residual_rms_norm(
                c,
                &s,
                &mut res,
                &w,
                &mut normed,
                1,
                n,
                1e-6,
            )?;
            let p2p = symm::kernels::p2p::P2p::new(c)?;
            let peer = (c.rank() + 1) % world;
            let from = (c.rank() + world - 1) % world;
            let x = c.device_buffer_from(&vec![c.rank() as f32; n])?;
            let mut got = c.device_buffer::<f32>(n)?;
            p2p.send_recv(&mut [
                symm::kernels::p2p::P2pOp::Send { input: &x, peer },
                symm::kernels::p2p::P2pOp::Recv {
                    out: &mut got,
                    peer: from,
                },
            ])?;
            c.barrier()?;
            let coll = symm::functional::Collectives::new(c)?;
            coll.all_reduce(&x, &mut out, ReduceOp::Sum)?.wait_host()?;
            // The application's own channels, after all of that.
            for ch in &mine {
                s.barrier(ch, Duration::from_secs(10))?;
            }
            c.synchronize()?;
            Ok((normed.to_host()?, got.to_host()?))
        }) else {
            return;
        };
        for (r, (normed, got)) in outs.iter().enumerate() {
            assert_eq!(
                got,
                &vec![((r + world - 1) % world) as f32; 64],
                "p2p at rank {r}"
            );
            // Every element of the sum is the same, so RMSNorm gives 1.
            assert!(normed.iter().all(|&v| (v - 1.0).abs() < 1e-5), "{normed:?}");
        }
    }
}

/// NaN, infinities and signed zeros follow IEEE (min and max as
/// `minimum`/`maximum`), and every rank gets the same bits.
#[test]
fn reduce_scatter_special_values() {
    let specials = [
        f32::NAN,
        f32::from_bits(0x7fc0_1234),
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1.5,
        -2.25,
        f32::MAX,
        f32::MIN_POSITIVE / 4.0,
    ];
    for world in [2, 3, 4] {
        let n = 4096;
        if !tier::runs(quick(world, n)) {
            continue;
        }
        let mut rng = rand::rng();
        let inputs: Vec<Vec<f32>> = (0..world)
            .map(|_| {
                (0..n)
                    .map(|_| specials[rng.random_range(0..specials.len())])
                    .collect()
            })
            .collect();
        for op in ReduceOp::ALL {
            reduce_scatter_case::<f32>(world, n, op, &inputs);
        }
        // The NaN rule, spelled out: any NaN operand gives a NaN.
        assert!(ReduceOp::Min.combine(1.0, f32::NAN).is_nan());
        assert!(ReduceOp::Max.combine(f32::NAN, 1.0).is_nan());
        assert_eq!(
            ReduceOp::Min.combine(0.0, -0.0).to_bits(),
            (-0.0f32).to_bits()
        );
        assert_eq!(ReduceOp::Max.combine(-0.0, 0.0).to_bits(), 0.0f32.to_bits());
    }
}

fn all_to_all_case<T: CopyElem>(world: usize, m: usize) {
    let inputs: Vec<Vec<T>> = (0..world).map(|_| random_bits::<T>(world * m)).collect();
    let what = format!("all_to_all {} world {world} m {m}", T::DTYPE);
    let Some(outs) = on_ranks(world, &what, |c| {
        let buf = c.alloc::<T>(world * m)?;
        buf.copy_from_host(&inputs[c.rank()])?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer_from(&vec![poison::<T>(); world * m + 1])?;
        all_to_all(c, &s, &mut out, m)?;
        c.synchronize()?;
        out.to_host()
    }) else {
        return;
    };
    for (r, o) in outs.iter().enumerate() {
        let want: Vec<T> = (0..world)
            .flat_map(|p| inputs[p][r * m..(r + 1) * m].iter().copied())
            .collect();
        assert_bits(&format!("{what}, rank {r}"), &o[..world * m], &want);
        assert_bits(
            &format!("{what}, rank {r}, past the end"),
            &o[world * m..],
            &[poison::<T>()],
        );
    }
}

#[test]
fn all_to_all_with_equal_splits() {
    for world in WORLDS {
        for m in [1, 7, 1000] {
            if !tier::runs(quick(world, world * m)) {
                continue;
            }
            all_to_all_case::<f32>(world, m);
            all_to_all_case::<bf16>(world, m);
            all_to_all_case::<u8>(world, m);
            all_to_all_case::<i64>(world, m);
        }
    }
}

/// The pull copies at four vectors a thread or more in each part, where
/// they take every part at once (warp-sized runs of each part in turn,
/// four at a time, then one at a time, then a rest of fewer than 32
/// vectors a part): the all-gather, in place too, the gather's root and the
/// equal all-to-all, with a size that moves in whole vectors and one that
/// does not (part by part then); and, past the quick tier, five grid
/// strides of vectors a part (so the one-at-a-time loop runs) in f32, in a
/// one-byte type (16-element vectors, 256-thread blocks) and in an
/// eight-byte one. The emulator's pull grid is 4 blocks (8192 vectors a
/// part of f32 reach the form); a GPU's up to 128, so there the sizes are
/// larger.
#[test]
fn pull_copies_of_every_part_at_once() {
    let whole = if on_gpu() { (1 << 20) + 36 } else { 32768 + 36 };
    for world in WORLDS {
        if !tier::runs(quick(world, whole)) {
            continue;
        }
        on_path(Some(CollectivePath::Pull), || {
            for n in [whole, whole + 1] {
                all_gather_case::<f32>(world, n, false);
                all_gather_case::<f32>(world, n, true);
                all_to_all_case::<f32>(world, n);
            }
            all_gather_case::<bf16>(world, 2 * whole, false);
            // (No reduction: only the gather's root pulls parts.)
            let f: Vec<Vec<bf16>> = (0..world).map(|_| random_values::<bf16>(whole)).collect();
            root_case::<f32, bf16>(
                world,
                whole,
                world - 1,
                &f,
                &|i, op| f32_reduce_at(&f, i, op),
                &[],
            );
        });
        // Five strides of vectors a part, and a rest: 40960 + 36 f32, 81920
        // + 48 bytes, 20480 + 6 i64 on the emulator.
        let (five, bytes, longs) = if on_gpu() {
            (5 * (1 << 18) + 36, 5 * (1 << 19) + 48, 5 * (1 << 17) + 6)
        } else {
            (5 * 8192 + 36, 5 * 16384 + 48, 5 * 4096 + 6)
        };
        if !tier::runs(quick(world, bytes)) {
            continue;
        }
        on_path(Some(CollectivePath::Pull), || {
            all_gather_case::<f32>(world, five, true);
            all_to_all_case::<f32>(world, five);
            all_gather_case::<u8>(world, bytes, false);
            all_to_all_case::<u8>(world, bytes);
            all_gather_case::<i64>(world, longs, true);
            all_to_all_case::<i64>(world, longs);
        });
    }
}

/// Each collective with an LL form on the path its size would not take:
/// pull at small sizes, LL above [`LL_MAX_BYTES`](symm::kernels::collectives::LL_MAX_BYTES)
/// (the other tests run each size on its own dispatch).
#[test]
fn every_collective_on_the_other_path() {
    for world in WORLDS {
        on_path(Some(CollectivePath::Pull), || {
            if !tier::runs(quick(world, 4095)) {
                return;
            }
            for n in [1, 7, 4095] {
                all_gather_case::<f32>(world, n, false);
                all_gather_case::<u8>(world, n, n == 7);
                broadcast_case::<bf16>(world, n, world - 1, n == 1);
                all_to_all_case::<i64>(world, n.min(1000));
                let inputs: Vec<Vec<bf16>> = (0..world).map(|_| random_values(n)).collect();
                for op in ReduceOp::ALL {
                    reduce_scatter_case::<bf16>(world, n, op, &inputs);
                    if op != ReduceOp::Sum {
                        all_reduce_op_case::<bf16>(world, n, op, op == ReduceOp::Min, &inputs);
                    }
                }
            }
        });
        if world > 4 && !on_gpu() {
            continue; // time: worlds 1-4 cover the large LL loops on the emulator
        }
        on_path(Some(CollectivePath::Ll), || {
            let n = 65536 + 3;
            // Large: the rest tier's.
            if !tier::runs(quick(world, n)) {
                return;
            }
            all_gather_case::<f32>(world, n, false);
            all_gather_case::<u8>(world, 2 * n, true);
            broadcast_case::<f16>(world, n, 0, false);
            all_to_all_case::<u32>(world, 40001);
            let inputs: Vec<Vec<f32>> = (0..world).map(|_| random_values(n)).collect();
            // Chunks of 40001 f32, past LL_MAX_BYTES too.
            let rs_n = world * 40001 - 2;
            let rs_inputs: Vec<Vec<f32>> = (0..world).map(|_| random_values(rs_n)).collect();
            for op in [ReduceOp::Avg, ReduceOp::Max] {
                reduce_scatter_case::<f32>(world, rs_n, op, &rs_inputs);
                all_reduce_op_case::<f32>(world, n, op, op == ReduceOp::Max, &inputs);
            }
        });
    }
}

/// The all-gather and all-to-all on the copy engines
/// ([`CollectivePath::CopyEngine`]: one-block barriers around
/// stream-ordered copies from each peer's input), bit for bit at every
/// world and odd sizes, the element past the output untouched; the calls
/// with no such form (the in-place all-gather, broadcast, reduce-scatter)
/// pull where it is forced. Then the same calls asked for by name
/// (`*_with`), back to back with pull and LL calls on the same channel.
#[test]
fn copies_on_the_copy_engines() {
    use symm::kernels::collectives::{all_gather_with, all_to_all_with};
    for world in WORLDS {
        on_path(Some(CollectivePath::CopyEngine), || {
            if !tier::runs(quick(world, 4095)) {
                return;
            }
            for n in [1, 7, 4095] {
                all_gather_case::<f32>(world, n, false);
                all_gather_case::<u8>(world, n, n == 7);
                all_to_all_case::<bf16>(world, n.min(1000));
                broadcast_case::<i64>(world, n, world - 1, false);
            }
            let inputs: Vec<Vec<f32>> = (0..world).map(|_| random_values(7 * world)).collect();
            reduce_scatter_case::<f32>(world, 7 * world, ReduceOp::Sum, &inputs);
        });
        if !tier::runs(quick(world, 1)) {
            continue;
        }
        // Large enough that the pull kernel runs several blocks, whose
        // signals the copy engines' one-block barriers never touch.
        let n = 1 << 15;
        let inputs: Vec<Vec<u32>> = (0..world).map(|_| random_bits::<u32>(world * n)).collect();
        let Some(outs) = on_ranks(world, "copy engine by name", |c| {
            let buf = c.alloc::<u32>(world * n)?;
            buf.copy_from_host(&inputs[c.rank()])?;
            let s = buf.rendezvous()?;
            // Which blocks' signal slots of this rank's pad a call moved.
            let blocks_moved = |before: &[u32], after: &[u32]| -> Vec<usize> {
                let mut b: Vec<usize> = before
                    .iter()
                    .zip(after)
                    .enumerate()
                    .filter(|(_, (x, y))| x != y)
                    .map(|(i, _)| (i % 32768) / 8 % 128)
                    .collect();
                b.dedup();
                b
            };
            let mut got = Vec::new();
            for (k, path) in [
                CollectivePath::CopyEngine,
                CollectivePath::Pull,
                CollectivePath::CopyEngine,
                CollectivePath::Ll,
                CollectivePath::CopyEngine,
            ]
            .into_iter()
            .enumerate()
            {
                let mut a = c.device_buffer_from(&vec![poison::<u32>(); world * n])?;
                let mut b = c.device_buffer_from(&vec![poison::<u32>(); world * n])?;
                c.synchronize()?;
                let before = s.read_signal_pad(c.rank())?;
                // A part of `n - k` a rank: every call's shape differs.
                all_gather_with(path, c, &s, &mut a, n - k)?;
                all_to_all_with(path, c, &s, &mut b, n - k)?;
                c.synchronize()?;
                let moved = blocks_moved(&before, &s.read_signal_pad(c.rank())?);
                got.push((a.to_host()?, b.to_host()?, path, moved));
            }
            Ok(got)
        }) else {
            continue;
        };
        for (r, calls) in outs.iter().enumerate() {
            for (k, (a, b, path, moved)) in calls.iter().enumerate() {
                let m = n - k;
                let what = format!("world {world}, rank {r}, call {k} on {path:?}");
                let gathered: Vec<u32> = (0..world)
                    .flat_map(|p| inputs[p][..m].iter().copied())
                    .collect();
                assert_bits(
                    &format!("all_gather_with, {what}"),
                    &a[..world * m],
                    &gathered,
                );
                let sent: Vec<u32> = (0..world)
                    .flat_map(|p| inputs[p][r * m..(r + 1) * m].iter().copied())
                    .collect();
                assert_bits(&format!("all_to_all_with, {what}"), &b[..world * m], &sent);
                assert!(a[world * m..]
                    .iter()
                    .chain(&b[world * m..])
                    .all(|x| *x == poison::<u32>()));
                // The copy engines' barriers are block 0's (its counter and
                // flags; the identities' slots are blocks 0 and 1), where
                // the pull kernel's grid signals on blocks past them too.
                match path {
                    CollectivePath::CopyEngine => {
                        assert!(moved.iter().all(|&b| b < 2), "{what}: blocks {moved:?}")
                    }
                    CollectivePath::Pull if world > 1 => {
                        assert!(moved.iter().any(|&b| b >= 2), "{what}: blocks {moved:?}")
                    }
                    _ => {}
                }
            }
        }
    }
}

/// A copy-engine call one rank never makes (its shape agreed before, so
/// no host exchange waits for it) fails on the rank that made it after one
/// kernel timeout: its entry barrier's wait gives up, naming the peer, and
/// its exit barrier does not wait again. (The peer stays alive meanwhile,
/// so its departure does not end the waits.) GPU ranks only: the
/// emulator's scheduler ends a stuck launch itself.
#[test]
fn a_copy_engine_call_a_peer_never_makes_fails_after_one_timeout() {
    if !on_gpu() {
        eprintln!(
            "SKIPPED: a_copy_engine_call_a_peer_never_makes_fails_after_one_timeout needs GPU \
             ranks (the emulator ends a stuck launch by its own scheduler)"
        );
        return;
    }
    if !tier::quick_test() {
        return;
    }
    let Some(ranks) = ranks(2) else { return };
    let timeout = Duration::from_secs(2);
    let opts = options().with_kernel_timeout(timeout);
    let took = std::sync::Mutex::new(None);
    let got = run(ranks, opts, |c| {
        let buf = c.alloc::<f32>(1024)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(2048)?;
        force_path(c, Some(CollectivePath::CopyEngine))?;
        all_gather(c, &s, &mut out, 512)?;
        c.synchronize()?;
        if c.rank() == 1 {
            // Alive, but never in the call: past both timeouts.
            std::thread::sleep(4 * timeout);
            return Ok(());
        }
        let start = std::time::Instant::now();
        let r = all_gather(c, &s, &mut out, 512).and_then(|()| c.synchronize());
        *took.lock().unwrap() = Some(start.elapsed());
        r
    });
    let e = got.expect_err("the call rank 1 never made fails");
    let took = took.lock().unwrap().expect("rank 0 timed its call");
    assert!(
        took < timeout + timeout / 2,
        "rank 0's call failed after {took:?}: more than one timeout of {timeout:?}: {e}"
    );
    let text = e.to_string();
    assert!(text.contains("peer 1") || text.contains("rank 1"), "{text}");
}

/// A packet left in an LL slot by a call a multiple of 256 epochs earlier
/// agrees with a new call's tag in the bits the wait checks, so the
/// kernels clear each parity's slots once every 256 epochs (as the
/// all-reduce's LL does). A large all-gather (no headers: its packets fill
/// the slots where the broadcast's headers go) grows the stage and spends
/// epoch 1; then `lead` small broadcasts (headers), the large all-gather,
/// 255 small broadcasts, and the large all-gather again, 256 epochs later
/// on the same parity: every call is exact, and none fails.
#[test]
fn ll_collectives_256_epochs_apart_do_not_read_stale_packets() {
    for lead in [1, 0] {
        if tier::runs(lead == 1) {
            ll_collectives_256_epochs_apart(lead);
        }
    }
}

fn ll_collectives_256_epochs_apart(lead: usize) {
    let world = 2;
    let (big, small) = (2048usize, 8usize);
    let inputs: Vec<Vec<f32>> = (0..world).map(|_| random_bits::<f32>(big)).collect();
    let want = inputs.concat();
    let what = format!("LL collectives 256 epochs apart, lead {lead}");
    let Some(outs) = on_ranks(world, &what, |c| {
        force_path(c, Some(CollectivePath::Ll))?;
        let buf = c.alloc::<f32>(big)?;
        buf.copy_from_host(&inputs[c.rank()])?;
        let s = buf.rendezvous()?;
        let mut grow = c.device_buffer_from(&vec![poison::<f32>(); world * big])?;
        let mut first = c.device_buffer_from(&vec![poison::<f32>(); world * big])?;
        let mut last = c.device_buffer_from(&vec![poison::<f32>(); world * big])?;
        let mut few = c.device_buffer_from(&vec![poison::<f32>(); small])?;
        all_gather(c, &s, &mut grow, big)?;
        for _ in 0..lead {
            broadcast(c, &s, &mut few, small, 1)?;
        }
        all_gather(c, &s, &mut first, big)?;
        for _ in 0..255 {
            broadcast(c, &s, &mut few, small, 1)?;
        }
        // Rank 1 late, so rank 0 polls the slots before rank 1's packets
        // come: a slot left uncleared then shows its old packet.
        if c.rank() == 1 {
            c.synchronize()?;
            std::thread::sleep(Duration::from_millis(50));
        }
        all_gather(c, &s, &mut last, big)?;
        c.synchronize()?;
        Ok((first.to_host()?, few.to_host()?, last.to_host()?))
    }) else {
        return;
    };
    for (r, (first, few, last)) in outs.iter().enumerate() {
        assert_bits(
            &format!("{what}: rank {r}, the first large call"),
            first,
            &want,
        );
        assert_bits(
            &format!("{what}: rank {r}, the last broadcast"),
            few,
            &inputs[1][..small],
        );
        assert_bits(&format!("{what}: rank {r}, 256 epochs later"), last, &want);
    }
}

/// The dispatch follows the crossover measured in `bench/NOTES.md` v20 (LL
/// to 128 KiB per peer, on 2, 3 and 4 GPUs alike).
#[test]
fn dispatch_takes_ll_to_the_measured_crossover() {
    if !tier::quick_test() {
        return;
    }
    assert_eq!(CollectivePath::choose(1), CollectivePath::Ll);
    assert_eq!(CollectivePath::choose(128 << 10), CollectivePath::Ll);
    assert_eq!(
        CollectivePath::choose((128 << 10) + 1),
        CollectivePath::Pull
    );
    assert_eq!(CollectivePath::choose(64 << 20), CollectivePath::Pull);
}

/// Random splits, zeros included (a whole row or column of zeros now and
/// then): `splits[p][r]` is what rank p sends to rank r.
fn random_splits(world: usize, max: usize) -> Vec<Vec<usize>> {
    let mut rng = rand::rng();
    let silent = rng.random_range(0..world + 2);
    (0..world)
        .map(|p| {
            (0..world)
                .map(|_| {
                    if p == silent || rng.random_range(0..4) == 0 {
                        0
                    } else {
                        rng.random_range(0..=max)
                    }
                })
                .collect()
        })
        .collect()
}

/// What rank r receives from a split all-to-all: each rank's span for it,
/// in rank order.
fn split_reference<T: Scalar>(inputs: &[Vec<T>], splits: &[Vec<usize>], r: usize) -> Vec<T> {
    let mut want = Vec::new();
    for (p, input) in inputs.iter().enumerate() {
        let off: usize = splits[p][..r].iter().sum();
        want.extend_from_slice(&input[off..off + splits[p][r]]);
    }
    want
}

fn all_to_all_split_case<T: CopyElem>(world: usize, splits: &[Vec<usize>], on_device: bool) {
    let sent: Vec<usize> = splits.iter().map(|s| s.iter().sum()).collect();
    let received: Vec<usize> = (0..world)
        .map(|r| splits.iter().map(|s| s[r]).sum())
        .collect();
    // Symmetric allocations are the same size on every rank: the largest.
    let len = sent.iter().max().copied().unwrap_or(0).max(1);
    let inputs: Vec<Vec<T>> = (0..world).map(|_| random_bits::<T>(len)).collect();
    let cap = received.iter().max().copied().unwrap_or(0) + 3;
    let what = format!(
        "all_to_all_{} {} world {world} splits {splits:?}",
        if on_device { "v" } else { "single" },
        T::DTYPE
    );
    let Some(outs) = on_ranks(world, &what, |c| {
        let r = c.rank();
        let buf = c.alloc::<T>(len)?;
        buf.copy_from_host(&inputs[r])?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer_from(&vec![poison::<T>(); cap])?;
        let mut report = vec![u64::MAX; 2 * world];
        if on_device {
            let mine: Vec<u64> = splits[r].iter().map(|&k| k as u64).collect();
            let dev_splits = c.device_buffer_from(&mine)?;
            let mut dev_report = c.device_buffer_from(&report)?;
            all_to_all_v(c, &s, &mut out, &dev_splits, &mut dev_report)?;
            c.synchronize()?;
            report = dev_report.to_host()?;
        } else {
            let expect: Vec<usize> = splits.iter().map(|s| s[r]).collect();
            all_to_all_single(c, &s, &mut out, &splits[r], &expect)?;
            c.synchronize()?;
        }
        Ok((out.to_host()?, report))
    }) else {
        return;
    };
    for (r, (o, report)) in outs.iter().enumerate() {
        let want = split_reference(&inputs, splits, r);
        assert_bits(&format!("{what}, rank {r}"), &o[..want.len()], &want);
        assert!(
            o[want.len()..]
                .iter()
                .all(|x| x.to_bits64() == poison::<T>().to_bits64()),
            "{what}, rank {r}: wrote past what it received"
        );
        if on_device {
            let mut at = 0u64;
            for p in 0..world {
                assert_eq!(
                    report[p], splits[p][r] as u64,
                    "{what}, rank {r}: size from {p}"
                );
                assert_eq!(report[world + p], at, "{what}, rank {r}: offset of {p}");
                at += splits[p][r] as u64;
            }
        }
    }
}

#[test]
fn all_to_all_with_uneven_and_zero_splits() {
    for world in WORLDS {
        for max in [0, 1, 9, 3000] {
            if !tier::runs(quick(world, world * max)) {
                continue;
            }
            for _ in 0..2 {
                let splits = random_splits(world, max);
                all_to_all_split_case::<f32>(world, &splits, false);
                all_to_all_split_case::<f32>(world, &splits, true);
                all_to_all_split_case::<bf16>(world, &splits, true);
                all_to_all_split_case::<u8>(world, &splits, false);
            }
        }
    }
}

/// Random disjoint ranges of a buffer of `len` elements: some empty, some
/// unaligned, in random order.
fn random_ranges(len: usize, count: usize) -> Vec<std::ops::Range<usize>> {
    let mut rng = rand::rng();
    let mut cuts: Vec<usize> = (0..2 * count).map(|_| rng.random_range(0..=len)).collect();
    cuts.sort();
    let mut v: Vec<_> = cuts.chunks(2).map(|c| c[0]..c[1]).collect();
    // Shuffle: tensors need not lie in the buffer's order.
    for i in (1..v.len()).rev() {
        v.swap(i, rng.random_range(0..=i));
    }
    v
}

#[test]
fn coalesced_all_gather_and_all_reduce() {
    for world in WORLDS {
        for (len, count) in [(64, 1), (5000, 7), (300, 30)] {
            if !tier::runs(quick(world, len)) {
                continue;
            }
            let ranges = random_ranges(len, count);
            // all_gather, f32 and u8 bits.
            let inputs: Vec<Vec<u8>> = (0..world).map(|_| random_bits::<u8>(len)).collect();
            let total: usize = ranges.iter().map(|r| r.len() * world).sum();
            let what = format!("all_gather_coalesced world {world} ranges {ranges:?}");
            let Some(outs) = on_ranks(world, &what, |c| {
                let buf = c.alloc::<u8>(len)?;
                buf.copy_from_host(&inputs[c.rank()])?;
                let s = buf.rendezvous()?;
                let mut out = c.device_buffer_from(&vec![0xEEu8; total + 1])?;
                all_gather_coalesced(c, &s, &ranges, &mut out)?;
                c.synchronize()?;
                out.to_host()
            }) else {
                continue;
            };
            let mut want = Vec::new();
            for r in &ranges {
                for input in &inputs {
                    want.extend_from_slice(&input[r.clone()]);
                }
            }
            want.push(0xEE);
            for (r, o) in outs.iter().enumerate() {
                assert_bits(&format!("{what}, rank {r}"), o, &want);
            }
            // all_reduce, in place: what lies outside the ranges stays.
            for op in [ReduceOp::Sum, ReduceOp::Max] {
                let inputs: Vec<Vec<f32>> = (0..world).map(|_| random_values::<f32>(len)).collect();
                let what = format!("all_reduce_coalesced {op:?} world {world} ranges {ranges:?}");
                let Some(outs) = on_ranks(world, &what, |c| {
                    let buf = c.alloc::<f32>(len)?;
                    buf.copy_from_host(&inputs[c.rank()])?;
                    all_reduce_coalesced(c, &buf, &ranges, op)?;
                    // Twice: the second call reduces the first's results.
                    all_reduce_coalesced(c, &buf, &ranges, op)?;
                    c.synchronize()?;
                    buf.to_host()
                }) else {
                    continue;
                };
                let mut want: Vec<Vec<f32>> = inputs.clone();
                for _ in 0..2 {
                    let before = want.clone();
                    for r in &ranges {
                        for i in r.clone() {
                            let mut acc = before[0][i];
                            for b in &before[1..] {
                                acc = op.combine(acc, b[i]);
                            }
                            for w in want.iter_mut() {
                                w[i] = acc;
                            }
                        }
                    }
                }
                for (r, o) in outs.iter().enumerate() {
                    assert_bits(&format!("{what}, rank {r}"), o, &want[r]);
                }
            }
        }
    }
}

#[test]
fn coalesced_calls_check_their_ranges() {
    if !tier::quick_test() {
        return;
    }
    let world = 2;
    // Overlapping ranges.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(100)?;
        all_reduce_coalesced(c, &buf, &[0..10, 5..20], ReduceOp::Sum)
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::InvalidArgument, "{m}");
            assert!(m.contains("overlap"), "{m}");
        }
    }
    // Different ranges on the ranks.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(100)?;
        let end = 10 + c.rank();
        all_reduce_coalesced(c, &buf, &[0..end, 20..30], ReduceOp::Sum)
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
            assert!(m.contains("differ") && m.contains("digest"), "{m}");
        }
    }
    // A range past the end.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(100)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(400)?;
        all_gather_coalesced(c, &s, &[0..10, 90..101], &mut out)
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::InvalidArgument, "{m}");
            assert!(m.contains("90..101"), "{m}");
        }
    }
}

/// A rank's failure: the kind of its error at the origin
/// ([`symm::Error::root_kind`]), which the tests match, and its text, which
/// they read where the wording is the point (it names a rank or a value).
#[derive(Debug)]
struct Failure {
    kind: ErrorKind,
    text: String,
}

impl std::ops::Deref for Failure {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{:?}] {}", self.kind, self.text)
    }
}

/// Runs `f` on `world` ranks, expects every rank to fail, and returns each
/// rank's failure.
fn every_rank_fails(
    world: usize,
    f: impl Fn(&Comm) -> symm::Result<()> + Sync,
) -> Option<Vec<Failure>> {
    every_rank_fails_with(world, true, f)
}

/// [`every_rank_fails`], with the host's check of the ranks' sequences of
/// calls ([`Comm::check_call`]) on or off (off: the kernels' own checks).
fn every_rank_fails_with(
    world: usize,
    check_calls: bool,
    f: impl Fn(&Comm) -> symm::Result<()> + Sync,
) -> Option<Vec<Failure>> {
    let ranks = ranks(world)?;
    let options = options()
        .with_timeout(Duration::from_secs(10))
        .with_kernel_timeout(Duration::from_secs(10))
        .with_check_calls(check_calls);
    let e = run(ranks, options, f).expect_err("the call must fail");
    assert_eq!(e.errors.len(), world, "every rank fails: {e}");
    let failures: Vec<Failure> = e
        .errors
        .iter()
        .map(|(_, e)| Failure {
            kind: e.root_kind(),
            text: e.to_string(),
        })
        .collect();
    Some(failures)
}

/// An output that overlaps the symmetric input fails every rank, and the
/// error says how to run in place only where the call can: all_gather
/// names `all_gather_in_place`; broadcast and all_reduce_op ask for the
/// input's own buffer, and name their in-place function where there is
/// one (`broadcast_in_place`; `all_reduce_in_place` for a sum only;
/// the functional `reduce_scatter_in_place`); all_to_all and
/// all_to_all_single say they have no in-place form.
#[test]
fn an_overlapping_output_says_how_to_run_in_place_if_the_call_can() {
    if !tier::quick_test() {
        return;
    }
    let world = 3;
    let own = "pass this rank's buffer of the input itself as the output, from its first element";
    let none = "this call has no in-place form";
    // (call, what the error says, what it must not say)
    let cases: [(&str, String, &str); 7] = [
        (
            "all_gather",
            "and call `symm::kernels::collectives::all_gather_in_place`".into(),
            none,
        ),
        (
            "broadcast",
            format!("{own}, or call `symm::kernels::collectives::broadcast_in_place`"),
            none,
        ),
        (
            "all_reduce_op sum",
            format!("{own}, or call `symm::kernels::all_reduce::all_reduce_in_place`"),
            none,
        ),
        ("all_reduce_op max", format!("{own})"), "or call"),
        (
            "reduce_scatter",
            "to run in place, call `symm::functional::Collectives::reduce_scatter_in_place`".into(),
            none,
        ),
        ("all_to_all", none.into(), "to run in place"),
        ("all_to_all_single", none.into(), "to run in place"),
    ];
    for (call, says, not) in &cases {
        let Some(msgs) = every_rank_fails(world, |c| {
            let buf = c.alloc::<f32>(8 * world)?;
            let s = buf.rendezvous()?;
            let splits = vec![8; world];
            match *call {
                "all_gather" => all_gather(c, &s, &mut buf.slice(..)?, 8),
                "broadcast" => broadcast(c, &s, &mut buf.slice(4..12)?, 8, 0),
                "all_reduce_op sum" => {
                    all_reduce_op(c, &s, &mut buf.slice(4..12)?, 8, ReduceOp::Sum)
                }
                "all_reduce_op max" => {
                    all_reduce_op(c, &s, &mut buf.slice(4..12)?, 8, ReduceOp::Max)
                }
                "reduce_scatter" => reduce_scatter(c, &s, &mut buf.slice(..8)?, 8, ReduceOp::Sum),
                "all_to_all" => all_to_all(c, &s, &mut buf.slice(..)?, 8),
                _ => all_to_all_single(c, &s, &mut buf.slice(..)?, &splits, &splits),
            }
        }) else {
            return;
        };
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::InvalidArgument, "{call}: {m}");
            assert!(
                m.contains("overlaps") && m.contains(says.as_str()) && !m.contains(not),
                "{call}: {m}"
            );
        }
    }
}

#[test]
fn mismatched_calls_are_the_same_clear_error_on_every_rank() {
    if !tier::quick_test() {
        return;
    }
    let world = 3;
    // Lengths.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(64 * world)?;
        all_gather(c, &s, &mut out, 10 + c.rank())
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
            assert!(
                m.contains("differ") && m.contains("rank 2: all_gather of 12"),
                "{m}"
            );
        }
    }
    // Ops.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(64)?;
        let op = if c.rank() == 1 {
            ReduceOp::Max
        } else {
            ReduceOp::Sum
        };
        reduce_scatter(c, &s, &mut out, 64, op)
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
            assert!(
                m.contains("differ")
                    && m.contains("rank 1: reduce_scatter of 64 elements of f32 by Max"),
                "{m}"
            );
        }
    }
    // Roots.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<u32>(8)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<u32>(8)?;
        broadcast(c, &s, &mut out, 8, c.rank() % 2)
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
            assert!(m.contains("differ") && m.contains("root 1"), "{m}");
        }
    }
    // A root outside the group, on one rank: its problem, named on all.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<u32>(8)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<u32>(8)?;
        broadcast(c, &s, &mut out, 8, if c.rank() == 0 { 5 } else { 0 })
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::InvalidArgument, "{m}");
            assert!(m.contains("rank 0: root 5 is not a rank of 3"), "{m}");
        }
    }
    // An output too small on one rank.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(24)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(if c.rank() == 2 { 20 } else { 24 })?;
        all_to_all(c, &s, &mut out, 8)
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::InvalidArgument, "{m}");
            assert!(m.contains("rank 2: the output holds 20 elements"), "{m}");
        }
    }
    // More than symm's kernels move, on one rank: a capacity problem (a
    // limit of symm's, not a mistake in the call), of that kind on all.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<u32>(8)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<u32>(8)?;
        let mut send = vec![0; c.world_size()];
        if c.rank() == 1 {
            send[0] = u32::MAX as usize;
        }
        all_to_all_single(c, &s, &mut out, &send, &vec![0; c.world_size()])
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Capacity, "{m}");
            assert!(m.contains("rank 1: a split of 4294967295 elements"), "{m}");
        }
    }
    // world × m past usize, alike on every rank: Capacity, with no memory
    // of that size anywhere.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<u32>(8)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<u32>(8)?;
        all_to_all(c, &s, &mut out, usize::MAX / 2)
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Capacity, "{m}");
            assert!(m.contains("elements overflow"), "{m}");
        }
    }
}

/// Shapes that every rank agreed on before (so no store exchange runs),
/// then called differently: the host's check of the calls' sequence fails
/// every rank at once, and without it (ranks in different processes) the
/// kernels' digest check does.
#[test]
fn mismatches_of_agreed_shapes_still_fail_every_rank() {
    if !tier::quick_test() {
        return;
    }
    for host in [true, false] {
        mismatches_of_agreed_shapes(host);
    }
}

fn mismatches_of_agreed_shapes(host: bool) {
    let world = 2;
    // Each on the default path (LL at these sizes) and on the pull path,
    // whose kernels send their digest after the entry barrier's flag and
    // compare it at the exit barrier: every rank fails, none returns what
    // it read from the other's call.
    for path in [None, Some(CollectivePath::Pull)] {
        if let Some(msgs) = every_rank_fails_with(world, host, |c| {
            force_path(c, path)?;
            let buf = c.alloc::<f32>(64)?;
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer::<f32>(128)?;
            all_gather(c, &s, &mut out, 10)?;
            all_gather(c, &s, &mut out, 12)?;
            all_gather(c, &s, &mut out, 10 + 2 * c.rank())?;
            c.synchronize()
        }) {
            for m in &msgs {
                assert_eq!(m.kind, ErrorKind::Mismatch, "{path:?}: {m}");
            }
        }
        if let Some(msgs) = every_rank_fails_with(world, host, |c| {
            force_path(c, path)?;
            let buf = c.alloc::<f32>(64)?;
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer::<f32>(64)?;
            for op in [ReduceOp::Sum, ReduceOp::Max] {
                reduce_scatter(c, &s, &mut out, 64, op)?;
            }
            let op = if c.rank() == 0 {
                ReduceOp::Sum
            } else {
                ReduceOp::Max
            };
            reduce_scatter(c, &s, &mut out, 64, op)?;
            c.synchronize()
        }) {
            for m in &msgs {
                assert_eq!(m.kind, ErrorKind::Mismatch, "{path:?}: {m}");
            }
        }
    }
    // The all-to-all-v against an all-gather of the same input on the pull
    // path (calls on one input meet at its pad; on different inputs they
    // would not, as the last case below shows): the all-to-all-v reads the
    // splits its peer published for an earlier call, in bounds, and the
    // digests compared at the exit barrier fail both.
    if let Some(msgs) = every_rank_fails_with(world, host, |c| {
        force_path(c, Some(CollectivePath::Pull))?;
        let buf = c.alloc::<f32>(64)?;
        let x = buf.rendezvous()?;
        let splits = c.device_buffer_from(&vec![4u64; world])?;
        let mut report = c.device_buffer::<u64>(2 * world)?;
        let mut out = c.device_buffer::<f32>(64)?;
        all_to_all_v(c, &x, &mut out, &splits, &mut report)?;
        all_gather(c, &x, &mut out, 8)?;
        match c.rank() {
            0 => all_to_all_v(c, &x, &mut out, &splits, &mut report)?,
            _ => all_gather(c, &x, &mut out, 8)?,
        }
        c.synchronize()
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
        }
    }
    // Different kinds and types, each agreed before, both on the LL path:
    // the LL packets' tags carry the digest, and every LL call shares the
    // stage; then a broadcast (headers) against an all-gather (none),
    // whose headers meet the all-gather's first packets.
    if let Some(msgs) = every_rank_fails_with(world, host, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(128)?;
        let buf8 = c.alloc::<u8>(64)?;
        let s8 = buf8.rendezvous()?;
        let mut out8 = c.device_buffer::<u8>(128)?;
        all_gather::<f32>(c, &s, &mut out, 16)?;
        all_gather::<u8>(c, &s8, &mut out8, 16)?;
        reduce_scatter(c, &s, &mut out, 32, ReduceOp::Min)?;
        match c.rank() {
            0 => all_gather::<u8>(c, &s8, &mut out8, 16)?,
            _ => reduce_scatter(c, &s, &mut out, 32, ReduceOp::Min)?,
        }
        c.synchronize()
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
        }
    }
    for root in 0..world {
        if let Some(msgs) = every_rank_fails_with(world, host, |c| {
            let buf = c.alloc::<f32>(64)?;
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer::<f32>(128)?;
            all_gather(c, &s, &mut out, 16)?;
            broadcast(c, &s, &mut out, 16, root)?;
            match c.rank() {
                0 => all_gather(c, &s, &mut out, 16)?,
                _ => broadcast(c, &s, &mut out, 16, root)?,
            }
            c.synchronize()
        }) {
            for m in &msgs {
                // On a GPU a rank whose waits a peer's failure stopped may
                // report `PeerFailed` with no cause kind (as a design where
                // one rank alone saw the other call did, NOTES v42), so
                // this also checks that each rank's kernel finds the other
                // call's packet or header itself; the emulator passes the
                // cause's kind on, and cannot tell.
                assert_eq!(m.kind, ErrorKind::Mismatch, "root {root}: {m}");
            }
        }
    }
    // A reduce-scatter whose last chunk is empty (headers) against one
    // whose chunks all hold elements (none).
    if let Some(msgs) = every_rank_fails_with(world, host, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(64)?;
        reduce_scatter(c, &s, &mut out, 1, ReduceOp::Max)?;
        reduce_scatter(c, &s, &mut out, 8, ReduceOp::Max)?;
        let n = if c.rank() == 0 { 1 } else { 8 };
        reduce_scatter(c, &s, &mut out, n, ReduceOp::Max)?;
        c.synchronize()
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
        }
    }
    // One rank on LL and the other on pull (a cached shape of each): the
    // host's check tells the calls apart (the path is in their digest).
    // Without it they meet at no common signal, so each times out, naming
    // the peer it waited for, instead of hanging.
    if let Some(msgs) = every_rank_fails_with(world, host, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(128)?;
        for path in CollectivePath::ALL {
            force_path(c, Some(path))?;
            all_gather(c, &s, &mut out, 16)?;
        }
        force_path(c, Some(CollectivePath::ALL[c.rank() % 2]))?;
        all_gather(c, &s, &mut out, 16)?;
        c.synchronize()
    }) {
        for m in &msgs {
            if host {
                assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
                continue;
            }
            // A GPU's signal timeout or the emulator's hang report, each
            // naming the peer waited for; or, on the rank that heard of
            // the other's report first, that report (clipped in the
            // departure record) under the failed rank's name.
            let waited = m.contains("did not complete") || m.contains("made no progress");
            let named = m.contains("peer")
                || m.contains("from rank")
                || (0..world).any(|r| m.contains(&format!("rank {r} failed: kernel")));
            assert!(waited && named, "{m}");
        }
    }
    // One rank on the copy engines and the other on pull (a cached shape
    // of each, one block's grid): their barriers meet on block 0, and the
    // exit's identity check (the path is in the call's digest) fails the
    // call on both.
    if let Some(msgs) = every_rank_fails_with(world, host, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(128)?;
        for path in [CollectivePath::CopyEngine, CollectivePath::Pull] {
            force_path(c, Some(path))?;
            all_gather(c, &s, &mut out, 16)?;
        }
        let path = [CollectivePath::CopyEngine, CollectivePath::Pull][c.rank() % 2];
        force_path(c, Some(path))?;
        all_gather(c, &s, &mut out, 16)?;
        c.synchronize()
    }) {
        for m in &msgs {
            if host {
                assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
                continue;
            }
            let said = m.contains("made different calls")
                || (0..world).any(|r| m.contains(&format!("rank {r} failed: kernel")));
            assert!(said, "{m}");
        }
    }
    // Sum on one rank and Max on the other, first call: the store check
    // names both (Sum must not bypass it for the built-in all-reduce).
    if let Some(msgs) = every_rank_fails_with(world, host, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(64)?;
        let op = if c.rank() == 0 {
            ReduceOp::Sum
        } else {
            ReduceOp::Max
        };
        all_reduce_op(c, &s, &mut out, 64, op)?;
        c.synchronize()
    }) {
        for m in &msgs {
            assert_eq!(m.kind, ErrorKind::Mismatch, "{m}");
            assert!(m.contains("differ") && m.contains("by Max"), "{m}");
        }
    }
}

/// Outputs sized to what each rank receives (different on every rank):
/// the grid must not follow them.
#[test]
fn all_to_all_v_with_outputs_of_different_sizes() {
    if !tier::quick_test() {
        return;
    }
    let world = 2;
    let Some(outs) = on_ranks(world, "all_to_all_v, outputs 2 and 6000", |c| {
        let buf = c.alloc::<f32>(6000)?;
        buf.copy_from_host(&vec![c.rank() as f32 + 1.0; 6000])?;
        let s = buf.rendezvous()?;
        // Rank 0 sends 1 to each rank; rank 1 sends 1 to rank 0 and 5000
        // to itself.
        let splits: Vec<u64> = if c.rank() == 0 {
            vec![1, 1]
        } else {
            vec![1, 5000]
        };
        let splits = c.device_buffer_from(&splits)?;
        let mut out = c.device_buffer::<f32>(if c.rank() == 0 { 2 } else { 6000 })?;
        let mut report = c.device_buffer::<u64>(4)?;
        all_to_all_v(c, &s, &mut out, &splits, &mut report)?;
        c.synchronize()?;
        Ok((out.to_host()?, report.to_host()?))
    }) else {
        return;
    };
    assert_eq!(outs[0].0, [1.0, 2.0]);
    assert_eq!(outs[0].1, [1, 1, 0, 1]);
    assert_eq!(
        outs[1].0[..5001],
        [[1.0][..].to_vec(), vec![2.0; 5000]].concat()
    );
    assert_eq!(outs[1].1, [1, 5000, 0, 1]);
}

/// Splits that disagree, overflow an output or pass an input: the same
/// kernel failure on every rank, naming the fault alone, at 3 ranks and
/// at 10 (the wide kernel of a domain of more than 8).
#[test]
fn mismatched_splits_fail_every_rank() {
    if !tier::quick_test() {
        return;
    }
    for world in [3, 10] {
        mismatched_splits_at(world);
    }
}

fn mismatched_splits_at(world: usize) {
    // Rank 1 expects 5 from rank 0, which sends 4.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(64)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(64)?;
        let send = vec![4; world];
        let mut expect = vec![4; world];
        if c.rank() == 1 {
            expect[0] = 5;
        }
        all_to_all_single(c, &s, &mut out, &send, &expect)?;
        // A kernel's failure shows at the next synchronisation on a GPU.
        c.synchronize()
    }) {
        for m in &msgs {
            // The kernel's assertion of this fault alone: the ranks'
            // calls differ, a mismatch.
            assert_eq!(m.kind, ErrorKind::Mismatch, "world {world}: {m}");
            assert!(m.contains("split sizes disagree"), "{m}");
            assert!(!m.contains("too small") && !m.contains("more than"), "{m}");
        }
    }
    // Device splits that overflow rank 2's output.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(6 * world)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(if c.rank() == 2 { 10 } else { 6 * world })?;
        let splits = c.device_buffer_from(&vec![6u64; world])?;
        let mut report = c.device_buffer::<u64>(2 * world)?;
        all_to_all_v(c, &s, &mut out, &splits, &mut report)?;
        c.synchronize()
    }) {
        for m in &msgs {
            // Device splits are checked by the kernel: a kernel failure.
            assert_eq!(m.kind, ErrorKind::Kernel, "world {world}: {m}");
            assert!(m.contains("too small"), "{m}");
            assert!(!m.contains("disagree") && !m.contains("more than"), "{m}");
        }
    }
    // Device splits that pass a rank's input.
    if let Some(msgs) = every_rank_fails(world, |c| {
        let buf = c.alloc::<f32>(8)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(64)?;
        let splits = c.device_buffer_from(&vec![3u64; world])?;
        let mut report = c.device_buffer::<u64>(2 * world)?;
        all_to_all_v(c, &s, &mut out, &splits, &mut report)?;
        c.synchronize()
    }) {
        for m in &msgs {
            // Device splits are checked by the kernel: a kernel failure.
            assert_eq!(m.kind, ErrorKind::Kernel, "world {world}: {m}");
            assert!(m.contains("more than its input holds"), "{m}");
            assert!(!m.contains("disagree") && !m.contains("too small"), "{m}");
        }
    }
}

/// 1000 back-to-back calls of mixed collectives (all six kinds, on both
/// paths) on one stream, with inputs
/// rewritten on the stream before each call and no host synchronisation:
/// sampled calls' outputs are checked against their exact references.
#[test]
fn back_to_back_mixed_collectives() {
    let calls: u32 = 1000;
    // Not a multiple of the six kinds, so the samples cover every kind.
    let every = if on_gpu() { 97 } else { 61 };
    for world in [1, 3, 4] {
        // The quick tier: one rank (many ranks, in the other tests).
        if !tier::runs(world == 1) {
            continue;
        }
        // Most calls small (one block), a quarter large (up to eight
        // blocks): the grids, and so the blocks that count calls on the
        // shared counter, change from call to call.
        let small: u32 = 37 * world as u32;
        let big: u32 = 1000 * world as u32;
        let size = move |k: u32| if k % 8 == 3 || k % 8 == 6 { big } else { small };
        let m_small = small / world as u32;
        let seed: u32 = rand::random();
        // Large calls of every kind are sampled too (k % 56 runs through
        // every residue mod 6 among them).
        let samples: Vec<u32> = (0..calls)
            .filter(|&k| k % every == 5 || (size(k) == big && k % 7 == 0))
            .collect();
        let Some(outs) = on_ranks(world, "back to back", |c| {
            let buf = c.alloc::<f32>(big as usize)?;
            let s = buf.rendezvous()?;
            let splits: Vec<u64> = (0..world).map(|r| u64::from(m_small) - r as u64).collect();
            let dev_splits = c.device_buffer_from(&splits)?;
            let mut report = c.device_buffer::<u64>(2 * world)?;
            let width = big as usize * world;
            let mut out = c.device_buffer::<f32>(width)?;
            let mut hist = c.device_buffer_from(&vec![f32::NAN; samples.len() * width])?;
            let cfg = LaunchConfig::linear(2, 128);
            for k in 0..calls {
                let n = size(k);
                let m = n / world as u32;
                fill_input::launch(c, cfg, &s, n, k, seed)?;
                // Every path, interleaved: each kind (k % 6) goes round
                // them from one round of six to the next (the copy
                // engines' for the all-gather and all-to-all, the pull for
                // the other kinds).
                force_path(c, Some(CollectivePath::ALL[(k as usize / 6) % 3]))?;
                match k % 6 {
                    5 => all_reduce_op(c, &s, &mut out, n as usize, ReduceOp::Min)?,
                    0 => all_gather(c, &s, &mut out, n as usize)?,
                    1 => reduce_scatter(c, &s, &mut out, n as usize, ReduceOp::Sum)?,
                    2 => broadcast(c, &s, &mut out, n as usize, k as usize % world)?,
                    3 => all_to_all(c, &s, &mut out, m as usize)?,
                    _ => all_to_all_v(c, &s, &mut out, &dev_splits, &mut report)?,
                }
                if let Ok(slot) = samples.binary_search(&k) {
                    keep::launch(
                        c,
                        cfg,
                        &out,
                        &mut hist,
                        slot as u32 * width as u32,
                        width as u32,
                    )?;
                }
            }
            c.synchronize()?;
            hist.to_host()
        }) else {
            continue;
        };
        let width = big as usize * world;
        for (r, hist) in outs.iter().enumerate() {
            for (si, &k) in samples.iter().enumerate() {
                let n = size(k);
                let m = n / world as u32;
                let got = &hist[si * width..(si + 1) * width];
                let input = |p: usize, i: usize| fill_ref(seed, p as u32, k, i as u32);
                let want: Vec<f32> = match k % 6 {
                    5 => (0..n as usize)
                        .map(|i| (1..world).fold(input(0, i), |a, p| a.min(input(p, i))))
                        .collect(),
                    0 => (0..world * n as usize)
                        .map(|j| input(j / n as usize, j % n as usize))
                        .collect(),
                    1 => reduce_scatter_chunk(n as usize, world, r)
                        .map(|i| (1..world).fold(input(0, i), |a, p| a + input(p, i)))
                        .collect(),
                    2 => (0..n as usize)
                        .map(|i| input(k as usize % world, i))
                        .collect(),
                    3 => (0..world * m as usize)
                        .map(|j| input(j / m as usize, r * m as usize + j % m as usize))
                        .collect(),
                    4 => {
                        let mut v = Vec::new();
                        for p in 0..world {
                            let off: usize = (0..r).map(|q| m_small as usize - q).sum();
                            let len = m_small as usize - r;
                            v.extend((off..off + len).map(|i| input(p, i)));
                        }
                        v
                    }
                    _ => unreachable!(),
                };
                assert_bits(
                    &format!("world {world}, call {k}, rank {r}"),
                    &got[..want.len()],
                    &want,
                );
            }
        }
        // Every rank agrees bit for bit where the result is the same on
        // every rank (all_gather, broadcast, all_reduce).
        for (si, k) in samples.iter().enumerate() {
            if [0, 2, 5].contains(&(k % 6)) {
                let n = size(*k) as usize;
                let len = if k % 6 == 0 { n * world } else { n };
                let at = si * width;
                for o in &outs[1..] {
                    assert_bits("all ranks agree", &o[at..at + len], &outs[0][at..at + len]);
                }
            }
        }
    }
}

use symm::kernels::collectives::{
    all_gather_coalesced_pull, all_gather_pull, all_reduce_coalesced_pull, all_reduce_op_two_shot,
    all_to_all_pull, all_to_all_v_pull, all_to_all_v_wide, broadcast_pull, broadcast_sag, ce_sync,
    copy_ll, fold_rows, gather_pull, reduce_ll, reduce_pull, reduce_scatter_pull, scatter_pull,
};

// Every kernel for every vector width and every op, and the copies (whose
// code differs by the width) for a few element types, not every
// combination: NVRTC takes most of a second per instantiation, three times
// over (sm_90 checked and not, sm_80 unchecked). The quick tier compiles
// a sample, the rest tier the others; each
// `check_kernels!` test is an inner function of a test that asks the tier
// (`check_kernels!`'s own test cannot).

/// A sample of the collective kernels: the LL copy and reduction, and a
/// pull reduce-scatter.
#[allow(unnameable_test_items)]
#[test]
fn collective_kernels_sample_compile() {
    if !tier::quick_test() {
        return;
    }
    symm::check_kernels!(
        fn collective_kernels_sample;
        reduce_scatter_pull::<bf16, 8, 2, false>,
        copy_ll::<f32, 2>,
        reduce_ll::<f32, 2, 0, false>,
        reduce_scatter_pull::<i64, 2, 0, true>,
        fold_rows::<bf16, 0, false>,
        all_to_all_v_wide::<f32, 4>,
        ce_sync::<f32>,
        broadcast_sag::<bf16, 8>,
    );
    collective_kernels_sample();
}

/// The collective kernels' other instantiations.
#[allow(unnameable_test_items)]
#[test]
fn collective_kernels_compile() {
    if !tier::full_test("NVRTC compiles of the collective kernels beyond the sample") {
        return;
    }
    symm::check_kernels!(
        fn collective_kernels;
        all_gather_pull::<f32, 4>,
        broadcast_pull::<u8, 16>,
        all_to_all_pull::<i64, 2>,
        all_to_all_v_pull::<f32, 4>,
        all_reduce_op_two_shot::<f8e4m3, 16, 2, false>,
        all_gather_coalesced_pull::<f32, 4>,
        all_reduce_coalesced_pull::<f32, 4, 0, false>,
        all_gather_pull::<bf16, 8>,
        all_gather_pull::<u8, 16>,
        all_gather_pull::<u64, 2>,
        broadcast_pull::<f32, 4>,
        broadcast_pull::<i64, 2>,
        broadcast_sag::<f32, 4>,
        broadcast_sag::<u8, 16>,
        all_to_all_pull::<f32, 4>,
        all_to_all_pull::<u8, 16>,
        all_to_all_v_pull::<u8, 16>,
        all_to_all_v_pull::<i64, 2>,
        all_to_all_v_wide::<u8, 16>,
        all_to_all_v_wide::<i64, 2>,
        ce_sync::<u8>,
        reduce_scatter_pull::<f32, 4, 0, false>,
        reduce_scatter_pull::<f32, 4, 1, false>,
        reduce_scatter_pull::<f32, 4, 4, false>,
        reduce_scatter_pull::<f16, 8, 3, false>,
        all_reduce_op_two_shot::<f32, 4, 1, false>,
        all_reduce_op_two_shot::<f32, 4, 3, false>,
        all_reduce_op_two_shot::<bf16, 8, 2, false>,
        all_reduce_op_two_shot::<f16, 8, 4, false>,
        all_gather_pull::<f8e4m3, 16>,
        reduce_scatter_pull::<f8e4m3, 16, 0, false>,
        reduce_scatter_pull::<f8e5m2, 16, 3, false>,
        all_reduce_op_two_shot::<f8e5m2, 16, 1, false>,
        all_gather_coalesced_pull::<u8, 16>,
        all_reduce_coalesced_pull::<bf16, 8, 3, false>,
        all_reduce_coalesced_pull::<f8e4m3, 16, 0, false>,
        copy_ll::<bf16, 4>,
        copy_ll::<u8, 8>,
        copy_ll::<i64, 1>,
        copy_ll::<f8e5m2, 8>,
        reduce_ll::<f32, 2, 1, false>,
        reduce_ll::<f32, 2, 3, false>,
        reduce_ll::<bf16, 4, 2, false>,
        reduce_ll::<f16, 4, 4, false>,
        reduce_ll::<f8e4m3, 8, 0, false>,
        reduce_ll::<f8e5m2, 8, 3, false>,
        // The native reductions: each kernel, op and type at least once.
        reduce_scatter_pull::<i32, 4, 2, true>,
        reduce_scatter_pull::<f64, 2, 1, true>,
        all_reduce_op_two_shot::<u64, 2, 4, true>,
        all_reduce_op_two_shot::<u32, 4, 3, true>,
        all_reduce_coalesced_pull::<f64, 2, 0, true>,
        all_reduce_coalesced_pull::<i64, 2, 2, true>,
        reduce_ll::<i64, 1, 4, true>,
        reduce_ll::<u32, 2, 0, true>,
        reduce_ll::<f64, 1, 3, true>,
        // To and from a root.
        gather_pull::<f32, 4>,
        gather_pull::<u8, 16>,
        scatter_pull::<bf16, 8>,
        scatter_pull::<i64, 2>,
        reduce_pull::<f32, 4, 0, false>,
        reduce_pull::<f8e4m3, 16, 3, false>,
        reduce_pull::<u64, 2, 4, true>,
        // The local fold of an exact reduction across domains.
        fold_rows::<f32, 1, false>,
        fold_rows::<f32, 2, false>,
        fold_rows::<f8e4m3, 3, false>,
        fold_rows::<f16, 4, false>,
        fold_rows::<i32, 0, true>,
        fold_rows::<f64, 1, true>,
        fold_rows::<u64, 4, true>,
    );
    collective_kernels();
}

/// A domain of more than 8 ranks (a multi-node NVLink rack's): the
/// reductions, whose kernels read their peers 8 at a time, and the copies
/// run on the pull path, and the all-to-all with splits on its wide
/// kernel, exact against the references and the same bits on every rank.
#[test]
fn domains_past_8_ranks_take_the_general_kernels() {
    // 40: the identity barriers' checkers start past two handshake warps,
    // on GPUs only (on the emulator, 40 ranks of 512-thread blocks beside
    // the other tests' ranks pass the process's stack mappings).
    for world in [9, 16, 40] {
        // Also the quick tier's: the 8-wide gathers' second group of ranks.
        if !tier::runs(world == 9) || (world == 40 && !on_gpu()) {
            continue;
        }
        let n = 4099;
        let inputs: Vec<Vec<f32>> = (0..world).map(|_| random_values::<f32>(n)).collect();
        for op in [ReduceOp::Sum, ReduceOp::Max] {
            reduce_scatter_case::<f32>(world, n, op, &inputs);
            all_reduce_op_case::<f32>(world, n, op, false, &inputs);
        }
        all_reduce_op_case::<f32>(world, n, ReduceOp::Sum, true, &inputs);
        let small: Vec<Vec<bf16>> = (0..world).map(|_| random_values::<bf16>(77)).collect();
        reduce_scatter_case::<bf16>(world, 77, ReduceOp::Avg, &small);
        native_case::<i32>(world, 100);
        fold_case::<f32>(world, 333);
        all_gather_case::<f32>(world, 7, false);
        all_gather_case::<u8>(world, 100, true);
        broadcast_case::<f32>(world, 4095, world - 1, false);
        all_to_all_case::<bf16>(world, 7);
        // The all-to-all with splits: its wide kernel, host and device
        // splits, uneven and zero ones among them.
        for max in [0, 9, 300] {
            let splits = random_splits(world, max);
            all_to_all_split_case::<f32>(world, &splits, false);
            all_to_all_split_case::<u8>(world, &splits, true);
        }
    }
}
