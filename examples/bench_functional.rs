//! Functional collectives benchmark: each collective through
//! `symm::functional::Collectives` (the communication stream, its events,
//! the choice, the handle) against the same kernel called directly on the
//! user's stream, from the same pool tensor into the same output, with the
//! functional call on the user's stream (the default) and on its own
//! communication stream.
//!
//! Two numbers per call: the **host** time to enqueue one call (batches of
//! 200 back-to-back calls, host clock, no synchronisation inside a batch,
//! the variants in turn for 15 rounds: medians, and the median of each
//! round's difference from the direct call) and the **graph** time (a CUDA graph of 32 back-to-back
//! calls, the median of 9 replays, as every benchmark here times): the
//! functional call is captured whole, fork to the communication stream and
//! join back included. Then a timeline (CUDA events) of a collective on
//! the communication stream beside a compute kernel on the user's stream,
//! started together, to show them overlap.
//!
//! ```text
//! cargo run --release --example bench_functional -- --worlds 1,2 --sizes 1024,65536
//! ```

use std::time::Instant;

use symm::cudarc::driver::sys::CUevent_flags;
use symm::dsl::*;
use symm::functional::{Collective, Collectives, Options, Prefer};
use symm::kernels::all_reduce::all_reduce;
use symm::kernels::collectives::{self as coll, ReduceOp};
use symm::{run, symm_kernel, Comm, CommOptions, DeviceBuffer, LaunchConfig, Ranks, Result};

#[path = "support/bench.rs"]
#[allow(dead_code)] // the NCCL baselines are other programs'
mod bench;
use bench::{drv, other, time_graph, Barrier, CALLS, REPLAYS};

/// Calls per host-timed batch.
const BATCH: usize = 200;

#[derive(clap::Parser)]
struct Args {
    /// World sizes (ranks share GPUs where a machine has fewer: then the
    /// host numbers hold and the graph numbers are not multi-GPU ones).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    worlds: Vec<usize>,
    /// Per-rank message bytes.
    #[arg(long, value_delimiter = ',', default_value = "1024,16384,65536")]
    sizes: Vec<usize>,
    /// Skip the overlap timeline.
    #[arg(long)]
    no_timeline: bool,
}

/// Busy work for the compute stream: `iters` dependent multiply-adds per
/// element.
#[symm_kernel]
fn spin(x: &mut [f32], iters: u32) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        let mut v = x[i];
        for _ in 0..iters {
            v = v * 0.999_9 + 0.000_1;
        }
        x[i] = v;
    }
}

/// The collectives timed: those with a direct kernel call of the same
/// shape.
const TIMED: [Collective; 5] = [
    Collective::AllReduce,
    Collective::AllGather,
    Collective::ReduceScatter,
    Collective::Broadcast,
    Collective::AllToAll,
];

