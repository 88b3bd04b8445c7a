//! The built-in one-shot all-reduce: float64 references, bitwise agreement
//! across ranks, odd lengths, and back-to-back calls with changing data and
//! no host synchronisation. On the emulator by default (CI); on GPU ranks
//! with `SYMM_KERNEL_TESTS_ON=gpu`.

use std::time::Duration;

use rand::Rng;
#[path = "support/targets.rs"]
mod targets;
use targets::{on_gpu, ranks};
#[path = "support/calls.rs"]
mod calls;
#[path = "support/data.rs"]
mod data;
/// The main job's verdict on a result (examples/all_reduce.rs).
#[path = "../examples/support/check.rs"]
mod example_check;
#[path = "support/tier.rs"]
mod tier;
use calls::{check_samples, fill_input, keep};

use symm::dsl::*;
use symm::kernels::all_reduce::{
    all_reduce, all_reduce_in_place, all_reduce_with, AllReduceElem, AllReducePath,
};
use symm::{run, symm_kernel, CommOptions, LaunchConfig, Ranks};

/// Whether a case of `world` ranks and `n` elements is in the quick tier's
/// sample: the quick world sizes, below 64 Ki (the rest tier runs four and
/// eight ranks and the large sizes).
fn quick(world: usize, n: usize) -> bool {
    tier::quick_world(world) && n < 65536
}

/// Fresh random inputs in (-1, 1), full-mantissa and of mixed magnitudes
/// (`data::mixed_f32`), so that a different summation order shows: `n`
/// elements for each of `world` ranks.
fn random_inputs<T: Scalar>(world: usize, n: usize) -> Vec<Vec<T>> {
    (0..world)
        .map(|_| data::mixed_f32s(n).into_iter().map(T::from_f32).collect())
        .collect()
}

/// This rank's row of `inputs` in a rendezvoused buffer of its length.
fn staged(
    c: &symm::Comm,
    inputs: &[Vec<f32>],
) -> symm::Result<std::sync::Arc<symm::SymmetricMemory>> {
    let buf = c.alloc::<f32>(inputs[c.rank()].len())?;
    buf.copy_from_host(&inputs[c.rank()])?;
    buf.rendezvous()
}

/// The float64 sum of element `i` over every rank's input.
fn reference<T: Scalar>(inputs: &[Vec<T>], i: usize) -> f64 {
    inputs.iter().map(|v| f64::from(v[i].to_f32())).sum()
}

/// The float64 sum of |element `i`| over every rank's input: what a
/// summation's rounding error is relative to.
fn magnitude<T: Scalar>(inputs: &[Vec<T>], i: usize) -> f64 {
    inputs.iter().map(|v| f64::from(v[i].to_f32()).abs()).sum()
}

/// Whether every rank's result (`outs`, rank 0 first) holds rank 0's bits;
/// the first rank that does not, if any, and where.
fn ranks_agree<T: Scalar>(outs: &[Vec<T>]) -> Result<(), String> {
    for (r, o) in outs.iter().enumerate() {
        symm::compare_bits(o, &outs[0])
            .map_err(|e| format!("rank {r} differs from rank 0: {e}"))?;
    }
    Ok(())
}

/// Whether `a` and `b` hold the same bits.
fn same_bits<T: Scalar>(a: &[T], b: &[T]) -> bool {
    symm::compare_bits(a, b).is_ok()
}

/// Asserts that every rank's f32 result (`per_rank`, rank 0 first) holds
/// rank 0's bits and is within 1e-5 of the float64 sum of `inputs`,
/// element by element.
fn assert_exact<'a>(
    inputs: &[Vec<f32>],
    per_rank: impl IntoIterator<Item = &'a [f32]>,
    what: &str,
) {
    let per_rank: Vec<&[f32]> = per_rank.into_iter().collect();
    for (r, o) in per_rank.iter().enumerate() {
        assert!(
            same_bits(o, per_rank[0]),
            "{what}: rank {r} differs from rank 0"
        );
        for (i, &got) in o.iter().enumerate() {
            let want = reference(inputs, i);
            assert!(
                (f64::from(got) - want).abs() <= 1e-5,
                "{what}, rank {r}, element {i}: {got} vs {want}"
            );
        }
    }
}

