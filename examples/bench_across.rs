//! Collectives across NVLink domains: `symm::functional`'s hierarchical
//! all-reduce, all-gather, reduce-scatter, broadcast and all-to-all
//! (symm's kernels in each domain, NCCL on the rails between them) against
//! flat NCCL over the whole group (`Prefer::Nccl`), on simulated nodes of
//! one machine (`--nodes`: ranks split into that many domains of
//! consecutive ranks, one rank per GPU). With `--deterministic`, the
//! reductions take their exact form (an all-to-all, symm's fold in rank
//! order, an all-gather): the price of the deterministic mode across
//! domains.
//!
//! Every number is a CUDA graph of back-to-back calls (the median of its
//! replays, as every benchmark here times), from plain device buffers (a
//! group across domains has no symmetric pool), on the user's stream.
//! Before timing, each size's two results are compared bit for bit (sums
//! of small integers: exact in any order).
//!
//! With `--calibrate`, it also prints what `Collectives::calibrate`
//! measures on the same group (its own timing: host clocks around
//! back-to-back calls, not graphs) and the thresholds it derives; with
//! one GPU per simulated node there is nothing to measure (the hierarchy
//! is NCCL alone), and it says so.
//!
//! Run it with NCCL's network transport between the simulated nodes, as
//! between real ones (one GPU per node: within a node NCCL then uses
//! nothing else):
//!
//! ```text
//! NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 \
//!   cargo run --release --example bench_across -- --nodes 2
//! ```

use symm::functional::{
    CalibrateOptions, CallFacts, Collective, Collectives, Options, Placed, Prefer, ReduceOp,
};
use symm::{run, Comm, CommOptions, DType, DeviceBuffer, Ranks, Result};

#[path = "support/bench.rs"]
#[allow(dead_code)] // the NCCL baselines are other programs'
mod bench;
use bench::{other, sizes, time_graph, Barrier};

#[derive(clap::Parser)]
struct Args {
    /// Ranks (one per GPU; default: every GPU).
    #[arg(long)]
    world: Option<usize>,
    /// Simulated nodes (NVLink domains) the ranks are split into.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Largest message, bytes (1 KiB to it, in powers of 4).
    #[arg(long, default_value_t = 256 << 20)]
    max_bytes: usize,
    /// Collectives (all_reduce, all_gather, reduce_scatter, broadcast,
    /// all_to_all).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all"
    )]
    calls: Vec<String>,
    /// symm's side in the deterministic mode (its reductions' exact form).
    #[arg(long)]
    deterministic: bool,
    /// Also run `Collectives::calibrate` (1 KiB to `--max-bytes`) and print
    /// its table and the `SYMM_FUNCTIONAL_MIN_HIER_BYTES` it measured.
    #[arg(long)]
    calibrate: bool,
}

/// The collectives with hierarchical forms.
const CALLS: [Collective; 5] = [
    Collective::AllReduce,
    Collective::AllGather,
    Collective::ReduceScatter,
    Collective::Broadcast,
    Collective::AllToAll,
];

/// One row: the call, the message's bytes, µs of (hierarchical, flat
/// NCCL), whether their results agreed bit for bit, and the
/// hierarchical variant's choice.
type Row = (Collective, usize, [f64; 2], bool, String);

/// One call of `call` on `fc` from `x` into `y`, `elems` elements per
/// rank.
fn one(
    fc: &Collectives,
    call: Collective,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
) -> Result<()> {
    let root = fc.comm().world_size() - 1;
    match call {
        Collective::AllReduce => fc.all_reduce(x, y, ReduceOp::Sum)?.wait().map(drop),
        Collective::AllGather => fc.all_gather(x, y)?.wait().map(drop),
        Collective::ReduceScatter => fc.reduce_scatter(x, y, ReduceOp::Sum)?.wait().map(drop),
        Collective::AllToAll => fc.all_to_all(x, y)?.wait().map(drop),
        _ => fc.broadcast(x, y, root)?.wait().map(drop),
    }
}

