//! Expert-parallel dispatch and combine (`symm::kernels::moe`): random
//! routings (tokens to no expert, all to one expert, empty experts, ranks
//! with no tokens) against a host reference, bit for bit, over several
//! steps with new routings and no host synchronisation between them; and
//! the errors of a bad index, a full capacity and a config that differs.
//! On the emulator by default (CI); on GPU ranks with
//! `SYMM_KERNEL_TESTS_ON=gpu`.

use std::time::Duration;

use rand::Rng;
#[path = "support/targets.rs"]
mod targets;
use targets::ranks;
#[path = "support/tier.rs"]
mod tier;

use symm::dsl::*;
use symm::kernels::collectives::CopyElem;
use symm::kernels::moe::{moe_layout, moe_move, moe_pack, moe_rows, moe_sum, Moe, MoeConfig};
use symm::symm_kernel;
use symm::{bf16, run, Comm, CommOptions, Error, ErrorKind, LaunchConfig};

fn options() -> CommOptions {
    CommOptions::default()
        .with_timeout(Duration::from_secs(30))
        .with_kernel_timeout(Duration::from_secs(20))
}

/// One rank's step: its tokens, rows, routing and weights.
#[derive(Clone)]
struct Step<T> {
    tokens: usize,
    x: Vec<T>,
    idx: Vec<i32>,
    weights: Vec<f32>,
}

/// How a step routes its tokens.
#[derive(Clone, Copy, Debug)]
enum Routing {
    /// Distinct random experts a token, some slots `-1`.
    Random,
    /// Slot `k` of every token to expert `k`: expert 0 gets every token,
    /// and the experts past `top_k` none.
    OneExpert,
}

fn step<T: Scalar>(cfg: &MoeConfig, tokens: usize, routing: Routing) -> Step<T> {
    let mut rng = rand::rng();
    let (h, k, e) = (cfg.hidden, cfg.top_k, cfg.num_experts);
    let x = (0..tokens * h)
        .map(|_| T::from_f32(rng.random_range(-4.0f32..4.0)))
        .collect();
    let mut idx = Vec::with_capacity(tokens * k);
    for _ in 0..tokens {
        let mut chosen: Vec<i32> = Vec::new();
        for _ in 0..k {
            let v = match routing {
                Routing::OneExpert => chosen.len() as i32,
                Routing::Random if rng.random_range(0..8) == 0 => -1,
                Routing::Random => loop {
                    let v = rng.random_range(0..e) as i32;
                    if !chosen.contains(&v) || chosen.len() >= e {
                        break v;
                    }
                },
            };
            chosen.push(v);
            idx.push(v);
        }
    }
    let weights = (0..tokens * k)
        .map(|_| rng.random_range(0.0f32..1.0))
        .collect();
    Step {
        tokens,
        x,
        idx,
        weights,
    }
}

/// An expert's work in the test: its row times (expert + 1), rounded to
/// `T`, the same on the host and in the reference.
fn expert<T: Scalar>(e: usize, v: T) -> T {
    T::from_f32(v.to_f32() * (e as f32 + 1.0))
}

/// What rank `r` must receive: for each local expert, the rows of every
/// source rank in order, each source's in (token, slot) order.
fn expected_rows<T: Scalar>(
    cfg: &MoeConfig,
    steps: &[Step<T>],
    r: usize,
    local: usize,
) -> Vec<Vec<Vec<T>>> {
    let h = cfg.hidden;
    (0..local)
        .map(|l| {
            let g = (r * local + l) as i32;
            let mut rows = Vec::new();
            for s in steps {
                for (p, &v) in s.idx.iter().enumerate() {
                    if v == g {
                        let t = p / cfg.top_k;
                        rows.push(s.x[t * h..(t + 1) * h].to_vec());
                    }
                }
            }
            rows
        })
        .collect()
}

/// Token `t`'s combined row on its own rank, as `moe_sum` computes it.
fn expected_out<T: Scalar>(cfg: &MoeConfig, s: &Step<T>) -> Vec<T> {
    let (h, k) = (cfg.hidden, cfg.top_k);
    let mut out = vec![T::from_f32(0.0); s.tokens * h];
    for t in 0..s.tokens {
        for i in 0..h {
            let mut acc = 0.0f32;
            for j in 0..k {
                let p = t * k + j;
                let e = s.idx[p];
                if e >= 0 {
                    acc += s.weights[p] * expert(e as usize, s.x[t * h + i]).to_f32();
                }
            }
            out[t * h + i] = T::from_f32(acc);
        }
    }
    out
}

