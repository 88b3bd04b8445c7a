//! Times a MoE step (`symm::kernels::moe`: dispatch, then combine) on
//! every rank's GPU, one rank per GPU: each form (`--mode`: the pull form,
//! the all-to-all form, or both) with rows in bf16
//! and in fp8 (scales per 128 elements), at decode and prefill batches, in
//! CUDA graphs of back-to-back steps (a new routing is a new graph; the
//! numbers are a fixed random routing's), medians of the replays. Prints a
//! table of µs per dispatch, per combine and per step (no expert between
//! them: the combine sends back whatever its input holds), and the bytes
//! that cross between each rank and its peers per step (the form's own:
//! the pull form sends a token to a rank once and gets a row or an f32
//! sum back from each rank once, the all-to-all form a row a slot each
//! way) over the step's time.
//!
//! `--stages` times each part of the bf16 step alone instead: symm's
//! kernels, and the rows' exchange by symm and by NCCL.
//!
//! `--emulator N` runs the same steps at toy sizes on N emulated ranks and
//! checks each rank's combined rows against a host reference (nothing
//! timed).
//!
//! Beside it, bf16 only: the same step with NCCL moving the rows (symm's
//! own layout and copy kernels, NCCL's grouped sends and receives, whose
//! sizes the host reads back each step), and symm's step timed the same
//! way (each step alone, synchronised), for a like-for-like ratio. Not yet
//! here: torch's `all_to_all_vdev_2d`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use symm::dsl::*;
use symm::kernels::moe::{Fp8Scales, Moe, MoeConfig, MoeMode};
use symm::{bf16, run, symm_kernel, Comm, CommOptions, LaunchConfig, Ranks};

#[path = "support/bench.rs"]
#[allow(dead_code)] // what the other benchmarks use
mod bench;
use bench::{method_line, time_graph, time_steps, Barrier, CALLS};

#[path = "support/moe_nccl.rs"]
mod moe_nccl;
use moe_nccl::NcclMoe;

#[derive(clap::Parser)]
struct Args {
    /// Ranks (one per GPU; default: every GPU).
    #[arg(long)]
    world: Option<usize>,
    /// Tokens a rank, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "128,4096")]
    tokens: Vec<usize>,
    /// Elements in a token's row.
    #[arg(long, default_value_t = 7168)]
    hidden: usize,
    /// Experts in all (a multiple of the ranks).
    #[arg(long, default_value_t = 256)]
    experts: usize,
    /// Slots a token.
    #[arg(long, default_value_t = 8)]
    top_k: usize,
    /// Only check the steps on N emulated ranks, at toy sizes.
    #[arg(long, value_name = "N")]
    emulator: Option<usize>,
    /// Time each part of the bf16 step alone instead (where the µs go).
    #[arg(long)]
    stages: bool,
    /// The forms to time: `pull`, `all-to-all`, `copy-engine`, `both`
    /// (pull and all-to-all) or `all`.
    #[arg(long, default_value = "all")]
    mode: String,
}

/// The forms `--mode` names.
fn modes(a: &Args) -> Vec<MoeMode> {
    match a.mode.as_str() {
        "pull" => vec![MoeMode::Pull],
        "all-to-all" => vec![MoeMode::AllToAll],
        "copy-engine" => vec![MoeMode::CopyEngine],
        "both" => vec![MoeMode::Pull, MoeMode::AllToAll],
        "all" => ALL_MODES.to_vec(),
        other => {
            eprintln!("bench_moe: --mode {other}: pull, all-to-all, copy-engine, both or all");
            std::process::exit(2);
        }
    }
}

/// Every form.
const ALL_MODES: [MoeMode; 3] = [MoeMode::Pull, MoeMode::AllToAll, MoeMode::CopyEngine];

/// The experts' work in the benchmark: each row copied (the step's time
/// is the communication's, not a GEMM's).
#[symm_kernel]
pub(crate) fn copy_rows(from: &[bf16], to: &mut [bf16]) {
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < from.len() as u32 {
        to[i] = from[i];
        i += grid_dim_x() * block_dim_x();
    }
}

