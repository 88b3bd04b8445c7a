//! The fused all-reduce + residual add + RMSNorm
//! (`symm::kernels::fused`): every rank's new residual bit for bit against
//! the kernel's own arithmetic (f32, rank order, one rounding), the
//! normalised rows against a float64 reference within one rounding of the
//! element type, both outputs bitwise equal on every rank, at worlds 1 to
//! 8, 9, 16 and 40, for bf16, f16 and f32, with rows beyond the grid and calls
//! in a row; and bad arguments as the same error on every rank. On the
//! emulator by default (CI); on GPU ranks with `SYMM_KERNEL_TESTS_ON=gpu`.

use std::time::Duration;

#[path = "support/targets.rs"]
mod targets;
use targets::{on_gpu, ranks};
#[path = "support/data.rs"]
mod data;

use symm::dsl::Scalar;
use symm::kernels::fused::{all_reduce_residual_rms_norm, reference, FusedElem};
use symm::{bf16, compare_bits, f16, run, CommOptions};

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(30))
}

/// The largest error of one rounding to `T`, relative.
fn rounding<T: Scalar>() -> f64 {
    match std::mem::size_of::<T>() {
        2 if T::DTYPE == symm::DType::BF16 => 2f64.powi(-8),
        2 => 2f64.powi(-11),
        _ => 2f64.powi(-23),
    }
}

fn values<T: Scalar>(n: usize) -> Vec<T> {
    data::mixed_f32s(n).into_iter().map(T::from_f32).collect()
}

/// One call's data: every rank's partial sums, the residual, the weight.
type CallData<T> = (Vec<Vec<T>>, Vec<T>, Vec<T>);

/// `calls` fused calls in a row on the same symmetric buffer (its call
/// counters advance), fresh data each, on `world` ranks.
fn case<T: FusedElem>(world: usize, rows: usize, hidden: usize, calls: usize) {
    let Some(ranks) = ranks(world) else { return };
    let n = rows * hidden;
    let eps = 1e-5f32;
    let data: Vec<CallData<T>> = (0..calls)
        .map(|_| {
            let partials = (0..world).map(|_| values::<T>(n)).collect();
            (partials, values::<T>(n), values::<T>(hidden))
        })
        .collect();
    let what = format!("{} world {world} rows {rows} hidden {hidden}", T::DTYPE);
    let got = run(ranks, options(), |c| {
        let buf = c.alloc::<T>(n)?;
        let smem = buf.rendezvous()?;
        let mut seen = Vec::new();
        for (partials, residual, weight) in &data {
            buf.copy_from_host(&partials[c.rank()])?;
            let mut res = c.device_buffer_from(residual)?;
            let w = c.device_buffer_from(weight)?;
            let mut out = c.device_buffer_from(&vec![T::__from_bits64(u64::MAX); n])?;
            all_reduce_residual_rms_norm(c, &smem, &mut res, &w, &mut out, rows, hidden, eps)?;
            c.synchronize()?;
            seen.push((res.to_host()?, out.to_host()?));
        }
        Ok(seen)
    })
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    for (k, (partials, residual, weight)) in data.iter().enumerate() {
        for row in 0..rows {
            let at = row * hidden..(row + 1) * hidden;
            let parts: Vec<&[T]> = partials.iter().map(|p| &p[at.clone()]).collect();
            let (new, normed) = reference(&parts, &residual[at.clone()], weight, eps);
            let (res, out) = &got[0][k];
            if let Err(m) = compare_bits(&res[at.clone()], &new) {
                panic!("{what}: call {k}, row {row}: new residual: {m}");
            }
            // And against float64: one rounding to T, plus f32's rounding
            // of the sum (the partials' magnitude, 2^-23 per addition).
            for (i, g) in res[at.clone()].iter().enumerate() {
                let exact: f64 = partials
                    .iter()
                    .map(|p| f64::from(p[row * hidden + i].to_f32()))
                    .sum::<f64>()
                    + f64::from(residual[row * hidden + i].to_f32());
                let mag: f64 = partials
                    .iter()
                    .map(|p| f64::from(p[row * hidden + i].to_f32()).abs())
                    .sum::<f64>()
                    + f64::from(residual[row * hidden + i].to_f32()).abs();
                let floor = if T::DTYPE == symm::DType::F16 {
                    2f64.powi(-25)
                } else {
                    1e-38
                };
                let tol = rounding::<T>() * exact.abs()
                    + (world + 1) as f64 * 2f64.powi(-23) * mag
                    + floor;
                let g = f64::from(g.to_f32());
                assert!(
                    (g - exact).abs() <= tol,
                    "{what}: call {k}, row {row}, element {i}: residual {g} vs {exact}"
                );
            }
            for (i, (g, w)) in out[at.clone()].iter().zip(&normed).enumerate() {
                let g = f64::from(g.to_f32());
                // One rounding: relative, or half the subnormal spacing
                // (f16's is 2^-24), with f32's own rounding on top.
                let floor = if T::DTYPE == symm::DType::F16 {
                    2f64.powi(-25)
                } else {
                    1e-38
                };
                let tol = rounding::<T>() * w.abs() + 1e-6 * w.abs() + floor;
                assert!(
                    (g - w).abs() <= tol,
                    "{what}: call {k}, row {row}, element {i}: {g} vs {w} (tolerance {tol})"
                );
            }
        }
        for (r, seen) in got.iter().enumerate() {
            for (name, a, b) in [
                ("residual", &seen[k].0, &got[0][k].0),
                ("out", &seen[k].1, &got[0][k].1),
            ] {
                if let Err(m) = compare_bits(a, b) {
                    panic!("{what}: call {k}: rank {r}'s {name} differs from rank 0's: {m}");
                }
            }
        }
    }
}