/// One sum of fresh random data, out of place (called twice, which checks
/// that the call counters reset nothing) or in place (once), against
/// float64 (RMS error at most `tol` relative to the terms' magnitudes, and
/// each element within `elem_tol` when given) and bitwise across ranks.
fn check<T: AllReduceElem>(
    world: usize,
    n: usize,
    tol: f64,
    elem_tol: Option<f64>,
    in_place: bool,
) {
    let Some(ranks) = ranks(world) else { return };
    let inputs: Vec<Vec<T>> = random_inputs(world, n);
    let outs = run(
        ranks,
        CommOptions::default().with_timeout(Duration::from_secs(30)),
        |c| {
            let buf = c.alloc::<T>(n)?;
            buf.copy_from_host(&inputs[c.rank()])?;
            if in_place {
                all_reduce_in_place(c, &buf, n)?;
                c.synchronize()?;
                return buf.to_host();
            }
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer_from(&vec![T::from_f32(f32::NAN); n])?;
            all_reduce(c, &s, &mut out, n)?;
            all_reduce(c, &s, &mut out, n)?;
            c.synchronize()?;
            out.to_host()
        },
    )
    .unwrap_or_else(|e| panic!("world {world}, n {n}: {e}"));
    if let Err(e) = ranks_agree(&outs) {
        panic!("world {world}, n {n}: {e}");
    }
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (i, got) in outs[0].iter().enumerate() {
        let want = reference(&inputs, i);
        let got = f64::from(got.to_f32());
        assert!(
            got.is_finite(),
            "world {world}, n {n}: element {i} was not written"
        );
        if let Some(e) = elem_tol {
            assert!(
                (got - want).abs() <= e,
                "world {world}, n {n}, element {i}: {got} vs {want}"
            );
        }
        num += (got - want).powi(2);
        // Relative to the terms' magnitude, not the sum's: with inputs of
        // either sign a sum may cancel to near zero, and a summation's
        // rounding error is bounded by its terms.
        den += magnitude(&inputs, i).powi(2);
    }
    let rel = (num / den.max(f64::MIN_POSITIVE)).sqrt();
    assert!(
        rel <= tol,
        "world {world}, n {n}: relative error {rel:e} > {tol:e}"
    );
}

/// A test-only mutant of a one-shot all-reduce: every rank sums element `i`
/// of every rank's buffer, in rank order, or in the opposite order where
/// `reversed` is 1.
#[symm_kernel]
fn sum_in_order(buf: SymmBuf<f32>, out: &mut [f32], n: u32, reversed: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let w = buf.world_size();
        let mut s = 0.0f32;
        let mut k: u32 = 0;
        while k < w {
            let r = if reversed == 1 { w - 1 - k } else { k };
            let p = buf.peer(r);
            s = s + p[i];
            k += 1;
        }
        out[i] = s;
    }
}

/// [`sum_in_order`] of `inputs` on `world` ranks, rank 1 in the opposite
/// order: every rank's result.
fn mutant_sums(world: usize, inputs: &[Vec<f32>]) -> Option<Vec<Vec<f32>>> {
    let ranks = ranks(world)?;
    let n = inputs[0].len();
    let outs = run(
        ranks,
        CommOptions::default().with_timeout(Duration::from_secs(30)),
        |c| {
            let s = staged(c, inputs)?;
            s.barrier(&symm::signal::Channel::request(c)?, Duration::from_secs(30))?;
            let mut out = c.device_buffer_from(&vec![f32::NAN; n])?;
            let cfg = LaunchConfig::linear((n as u32).div_ceil(128), 128);
            sum_in_order::launch(c, cfg, &s, &mut out, n as u32, u32::from(c.rank() == 1))?;
            c.synchronize()?;
            out.to_host()
        },
    );
    Some(outs.unwrap_or_else(|e| panic!("world {world}: {e}")))
}

/// The bitwise check across ranks can fail on these inputs: a rank that
/// sums in another order is caught. (On `random_range(-1.0..1.0)` draws,
/// multiples of 2^-22 whose sums of up to 4 are exact in any order, the
/// same mutant agrees bit for bit: those inputs could not catch it.)
#[test]
fn a_rank_that_sums_in_another_order_is_caught() {
    for world in [3, 4, 8] {
        // World 3 in the quick tier: the test's smallest world, so that the
        // quick tier asserts something here too.
        if !tier::runs(world == 3) {
            continue;
        }
        let inputs: Vec<Vec<f32>> = random_inputs(world, 2048);
        let Some(outs) = mutant_sums(world, &inputs) else {
            continue;
        };
        assert!(
            ranks_agree(&outs).is_err(),
            "world {world}: the rank that sums backwards agreed bit for bit"
        );
        // The main job's own check (examples/all_reduce.rs) catches it too.
        assert!(
            !example_check::verdict(&inputs, &outs).ok(1e-6),
            "world {world}: the example's check passed the rank that sums backwards"
        );
        if world <= 4 {
            let uniform: Vec<Vec<f32>> = (0..world)
                .map(|_| {
                    (0..2048)
                        .map(|_| rand::rng().random_range(-1.0f32..1.0))
                        .collect()
                })
                .collect();
            let outs = mutant_sums(world, &uniform).expect("placed above");
            assert_eq!(ranks_agree(&outs), Ok(()), "world {world}");
            assert!(
                example_check::verdict(&uniform, &outs).ok(1e-6),
                "world {world}: on uniform draws the example's check should pass it"
            );
        }
    }
}