/// One rank's routing: `top_k` distinct experts a token, and weights.
fn routing(seed: u64, tokens: usize, experts: usize, top_k: usize) -> (Vec<i32>, Vec<f32>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut idx = Vec::with_capacity(tokens * top_k);
    for _ in 0..tokens {
        let mut chosen: Vec<i32> = Vec::new();
        while chosen.len() < top_k {
            let e = rng.random_range(0..experts) as i32;
            if !chosen.contains(&e) {
                chosen.push(e);
            }
        }
        idx.extend(chosen);
    }
    let w = (0..tokens * top_k)
        .map(|_| rng.random_range(0.0f32..1.0))
        .collect();
    (idx, w)
}

/// Bytes this rank's tokens get back from its peers in a combine of rows
/// of `hidden` bf16: a row a slot, or (`once`, the pull and copy-engine
/// forms) a row a token and peer, in f32 where the peer holds several of
/// its slots (`f32_back`, the copy-engine form: always).
fn bytes_back(
    idx: &[i32],
    rank: usize,
    local: usize,
    top_k: usize,
    hidden: usize,
    once: bool,
    f32_back: bool,
) -> usize {
    if !once {
        return 2 * hidden * rows_to_peers(idx, rank, local, top_k, false);
    }
    if f32_back {
        // The copy-engine form: an f32 row a token and peer.
        return 4 * hidden * rows_to_peers(idx, rank, local, top_k, true);
    }
    idx.chunks(top_k)
        .map(|slots| {
            let mut ranks: Vec<usize> = slots
                .iter()
                .filter(|&&e| e >= 0 && e as usize / local != rank)
                .map(|&e| e as usize / local)
                .collect();
            ranks.sort_unstable();
            ranks
                .chunk_by(|a, b| a == b)
                .map(|g| if g.len() == 1 { 2 * hidden } else { 4 * hidden })
                .sum::<usize>()
        })
        .sum()
}
/// Rows this rank sends to its peers (not to itself) in a dispatch: one
/// a slot, or (`once`, the pull and copy-engine forms) one a token and
/// peer.
fn rows_to_peers(idx: &[i32], rank: usize, local: usize, top_k: usize, once: bool) -> usize {
    let to_peer = |e: i32| e >= 0 && e as usize / local != rank;
    if !once {
        return idx.iter().filter(|&&e| to_peer(e)).count();
    }
    idx.chunks(top_k)
        .map(|slots| {
            let mut ranks: Vec<usize> = slots
                .iter()
                .filter(|&&e| to_peer(e))
                .map(|&e| e as usize / local)
                .collect();
            ranks.sort_unstable();
            ranks.dedup();
            ranks.len()
        })
        .sum()
}

/// What a step reads and writes, whoever moves the rows: the tokens'
/// rows, routing and weights, the experts' rows (`y`, as many as the
/// received layout holds) and the combined rows.
struct Io {
    tokens: usize,
    x: symm::DeviceBuffer<bf16>,
    idx: symm::DeviceBuffer<i32>,
    w: symm::DeviceBuffer<f32>,
    y: symm::DeviceBuffer<bf16>,
    out: symm::DeviceBuffer<bf16>,
}

impl Io {
    #[allow(clippy::too_many_arguments)]
    fn new(
        c: &Comm,
        hidden: usize,
        tokens: usize,
        x: &[bf16],
        idx: &[i32],
        w: &[f32],
        y_rows: usize,
    ) -> symm::Result<Io> {
        Ok(Io {
            tokens,
            x: c.device_buffer_from(x)?,
            idx: c.device_buffer_from(idx)?,
            w: c.device_buffer_from(w)?,
            y: c.device_buffer(y_rows * hidden)?,
            out: c.device_buffer(tokens * hidden)?,
        })
    }
}

/// A step's parts on `c`: the plan and the step's buffers.
struct Step {
    moe: Moe<bf16>,
    io: Io,
}