fn same_bits<T: Scalar>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            a.__to_bits64(),
            b.__to_bits64(),
            "{what}: element {i}: got {a:?}, want {b:?}"
        );
    }
}

/// `steps` steps of `cfg` on `world` ranks, each dispatched and combined
/// with no host synchronisation between them; the last step's received
/// rows and every step's output checked against the references.
fn case<T: CopyElem>(world: usize, cfg: MoeConfig, steps: usize, routing: Routing) {
    let Some(ranks) = ranks(world) else { return };
    let local = cfg.num_experts / world;
    let data: Vec<Vec<Step<T>>> = (0..steps)
        .map(|i| {
            (0..world)
                .map(|r| {
                    // Rank 1 dispatches nothing in the first step.
                    let n = if i == 0 && r == 1 {
                        0
                    } else {
                        rand::rng().random_range(1..=cfg.max_tokens)
                    };
                    step::<T>(&cfg, n, routing)
                })
                .collect()
        })
        .collect();
    let what = format!("moe {} world {world} {cfg:?} {routing:?}", T::DTYPE);
    let outs = run(ranks, options(), |c: &Comm| {
        let mut moe = Moe::<T>::new(c, cfg.clone())?;
        let h = cfg.hidden;
        let mut outs = Vec::new();
        let mut last = None;
        for (i, st) in data.iter().enumerate() {
            let mine = &st[c.rank()];
            let x = c.device_buffer_from(&pad(&mine.x, T::from_f32(0.0)))?;
            let idx = c.device_buffer_from(&pad(&mine.idx, 0))?;
            let w = c.device_buffer_from(&pad(&mine.weights, 0.0))?;
            moe.dispatch(c, &x, &idx, mine.tokens)?;
            // The experts' work on the device's layout, on the host: the
            // layout and rows are read back (this synchronises; the
            // dispatch and combine themselves never do).
            let layout = moe.layout().read(0, 2 * local + 2)?;
            let got = moe.received().read(0, moe.received_rows() * h)?;
            let mut y = vec![T::from_f32(0.0); got.len()];
            for l in 0..local {
                let (n, at) = (layout[l] as usize, layout[local + l] as usize);
                for row in at..at + n {
                    for j in 0..h {
                        y[row * h + j] = expert(c.rank() * local + l, got[row * h + j]);
                    }
                }
            }
            let y = c.device_buffer_from(&y)?;
            let mut out =
                c.device_buffer_from(&vec![T::from_f32(f32::NAN); mine.tokens.max(1) * h])?;
            moe.combine(c, &y, &w, &mut out)?;
            outs.push(out.read(0, mine.tokens * h)?);
            if i + 1 == data.len() {
                last = Some((layout, got));
            }
        }
        c.synchronize()?;
        Ok((outs, last.expect("a step ran")))
    })
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let last: Vec<Step<T>> = data.last().cloned().unwrap();
    for (r, (outs, (layout, got))) in outs.iter().enumerate() {
        let want = expected_rows(&cfg, &last, r, local);
        let mut total = 0;
        for (l, rows) in want.iter().enumerate() {
            let (n, at) = (layout[l] as usize, layout[local + l] as usize);
            assert_eq!(n, rows.len(), "{what}: rank {r} expert {l}'s rows");
            assert_eq!(
                at % cfg.align,
                0,
                "{what}: rank {r} expert {l} starts at {at}"
            );
            for (j, row) in rows.iter().enumerate() {
                let h = cfg.hidden;
                same_bits(
                    &format!("{what}: rank {r} expert {l} row {j}"),
                    &got[(at + j) * h..(at + j + 1) * h],
                    row,
                );
            }
            total += n;
        }
        assert_eq!(
            layout[2 * local] as usize,
            total,
            "{what}: rank {r}'s rows in all"
        );
        for (i, out) in outs.iter().enumerate() {
            same_bits(
                &format!("{what}: rank {r} step {i}'s output"),
                out,
                &expected_out(&cfg, &data[i][r]),
            );
        }
    }
}

/// `v`, or one `zero` where it is empty (a device buffer holds at least one
/// element).
fn pad<T: Copy>(v: &[T], zero: T) -> Vec<T> {
    if v.is_empty() {
        vec![zero]
    } else {
        v.to_vec()
    }
}