/// Host µs to enqueue one call of each variant (`call(v)`), from batches
/// of `BATCH` calls taken in turn (variant 0, 1, 2, 0, 1, 2, …: drifts of
/// the host's clock and load hit them alike), 15 rounds: the median per
/// variant, and the median over rounds of each variant's difference from
/// variant 0.
fn host_us(
    c: &Comm,
    variants: usize,
    call: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<Vec<(f64, f64)>> {
    for v in 0..variants {
        call(v)?;
    }
    c.synchronize()?;
    let mut t = vec![Vec::new(); variants];
    for _ in 0..15 {
        for (v, tv) in t.iter_mut().enumerate() {
            let start = Instant::now();
            for _ in 0..BATCH {
                call(v)?;
            }
            tv.push(start.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
            c.synchronize()?;
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok((0..variants)
        .map(|v| {
            let diff: Vec<f64> = t[v].iter().zip(&t[0]).map(|(a, b)| a - b).collect();
            (median(t[v].clone()), median(diff))
        })
        .collect())
}

/// One row: the call, its bytes, (host, host over direct, graph) µs of the
/// direct call, of the functional call on the user's stream and on its own
/// stream, and the functional call's choice.
type Row = (&'static str, usize, Vec<(f64, f64, f64)>, String);

fn rows(c: &Comm, sizes: &[usize]) -> Result<Vec<Row>> {
    let world = c.world_size();
    // symm's kernels for every row (the direct calls' backend), whatever
    // the thresholds would pick.
    let symm = Options::default().with_backend(Prefer::Symm);
    let own = Collectives::with_options(c, symm.clone().with_own_stream(true))?;
    let same = Collectives::with_options(c, symm.with_own_stream(false))?;
    let pool = c.pool();
    let barrier = Barrier::new(c)?;
    let mut out = Vec::new();
    for &bytes in sizes {
        let n = (bytes / 4).max(world);
        let n = n - n % world;
        let x = pool.alloc::<f32>(n)?;
        x.write(0, &vec![1.0; n])?;
        let smem = x.rendezvous()?;
        let mut y: DeviceBuffer<f32> = c.device_buffer(world * n)?;
        for call in TIMED {
            // Variant 0 calls the kernel directly; 1 and 2 the functional
            // entry point on the user's stream and on its own.
            let mut one = |v: usize| -> Result<()> {
                let fc = if v == 1 { &same } else { &own };
                match (v, call) {
                    (0, Collective::AllReduce) => all_reduce(c, &smem, &mut y, n),
                    (0, Collective::AllGather) => coll::all_gather(c, &smem, &mut y, n),
                    (0, Collective::ReduceScatter) => {
                        coll::reduce_scatter(c, &smem, &mut y, n, ReduceOp::Sum)
                    }
                    (0, Collective::Broadcast) => coll::broadcast(c, &smem, &mut y, n, 0),
                    (0, _) => coll::all_to_all(c, &smem, &mut y, n / world),
                    (_, Collective::AllReduce) => {
                        fc.all_reduce(&x, &mut y, ReduceOp::Sum)?.wait().map(drop)
                    }
                    (_, Collective::AllGather) => fc.all_gather(&x, &mut y)?.wait().map(drop),
                    (_, Collective::ReduceScatter) => fc
                        .reduce_scatter(&x, &mut y, ReduceOp::Sum)?
                        .wait()
                        .map(drop),
                    (_, Collective::Broadcast) => fc.broadcast(&x, &mut y, 0)?.wait().map(drop),
                    (_, _) => fc.all_to_all(&x, &mut y)?.wait().map(drop),
                }
            };
            eprintln!("rank {}: {call} {bytes} B", c.rank());
            let host = host_us(c, 3, &mut one)?;
            own.synchronize()?;
            let mut timed = Vec::new();
            for (v, (h, dh)) in host.into_iter().enumerate() {
                let g = time_graph(c, &barrier, &mut || one(v))?;
                own.synchronize()?;
                timed.push((h, dh, g));
            }
            let choice = own
                .explain(&symm::functional::CallFacts {
                    collective: call,
                    dtype: symm::DType::F32,
                    op: matches!(call, Collective::AllReduce | Collective::ReduceScatter)
                        .then_some(ReduceOp::Sum),
                    bytes: n * 4,
                    bytes_per_peer: n * 4,
                    nccl_shape: None,
                    placed: symm::functional::Placed::Pool {
                        segment: x.place().1,
                    },
                })?
                .to_string();
            out.push((call.name(), n * 4, timed, choice));
        }
    }
    Ok(out)
}

/// Timeline (µs from a common start, CUDA events) of a 16 MiB all-reduce
/// on the communication stream and a compute kernel on the user's stream,
/// each alone and then both at once.
fn timeline(c: &Comm) -> Result<Vec<String>> {
    let fc = Collectives::with_options(c, Options::default().with_own_stream(true))?;
    let user = c.cuda_stream().ok_or_else(|| other(c, "GPU ranks only"))?;
    let comm_stream = fc.comm_stream().expect("GPU rank").clone();
    let ctx = user.context().clone();
    let ev = || {
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv(c, "event"))
    };
    let n = 4 << 20;
    let pool = c.pool();
    let x = pool.alloc::<f32>(n)?;
    x.write(0, &vec![1.0; n])?;
    let mut y = c.device_buffer::<f32>(n)?;
    let mut busy = c.device_buffer::<f32>(1 << 20)?;
    let cfg = LaunchConfig::linear((1 << 20) / 256, 256);
    let iters = 20_000;
    let mut lines = Vec::new();
    for phase in ["compute alone", "collective alone", "both at once"] {
        for _ in 0..2 {
            // The second pass is the one reported (the first loads modules).
            lines.retain(|l: &String| !l.starts_with(phase));
            c.synchronize()?;
            fc.synchronize()?;
            let (t0, ce, cs, cend) = (ev()?, ev()?, ev()?, ev()?);
            t0.record(&user).map_err(drv(c, "record"))?;
            let h = if phase != "compute alone" {
                comm_stream.wait(&t0).map_err(drv(c, "wait"))?;
                cs.record(&comm_stream).map_err(drv(c, "record"))?;
                let h = fc.all_reduce(&x, &mut y, ReduceOp::Sum)?;
                cend.record(&comm_stream).map_err(drv(c, "record"))?;
                Some(h)
            } else {
                None
            };
            if phase != "collective alone" {
                spin::launch(c, cfg, &mut busy, iters)?;
            }
            ce.record(&user).map_err(drv(c, "record"))?;
            if let Some(h) = h {
                h.wait()?;
            }
            c.synchronize()?;
            fc.synchronize()?;
            let at = |e: &symm::cudarc::driver::CudaEvent| -> Result<f64> {
                Ok(f64::from(t0.elapsed_ms(e).map_err(drv(c, "elapsed"))?) * 1e3)
            };
            let coll = if phase != "compute alone" {
                format!("collective {:.1}–{:.1} µs", at(&cs)?, at(&cend)?)
            } else {
                String::new()
            };
            let comp = if phase != "collective alone" {
                format!("compute 0.0–{:.1} µs", at(&ce)?)
            } else {
                String::new()
            };
            lines.push(format!("{phase}: {comp} {coll}"));
        }
    }
    Ok(lines)
}

fn main() {
    let args: Args = clap::Parser::parse();
    eprintln!("{}", bench::method_line());
    for world in args.worlds {
        let Some(ranks) = Ranks::gpus(world) else {
            eprintln!("SKIPPED: world {world}: no GPUs to place it on");
            continue;
        };
        let placement = ranks.describe();
        let sizes = args.sizes.clone();
        let timeline_on = !args.no_timeline;
        let got = run(ranks, CommOptions::default(), move |c| {
            let r = rows(c, &sizes)?;
            let t = if timeline_on && c.rank() == 0 && c.world_size() == 1 {
                timeline(c)?
            } else {
                Vec::new()
            };
            Ok((r, t))
        });
        let got = match got {
            Ok(g) => g,
            Err(e) => {
                eprintln!("world {world}: {e}");
                std::process::exit(1);
            }
        };
        println!("\n### world {world} ({placement})\n");
        println!("host: µs to enqueue one call (batches of {BATCH}, the three variants in turn, 15 rounds: medians; in brackets the median of the per-round differences from the direct call); graph: µs per call in a CUDA graph of {CALLS} back-to-back calls (median of {REPLAYS} replays); rank 0. user: the functional call on the user's stream (the default); own: on its own communication stream (`Options::with_own_stream(true)`: an event fork and join per call)\n");
        println!("| call | bytes | direct host | user host | own host | direct graph | user graph | own graph | choice |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for (call, bytes, t, choice) in &got[0].0 {
            let [(dh, _, dg), (uh, ud, ug), (oh, od, og)] = t[..] else {
                continue;
            };
            println!(
                "| {call} | {bytes} | {dh:.2} | {uh:.2} ({ud:+.2}) | {oh:.2} ({od:+.2}) | {dg:.2} | {ug:.2} ({:+.2}) | {og:.2} ({:+.2}) | {choice} |",
                ug - dg, og - dg
            );
        }
        for line in &got[0].1 {
            println!("\ntimeline: {line}");
        }
    }
}