impl Step {
    fn new(
        c: &Comm,
        cfg: MoeConfig,
        tokens: usize,
        x: &[bf16],
        idx: &[i32],
        w: &[f32],
    ) -> symm::Result<Step> {
        let moe = Moe::<bf16>::new(c, cfg.clone())?;
        let io = Io::new(c, cfg.hidden, tokens, x, idx, w, moe.received_rows())?;
        Ok(Step { moe, io })
    }

    /// Dispatch, then combine of the experts' rows `y`: with `experts`,
    /// the received rows copied (identity experts, for the check; not in
    /// fp8, whose rows are not `bf16`), else whatever `y` holds (the
    /// timings: the communication's, not an expert's).
    fn run(&mut self, c: &Comm, experts: bool) -> symm::Result<()> {
        let io = &mut self.io;
        self.moe.dispatch(c, &io.x, &io.idx, io.tokens)?;
        if experts && self.moe.received_fp8().is_none() {
            copy_rows::launch(
                c,
                LaunchConfig::linear(264, 256),
                self.moe.received(),
                &mut io.y,
            )?;
        }
        self.moe.combine(c, &io.y, &io.w, &mut io.out)
    }

    fn dispatch(&mut self, c: &Comm) -> symm::Result<()> {
        let io = &self.io;
        self.moe.dispatch(c, &io.x, &io.idx, io.tokens)
    }

    fn combine(&mut self, c: &Comm) -> symm::Result<()> {
        let io = &mut self.io;
        self.moe.combine(c, &io.y, &io.w, &mut io.out)
    }
}

/// The same step with NCCL moving the rows (`support/moe_nccl.rs`).
struct NcclStep {
    m: NcclMoe,
    io: Io,
}

impl NcclStep {
    fn new(
        c: &Comm,
        cfg: MoeConfig,
        tokens: usize,
        x: &[bf16],
        idx: &[i32],
        w: &[f32],
    ) -> symm::Result<NcclStep> {
        let h = cfg.hidden;
        let m = NcclMoe::new(c, cfg)?;
        let io = Io::new(c, h, tokens, x, idx, w, m.received_rows())?;
        Ok(NcclStep { m, io })
    }

    fn run(&mut self, c: &Comm) -> symm::Result<()> {
        let io = &mut self.io;
        self.m.dispatch(c, &io.x, &io.idx, io.tokens)?;
        self.m.combine(c, &io.y, &io.w, &mut io.out)
    }

    /// Each part of the step timed alone, µs: symm's kernels in graphs,
    /// the row exchange by symm's `all_to_all_v` (in a graph) and by NCCL
    /// (each alone, synchronised).
    fn stages(&mut self, c: &Comm) -> symm::Result<Vec<(&'static str, f64)>> {
        self.run(c)?;
        c.synchronize()?;
        let barrier = Barrier::new(c)?;
        let (m, io) = (&mut self.m, &mut self.io);
        let n = io.tokens;
        let mut t = Vec::new();
        t.push((
            "layout",
            time_graph(c, &barrier, &mut || m.layout(c, &io.idx, n))?,
        ));
        t.push((
            "pack",
            time_graph(c, &barrier, &mut || m.pack(c, &io.x, &io.idx, n))?,
        ));
        let parts = m.sizes(c)?;
        let this = &*m;
        t.push((
            "rows by NCCL",
            time_steps(c, 20, &mut || this.exchange_rows(c, &parts, false))?,
        ));
        let send = c.alloc::<bf16>(m.send.len())?;
        let smem = send.rendezvous()?;
        let mut report = c.device_buffer::<u64>(2 * c.world_size())?;
        let (splits, raw) = (&m.splits, &mut m.raw);
        t.push((
            "rows by symm",
            time_graph(c, &barrier, &mut || {
                symm::kernels::collectives::all_to_all_v::<bf16>(c, &smem, raw, splits, &mut report)
            })?,
        ));
        t.push(("expert-major", time_graph(c, &barrier, &mut || m.rows(c))?));
        t.push((
            "move there",
            time_graph(c, &barrier, &mut || m.move_there(c))?,
        ));
        t.push((
            "move back",
            time_graph(c, &barrier, &mut || m.move_back(c, &io.y))?,
        ));
        t.push((
            "sum",
            time_graph(c, &barrier, &mut || m.sum(c, &io.w, &mut io.out, n))?,
        ));
        Ok(t)
    }
}