#[test]
fn matches_float64_and_is_bitwise_identical_across_ranks() {
    let big = if on_gpu() { (1 << 20) + 3 } else { 65536 + 3 };
    // One rank is a group too (the sum is the input itself), and the only
    // world size a one-GPU machine can run.
    for world in [1, 2, 3, 4, 8] {
        for n in [1, 7, 4095, 65536, big] {
            if !on_gpu() && world == 8 && n > 4095 {
                continue; // keeps CI fast; world 8 still runs the odd lengths
            }
            if !tier::runs(quick(world, n)) {
                continue;
            }
            check::<f32>(world, n, 1e-6, Some(1e-5), false);
            check::<bf16>(world, n, 1e-2, None, false);
        }
        if tier::runs(quick(world, 4095)) {
            check::<f16>(world, 4095, 1e-2, None, false);
        }
    }
}

#[test]
fn back_to_back_calls_with_changing_data_and_no_host_sync() {
    let (calls, every) = if on_gpu() {
        (10_000u32, 997u32)
    } else {
        (40u32, 7u32)
    };
    let big: u32 = if on_gpu() { (1 << 20) + 3 } else { 70_001 };
    let cases: Vec<(Option<AllReducePath>, u32)> = AllReducePath::ALL
        .iter()
        .map(|&p| (Some(p), 4099))
        .chain([(None, big)])
        .collect();
    for &world in if on_gpu() {
        &[1, 2, 4, 8][..]
    } else {
        &[1, 2, 4][..]
    } {
        let Some(ranks) = ranks(world) else { continue };
        for &(path, n) in &cases {
            // The quick tier: two ranks, the LL and push paths.
            let sample =
                world == 2 && matches!(path, Some(AllReducePath::Ll | AllReducePath::Push));
            if !tier::runs(sample) {
                continue;
            }
            let samples: Vec<u32> = (0..calls).filter(|k| k % every == 3).collect();
            let seed: u32 = rand::random();
            let hist = run(
                ranks.clone(),
                CommOptions::default().with_timeout(Duration::from_secs(60)),
                |c| {
                    let buf = c.alloc::<f32>(n as usize)?;
                    let s = buf.rendezvous()?;
                    let mut out = c.device_buffer::<f32>(n as usize)?;
                    let mut hist =
                        c.device_buffer_from(&vec![f32::NAN; samples.len() * n as usize])?;
                    let cfg = LaunchConfig::linear(if on_gpu() { 64 } else { 4 }, 256);
                    for k in 0..calls {
                        fill_input::launch(c, cfg, &s, n, k, seed)?;
                        match path {
                            Some(p) => all_reduce_with(p, c, &s, &mut out, n as usize)?,
                            None => all_reduce(c, &s, &mut out, n as usize)?,
                        }
                        if let Ok(slot) = samples.binary_search(&k) {
                            keep::launch(c, cfg, &out, &mut hist, slot as u32 * n, n)?;
                        }
                    }
                    c.synchronize()?;
                    hist.to_host()
                },
            )
            .unwrap_or_else(|e| panic!("world {world}, {path:?}, n {n}: {e}"));
            for (r, h) in hist.iter().enumerate() {
                assert!(
                    same_bits(h, &hist[0]),
                    "world {world}, {path:?}, n {n}: rank {r} differs from rank 0"
                );
                check_samples(world as u32, n, seed, &samples, h)
                    .unwrap_or_else(|e| panic!("world {world}, {path:?}, n {n}, rank {r}: {e}"));
            }
        }
    }
}

