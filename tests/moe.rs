//! Expert-parallel dispatch and combine (`symm::kernels::moe`): random
//! routings (tokens to no expert, all to one expert, empty experts, ranks
//! with no tokens) against a host reference, bit for bit, over several
//! steps with new routings and no host synchronisation between them; and
//! the errors of a bad index, a full capacity and a config that differs.
//! On the emulator by default (CI); on GPU ranks with
//! `SYMM_KERNEL_TESTS_ON=gpu`.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
#[path = "support/targets.rs"]
mod targets;
use targets::ranks;
#[path = "support/tier.rs"]
mod tier;

use symm::dsl::*;

use symm::kernels::moe::{
    layout, layout_scratch, moe_counts, moe_dests, moe_layout, moe_layout_place, moe_layout_scan,
    moe_move, moe_pack, moe_pack_fp8, moe_pull, moe_push, moe_rows, moe_spread, moe_stage, moe_sum,
    moe_sum_ranks, Fp8Scales, Moe, MoeConfig, MoeElem, MoeMode,
};
use symm::symm_kernel;
use symm::{bf16, run, Comm, CommOptions, Error, ErrorKind, LaunchConfig};

/// Every form: every case runs in each.
const MODES: [MoeMode; 3] = [MoeMode::Pull, MoeMode::AllToAll, MoeMode::CopyEngine];

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