/// The pull form's staging kernels timed alone (each in a graph), and its
/// whole dispatch in bf16 and in fp8: what the barrier kernel between
/// them takes is the difference.
fn pull_stages(
    c: &Comm,
    a: &Args,
    tokens: usize,
    x: &[bf16],
    idx: &[i32],
) -> symm::Result<Vec<(&'static str, f64)>> {
    use symm::kernels::moe::{layout, layout_scratch, moe_pack_fp8, moe_stage};
    let barrier = Barrier::new(c)?;
    let (e, k, h) = (a.experts, a.top_k, a.hidden);
    let local = e / c.world_size();
    let xs = c.device_buffer_from(x)?;
    let ids = c.device_buffer_from(idx)?;
    let mut scratch = c.device_buffer::<u32>(layout_scratch(e))?;
    let mut pos = c.device_buffer::<u32>(tokens * k)?;
    let mut counts = c.device_buffer::<u32>(e)?;
    let mut splits = c.device_buffer::<u64>(c.world_size())?;
    let mut scale_splits = c.device_buffer::<u64>(c.world_size())?;
    let mut stage = c.device_buffer::<u8>(tokens * h * 2)?;
    let mut idx_out = c.device_buffer::<i32>(tokens * k)?;
    let mut f8 = c.device_buffer::<f8e4m3>(tokens * h)?;
    let mut scales = c.device_buffer::<f32>(tokens * h / 128)?;
    let grid = LaunchConfig::linear(tokens as u32, 256);
    let mut t = vec![(
        "pull: layout (ranks within experts)",
        time_graph(c, &barrier, &mut || {
            layout(
                c,
                &ids,
                tokens * k,
                (e, local, h, 0),
                false,
                true,
                &mut scratch,
                &mut pos,
                (&mut splits, &mut scale_splits, &mut counts),
            )
            .map(|_| ())
        })?,
    )];
    let xb = c.bind("x", &xs)?;
    let xb = xb.bytes();
    t.push((
        "pull: stage bf16 rows",
        time_graph(c, &barrier, &mut || {
            moe_stage::launch(
                c,
                grid,
                &xb,
                &ids,
                &mut stage,
                &mut idx_out,
                k as u32,
                e as u32,
                (2 * h) as u32,
                true,
                true,
            )
        })?,
    ));
    t.push((
        "pull: stage fp8 rows (scales per 128)",
        time_graph(c, &barrier, &mut || {
            moe_pack_fp8::launch::<bf16, 8>(
                c,
                LaunchConfig::linear(tokens as u32, 256),
                &xs,
                &ids,
                &pos,
                &mut f8,
                &mut scales,
                k as u32,
                e as u32,
                h as u32,
                128,
                true,
                true,
            )
        })?,
    ));
    for (name, fp8) in [("pull: dispatch bf16", false), ("pull: dispatch fp8", true)] {
        let mut s = Step::new(
            c,
            cfg(a, tokens, fp8, MoeMode::Pull),
            tokens,
            x,
            idx,
            &[0.5; 1],
        )?;
        t.push((name, time_graph(c, &barrier, &mut || s.dispatch(c))?));
    }
    Ok(t)
}

fn cfg(a: &Args, tokens: usize, fp8: bool, mode: MoeMode) -> MoeConfig {
    let cfg = MoeConfig::new(a.hidden, a.experts, a.top_k, tokens)
        .with_align(16)
        .with_mode(mode);
    if fp8 {
        cfg.with_fp8(Fp8Scales::Per128)
    } else {
        cfg
    }
}