#[test]
fn dispatch_and_combine_match_the_reference() {
    for world in 1..=8 {
        if !tier::runs(world <= 3) {
            continue;
        }
        // At least top_k experts (each token names distinct ones).
        let cfg = MoeConfig::new(24, 2 * std::cmp::max(world, 2), 3, 6).with_align(4);
        case::<bf16>(world, cfg.clone(), 3, Routing::Random);
        case::<f32>(world, cfg.with_align(1), 2, Routing::Random);
        case::<bf16>(
            world,
            MoeConfig::new(16, 2 * world, 2, 5),
            2,
            Routing::OneExpert,
        );
    }
}

/// What every rank got from `f` on `world` ranks: every one must fail.
fn every_rank_fails(
    world: usize,
    f: impl Fn(&Comm) -> symm::Result<()> + Sync,
) -> Option<Vec<Error>> {
    let ranks = ranks(world)?;
    let e = run(ranks, options().with_timeout(Duration::from_secs(10)), f)
        .expect_err("the call must fail");
    assert_eq!(e.errors.len(), world, "every rank fails: {e}");
    Some(e.errors.into_iter().map(|(_, e)| e).collect())
}

#[test]
fn misuse_fails_every_rank() {
    if !tier::quick_test() {
        return;
    }
    let world = 2;
    // A config that differs: every rank says so at once.
    if let Some(errs) = every_rank_fails(world, |c| {
        let cfg = MoeConfig::new(16 + 8 * c.rank(), 4, 2, 4);
        Moe::<bf16>::new(c, cfg).map(|_| ())
    }) {
        for e in &errs {
            assert_eq!(e.root_kind(), ErrorKind::Mismatch, "{e}");
        }
    }
    // Experts that do not spread evenly.
    if let Some(errs) = every_rank_fails(world, |c| {
        Moe::<bf16>::new(c, MoeConfig::new(16, 3, 2, 4)).map(|_| ())
    }) {
        for e in &errs {
            assert!(e.to_string().contains("do not spread evenly"), "{e}");
        }
    }
    // More tokens than planned, on one rank.
    if let Some(errs) = every_rank_fails(world, |c| {
        let mut moe = Moe::<bf16>::new(c, MoeConfig::new(16, 4, 2, 4))?;
        let n = if c.rank() == 1 { 5 } else { 4 };
        let x = c.device_buffer::<bf16>(n * 16)?;
        let idx = c.device_buffer_from(&vec![0i32; n * 2])?;
        moe.dispatch(c, &x, &idx, n)?;
        c.synchronize()
    }) {
        for e in &errs {
            assert!(e.to_string().contains("at most 4"), "{e}");
        }
    }
    // An index past the experts on rank 1, token 2: its report names the
    // token as the block; every rank fails.
    if let Some(errs) = every_rank_fails(world, |c| {
        let mut moe = Moe::<bf16>::new(c, MoeConfig::new(16, 4, 2, 4))?;
        let mut idx = vec![0i32, 1, 2, 3, 1, 2, 0, 3];
        if c.rank() == 1 {
            idx[5] = 4;
        }
        let x = c.device_buffer::<bf16>(4 * 16)?;
        let idx = c.device_buffer_from(&idx)?;
        moe.dispatch(c, &x, &idx, 4)?;
        c.synchronize()
    }) {
        let Error::KernelAssert { block, message, .. } = &errs[1] else {
            panic!("rank 1: {}", errs[1])
        };
        assert_eq!(*block, 2, "{}", errs[1]);
        assert!(message.contains("top-k index"), "{message}");
    }
    // A routing that sends rank 0 more rows than its capacity: every rank
    // fails, none writes past it.
    if let Some(errs) = every_rank_fails(world, |c| {
        let mut moe = Moe::<bf16>::new(c, MoeConfig::new(16, 4, 2, 4).with_recv_capacity(6))?;
        let x = c.device_buffer::<bf16>(4 * 16)?;
        let idx = c.device_buffer_from(&[0i32, 1, 0, 1, 0, 1, 0, 1])?;
        moe.dispatch(c, &x, &idx, 4)?;
        c.synchronize()
    }) {
        for e in &errs {
            assert!(
                matches!(
                    e.root_kind(),
                    ErrorKind::Kernel | ErrorKind::Capacity | ErrorKind::PeerFailed
                ),
                "{e}"
            );
        }
    }
}

/// The test's experts on the device, as [`expert`] on the host: block `l`
/// scales local expert `l`'s rows (as `layout` places them) by its global
/// number plus one.
#[symm_kernel]
fn scale_rows<T: Scalar>(
    rows: &[T],
    layout: &[u32],
    y: &mut [T],
    local: u32,
    hidden: u32,
    rank: u32,
) {
    let l = block_idx_x();
    let n = layout[l];
    let at = layout[local + l];
    let factor = (rank * local + l) as f32 + 1.0f32;
    for row in at..at + n {
        let mut i = thread_idx_x();
        while i < hidden {
            y[row * hidden + i] = T::from_f32(rows[row * hidden + i].to_f32() * factor);
            i += block_dim_x();
        }
    }
}