/// A generator seeded from `SYMM_MOE_SEED`, else at random, and its seed,
/// which every case names in its failures.
fn seeded() -> (StdRng, u64) {
    let seed = std::env::var("SYMM_MOE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    (StdRng::seed_from_u64(seed), seed)
}

fn step<T: Scalar>(rng: &mut StdRng, cfg: &MoeConfig, tokens: usize, routing: Routing) -> Step<T> {
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

/// One element of a combined row, as both forms sum it: for each rank in
/// order that holds any of the token's slots (`(expert, weight, value)`,
/// `local` experts a rank), the sum of its slots in slot order from −0,
/// then those sums added from 0, in f32, rounded once.
fn combined<T: Scalar>(world: usize, local: usize, slots: &[(usize, f32, f32)]) -> T {
    let mut acc = 0.0f32;
    for d in 0..world {
        let mine: Vec<_> = slots.iter().filter(|s| s.0 / local == d).collect();
        if !mine.is_empty() {
            acc += mine.iter().fold(-0.0f32, |a, s| a + s.1 * s.2);
        }
    }
    T::from_f32(acc)
}

/// Token `t`'s combined row on its own rank (of `world`), as `moe_sum`
/// computes it.
fn expected_out<T: Scalar>(cfg: &MoeConfig, world: usize, s: &Step<T>) -> Vec<T> {
    let (h, k) = (cfg.hidden, cfg.top_k);
    let local = cfg.num_experts / world;
    let mut out = vec![T::from_f32(0.0); s.tokens * h];
    for t in 0..s.tokens {
        for i in 0..h {
            let slots: Vec<(usize, f32, f32)> = (0..k)
                .map(|j| t * k + j)
                .filter(|&p| s.idx[p] >= 0)
                .map(|p| {
                    let e = s.idx[p] as usize;
                    (e, s.weights[p], expert(e, s.x[t * h + i]).to_f32())
                })
                .collect();
            out[t * h + i] = combined(world, local, &slots);
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
fn case<T: MoeElem>(world: usize, cfg: MoeConfig, steps: usize, routing: Routing) {
    case_with::<T>(world, cfg, steps, routing, false)
}

/// [`case`], with the receive capacity set to the most rows any rank
/// receives in any step where `exact` (a plan filled to the last row), in
/// each of [`MODES`].
fn case_with<T: MoeElem>(
    world: usize,
    cfg: MoeConfig,
    steps: usize,
    routing: Routing,
    exact: bool,
) {
    for mode in MODES {
        case_in::<T>(world, cfg.clone().with_mode(mode), steps, routing, exact);
    }
}

/// [`case_with`] in `cfg`'s mode.
fn case_in<T: MoeElem>(
    world: usize,
    mut cfg: MoeConfig,
    steps: usize,
    routing: Routing,
    exact: bool,
) {
    let Some(ranks) = ranks(world) else { return };
    let local = cfg.num_experts / world;
    let (mut rng, seed) = seeded();
    let data: Vec<Vec<Step<T>>> = (0..steps)
        .map(|i| {
            (0..world)
                .map(|r| {
                    // Rank 1 dispatches nothing in the first step.
                    let n = if i == 0 && r == 1 {
                        0
                    } else {
                        rng.random_range(1..=cfg.max_tokens)
                    };
                    step::<T>(&mut rng, &cfg, n, routing)
                })
                .collect()
        })
        .collect();
    if exact {
        let most = data
            .iter()
            .flat_map(|st| {
                let local = cfg.num_experts / world;
                (0..world).map(move |r| {
                    st.iter()
                        .flat_map(|s| &s.idx)
                        .filter(|&&v| v >= 0 && v as usize / local == r)
                        .count()
                })
            })
            .max()
            .unwrap_or(1);
        cfg.recv_capacity = Some(most.max(1));
    }
    let what = format!(
        "moe {} world {world} {cfg:?} {routing:?} (SYMM_MOE_SEED={seed})",
        T::DTYPE
    );
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
                &expected_out(&cfg, world, &data[i][r]),
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
        // Rows of 40 bytes: copied byte by byte, not in 16-byte vectors.
        let odd = MoeConfig::new(20, 2 * std::cmp::max(world, 2), 2, 4);
        case::<bf16>(world, odd, 2, Routing::Random);
    }
    // Many more slots than the combine's loads in flight (2).
    if tier::runs(true) {
        let cfg = MoeConfig::new(40, 32, 10, 30).with_align(2);
        case::<bf16>(2, cfg, 2, Routing::Random);
        // More experts than the layout's threads (a warp for 12 pairs):
        // its per-expert loops in rounds.
        case::<bf16>(2, MoeConfig::new(16, 128, 2, 6), 2, Routing::Random);
        // Up to 600 tokens of top-8: past 128 a rank, the layout runs
        // several blocks (and its scan and place kernels).
        case::<bf16>(2, MoeConfig::new(16, 16, 8, 600), 2, Routing::Random);
    }
    // Many experts, rows wider than a block, and a capacity filled to its
    // last row.
    if tier::runs(false) {
        let cfg = MoeConfig::new(300, 256, 8, 160).with_align(16);
        case_with::<bf16>(2, cfg, 2, Routing::Random, true);
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

/// The layout on its own: pairs routed nowhere (`-1`) or to no expert
/// get no row, the others rows in expert order; a bad index, or `poison`,
/// makes every split one that no input holds.
#[test]
fn the_layout_poisons_the_splits_of_a_bad_routing() {
    if !tier::quick_test() {
        return;
    }
    let Some(ranks) = ranks(1) else { return };
    let got = run(ranks, options(), |c: &Comm| {
        let mut results = Vec::new();
        for (idx, poison) in [
            (vec![1i32, -1, 0, 1], 0u32),
            (vec![1i32, 7, 0, -1], 0),
            (vec![0i32, 1, 1, 0], 1),
        ] {
            let idx = c.device_buffer_from(&idx)?;
            let mut pos = c.device_buffer::<u32>(4)?;
            let mut splits = c.device_buffer::<u64>(1)?;
            let mut scale_splits = c.device_buffer::<u64>(1)?;
            let mut counts = c.device_buffer::<u32>(2)?;
            let mut scratch = c.device_buffer::<u32>(layout_scratch(2))?;
            layout(
                c,
                &idx,
                4,
                (2, 2, 10, 3),
                poison == 1,
                false,
                &mut scratch,
                &mut pos,
                (&mut splits, &mut scale_splits, &mut counts),
            )?;
            c.synchronize()?;
            results.push((
                pos.to_host()?,
                splits.to_host()?,
                scale_splits.to_host()?,
                counts.to_host()?,
            ));
        }
        Ok(results)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let m = u32::MAX;
    let bad = 0xFFFF_FFFFu64;
    // Expert 0's pairs (2) first, then expert 1's (0, 3), in pair order.
    assert_eq!(got[0][0], (vec![1, m, 0, 2], vec![30], vec![9], vec![1, 2]));
    assert_eq!(
        got[0][1],
        (vec![1, m, 0, m], vec![bad], vec![bad], vec![1, 1])
    );
    assert_eq!(got[0][2].1, vec![bad]);
    assert_eq!(got[0][2].2, vec![bad]);
}

/// The layout of many pairs over many blocks (and several chunks a
/// block) against the host's stable sort by expert: each pair's row, each
/// expert's count, each rank's split, and (the pull form's `within`) each
/// pair's rank within its expert; and a bad index in the last of 40
/// blocks poisons every split.
#[test]
fn the_layout_is_a_stable_sort_by_expert() {
    if !tier::quick_test() {
        return;
    }
    let Some(ranks) = ranks(1) else { return };
    let (mut rng, seed) = seeded();
    // (experts, local, pairs): 3 blocks of one chunk; 40 blocks of two;
    // one block (with `within`, that kernel alone); the last with an index
    // out of range near its end.
    let mut cases: Vec<(usize, usize, Vec<i32>)> = [
        (24usize, 8usize, 3000usize),
        (1024, 512, 20000),
        (16, 4, 700),
    ]
    .into_iter()
    .map(|(e, l, n)| {
        let idx = (0..n)
            .map(|_| {
                if rng.random_range(0..10) == 0 {
                    -1
                } else {
                    rng.random_range(0..e as i32)
                }
            })
            .collect();
        (e, l, idx)
    })
    .collect();
    let mut bad = cases[1].clone();
    bad.2[19_990] = 1024;
    cases.push(bad);
    let got = run(ranks, options(), |c: &Comm| {
        let mut out = Vec::new();
        for ((e, l, idx), within) in cases
            .iter()
            .flat_map(|c| [false, true].map(move |w| (c, w)))
        {
            let n = idx.len();
            let d_idx = c.device_buffer_from(idx)?;
            let mut pos = c.device_buffer::<u32>(n)?;
            let mut splits = c.device_buffer::<u64>(e / l)?;
            let mut scale_splits = c.device_buffer::<u64>(e / l)?;
            let mut counts = c.device_buffer::<u32>(*e)?;
            let mut scratch = c.device_buffer::<u32>(layout_scratch(*e))?;
            layout(
                c,
                &d_idx,
                n,
                (*e, *l, 3, 1),
                false,
                within,
                &mut scratch,
                &mut pos,
                (&mut splits, &mut scale_splits, &mut counts),
            )?;
            c.synchronize()?;
            out.push((
                pos.to_host()?,
                splits.to_host()?,
                scale_splits.to_host()?,
                counts.to_host()?,
            ));
        }
        Ok(out)
    })
    .unwrap_or_else(|err| panic!("{err}"));
    for bad in &got[0][6..] {
        let (_, splits, poisoned, _) = bad;
        assert!(
            splits.iter().chain(poisoned).all(|&s| s == 0xFFFF_FFFF),
            "a bad index in the last block: splits {splits:?}, scale splits {poisoned:?} (SYMM_MOE_SEED={seed})",
        );
    }
    let runs = cases
        .iter()
        .flat_map(|c| [false, true].map(move |w| (c, w)));
    for (((e, l, idx), within), (pos, splits, scale_splits, counts)) in runs.zip(&got[0]).take(6) {
        let mut want_counts = vec![0u32; *e];
        for &x in idx.iter().filter(|&&x| x >= 0) {
            want_counts[x as usize] += 1;
        }
        let mut base = vec![0u32; *e];
        for x in 1..*e {
            base[x] = base[x - 1] + want_counts[x - 1];
        }
        let mut next = base.clone();
        let want_pos: Vec<u32> = idx
            .iter()
            .map(|&x| {
                if x < 0 {
                    u32::MAX
                } else {
                    next[x as usize] += 1;
                    let row = next[x as usize] - 1;
                    if within {
                        row - base[x as usize]
                    } else {
                        row
                    }
                }
            })
            .collect();
        let rows: Vec<u64> = want_counts
            .chunks(*l)
            .map(|c| c.iter().map(|&n| n as u64).sum::<u64>())
            .collect();
        let want_splits: Vec<u64> = rows.iter().map(|r| 3 * r).collect();
        let what = format!(
            "{e} experts, {} pairs, within {within} (SYMM_MOE_SEED={seed})",
            idx.len()
        );
        assert_eq!(counts, &want_counts, "counts, {what}");
        // One block with `within` writes no splits (the pull form reads
        // none).
        if !(within && idx.len() == 700) {
            assert_eq!(splits, &want_splits, "splits, {what}");
            assert_eq!(scale_splits, &rows, "scale splits, {what}");
        }
        assert!(pos == &want_pos, "rows, {what}");
    }
}

#[test]
fn misuse_fails_every_rank() {
    if !tier::quick_test() {
        return;
    }
    for mode in MODES {
        misuse_in(mode);
    }
}

/// What a peer's error says where a rank's `call` (dispatch or combine)
/// failed on that rank alone, in `mode`.
fn peer_failure(mode: MoeMode, call: &str) -> &'static str {
    match (mode, call) {
        // The peer's own all-to-all found the poisoned sizes.
        (MoeMode::AllToAll, _) => "sends more than its input holds",
        // The copy-engine form's barriers are the pull form's.
        (_, "dispatch") => "a rank's step failed",
        (_, _) => "a rank's combine was refused",
    }
}

/// [`misuse_fails_every_rank`] in `mode`.
fn misuse_in(mode: MoeMode) {
    let world = 2;
    // A config that differs: every rank says so at once, itself (the
    // agreement's verdict, not a peer's failure passed on).
    if let Some(errs) = every_rank_fails(world, |c| {
        let cfg = MoeConfig::new(16 + 8 * c.rank(), 4, 2, 4).with_mode(mode);
        Moe::<bf16>::new(c, cfg).map(|_| ())
    }) {
        for e in &errs {
            assert_eq!(e.root_kind(), ErrorKind::Mismatch, "{e}");
            assert!(!matches!(e, Error::PeerFailed { .. }), "{e}");
        }
    }
    // Experts that do not spread evenly.
    if let Some(errs) = every_rank_fails(world, |c| {
        Moe::<bf16>::new(c, MoeConfig::new(16, 3, 2, 4).with_mode(mode)).map(|_| ())
    }) {
        for e in &errs {
            assert!(e.to_string().contains("do not spread evenly"), "{e}");
            assert!(!matches!(e, Error::PeerFailed { .. }), "{e}");
        }
    }
    // fp8 scales per 128 elements of rows of 100.
    if let Some(errs) = every_rank_fails(world, |c| {
        let cfg = MoeConfig::new(100, 4, 2, 4)
            .with_mode(mode)
            .with_fp8(Fp8Scales::Per128);
        Moe::<bf16>::new(c, cfg).map(|_| ())
    }) {
        for e in &errs {
            assert!(e.to_string().contains("multiple of 128"), "{e}");
        }
    }
    // More tokens than planned, on one rank, in the first step and in a
    // later one. Every rank goes on after an error (as a server that
    // reports a bad batch and keeps running would) and returns its first:
    // the bad rank's part of the step runs on split sizes no input holds,
    // so its peers fail at once, not at the kernel timeout.
    for (bad_step, fp8) in [(0, false), (1, false), (1, true)] {
        if let Some(errs) = every_rank_fails(world, |c| {
            let mut cfg = MoeConfig::new(16, 4, 2, 4).with_mode(mode);
            if fp8 {
                cfg = cfg.with_fp8(Fp8Scales::PerToken);
            }
            let mut moe = Moe::<bf16>::new(c, cfg)?;
            let mut first = None;
            for step in 0..=bad_step {
                let n = if c.rank() == 1 && step == bad_step {
                    5
                } else {
                    4
                };
                let x = c.device_buffer::<bf16>(n * 16)?;
                let idx = c.device_buffer_from(&vec![0i32; n * 2])?;
                let w = c.device_buffer::<f32>(n * 2)?;
                let y = c.device_buffer::<bf16>(moe.received_rows() * 16)?;
                let mut out = c.device_buffer::<bf16>(n * 16)?;
                if let Err(e) = moe.dispatch(c, &x, &idx, n) {
                    first.get_or_insert(e);
                }
                if let Err(e) = moe.combine(c, &y, &w, &mut out) {
                    first.get_or_insert(e);
                }
            }
            if let Err(e) = c.synchronize() {
                first.get_or_insert(e);
            }
            first.map_or(Ok(()), Err)
        }) {
            assert!(errs[1].to_string().contains("at most 4"), "{}", errs[1]);
            // The bad rank's part of the step made its peer's fail. (Without
            // it, a GPU waits for its kernel timeout, and the emulator's
            // check of the calls' sequence tells the ranks apart after 2 s
            // with a mismatch.)
            assert!(
                matches!(&errs[0], Error::KernelAssert { message, .. }
                    if message.contains(peer_failure(mode, "dispatch"))),
                "{mode:?} step {bad_step}, fp8 {fp8}: {}",
                errs[0]
            );
        }
    }
    // A combine before any dispatch, on every rank (the plan's agreement
    // of combine ran in its empty step, so each rank finds it alone and
    // runs its part on poisoned sizes): every rank says so.
    if let Some(errs) = every_rank_fails(world, |c| {
        let mut moe = Moe::<bf16>::new(c, MoeConfig::new(16, 4, 2, 4).with_mode(mode))?;
        let y = c.device_buffer::<bf16>(moe.received_rows() * 16)?;
        let w = c.device_buffer::<f32>(8)?;
        let mut out = c.device_buffer::<bf16>(4 * 16)?;
        moe.combine(c, &y, &w, &mut out)?;
        c.synchronize()
    }) {
        for e in &errs {
            assert!(e.to_string().contains("combine before any dispatch"), "{e}");
        }
    }
    // A `y` shorter than the received layout, on one rank, after a good
    // step: that rank says so, and its peer's combine fails at once on
    // the poisoned sizes.
    if let Some(errs) = every_rank_fails(world, |c| {
        let mut moe = Moe::<bf16>::new(c, MoeConfig::new(16, 4, 2, 4).with_mode(mode))?;
        let x = c.device_buffer::<bf16>(4 * 16)?;
        let idx = c.device_buffer_from(&[0i32, 1, 2, 3, 1, 2, 0, 3])?;
        let w = c.device_buffer::<f32>(8)?;
        let rows = moe.received_rows() - usize::from(c.rank() == 1);
        let y = c.device_buffer::<bf16>(rows * 16)?;
        let mut out = c.device_buffer::<bf16>(4 * 16)?;
        moe.dispatch(c, &x, &idx, 4)?;
        let mut first = moe.combine(c, &y, &w, &mut out).err();
        if let Err(e) = c.synchronize() {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }) {
        assert!(errs[1].to_string().contains("y holds"), "{}", errs[1]);
        assert!(
            matches!(&errs[0], Error::KernelAssert { message, .. }
                if message.contains(peer_failure(mode, "combine"))),
            "{mode:?}: {}",
            errs[0]
        );
    }
    // Configs that differ in fp8 alone: the error names it.
    if let Some(errs) = every_rank_fails(world, |c| {
        let mut cfg = MoeConfig::new(16, 4, 2, 4).with_mode(mode);
        if c.rank() == 1 {
            cfg = cfg.with_fp8(Fp8Scales::PerToken);
        }
        Moe::<bf16>::new(c, cfg).map(|_| ())
    }) {
        for e in &errs {
            assert_eq!(e.root_kind(), ErrorKind::Mismatch, "{e}");
            assert!(e.to_string().contains("fp8 Some(PerToken)"), "{e}");
        }
    }
    // An index past the experts on rank 1, token 2: its report names the
    // token as the block; every rank fails.
    bad_index_fails_every_rank(mode, &[0, 1, 2, 3, 1, 2, 0, 3], (5, 4));
    // The same past the layout's first block (700 tokens of top-2: 2
    // blocks), at token 650.
    let many: Vec<i32> = (0..1400).map(|p| p % 4).collect();
    bad_index_fails_every_rank(mode, &many, (1301, 9));
    // A routing that sends rank 0 more rows than its capacity: every rank
    // fails, none writes past it.
    if let Some(errs) = every_rank_fails(world, |c| {
        let mut moe = Moe::<bf16>::new(
            c,
            MoeConfig::new(16, 4, 2, 4)
                .with_mode(mode)
                .with_recv_capacity(6),
        )?;
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
                "{mode:?}: {e}"
            );
            if mode != MoeMode::AllToAll && !matches!(e, Error::PeerFailed { .. }) {
                assert!(e.to_string().contains("receive capacity"), "{e}");
            }
        }
    }
}

/// A dispatch in `mode` (4 experts over 2 ranks, top-2, rows of 16) of
/// the tokens of `idx`, where rank 1's pair `bad.0` names expert `bad.1`,
/// past the experts: rank 1's error names the pair's token as its block,
/// and (the pull form) its peer fails at once with the step's verdict.
fn bad_index_fails_every_rank(mode: MoeMode, idx: &[i32], bad: (usize, i32)) {
    let tokens = idx.len() / 2;
    if let Some(errs) = every_rank_fails(2, |c| {
        let cfg = MoeConfig::new(16, 4, 2, tokens).with_mode(mode);
        let mut moe = Moe::<bf16>::new(c, cfg)?;
        let mut idx = idx.to_vec();
        if c.rank() == 1 {
            idx[bad.0] = bad.1;
        }
        let x = c.device_buffer::<bf16>(tokens * 16)?;
        let idx = c.device_buffer_from(&idx)?;
        moe.dispatch(c, &x, &idx, tokens)?;
        c.synchronize()
    }) {
        let Error::KernelAssert { block, message, .. } = &errs[1] else {
            panic!("rank 1: {}", errs[1])
        };
        assert_eq!(*block as usize, bad.0 / 2, "{}", errs[1]);
        assert!(message.contains("top-k index"), "{message}");
        if mode != MoeMode::AllToAll {
            assert!(
                errs[0].to_string().contains(peer_failure(mode, "dispatch")),
                "{}",
                errs[0]
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
/// end (but the copy-engine form's own), every third step's dispatch and
/// every third's combine made twice in a row: every step's output is
/// exact.
fn back_to_back<T: MoeElem>(world: usize, steps: usize) {
    for mode in MODES {
        back_to_back_in::<T>(world, steps, mode);
    }
}

/// [`back_to_back`] in `mode`.
fn back_to_back_in<T: MoeElem>(world: usize, steps: usize, mode: MoeMode) {
    back_to_back_on::<T>(world, steps, mode, false);
}

/// [`back_to_back_in`], where `side` with every step's calls on another
/// stream of the rank than the plan's (a handle from
/// `Comm::with_cuda_stream`; GPU ranks only), the plan's own stream idle.
fn back_to_back_on<T: MoeElem>(world: usize, steps: usize, mode: MoeMode, side: bool) {
    let Some(ranks) = ranks(world) else { return };
    let cfg = MoeConfig::new(16, 2 * world, 2, 4)
        .with_align(2)
        .with_mode(mode);
    let local = 2;
    let (mut rng, seed) = seeded();
    let data: Vec<Vec<Step<T>>> = (0..steps)
        .map(|_| {
            (0..world)
                .map(|_| {
                    let n = rng.random_range(0..=cfg.max_tokens);
                    step::<T>(&mut rng, &cfg, n, Routing::Random)
                })
                .collect()
        })
        .collect();
    let what = format!(
        "moe back to back, {} world {world}, {steps} steps, {mode:?}, side stream {side} (SYMM_MOE_SEED={seed})",
        T::DTYPE
    );
    let outs = run(ranks, options(), |plan: &Comm| {
        // The test's own kernel loaded before the plan's agreement, as the
        // plan loads its own: where ranks share a GPU, a first load waits
        // for the device to be idle, which a rank spinning on this one
        // would keep it from being.
        scale_rows::co_resident_grid::<T>(plan, 64, 0)?;
        let mut moe = Moe::<T>::new(plan, cfg.clone())?;
        let c = &match side {
            false => plan.clone(),
            true => {
                plan.synchronize()?;
                let s = plan
                    .cuda_stream()
                    .expect("a GPU rank")
                    .context()
                    .new_stream();
                let s = s.map_err(|e| plan.driver_error("cuStreamCreate", e))?;
                plan.with_cuda_stream(s)?
            }
        };
        let h = cfg.hidden;
        let mut y = c.device_buffer::<T>(moe.received_rows() * h)?;
        let mut kept = Vec::new();
        for (i, st) in data.iter().enumerate() {
            let mine = &st[c.rank()];
            let x = c.device_buffer_from(&pad(&mine.x, T::from_f32(0.0)))?;
            let idx = c.device_buffer_from(&pad(&mine.idx, 0))?;
            let w = c.device_buffer_from(&pad(&mine.weights, 0.0))?;
            let mut out =
                c.device_buffer_from(&vec![T::from_f32(f32::NAN); mine.tokens.max(1) * h])?;
            moe.dispatch(c, &x, &idx, mine.tokens)?;
            if i % 3 == 1 {
                // Dispatches back to back: the second rewrites what the
                // first's peers read.
                moe.dispatch(c, &x, &idx, mine.tokens)?;
            }
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
            if i % 3 == 2 {
                // Combines back to back, likewise.
                moe.combine(c, &y, &w, &mut out)?;
            }
            // Inputs stay alive until the end: nothing synchronises (but
            // the copy-engine form's dispatch, which waits for the counts).
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
                &expected_out(&cfg, world, &data[i][r]),
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
        // 1000 steps in the default form on a GPU (400 on the emulator,
        // for CI's time), 100 in the others.
        let many = if targets::on_gpu() { 1000 } else { 400 };
        back_to_back_in::<bf16>(2, many, MoeMode::default());
        back_to_back_in::<bf16>(2, 100, MoeMode::AllToAll);
        back_to_back_in::<bf16>(2, 100, MoeMode::CopyEngine);
        if targets::on_gpu() {
            // Calls on another stream than the plan's (whose own stream,
            // idle, must not be what the copy-engine form waits for).
            for mode in MODES {
                back_to_back_on::<bf16>(2, 10, mode, true);
            }
        }
        // (3 ranks, not a power of two, and 8, the most; 4 lies between,
        // for CI's time.)
        for world in [3, 8] {
            back_to_back::<f32>(world, 100);
        }
    }
}

/// A step captured once in a CUDA graph (dispatch, the experts on the
/// device, combine) and replayed with a new routing, new rows and new
/// weights written into the same buffers before each replay: every
/// replay's output is exact. GPU only (skipped, loudly, elsewhere).
#[test]
fn a_step_replays_in_a_cuda_graph_with_new_routings() {
    if !tier::quick_test() {
        return;
    }
    if !targets::on_gpu() {
        eprintln!(
            "SKIPPED: a_step_replays_in_a_cuda_graph_with_new_routings needs a GPU (SYMM_KERNEL_TESTS_ON=gpu)"
        );
        return;
    }
    for (world, mode) in [2, 4].into_iter().flat_map(|w| MODES.map(|m| (w, m))) {
        if mode == MoeMode::CopyEngine {
            copy_engine_refuses_capture(world);
            continue;
        }
        let Some(ranks) = ranks(world) else { continue };
        let cfg = MoeConfig::new(64, 2 * world, 3, 5)
            .with_align(4)
            .with_mode(mode);
        let (local, tokens, h) = (2, 5, cfg.hidden);
        let (mut rng, seed) = seeded();
        // Replay 0 is the capture's own (eager) step.
        let data: Vec<Vec<Step<bf16>>> = (0..5)
            .map(|_| {
                (0..world)
                    .map(|_| step::<bf16>(&mut rng, &cfg, tokens, Routing::Random))
                    .collect()
            })
            .collect();
        let what = format!("moe in a CUDA graph, world {world}, {mode:?} (SYMM_MOE_SEED={seed})");
        let outs = run(ranks, options(), |c: &Comm| {
            scale_rows::co_resident_grid::<bf16>(c, 64, 0)?;
            let mut moe = Moe::<bf16>::new(c, cfg.clone())?;
            let mine = &data[0][c.rank()];
            let x = c.device_buffer_from(&mine.x)?;
            let idx = c.device_buffer_from(&mine.idx)?;
            let w = c.device_buffer_from(&mine.weights)?;
            let mut y = c.device_buffer::<bf16>(moe.received_rows() * h)?;
            let mut out = c.device_buffer::<bf16>(tokens * h)?;
            // One step: dispatch, the experts on the device, combine.
            let body = |moe: &mut Moe<bf16>,
                        y: &mut symm::DeviceBuffer<bf16>,
                        out: &mut symm::DeviceBuffer<bf16>|
             -> symm::Result<()> {
                moe.dispatch(c, &x, &idx, tokens)?;
                scale_rows::launch::<bf16>(
                    c,
                    LaunchConfig::linear(local as u32, 64),
                    moe.received(),
                    moe.layout(),
                    y,
                    local as u32,
                    h as u32,
                    c.rank() as u32,
                )?;
                moe.combine(c, y, &w, out)
            };
            // Eager first: the collectives' first calls happen outside the
            // capture.
            body(&mut moe, &mut y, &mut out)?;
            c.synchronize()?;
            let mut outs = vec![out.read(0, tokens * h)?];
            let err = |e| driver_error(c, e);
            let s = begin_capture(c)?;
            body(&mut moe, &mut y, &mut out)?;
            let g = s
                .end_capture(
                    symm::cudarc::driver::sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
                )
                .map_err(err)?
                .expect("a graph");
            for st in &data[1..] {
                let mine = &st[c.rank()];
                c.synchronize()?;
                x.write(0, &mine.x)?;
                idx.write(0, &mine.idx)?;
                w.write(0, &mine.weights)?;
                out.write(0, &vec![bf16::from_f32(f32::NAN); tokens * h])?;
                c.host_barrier()?;
                g.launch().map_err(err)?;
                c.synchronize()?;
                outs.push(out.read(0, tokens * h)?);
                c.host_barrier()?;
            }
            Ok(outs)
        })
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        for (r, outs) in outs.iter().enumerate() {
            for (i, out) in outs.iter().enumerate() {
                same_bits(
                    &format!("{what}: rank {r} replay {i}"),
                    out,
                    &expected_out(&cfg, world, &data[i][r]),
                );
            }
        }
    }
}

/// A CUDA driver error as the rank's error.
fn driver_error(c: &Comm, e: symm::cudarc::driver::DriverError) -> Error {
    c.error(ErrorKind::InvalidArgument, format!("{e:?}"))
}

/// Starts capturing this GPU rank's stream into a CUDA graph (this
/// thread's work only); returns the stream.
fn begin_capture(c: &Comm) -> symm::Result<std::sync::Arc<symm::cudarc::driver::CudaStream>> {
    let s = c.cuda_stream().expect("GPU rank");
    s.begin_capture(
        symm::cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    )
    .map_err(|e| driver_error(c, e))?;
    Ok(s)
}

/// The copy-engine form reads each dispatch's counts on the host, so a
/// step captured in a CUDA graph is refused on every rank, saying why,
/// and the plan runs eagerly after it.
fn copy_engine_refuses_capture(world: usize) {
    let Some(ranks) = ranks(world) else { return };
    let cfg = MoeConfig::new(64, 2 * world, 3, 5).with_mode(MoeMode::CopyEngine);
    let outs = run(ranks, options(), |c: &Comm| {
        let mut moe = Moe::<bf16>::new(c, cfg.clone())?;
        let x = c.device_buffer::<bf16>(5 * 64)?;
        // Each token to experts 0, 1 and 2 (distinct: within the plan).
        let idx = c.device_buffer_from(&[0i32, 1, 2].repeat(5))?;
        let w = c.device_buffer_from(&[0.5f32; 15])?;
        let y = c.device_buffer::<bf16>(moe.received_rows() * 64)?;
        let mut out = c.device_buffer::<bf16>(5 * 64)?;
        moe.dispatch(c, &x, &idx, 5)?;
        c.synchronize()?;
        let s = begin_capture(c)?;
        let combine = moe.combine(c, &y, &w, &mut out);
        let dispatch = moe.dispatch(c, &x, &idx, 5);
        let _ = s.end_capture(
            symm::cudarc::driver::sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
        );
        // Eagerly, the same step runs.
        moe.dispatch(c, &x, &idx, 5)?;
        moe.combine(c, &y, &w, &mut out)?;
        c.synchronize()?;
        let said = |r: symm::Result<()>| r.err().map_or("no error".into(), |e| e.to_string());
        Ok([said(combine), said(dispatch)])
    })
    .unwrap_or_else(|e| panic!("moe copy-engine capture, world {world}: {e}"));
    for (r, said) in outs.iter().enumerate() {
        for (call, e) in ["combine", "dispatch"].iter().zip(said) {
            assert!(
                e.contains("copy-engine form") && e.contains("CUDA graph"),
                "rank {r} of {world}: a captured copy-engine {call}: {e}"
            );
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
        moe_layout_scan,
        moe_layout_place,
        moe_rows,
        moe_pack,
        moe_pack_fp8::<bf16, 8>,
        moe_move,
        moe_sum::<bf16, 8>,
        moe_stage,
        moe_pull::<bf16, 8>,
        moe_pull::<f8e4m3, 16>,
        moe_push::<bf16, 8>,
        moe_sum_ranks::<bf16, 8>,
        moe_counts,
        moe_dests,
        moe_spread,
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
        moe_pack_fp8::<f32, 4>,
        moe_sum::<f32, 4>,
        moe_pull::<f32, 4>,
        moe_push::<f32, 4>,
        moe_sum_ranks::<f32, 4>,
        scale_rows::<bf16>,
        scale_rows::<f32>,
    );
    moe_kernels();
}

/// A row quantized as `moe_pack_fp8` does: each group's scale its largest
/// magnitude over 448 (1 for zeros), each element `x / scale` in e4m3.
fn quantize<T: Scalar>(row: &[T], group: usize) -> (Vec<f8e4m3>, Vec<f32>) {
    let mut q = Vec::with_capacity(row.len());
    let mut scales = Vec::new();
    for g in row.chunks(group) {
        let m = g.iter().fold(0.0f32, |m, v| m.max(v.to_f32().abs()));
        let s = if m > 0.0 {
            (m / 448.0).max(f32::MIN_POSITIVE)
        } else {
            1.0
        };
        scales.push(s);
        q.extend(g.iter().map(|v| f8e4m3::from_f32(v.to_f32() / s)));
    }
    (q, scales)
}

/// An fp8 expert's work in the test: the row dequantized, times (expert +
/// 1), rounded to `T`.
fn fp8_expert<T: Scalar>(e: usize, q: f8e4m3, scale: f32) -> T {
    T::from_f32(q.to_f32() * scale * (e as f32 + 1.0))
}

/// An fp8 dispatch (`scales` of rows of `hidden`) on `world` ranks: the
/// received rows and scales bit for bit against the host's quantization,
/// and the combine of the dequantized experts' rows.
fn fp8_case(world: usize, scales: Fp8Scales, hidden: usize) {
    for mode in MODES {
        fp8_case_in(world, scales, hidden, mode);
    }
}

/// [`fp8_case`] in `mode`.
fn fp8_case_in(world: usize, scales: Fp8Scales, hidden: usize, mode: MoeMode) {
    let Some(ranks) = ranks(world) else { return };
    let cfg = MoeConfig::new(hidden, 2 * std::cmp::max(world, 2), 2, 5)
        .with_align(2)
        .with_fp8(scales)
        .with_mode(mode);
    let local = cfg.num_experts / world;
    let group = scales.group(hidden);
    let per_row = hidden / group;
    let (mut rng, seed) = seeded();
    let data: Vec<Step<bf16>> = (0..world)
        .map(|r| {
            let n = if r == 1 {
                0
            } else {
                rng.random_range(1..=cfg.max_tokens)
            };
            step::<bf16>(&mut rng, &cfg, n, Routing::Random)
        })
        .collect();
    let what =
        format!("moe fp8 {scales:?} world {world} hidden {hidden} {mode:?} (SYMM_MOE_SEED={seed})");
    let outs = run(ranks, options(), |c: &Comm| {
        let mut moe = Moe::<bf16>::new(c, cfg.clone())?;
        let mine = &data[c.rank()];
        let x = c.device_buffer_from(&pad(&mine.x, bf16::from_f32(0.0)))?;
        let idx = c.device_buffer_from(&pad(&mine.idx, 0))?;
        let w = c.device_buffer_from(&pad(&mine.weights, 0.0))?;
        moe.dispatch(c, &x, &idx, mine.tokens)?;
        let rows = moe.received_rows();
        let layout = moe.layout().read(0, 2 * local + 2)?;
        let q = moe.received_fp8().expect("fp8").read(0, rows * hidden)?;
        let s = moe
            .received_scales()
            .expect("fp8")
            .read(0, rows * per_row)?;
        let mut y = vec![bf16::from_f32(0.0); rows * hidden];
        for l in 0..local {
            let (n, at) = (layout[l] as usize, layout[local + l] as usize);
            for row in at..at + n {
                for i in 0..hidden {
                    let e = c.rank() * local + l;
                    y[row * hidden + i] =
                        fp8_expert(e, q[row * hidden + i], s[row * per_row + i / group]);
                }
            }
        }
        let y = c.device_buffer_from(&y)?;
        let mut out =
            c.device_buffer_from(&vec![bf16::from_f32(f32::NAN); mine.tokens.max(1) * hidden])?;
        moe.combine(c, &y, &w, &mut out)?;
        c.synchronize()?;
        Ok((layout, q, s, out.read(0, mine.tokens * hidden)?))
    })
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    for (r, (layout, q, s, out)) in outs.iter().enumerate() {
        for (l, rows) in expected_rows(&cfg, &data, r, local).iter().enumerate() {
            let (n, at) = (layout[l] as usize, layout[local + l] as usize);
            assert_eq!(n, rows.len(), "{what}: rank {r} expert {l}'s rows");
            for (j, row) in rows.iter().enumerate() {
                let (wq, ws) = quantize(row, group);
                let got_q = &q[(at + j) * hidden..(at + j + 1) * hidden];
                let got_s = &s[(at + j) * per_row..(at + j + 1) * per_row];
                same_bits(&format!("{what}: rank {r} expert {l} row {j}"), got_q, &wq);
                same_bits(
                    &format!("{what}: rank {r} expert {l} row {j}'s scales"),
                    got_s,
                    &ws,
                );
            }
        }
        // Each token's combined row, from its own quantization.
        let st = &data[r];
        let (k, h) = (cfg.top_k, hidden);
        let mut want = vec![bf16::from_f32(0.0); st.tokens * h];
        for t in 0..st.tokens {
            let (wq, ws) = quantize(&st.x[t * h..(t + 1) * h], group);
            for i in 0..h {
                let slots: Vec<(usize, f32, f32)> = (0..k)
                    .map(|j| t * k + j)
                    .filter(|&p| st.idx[p] >= 0)
                    .map(|p| {
                        let e = st.idx[p] as usize;
                        let y: bf16 = fp8_expert(e, wq[i], ws[i / group]);
                        (e, st.weights[p], y.to_f32())
                    })
                    .collect();
                want[t * h + i] = combined(world, local, &slots);
            }
        }
        same_bits(&format!("{what}: rank {r}'s output"), out, &want);
    }
}

#[test]
fn fp8_dispatch_with_scales() {
    for world in [1, 2, 3, 4, 8] {
        if !tier::runs(world <= 2) {
            continue;
        }
        // Rows of 40 element by element; of 64 and 256 in vectors of 16
        // (a scale a row by the block's reduction, a scale a 128 by
        // shuffles).
        fp8_case(world, Fp8Scales::PerToken, 40);
        fp8_case(world, Fp8Scales::PerToken, 64);
        fp8_case(world, Fp8Scales::Per128, 256);
    }
    // More groups than a block's 8 warps, a row wider than a block, and
    // rows of several passes of the block's 256 threads in vectors.
    if tier::runs(false) {
        fp8_case(2, Fp8Scales::Per128, 1536);
        fp8_case(2, Fp8Scales::PerToken, 600);
        fp8_case(2, Fp8Scales::PerToken, 8320);
        fp8_case(2, Fp8Scales::Per128, 8320);
    }
}

/// What a plan says it holds: every buffer, by its length, in `T` and in
/// fp8 (where `send` also takes the rows that come back and `back` the
/// rows as they arrive).
#[test]
fn the_plan_reports_its_memory() {
    if !tier::quick_test() {
        return;
    }
    let Some(ranks) = ranks(2) else { return };
    let got = run(ranks, options(), |c: &Comm| {
        let mut plans = Vec::new();
        for mode in MODES {
            let cfg = MoeConfig::new(16, 4, 2, 4).with_align(4).with_mode(mode);
            let plain = Moe::<bf16>::new(c, cfg.clone())?.memory();
            let fp8 = Moe::<bf16>::new(c, cfg.with_fp8(Fp8Scales::PerToken))?.memory();
            plans.push((plain, fp8));
        }
        Ok(plans)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // 2 local experts; 8 pairs; capacity 2 × 4 × 2 = 16 rows; 16 + 2 × 3
    // = 22 expert-major rows; bf16 rows of 16 (32 bytes); the layout's
    // scratch for 4 experts; 4 counts and the pull form's 3 words past
    // them.
    let shared = 4 * (7 + 4) + 4 * layout_scratch(4) + 4 * 6 + 8 * (2 + 2) + 8 * (4 + 4);
    // (`pos` and the kept indices, a pair each in the all-to-all form, and
    // `row_dst`, a received row each there, are counted with each form.)
    // The pull form: the all-to-all form's `pos` and kept indices hold
    // one element each; its own indices, ranks and weights a pair, rows
    // a (rank, pair), tokens a rank, and the one-element stand-ins for
    // scales.
    let small = shared + 4 + 4 + 4 + 4 * (8 + 8 + 8) + 4 * (16 + 2) + 4 * (1 + 1);
    // What comes back: a row a (token, rank), in bf16 and in f32.
    let back = 2 + 4 * 2 * 32 + 4 * 2 * 16 * 4;
    let (plain, fp8) = &got[0][0];
    // The rows staged (4 × 32 bytes); what only the all-to-all form uses
    // holds one element.
    assert_eq!(
        (
            plain.send,
            plain.received_raw,
            plain.received,
            plain.back,
            plain.small
        ),
        (4 * 32 + 2, 0, 22 * 32, back, small)
    );
    // fp8: the rows staged in e4m3 (4 × 16 bytes) and their scales, beside
    // one-element stand-ins for the bf16 staging and the all-to-all form's
    // fp8 rows and scales.
    assert_eq!(
        (
            fp8.send,
            fp8.received_raw,
            fp8.received,
            fp8.back,
            fp8.small
        ),
        (
            2 + 2 + 4 * 16 + 4 * 4 + 1 + 4,
            1 + 4,
            2 + 22 * 16 + 22 * 4,
            back,
            small + 8 * (4 + 4)
        )
    );
    let small = shared + 4 * 8 + 4 * 8 + 4 * 16;
    let (plain, fp8) = &got[0][1];
    assert_eq!(
        (
            plain.send,
            plain.received_raw,
            plain.received,
            plain.back,
            plain.small
        ),
        (8 * 32, 0, 22 * 32, 16 * 32, small)
    );
    // fp8: e4m3 rows of 16 bytes and one f32 scale a row beside them; the
    // bf16 expert-major rows hold one element.
    assert_eq!(
        (
            fp8.send,
            fp8.received_raw,
            fp8.received,
            fp8.back,
            fp8.small
        ),
        (
            8 * 32 + 8 * 16 + 8 * 4,
            16 * 16 + 16 * 4,
            2 + 22 * 16 + 22 * 4,
            16 * 32,
            small + 8 * (4 + 4)
        )
    );
    assert_eq!(
        plain.total(),
        plain.send + plain.received + plain.back + plain.small
    );
}
