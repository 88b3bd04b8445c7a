//! Times a MoE step (`symm::kernels::moe`: dispatch, then combine) on
//! every rank's GPU, one rank per GPU: the composed form with rows in bf16
//! and in fp8 (scales per 128 elements), at decode and prefill batches, in
//! CUDA graphs of back-to-back steps (a new routing is a new graph; the
//! numbers are a fixed random routing's), medians of the replays. Prints a
//! table of µs per dispatch, per combine and per step (no expert between
//! them: the combine sends back whatever its input holds), and the bytes
//! each rank sends to its peers per step over the step's time.
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
use symm::kernels::moe::{Fp8Scales, Moe, MoeConfig};
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
}

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

/// Rows this rank sends to its peers (not to itself) in a dispatch.
fn rows_to_peers(idx: &[i32], rank: usize, local: usize) -> usize {
    idx.iter()
        .filter(|&&e| e >= 0 && e as usize / local != rank)
        .count()
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

fn cfg(a: &Args, tokens: usize, fp8: bool) -> MoeConfig {
    let cfg = MoeConfig::new(a.hidden, a.experts, a.top_k, tokens).with_align(16);
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
    };
    let res = run(Ranks::Emulator(n), CommOptions::default(), |c| {
        let (idx, w) = routing(7 + c.rank() as u64, 5, a.experts, a.top_k);
        let x: Vec<bf16> = (0..5 * a.hidden)
            .map(|i| bf16::from_f32((i % 13) as f32 - 6.0))
            .collect();
        let mut s = Step::new(c, cfg(&a, 5, false), 5, &x, &idx, &w)?;
        s.run(c, true)?;
        c.synchronize()?;
        let got = s.io.out.to_host()?;
        let mut bad = 0;
        for t in 0..5 {
            for i in 0..a.hidden {
                let mut acc = 0.0f32;
                for k in 0..a.top_k {
                    acc += w[t * a.top_k + k] * x[t * a.hidden + i].to_f32();
                }
                if got[t * a.hidden + i].to_bits() != bf16::from_f32(acc).to_bits() {
                    bad += 1;
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
    // `--stages` also at one rank: its kernels alone, for a profiler.
    let Some(ranks) = Ranks::gpus(world).filter(|_| world >= 2 || args.stages) else {
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
                NcclStep::new(c, cfg(&args, tokens, false), tokens, &x, &idx, &w)?.stages(c)
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
        "| tokens a rank | rows | dispatch µs | combine µs | step µs | GB/s to peers | symm µs, each step alone | NCCL µs, each step alone | symm / NCCL | MB to peers a step |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &tokens in &args.tokens {
        for fp8 in [false, true] {
            let res = run(ranks.clone(), CommOptions::default(), |c| {
                let (idx, w) = routing(11 + c.rank() as u64, tokens, args.experts, args.top_k);
                let x: Vec<bf16> = (0..tokens * args.hidden)
                    .map(|i| bf16::from_f32((i % 7) as f32))
                    .collect();
                let mut s = Step::new(c, cfg(&args, tokens, fp8), tokens, &x, &idx, &w)?;
                let barrier = Barrier::new(c)?;
                let us = time_graph(c, &barrier, &mut || s.run(c, false))?;
                let there_us = time_graph(c, &barrier, &mut || s.dispatch(c))?;
                let back_us = time_graph(c, &barrier, &mut || s.combine(c))?;
                let alone = time_steps(c, 20, &mut || s.run(c, false))?;
                // NCCL in bf16 only; an NCCL that fails is said, not fatal.
                let nccl_us = if fp8 {
                    None
                } else {
                    match NcclStep::new(c, cfg(&args, tokens, false), tokens, &x, &idx, &w)
                        .and_then(|mut n| time_steps(c, 20, &mut || n.run(c)))
                    {
                        Ok(t) => Some(t),
                        Err(e) => {
                            eprintln!("rank {}: NCCL step: {e}", c.rank());
                            None
                        }
                    }
                };
                let rows = rows_to_peers(&idx, c.rank(), args.experts / c.world_size());
                // Both ways: the rows there (bf16, or e4m3 and a scale per
                // 128) and the experts' rows back (bf16).
                let there = if fp8 {
                    args.hidden + 4 * args.hidden / 128
                } else {
                    2 * args.hidden
                };
                Ok((
                    [there_us, back_us, us, alone],
                    nccl_us,
                    rows * (there + 2 * args.hidden),
                ))
            });
            match res {
                Ok(r) => {
                    let ([there_us, back_us, us, alone], nccl_us, bytes) = r[0];
                    let (nc, ratio) = match nccl_us {
                        Some(n) => (format!("{n:.1}"), format!("{:.2}×", alone / n)),
                        None => ("–".into(), "–".into()),
                    };
                    println!(
                        "| {tokens} | {} | {there_us:.1} | {back_us:.1} | {us:.1} | {:.1} | {alone:.1} | {nc} | {ratio} | {:.2} |",
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