#[test]
fn bad_inputs_are_clear_errors() {
    if !tier::quick_test() {
        return;
    }
    if on_gpu() {
        return;
    }
    let err = run(Ranks::Emulator(2), CommOptions::default(), |c| {
        let buf = c.alloc::<f32>(100)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(50)?;
        all_reduce(c, &s, &mut out, 100)
    })
    .expect_err("output too small");
    assert!(
        err.to_string()
            .contains("the input holds 100 and the output 50"),
        "{err}"
    );
    let err = run(Ranks::Emulator(2), CommOptions::default(), |c| {
        let buf = c.alloc::<f32>(100)?;
        let s = buf.rendezvous()?;
        let big = c.alloc::<f32>(104)?;
        let mut view = big.slice(1..101)?;
        all_reduce(c, &s, &mut view, 100)
    })
    .expect_err("misaligned output");
    assert!(err.to_string().contains("not 16-byte aligned"), "{err}");
}

#[test]
fn in_place_matches_float64_on_every_path() {
    // Sizes that land on several paths (LL, Lamport, the two-shots), in f32 and bf16
    // (8 elements per vector, so the in-place tails differ).
    let big = if on_gpu() { (1 << 20) + 3 } else { 70_001 };
    for world in [2, 3] {
        for n in [5usize, 4097, big] {
            if tier::runs(quick(world, n)) {
                check::<f32>(world, n, 1e-6, Some(1e-5), true);
            }
        }
        if tier::runs(quick(world, 2 * big + 1)) {
            check::<bf16>(world, 2 * big + 1, 1e-2, None, true);
        }
        if tier::runs(quick(world, 4095)) {
            check::<f16>(world, 4095, 1e-2, None, true);
        }
    }
}

#[test]
fn every_path_is_exact_at_odd_sizes() {
    let sizes: &[usize] = if on_gpu() {
        &[3, 4097, 300_001, (1 << 20) + 3]
    } else {
        &[3, 4097, 20_003]
    };
    // Eight emulated ranks run every path at the smallest size only (each
    // emulated thread is a CPU thread), so the 8-rank kernels run in CI.
    for &world in &[1, 2, 3, 4, 8] {
        let Some(ranks) = ranks(world) else { continue };
        let sizes = if world == 8 && !on_gpu() {
            &sizes[..1]
        } else {
            sizes
        };
        for &n in sizes {
            // The quick tier: the smallest size (every path still runs).
            if !tier::runs(quick(world, n) && n == sizes[0]) {
                continue;
            }
            every_path::<f32>(&ranks, world, n, |_| 1e-5);
            // bf16 sums are exact in f32, then rounded once to 8 bits of
            // mantissa (half an ulp: 2^-9 relative); the f32 sum itself is
            // off by at most 8 × 2^-24 × 8 absolute.
            if on_gpu() || n <= 4097 {
                every_path::<bf16>(&ranks, world, n, |want| want.abs() * 2f64.powi(-8) + 1e-5);
                // fp8: 3 (e4m3) and 2 (e5m2) bits of mantissa, rounded
                // once; near zero, half the smallest subnormal.
                every_path::<f8e4m3>(&ranks, world, n, |want| {
                    want.abs() * 2f64.powi(-4) + 2f64.powi(-10) + 1e-6
                });
                every_path::<f8e5m2>(&ranks, world, n, |want| {
                    want.abs() * 2f64.powi(-3) + 2f64.powi(-17) + 1e-6
                });
            }
        }
    }
}

/// The sum of `s`'s first `n` elements on every path of [`AllReducePath::ALL`], each
/// into a fresh output filled with `poison` first.
fn out_of_place_on_every_path<T: AllReduceElem>(
    c: &symm::Comm,
    s: &symm::SymmetricMemory,
    n: usize,
    poison: T,
) -> symm::Result<Vec<Vec<T>>> {
    let mut res = Vec::new();
    for path in AllReducePath::ALL {
        let mut out = c.device_buffer_from(&vec![poison; n])?;
        all_reduce_with(path, c, s, &mut out, n)?;
        c.synchronize()?;
        res.push(out.to_host()?);
    }
    Ok(res)
}