fn rows(c: &Comm, max: usize, calls: &[Collective], det: bool) -> Result<Vec<Row>> {
    let world = c.world_size();
    let hier = Collectives::with_options(c, Options::default().with_deterministic(det))?;
    let flat = Collectives::with_options(c, Options::default().with_backend(Prefer::Nccl))?;
    let barrier = Barrier::new(c)?;
    let mut out = Vec::new();
    for &call in calls {
        for bytes in sizes(max) {
            // The message: the all-gather's output and the reduce-scatter's
            // input are `bytes`, as NCCL's tests count them; the others'
            // input and output.
            let whole = bytes / 4;
            let (n_in, n_out) = match call {
                Collective::AllGather => (whole / world, whole / world * world),
                Collective::ReduceScatter => (whole / world * world, whole / world),
                Collective::AllToAll => (whole / world * world, whole / world * world),
                _ => (whole, whole),
            };
            if n_in == 0 || n_out == 0 {
                continue;
            }
            let data: Vec<f32> = (0..n_in)
                .map(|i| ((i * 7 + c.rank() * 13) % 17) as f32 - 8.0)
                .collect();
            let x = c.device_buffer_from(&data)?;
            let mut y = c.device_buffer_from(&vec![f32::NAN; n_out])?;
            let mut z = c.device_buffer_from(&vec![f32::INFINITY; n_out])?;
            one(&hier, call, &x, &mut y)?;
            one(&flat, call, &x, &mut z)?;
            c.synchronize()?;
            hier.synchronize()?;
            flat.synchronize()?;
            let agree = y
                .to_host()?
                .iter()
                .zip(z.to_host()?)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            eprintln!("rank {}: {call} {bytes} B", c.rank());
            let h = time_graph(c, &barrier, &mut || one(&hier, call, &x, &mut y))?;
            let f = time_graph(c, &barrier, &mut || one(&flat, call, &x, &mut y))?;
            let choice = hier
                .explain(&CallFacts {
                    collective: call,
                    dtype: DType::F32,
                    op: matches!(call, Collective::AllReduce | Collective::ReduceScatter)
                        .then_some(ReduceOp::Sum),
                    // (The reduce-scatter's chunk, as its call weighs it.)
                    bytes: n_in.min(n_out) * 4,
                    bytes_per_peer: n_in.min(n_out) * 4,
                    nccl_shape: None,
                    placed: Placed::Plain,
                })?
                .to_string();
            out.push((call, n_in.max(n_out) * 4, [h, f], agree, choice));
        }
    }
    Ok(out)
}

fn main() {
    let args: Args = clap::Parser::parse();
    let calls: Vec<Collective> = args
        .calls
        .iter()
        .map(|name| {
            CALLS
                .into_iter()
                .find(|c| c.name() == name)
                .unwrap_or_else(|| {
                    eprintln!("no collective `{name}` with a hierarchical form");
                    std::process::exit(2)
                })
        })
        .collect();
    let world = args.world.unwrap_or_else(symm::cuda_device_count);
    let Some(ranks) = Ranks::gpus(world).filter(|_| world >= 2) else {
        eprintln!("SKIPPED: bench_across needs 2 or more GPUs (one rank per GPU)");
        return;
    };
    if let Ranks::Cuda(d) = &ranks {
        let mut seen = d.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() < d.len() {
            eprintln!("SKIPPED: bench_across times one rank per GPU; {world} ranks share GPUs");
            return;
        }
    }
    eprintln!("{}", bench::method_line());
    let placement = ranks.describe();
    let (nodes, max) = (args.nodes, args.max_bytes);
    let got = run(ranks, CommOptions::default().with_nodes(nodes), |c| {
        if !c.topology().spans_domains() {
            return Err(other(c, "the ranks are one domain: pass --nodes 2 or more"));
        }
        let cal = match args.calibrate {
            true => {
                let how = CalibrateOptions::default().with_sizes(1 << 10, max);
                Some(Collectives::new(c)?.calibrate(&how)?.to_string())
            }
            false => None,
        };
        Ok((rows(c, max, &calls, args.deterministic)?, cal))
    });
    let got = match got {
        Ok(g) => g,
        Err(e) => {
            eprintln!("bench_across: {e}");
            std::process::exit(1);
        }
    };
    let p2p = std::env::var("NCCL_P2P_DISABLE").unwrap_or_default();
    let shm = std::env::var("NCCL_SHM_DISABLE").unwrap_or_default();
    let det = if args.deterministic {
        ", symm in the deterministic mode"
    } else {
        ""
    };
    println!(
        "\n### {world} ranks as {nodes} simulated nodes ({placement}; NCCL_P2P_DISABLE={p2p} \
         NCCL_SHM_DISABLE={shm}{det})\n"
    );
    println!(
        "µs per call, {}; rank 0. symm: `symm::functional` (hierarchical where a form \
         applies); NCCL: flat NCCL over the whole group (`Prefer::Nccl`). bytes: the message \
         (the all-gather's output, the reduce-scatter's input). same: the two results agree \
         bit for bit.\n",
        bench::method_line()
    );
    println!("| call | bytes | symm µs | NCCL µs | NCCL / symm | same | symm's choice |");
    println!("|---|---|---|---|---|---|---|");
    for (call, bytes, [h, f], agree, choice) in &got[0].0 {
        println!(
            "| {call} | {bytes} | {h:.1} | {f:.1} | {:.2} | {} | {choice} |",
            f / h,
            if *agree { "yes" } else { "**NO**" }
        );
    }
    if let Some(cal) = &got[0].1 {
        println!("\n`Collectives::calibrate` on the same group, rank 0 (the slowest rank's times):\n\n{cal}");
    }
    if got.iter().flat_map(|g| &g.0).any(|r| !r.3) {
        eprintln!("bench_across: the hierarchical and flat results differ");
        std::process::exit(1);
    }
}