#[test]
fn matches_its_reference_bitwise_on_every_rank() {
    // Rows of one vector per thread and one warp, several warps, and more
    // vectors than threads (the block reduction's every path), and more
    // rows than blocks.
    let shapes: &[(usize, usize)] = if on_gpu() {
        &[(1, 4096), (8, 8192), (3, 64), (130, 512), (2, 8256)]
    } else {
        &[(1, 256), (3, 40), (70, 16), (2, 1032)]
    };
    for world in 1..=8 {
        for &(rows, hidden) in shapes {
            case::<bf16>(world, rows, hidden, 2);
        }
        case::<f16>(world, 2, 64, 2);
        case::<f32>(world, 3, 36, 2);
    }
    case::<bf16>(2, 2, 8256, 2);
}

/// A domain of more than 8 ranks (a multi-node NVLink rack's): the sums
/// read the ranks past 8 in groups of 8, and the identity barriers need
/// more than the 40 threads of up to 8 ranks; still bitwise the reference
/// on every rank.
#[test]
fn matches_its_reference_past_8_ranks() {
    for world in [9, 16] {
        case::<bf16>(world, 3, 40, 2);
        case::<f32>(world, 2, 1032, 2);
    }
    // Past 32 ranks the identity checkers start at thread 64: 104 threads
    // for 40 ranks, where up to 8 the kernel has 64.
    case::<bf16>(40, 3, 40, 2);
}

/// A hidden size that is no multiple of 16 bytes, rows that differ
/// between ranks, a short residual, an output that is the input, and an
/// element type other than the input's: the same error on every rank.
#[test]
fn bad_arguments_fail_on_every_rank() {
    let world = 2;
    for bad in 0..5 {
        let Some(r) = ranks(world) else { return };
        let e = run(r, options(), |c| {
            let buf = c.alloc::<bf16>(4096)?;
            let smem = buf.rendezvous()?;
            let (rows, hidden, res_len) = match bad {
                0 => (2, 12, 24),
                1 => (1 + c.rank(), 64, 128),
                2 => (2, 64, if c.rank() == 1 { 100 } else { 128 }),
                _ => (2, 64, 128),
            };
            let mut res = c.device_buffer::<bf16>(res_len)?;
            let w = c.device_buffer::<bf16>(64)?;
            let mut out = c.device_buffer::<bf16>(128)?;
            match bad {
                3 => all_reduce_residual_rms_norm(
                    c,
                    &smem,
                    &mut res,
                    &w,
                    &mut buf.slice(..)?,
                    rows,
                    hidden,
                    1e-5,
                ),
                4 if c.rank() == 1 => {
                    let mut res16 = c.device_buffer::<f16>(128)?;
                    let w16 = c.device_buffer::<f16>(64)?;
                    let mut out16 = c.device_buffer::<f16>(128)?;
                    all_reduce_residual_rms_norm(
                        c, &smem, &mut res16, &w16, &mut out16, rows, hidden, 1e-5,
                    )
                }
                _ => all_reduce_residual_rms_norm(
                    c, &smem, &mut res, &w, &mut out, rows, hidden, 1e-5,
                ),
            }
        })
        .expect_err("bad arguments");
        assert_eq!(e.errors.len(), world, "case {bad}: {e}");
        let needle = [
            "is not a positive multiple",
            "calls differ",
            "the residual 100",
            "overlaps the symmetric input",
            "the input holds bf16, and the call is of f16",
        ][bad];
        for (_, m) in &e.errors {
            assert!(m.to_string().contains(needle), "case {bad}: {m}");
        }
    }
}

symm::check_kernels!(
    fn fused_kernels_compile;
    symm::kernels::fused::all_reduce_rms_norm::<bf16, 8>,
    symm::kernels::fused::all_reduce_rms_norm::<f16, 8>,
    symm::kernels::fused::all_reduce_rms_norm::<f32, 4>,
);