/// Every path, out of place and then in place where it may, on fresh
/// random inputs: each element within `tol(want)` of the float64 sum, and
/// the same bits on every rank.
fn every_path<T: AllReduceElem>(ranks: &Ranks, world: usize, n: usize, tol: fn(f64) -> f64) {
    let inputs: Vec<Vec<T>> = random_inputs(world, n);
    let outs = run(
        ranks.clone(),
        CommOptions::default().with_timeout(Duration::from_secs(30)),
        |c| {
            let buf = c.alloc::<T>(n)?;
            buf.copy_from_host(&inputs[c.rank()])?;
            let s = buf.rendezvous()?;
            // Out of place on every path, then in place (the output
            // is the rank's own input) on those that allow it.
            let mut res = out_of_place_on_every_path(c, &s, n, T::from_f32(f32::NAN))?;
            for path in AllReducePath::ALL.into_iter().filter(|p| p.allows_alias()) {
                let own = c.alloc::<T>(n)?;
                own.copy_from_host(&inputs[c.rank()])?;
                let s = own.rendezvous()?;
                all_reduce_with(path, c, &s, &mut own.slice(..)?, n)?;
                c.synchronize()?;
                res.push(own.to_host()?);
            }
            Ok(res)
        },
    )
    .unwrap_or_else(|e| panic!("{} world {world}, n {n}: {e}", T::DTYPE));
    let names: Vec<String> = AllReducePath::ALL
        .iter()
        .map(|p| format!("{p:?}"))
        .chain(
            AllReducePath::ALL
                .iter()
                .filter(|p| p.allows_alias())
                .map(|p| format!("{p:?} in place")),
        )
        .collect();
    for (path, name) in names.iter().enumerate() {
        let what = format!("{} {name}, world {world}, n {n}", T::DTYPE);
        for (r, o) in outs.iter().enumerate() {
            assert!(
                same_bits(&o[path], &outs[0][path]),
                "{what}: rank {r} differs from rank 0"
            );
        }
        for (i, got) in outs[0][path].iter().enumerate() {
            let want = reference(&inputs, i);
            let got = f64::from(got.to_f32());
            assert!(
                (got - want).abs() <= tol(want),
                "{what}, element {i}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn staged_calls_of_changing_sizes_back_to_back() {
    // Sizes alternate so that consecutive calls of the same parity differ
    // in size (slot strides must not depend on the call's size), and grow
    // twice mid-sequence (new staging while earlier calls may still run).
    // On GPUs the largest call is above 4 MiB, where the Lamport two-shot
    // launches wider blocks than for the calls around it.
    let big = if on_gpu() { 1_200_001 } else { 40_003 };
    let sizes = [9usize, 4097, 3, 20_001, 12_345, 1, big, 20_001, 7];
    let max = *sizes.iter().max().unwrap();
    for (world, path) in [2, 3, 4].into_iter().flat_map(|w| {
        [
            AllReducePath::Ll,
            AllReducePath::Lamport,
            AllReducePath::Push,
            AllReducePath::LamportTwoShot,
        ]
        .map(|p| (w, p))
    }) {
        // The quick tier: three ranks, every path.
        if !tier::runs(world == 3) {
            continue;
        }
        let Some(ranks) = ranks(world) else { continue };
        let inputs: Vec<Vec<f32>> = random_inputs(world, max);
        let outs = run(
            ranks,
            CommOptions::default().with_timeout(Duration::from_secs(30)),
            |c| {
                let s = staged(c, &inputs)?;
                let mut outs = Vec::new();
                for &n in &sizes {
                    outs.push(c.device_buffer_from(&vec![f32::NAN; n])?);
                }
                for (out, &n) in outs.iter_mut().zip(&sizes) {
                    all_reduce_with(path, c, &s, out, n)?;
                }
                c.synchronize()?;
                outs.iter()
                    .map(|o| o.to_host())
                    .collect::<symm::Result<Vec<_>>>()
            },
        )
        .unwrap_or_else(|e| panic!("world {world}, {path:?}: {e}"));
        for (k, &n) in sizes.iter().enumerate() {
            assert_exact(
                &inputs,
                outs.iter().map(|o| &o[k][..]),
                &format!("world {world}, {path:?}, call {k} (n {n})"),
            );
        }
    }
}

/// A packet left in an LL slot by a call a multiple of 256 epochs earlier
/// agrees with a new call's tag in the bits the wait checks (the epoch's
/// low 8), so it would fail a healthy call as "different calls": once
/// every 256 epochs of each parity (low 8 bits 0 or 1) the kernel clears
/// that parity's slots. A large call first grows the stage (epoch 1);
/// then, for each parity, `lead` small calls, a large call (epoch 3, or
/// 2), 255 small calls that leave its upper slots untouched (a small call
/// clears them, at epoch 257, or 256), and the large call again (epoch
/// 259, or 258: distance 256, the same parity, on one stage): every call
/// is exact, and none fails.
#[test]
fn ll_calls_256_epochs_apart_do_not_read_stale_packets() {
    for lead in [1, 0] {
        if tier::runs(lead == 1) {
            ll_calls_256_epochs_apart(lead);
        }
    }
}

fn ll_calls_256_epochs_apart(lead: usize) {
    let world = 2;
    let Some(ranks) = ranks(world) else { return };
    // Both above LL_SMALL_BYTES, so they share one stage and its epochs.
    let (big, small) = (2048usize, 300usize);
    let inputs: Vec<Vec<f32>> = random_inputs(world, big);
    let outs = run(
        ranks,
        CommOptions::default().with_timeout(Duration::from_secs(30)),
        |c| {
            let s = staged(c, &inputs)?;
            let mut first = c.device_buffer_from(&vec![f32::NAN; big])?;
            let mut last = c.device_buffer_from(&vec![f32::NAN; big])?;
            let mut few = c.device_buffer_from(&vec![f32::NAN; small])?;
            // The stage at its final size, and epoch 1 spent.
            let mut grow = c.device_buffer_from(&vec![f32::NAN; big])?;
            all_reduce_with(AllReducePath::Ll, c, &s, &mut grow, big)?;
            for _ in 0..lead {
                all_reduce_with(AllReducePath::Ll, c, &s, &mut few, small)?;
            }
            all_reduce_with(AllReducePath::Ll, c, &s, &mut first, big)?;
            for _ in 0..255 {
                all_reduce_with(AllReducePath::Ll, c, &s, &mut few, small)?;
            }
            all_reduce_with(AllReducePath::Ll, c, &s, &mut last, big)?;
            c.synchronize()?;
            Ok((first.to_host()?, few.to_host()?, last.to_host()?))
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_exact(
        &inputs,
        outs.iter().map(|o| &o.0[..]),
        "the first large call",
    );
    assert_exact(
        &inputs,
        outs.iter().map(|o| &o.1[..]),
        "the last small call",
    );
    assert_exact(
        &inputs,
        outs.iter().map(|o| &o.2[..]),
        "the large call 256 epochs later",
    );
}

#[test]
fn empty_and_aliased_outputs() {
    if !tier::quick_test() {
        return;
    }
    let Some(ranks) = ranks(2) else { return };
    // Over the LL threshold: the pull kernel must refuse to write into an
    // input that peers are reading; the dispatcher's path must not.
    let n = 70_001usize;
    let inputs: Vec<Vec<f32>> = random_inputs(2, n);
    let outs = run(
        ranks,
        CommOptions::default().with_timeout(Duration::from_secs(30)),
        |c| {
            let buf = c.alloc::<f32>(n)?;
            buf.copy_from_host(&inputs[c.rank()])?;
            let s = buf.rendezvous()?;
            // n == 0 is a no-op, not a launch that could touch the output.
            let mut poisoned = c.device_buffer_from(&[f32::NAN; 4])?;
            all_reduce(c, &s, &mut poisoned, 0)?;
            c.synchronize()?;
            assert!(poisoned.to_host()?.iter().all(|v| v.is_nan()));
            let mut view = buf.slice(..)?;
            let err = all_reduce_with(AllReducePath::Pull, c, &s, &mut view, n)
                .expect_err("aliased pull");
            // Through the agreement, which keeps a rank's problem's kind.
            assert_eq!(err.kind(), symm::ErrorKind::Unsupported, "{err}");
            assert!(err.to_string().contains("cannot reduce in place"), "{err}");
            let mut shifted = buf.slice(4..)?;
            for p in AllReducePath::ALL {
                let err = all_reduce_with(p, c, &s, &mut shifted, n - 4).expect_err("overlap");
                assert!(err.to_string().contains("without starting where"), "{err}");
            }
            let err = all_reduce(c, &s, &mut shifted, n - 4).expect_err("overlap");
            assert!(err.to_string().contains("without starting where"), "{err}");
            all_reduce(c, &s, &mut view, n)?;
            c.synchronize()?;
            buf.to_host()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_exact(
        &inputs,
        outs.iter().map(|o| &o[..]),
        "in place through a view",
    );
}

#[test]
fn the_books_tutorial_kernels_match_the_built_in_bit_for_bit() {
    use symm::kernels::tutorial::{naive_all_reduce, vectorized_all_reduce};
    use symm::signal::Channel;
    for world in [2, 4] {
        let Some(ranks) = ranks(world) else { continue };
        for n in [1usize, 4099, 65_537] {
            if !tier::runs(quick(world, n)) {
                continue;
            }
            let inputs: Vec<Vec<bf16>> = random_inputs(world, n);
            let outs = run(
                ranks.clone(),
                CommOptions::default().with_timeout(Duration::from_secs(30)),
                |c| {
                    let buf = c.alloc::<bf16>(n)?;
                    buf.copy_from_host(&inputs[c.rank()])?;
                    let s = buf.rendezvous()?;
                    let cfg = symm::kernels::all_reduce::config::<bf16>(n);
                    let poison = vec![bf16::from_f32(f32::NAN); n];
                    let mut a = c.device_buffer_from(&poison)?;
                    let mut b = c.device_buffer_from(&poison)?;
                    let mut d = c.device_buffer_from(&poison)?;
                    let (entry, exit) = (Channel::request(c)?, Channel::request(c)?);
                    let (entry, exit) = (entry.index(), exit.index());
                    naive_all_reduce::launch::<bf16>(c, cfg, &s, &mut a, n as u32, entry, exit)?;
                    vectorized_all_reduce::launch::<bf16, 8>(
                        c, cfg, &s, &mut b, n as u32, entry, exit,
                    )?;
                    all_reduce(c, &s, &mut d, n)?;
                    c.synchronize()?;
                    Ok([a.to_host()?, b.to_host()?, d.to_host()?])
                },
            )
            .unwrap_or_else(|e| panic!("world {world}, n {n}: {e}"));
            for (r, [a, b, d]) in outs.iter().enumerate() {
                assert!(same_bits(a, d), "world {world}, n {n}, rank {r}: naive");
                assert!(
                    same_bits(b, d),
                    "world {world}, n {n}, rank {r}: vectorized"
                );
                assert!(same_bits(d, &outs[0][2]), "world {world}, n {n}: rank {r}");
            }
            for (i, got) in outs[0][2].iter().enumerate() {
                let want = reference(&inputs, i);
                let got = f64::from(got.to_f32());
                assert!(
                    (got - want).abs() <= 1e-2 * want.abs().max(1.0),
                    "element {i}"
                );
            }
        }
    }
}

/// NaNs (including the all-ones bits the Lamport kernels use to mark an
/// empty slot), infinities and −0.0 among random data, on every path and
/// element type: the same bits on every rank, NaN exactly where the
/// float64 sum is NaN, infinities where it is infinite, and the right sum
/// elsewhere.
#[test]
fn special_values_pass_through_every_path() {
    let n = if on_gpu() { 40_000 } else { 4_099 };
    special_values::<f32>(n, 1e-5);
    special_values::<bf16>(n, 1e-2);
    special_values::<f16>(n, 1e-2);
}

fn special_values<T: AllReduceElem>(n: usize, tol: f64) {
    for world in [2, 4] {
        if !tier::runs(quick(world, n)) {
            continue;
        }
        let Some(ranks) = ranks(world) else { continue };
        let mut inputs: Vec<Vec<T>> = random_inputs(world, n);
        let specials = [
            T::from_bits32(u32::MAX), // the Lamport empty mark
            T::from_f32(f32::NAN),
            T::from_f32(f32::INFINITY),
            T::from_f32(f32::NEG_INFINITY),
            T::from_f32(-0.0),
        ];
        let mut rng = rand::rng();
        for _ in 0..n / 8 {
            let (r, i) = (rng.random_range(0..world), rng.random_range(0..n));
            inputs[r][i] = specials[rng.random_range(0..specials.len())];
        }
        let outs = run(
            ranks,
            CommOptions::default().with_timeout(Duration::from_secs(30)),
            |c| {
                let buf = c.alloc::<T>(n)?;
                buf.copy_from_host(&inputs[c.rank()])?;
                let s = buf.rendezvous()?;
                // Poison that is neither the empty mark nor a result.
                out_of_place_on_every_path(c, &s, n, T::from_f32(1e4))
            },
        )
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
        for (p, path) in AllReducePath::ALL.iter().enumerate() {
            for (r, o) in outs.iter().enumerate() {
                assert!(same_bits(&o[p], &outs[0][p]), "{path:?}: rank {r} differs");
            }
            for (i, got) in outs[0][p].iter().enumerate() {
                let want = reference(&inputs, i);
                let got = f64::from(got.to_f32());
                let ok = if want.is_nan() {
                    got.is_nan()
                } else if want.is_infinite() {
                    got == want
                } else {
                    (got - want).abs() <= tol * want.abs().max(1.0)
                };
                assert!(
                    ok,
                    "{path:?}, world {world}, element {i}: got {got}, want {want}"
                );
            }
        }
    }
}

/// A rank whose all-reduce kernel gave up waiting (here its peer never
/// joins the call) refuses every later all-reduce with an error that says
/// why, instead of reading staging that the late data may still reach.
#[test]
fn a_rank_whose_kernel_failed_refuses_later_calls() {
    if !tier::quick_test() {
        return;
    }
    let Some(ranks) = ranks(2) else { return };
    let n = 3000;
    let inputs: Vec<Vec<f32>> = random_inputs(2, n);
    let options = CommOptions::default()
        .with_timeout(Duration::from_secs(30))
        // Long enough that a loaded machine (the emulator declares a hang
        // after this long without progress) does not fail the healthy call.
        .with_kernel_timeout(Duration::from_millis(1500));
    let outs = run(ranks, options, |c| {
        let s = staged(c, &inputs)?;
        let mut out = c.device_buffer_from(&vec![f32::NAN; n])?;
        all_reduce(c, &s, &mut out, n)?;
        c.synchronize()?;
        let healthy = !c.kernel_failed();
        let mut failure = None;
        let mut refusal = None;
        if c.rank() == 0 {
            // Rank 1 never makes this call.
            failure = Some(
                all_reduce(c, &s, &mut out, n)
                    .and_then(|()| c.synchronize())
                    .expect_err("a call its peer never joins must fail")
                    .to_string(),
            );
            refusal = Some(
                all_reduce(c, &s, &mut out, n)
                    .expect_err("a rank whose kernel failed must refuse")
                    .to_string(),
            );
            c.store().set("refused", b"1").expect("store");
        } else {
            // Keep this rank's memory mapped until rank 0 is done with it.
            c.store()
                .wait(&["refused".to_string()], Duration::from_secs(60))
                .expect("rank 0 finishes");
        }
        Ok((healthy, c.kernel_failed(), failure, refusal))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let (healthy, failed, failure, refusal) = &outs[0];
    assert!(
        *healthy && *failed,
        "rank 0: healthy {healthy}, failed {failed}"
    );
    let failure = failure.as_deref().unwrap();
    assert!(failure.contains("rank 0"), "{failure}");
    let refusal = refusal.as_deref().unwrap();
    assert!(refusal.contains("failed earlier"), "{refusal}");
    assert!(outs[1].0 && !outs[1].1, "rank 1 never failed");
}

/// A domain of more than 8 ranks (a multi-node NVLink rack's): every size
/// takes the pull kernel (two-shot in place), which reads its peers 8 at a
/// time, exact against float64 and the same bits on every rank; a forced
/// LL, push or Lamport path, unrolled for 8 ranks, is the same
/// `Unsupported` error on every rank.
#[test]
fn domains_past_8_ranks_sum_on_the_pull_kernels() {
    // 40: the identity barriers' checkers start past two handshake warps,
    // on GPUs only (on the emulator, 40 ranks of 512-thread blocks beside
    // the other tests' ranks pass the process's stack mappings; the fused
    // test's 40 ranks run small blocks).
    for world in [9, 16, 40] {
        if !tier::runs(world == 9) || (world == 40 && !on_gpu()) {
            continue;
        }
        for n in [7, 4095] {
            check::<f32>(world, n, 1e-6, Some(1e-5), false);
            check::<f32>(world, n, 1e-6, Some(1e-5), true);
            check::<bf16>(world, n, 1e-2, None, false);
        }
        let Some(ranks) = ranks(world) else { continue };
        let errs = run(ranks, CommOptions::default(), |c| {
            let buf = c.alloc::<f32>(64)?;
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer_from(&[0f32; 64])?;
            let mut errs = Vec::new();
            for path in AllReducePath::ALL.into_iter().filter(|p| !p.general()) {
                let e = all_reduce_with(path, c, &s, &mut out, 64).unwrap_err();
                errs.push((path, e.kind(), e.to_string()));
            }
            Ok(errs)
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
        for (r, errs) in errs.iter().enumerate() {
            assert_eq!(errs.len(), 4, "rank {r}: {errs:?}");
            for (path, kind, text) in errs {
                assert_eq!(
                    *kind,
                    symm::ErrorKind::Unsupported,
                    "rank {r} {path:?}: {text}"
                );
                assert!(
                    text.contains("at most 8 ranks"),
                    "rank {r} {path:?}: {text}"
                );
            }
        }
    }
}