/// `--emulator N`: toy steps in bf16, each rank's output against the
/// reference (identity experts: each token's rows summed by weight).
pub(crate) fn check(n: usize) -> i32 {
    let a = Args {
        world: None,
        tokens: vec![5],
        hidden: 32,
        experts: 2 * n,
        top_k: 2,
        emulator: None,
        stages: false,
        mode: "both".into(),
    };
    let res = run(Ranks::Emulator(n), CommOptions::default(), |c| {
        let (idx, w) = routing(7 + c.rank() as u64, 5, a.experts, a.top_k);
        let x: Vec<bf16> = (0..5 * a.hidden)
            .map(|i| bf16::from_f32((i % 13) as f32 - 6.0))
            .collect();
        let mut bad = 0;
        for mode in ALL_MODES {
            let mut s = Step::new(c, cfg(&a, 5, false, mode), 5, &x, &idx, &w)?;
            s.run(c, true)?;
            c.synchronize()?;
            let got = s.io.out.to_host()?;
            for t in 0..5 {
                for i in 0..a.hidden {
                    // By rank, then slot (as the combine sums).
                    let local = a.experts / c.world_size();
                    let mut acc = 0.0f32;
                    for d in 0..c.world_size() {
                        let mut part = None;
                        for k in 0..a.top_k {
                            let p = t * a.top_k + k;
                            if idx[p] as usize / local == d {
                                let v = w[p] * x[t * a.hidden + i].to_f32();
                                part = Some(part.unwrap_or(-0.0f32) + v);
                            }
                        }
                        if let Some(part) = part {
                            acc += part;
                        }
                    }
                    if got[t * a.hidden + i].to_bits() != bf16::from_f32(acc).to_bits() {
                        bad += 1;
                    }
                }
            }
        }
        Ok(bad)
    });
    match res {
        Ok(bad) if bad.iter().all(|&b| b == 0) => {
            println!("bench_moe --emulator {n}: every rank's combined rows match the reference");
            0
        }
        Ok(bad) => {
            eprintln!("bench_moe --emulator {n}: wrong elements by rank: {bad:?}");
            1
        }
        Err(e) => {
            eprintln!("bench_moe --emulator {n}: {e}");
            1
        }
    }
}