/// Many steps back to back, each with a new routing and new rows, the
/// experts' work on the device, and no host synchronisation until the
/// end: every step's output is exact.
fn back_to_back<T: CopyElem>(world: usize, steps: usize) {
    let Some(ranks) = ranks(world) else { return };
    let cfg = MoeConfig::new(16, 2 * world, 2, 4).with_align(2);
    let local = 2;
    let data: Vec<Vec<Step<T>>> = (0..steps)
        .map(|_| {
            (0..world)
                .map(|_| {
                    step::<T>(
                        &cfg,
                        rand::rng().random_range(0..=cfg.max_tokens),
                        Routing::Random,
                    )
                })
                .collect()
        })
        .collect();
    let what = format!(
        "moe back to back, {} world {world}, {steps} steps",
        T::DTYPE
    );
    let outs = run(ranks, options(), |c: &Comm| {
        // The test's own kernel loaded before the plan's agreement, as the
        // plan loads its own: where ranks share a GPU, a first load waits
        // for the device to be idle, which a rank spinning on this one
        // would keep it from being.
        scale_rows::co_resident_grid::<T>(c, 64, 0)?;
        let mut moe = Moe::<T>::new(c, cfg.clone())?;
        let h = cfg.hidden;
        let mut y = c.device_buffer::<T>(moe.received_rows() * h)?;
        let mut kept = Vec::new();
        for st in &data {
            let mine = &st[c.rank()];
            let x = c.device_buffer_from(&pad(&mine.x, T::from_f32(0.0)))?;
            let idx = c.device_buffer_from(&pad(&mine.idx, 0))?;
            let w = c.device_buffer_from(&pad(&mine.weights, 0.0))?;
            let mut out =
                c.device_buffer_from(&vec![T::from_f32(f32::NAN); mine.tokens.max(1) * h])?;
            moe.dispatch(c, &x, &idx, mine.tokens)?;
            scale_rows::launch::<T>(
                c,
                LaunchConfig::linear(local as u32, 64),
                moe.received(),
                moe.layout(),
                &mut y,
                local as u32,
                h as u32,
                c.rank() as u32,
            )?;
            moe.combine(c, &y, &w, &mut out)?;
            // Inputs stay alive until the end: nothing synchronises.
            kept.push((x, idx, w, out, mine.tokens));
        }
        c.synchronize()?;
        kept.iter()
            .map(|(_, _, _, out, n)| out.read(0, n * h))
            .collect::<symm::Result<Vec<_>>>()
    })
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    for (r, outs) in outs.iter().enumerate() {
        for (i, out) in outs.iter().enumerate() {
            same_bits(
                &format!("{what}: rank {r} step {i}"),
                out,
                &expected_out(&cfg, &data[i][r]),
            );
        }
    }
}

#[test]
fn back_to_back_steps_need_no_host_sync() {
    if tier::runs(true) {
        back_to_back::<bf16>(2, 100);
    }
    if tier::runs(false) {
        back_to_back::<bf16>(2, 1000);
        for world in [3, 4, 8] {
            back_to_back::<f32>(world, 100);
        }
    }
}

// The MoE kernels compile with NVRTC (sm_90 and sm_80, checked and not),
// for bf16 and f32: a sample in the quick tier, the rest in the full one.
// Each `check_kernels!` test is an inner function of a test that asks the
// tier (`check_kernels!`'s own test cannot).

/// The layout kernels and the bf16 copies and sums.
#[allow(unnameable_test_items)]
#[test]
fn moe_kernels_sample_compile() {
    if !tier::quick_test() {
        return;
    }
    symm::check_kernels!(
        fn moe_kernels_sample;
        moe_layout,
        moe_rows,
        moe_pack::<bf16>,
        moe_move::<bf16>,
        moe_sum::<bf16>,
    );
    moe_kernels_sample();
}

/// The f32 instantiations, and the test's own expert.
#[allow(unnameable_test_items)]
#[test]
fn moe_kernels_compile() {
    if !tier::full_test("NVRTC compiles of the MoE kernels beyond the sample") {
        return;
    }
    symm::check_kernels!(
        fn moe_kernels;
        moe_pack::<f32>,
        moe_move::<f32>,
        moe_sum::<f32>,
        scale_rows::<bf16>,
        scale_rows::<f32>,
    );
    moe_kernels();
}