fn main() {
    let args: Args = clap::Parser::parse();
    if let Some(n) = args.emulator {
        std::process::exit(check(n));
    }
    let world = args.world.unwrap_or_else(symm::cuda_device_count);
    // `--stages`, or `--world 1` asked for, also at one rank: its kernels
    // alone, with no link between GPUs (for a profiler, or each form's
    // fixed costs).
    let asked_one = args.world == Some(1);
    let Some(ranks) = Ranks::gpus(world).filter(|_| world >= 2 || args.stages || asked_one) else {
        eprintln!("SKIPPED: bench_moe needs 2 or more GPUs (one rank per GPU)");
        return;
    };
    println!("{}", method_line().replace("calls", "steps"));
    if args.stages {
        for &tokens in &args.tokens {
            let res = run(ranks.clone(), CommOptions::default(), |c| {
                let (idx, w) = routing(11 + c.rank() as u64, tokens, args.experts, args.top_k);
                let x: Vec<bf16> = (0..tokens * args.hidden)
                    .map(|i| bf16::from_f32((i % 7) as f32))
                    .collect();
                let mut parts = NcclStep::new(
                    c,
                    cfg(&args, tokens, false, MoeMode::AllToAll),
                    tokens,
                    &x,
                    &idx,
                    &w,
                )?
                .stages(c)?;
                parts.extend(pull_stages(c, &args, tokens, &x, &idx)?);
                Ok(parts)
            });
            match res {
                Ok(r) => {
                    println!("\n### Parts of the bf16 step, {world} ranks, {tokens} tokens a rank (rank 0)\n");
                    println!("| part | µs |\n|---|---|");
                    for (name, us) in &r[0] {
                        println!("| {name} | {us:.1} |");
                    }
                }
                Err(e) => {
                    eprintln!("bench_moe --stages, {tokens} tokens: {e}");
                    std::process::exit(1);
                }
            }
        }
        return;
    }
    println!(
        "\n### MoE dispatch + combine, {world} ranks, hidden {}, {} experts, top-{} (rank 0)\n",
        args.hidden, args.experts, args.top_k
    );
    println!(
        "| tokens a rank | form | rows | dispatch µs | combine µs | step µs | GB/s to peers | symm µs, each step alone | NCCL µs, each step alone | symm / NCCL | MB to peers a step |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let modes = modes(&args);
    for &tokens in &args.tokens {
        for (mode, fp8) in modes
            .iter()
            .flat_map(|&m| [false, true].map(move |f| (m, f)))
        {
            let res = run(ranks.clone(), CommOptions::default(), |c| {
                let (idx, w) = routing(11 + c.rank() as u64, tokens, args.experts, args.top_k);
                let x: Vec<bf16> = (0..tokens * args.hidden)
                    .map(|i| bf16::from_f32((i % 7) as f32))
                    .collect();
                let mut s = Step::new(c, cfg(&args, tokens, fp8, mode), tokens, &x, &idx, &w)?;
                let barrier = Barrier::new(c)?;
                let alone = time_steps(c, 20, &mut || s.run(c, false))?;
                // The copy-engine form reads its counts on the host, so no
                // graph holds it: each call is timed alone.
                let [us, there_us, back_us] = if mode == MoeMode::CopyEngine {
                    [
                        alone,
                        time_steps(c, 20, &mut || s.dispatch(c))?,
                        time_steps(c, 20, &mut || s.combine(c))?,
                    ]
                } else {
                    [
                        time_graph(c, &barrier, &mut || s.run(c, false))?,
                        time_graph(c, &barrier, &mut || s.dispatch(c))?,
                        time_graph(c, &barrier, &mut || s.combine(c))?,
                    ]
                };
                // NCCL in bf16 only; an NCCL that fails is said, not fatal.
                let nccl_us = if fp8 {
                    None
                } else {
                    match NcclStep::new(c, cfg(&args, tokens, false, mode), tokens, &x, &idx, &w)
                        .and_then(|mut n| time_steps(c, 20, &mut || n.run(c)))
                    {
                        Ok(t) => Some(t),
                        Err(e) => {
                            eprintln!("rank {}: NCCL step: {e}", c.rank());
                            None
                        }
                    }
                };
                let local = args.experts / c.world_size();
                let once = mode != MoeMode::AllToAll;
                let sent = rows_to_peers(&idx, c.rank(), local, args.top_k, once);
                let f32_back = mode == MoeMode::CopyEngine;
                let back = bytes_back(
                    &idx,
                    c.rank(),
                    local,
                    args.top_k,
                    args.hidden,
                    once,
                    f32_back,
                );
                // Both ways: the rows there (bf16, or e4m3 and a scale per
                // 128) and the experts' rows back (as `bytes_back` counts).
                let there = if fp8 {
                    args.hidden + 4 * args.hidden / 128
                } else {
                    2 * args.hidden
                };
                Ok(([there_us, back_us, us, alone], nccl_us, sent * there + back))
            });
            match res {
                Ok(r) => {
                    let ([there_us, back_us, us, alone], nccl_us, bytes) = r[0];
                    let (nc, ratio) = match nccl_us {
                        Some(n) => (format!("{n:.1}"), format!("{:.2}×", alone / n)),
                        None => ("–".into(), "–".into()),
                    };
                    // No graph holds the copy-engine form's step (its GB/s
                    // are of the step alone).
                    let step = match mode {
                        MoeMode::CopyEngine => "–".to_string(),
                        _ => format!("{us:.1}"),
                    };
                    println!(
                        "| {tokens} | {} | {} | {there_us:.1} | {back_us:.1} | {step} | {:.1} | {alone:.1} | {nc} | {ratio} | {:.2} |",
                        match mode {
                            MoeMode::Pull => "pull",
                            MoeMode::AllToAll => "all-to-all",
                            MoeMode::CopyEngine => "copy engines (each call alone)",
                        },
                        if fp8 { "fp8, scales per 128" } else { "bf16" },
                        bytes as f64 / us / 1e3,
                        bytes as f64 / 1e6
                    );
                }
                Err(e) => {
                    eprintln!("bench_moe, {tokens} tokens, fp8 {fp8}: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    let _ = CALLS;
}
