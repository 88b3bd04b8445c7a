//! A 2-D mesh across (simulated) nodes: tensor parallelism inside each
//! NVLink domain, on symm's fused all-reduce + residual add + RMSNorm, and
//! data parallelism across the whole group, on `symm::functional`'s
//! hierarchical all-reduce (symm's kernels in each domain, NCCL between
//! them on GPUs), as a training step's gradient buckets overlapped with
//! the backward compute that makes the next ones.
//!
//! - **TP forward** (each domain's ranks, [`Comm::domain`]): every rank
//!   holds partial sums of a layer's output, and the fused kernel
//!   all-reduces them, adds the residual and normalises the rows. Every
//!   domain computes the same layer, so every rank's result must equal
//!   the world-1 reference (the host's: [`fused::reference`]) and, bit for
//!   bit, every other rank's, which a hierarchical all-gather of the
//!   results across the whole group checks.
//! - **DP backward** (the whole group): each bucket's gradient is made by
//!   a kernel on the user's stream (plus busy work standing in for the
//!   rest of the backward pass), then summed across every rank by the
//!   functional all-reduce on the group's communication stream, while the
//!   next bucket's compute runs. Gradients are small integers, so the sums
//!   are exact in any order and must equal the world-1 reference (the
//!   host's sum over ranks) exactly.
//!
//! On GPUs it then times the backward pass three ways (CUDA events on the
//! user's stream, the median of 5): the compute alone, the all-reduces
//! alone, and both overlapped.
//!
//! ```text
//! NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 \
//!   cargo run --release --example mesh -- --nodes 2 --grad-mib 256
//! cargo run --example mesh -- --emulator --world 4 --nodes 2
//! ```

use symm::cudarc::driver::sys::CUevent_flags;
use symm::dsl::*;
use symm::functional::{Collectives, Options, ReduceOp};
use symm::kernels::fused::{self, all_reduce_residual_rms_norm};
use symm::{run, symm_kernel, Comm, CommOptions, DeviceBuffer, LaunchConfig, Ranks, Result};

#[path = "support/bench.rs"]
#[allow(dead_code)] // the NCCL baselines are other programs'
mod bench;
use bench::{drv, other};

/// The mesh and the step's sizes.
#[derive(clap::Parser, Clone, Debug)]
pub struct Args {
    /// Ranks (default: every GPU, one rank per GPU; 4 on the emulator).
    #[arg(long)]
    pub world: Option<usize>,
    /// Simulated nodes (NVLink domains) the ranks are split into.
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Gradient bytes per rank, MiB (the emulator takes 1/16 MiB).
    #[arg(long, default_value_t = 256)]
    pub grad_mib: usize,
    /// Gradient buckets.
    #[arg(long, default_value_t = 8)]
    pub buckets: usize,
    /// Busy-work iterations per gradient element of the backward compute.
    #[arg(long, default_value_t = 200)]
    pub work: u32,
    /// Run on the CPU emulator.
    #[arg(long)]
    pub emulator: bool,
}

/// The TP layer's rows and hidden size.
const ROWS: usize = 8;
const HIDDEN: usize = 1024;
const EPS: f32 = 1e-5;

/// Bucket `bucket`'s gradient on `rank`: small integers, whose sums over
/// ranks are exact in any order, after `work` dependent multiply-adds per
/// element standing in for the backward pass (their result never
/// changes the gradient, but the compiler cannot know it).
#[symm_kernel]
pub fn gradient(g: &mut [f32], rank: u32, bucket: u32, work: u32) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < g.len() {
        let mut v = 0.5f32;
        for _ in 0..work {
            v = v * 0.999_9 + 0.000_1;
        }
        let k = (i as u32) * 7 + rank * 13 + bucket * 5;
        let base = (k % 17) as f32 - 8.0;
        if v > 2.0 {
            g[i] = 0.0;
        } else {
            g[i] = base;
        }
    }
}

/// [`gradient`]'s value on the host.
fn grad_value(i: usize, rank: usize, bucket: usize) -> f32 {
    let k = (i as u32)
        .wrapping_mul(7)
        .wrapping_add(rank as u32 * 13)
        .wrapping_add(bucket as u32 * 5);
    (k % 17) as f32 - 8.0
}

/// What one rank reports: whether its checks passed (with what failed),
/// and on GPUs the backward pass's µs (compute alone, all-reduces alone,
/// overlapped).
type Report = (Vec<String>, Option<[f64; 3]>);

/// The TP forward on `dom` (this rank's domain), checked against the
/// host's reference; the normalised rows.
fn tp_forward(dom: &Comm) -> Result<(Vec<f32>, Vec<String>)> {
    let (l, local) = (dom.world_size(), dom.rank());
    let n = ROWS * HIDDEN;
    let partial = |r: usize| -> Vec<f32> {
        (0..n)
            .map(|j| ((j * 3 + r * 5 + j / HIDDEN) % 9) as f32 - 4.0)
            .collect()
    };
    let residual0: Vec<f32> = (0..n).map(|j| (j % 5) as f32 - 2.0).collect();
    let weight: Vec<f32> = (0..HIDDEN).map(|j| 1.0 + (j % 3) as f32 * 0.25).collect();
    let input = dom.alloc::<f32>(n)?;
    input.write(0, &partial(local))?;
    let smem = input.rendezvous()?;
    let mut residual = dom.device_buffer_from(&residual0)?;
    let w = dom.device_buffer_from(&weight)?;
    let mut out = dom.device_buffer_from(&vec![f32::NAN; n])?;
    all_reduce_residual_rms_norm(dom, &smem, &mut residual, &w, &mut out, ROWS, HIDDEN, EPS)?;
    dom.synchronize()?;
    let (got_res, got) = (residual.to_host()?, out.to_host()?);
    let mut bad = Vec::new();
    let partials: Vec<Vec<f32>> = (0..l).map(partial).collect();
    for row in 0..ROWS {
        let at = row * HIDDEN..(row + 1) * HIDDEN;
        let parts: Vec<&[f32]> = partials.iter().map(|p| &p[at.clone()]).collect();
        let (new_res, normed) = fused::reference(&parts, &residual0[at.clone()], &weight, EPS);
        if got_res[at.clone()] != new_res[..] {
            bad.push(format!(
                "TP row {row}: the new residual differs from the reference"
            ));
        }
        let worst = got[at]
            .iter()
            .zip(&normed)
            .map(|(g, r)| (f64::from(*g) - r).abs() / r.abs().max(1e-3))
            .fold(0.0, f64::max);
        if worst.is_nan() || worst > 1e-5 {
            bad.push(format!(
                "TP row {row}: the normalised row is off by {worst:e} (relative)"
            ));
        }
    }
    Ok((got, bad))
}

/// One rank's step: the TP forward, the results compared across the whole
/// group, then the DP backward (checked, and timed on GPUs).
fn step(c: &Comm, grad_elems: usize, buckets: usize, work: u32) -> Result<Report> {
    let world = c.world_size();
    // The domain, on the user's stream (a subgroup has a stream of its
    // own), where the compute kernels run.
    let dom = match c.cuda_stream() {
        Some(s) => c.domain()?.with_cuda_stream(s.clone())?,
        None => c.domain()?,
    };
    let (normed, mut bad) = tp_forward(&dom)?;
    let fc = Collectives::with_options(c, Options::default().with_own_stream(true))?;
    // Every rank's normalised rows, which must all be the same.
    let mine = c.device_buffer_from(&normed)?;
    let mut all = c.device_buffer_from(&vec![f32::NAN; world * normed.len()])?;
    fc.all_gather(&mine, &mut all)?.wait_host()?;
    let all = all.to_host()?;
    for (r, theirs) in all.chunks(normed.len()).enumerate() {
        if theirs
            .iter()
            .zip(&normed)
            .any(|(a, b)| a.to_bits() != b.to_bits())
        {
            bad.push(format!("rank {r}'s TP result differs from this rank's"));
        }
    }
    // The DP backward: each bucket's gradient, then its all-reduce on the
    // communication stream while the next bucket's compute runs.
    let per = grad_elems.div_ceil(buckets);
    let mut grads: Vec<DeviceBuffer<f32>> = (0..buckets)
        .map(|_| c.device_buffer::<f32>(per))
        .collect::<Result<_>>()?;
    let mut sums: Vec<DeviceBuffer<f32>> = (0..buckets)
        .map(|_| c.device_buffer_from(&vec![f32::NAN; per]))
        .collect::<Result<_>>()?;
    let cfg = LaunchConfig::linear(per.div_ceil(256) as u32, 256);
    let rank = c.rank() as u32;
    let backward = |grads: &mut [DeviceBuffer<f32>],
                    sums: &mut [DeviceBuffer<f32>],
                    compute: bool,
                    reduce: bool|
     -> Result<()> {
        let mut pending = Vec::new();
        for (b, (g, s)) in grads.iter_mut().zip(sums.iter_mut()).enumerate() {
            if compute {
                gradient::launch(&dom, cfg, g, rank, b as u32, work)?;
            }
            if reduce {
                pending.push(fc.all_reduce(&*g, s, ReduceOp::Sum)?);
            }
        }
        for p in pending {
            p.wait()?;
        }
        Ok(())
    };
    backward(&mut grads, &mut sums, true, true)?;
    c.synchronize()?;
    fc.synchronize()?;
    for (b, s) in sums.iter().enumerate() {
        let got = s.to_host()?;
        let wrong = (0..per).find(|&i| {
            let want: f32 = (0..world).map(|r| grad_value(i, r, b)).sum();
            got[i].to_bits() != want.to_bits()
        });
        if let Some(i) = wrong {
            bad.push(format!(
                "DP bucket {b}: element {i} is {}, and the world-1 reference {}",
                got[i],
                (0..world).map(|r| grad_value(i, r, b)).sum::<f32>()
            ));
        }
    }
    let Some(user) = c.cuda_stream() else {
        return Ok((bad, None));
    };
    // Timed: compute alone, all-reduces alone, overlapped.
    let ctx = user.context().clone();
    let ev = || {
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv(c, "cuEventCreate"))
    };
    let mut times = [0.0; 3];
    for (k, (compute, reduce)) in [(true, false), (false, true), (true, true)]
        .into_iter()
        .enumerate()
    {
        let mut us = Vec::new();
        for _ in 0..6 {
            c.host_barrier()?;
            let (t0, t1) = (ev()?, ev()?);
            t0.record(&user).map_err(drv(c, "cuEventRecord"))?;
            backward(&mut grads, &mut sums, compute, reduce)?;
            t1.record(&user).map_err(drv(c, "cuEventRecord"))?;
            t1.synchronize().map_err(drv(c, "cuEventSynchronize"))?;
            fc.synchronize()?;
            us.push(f64::from(t0.elapsed_ms(&t1).map_err(drv(c, "elapsed"))?) * 1e3);
        }
        // The first is a warm-up.
        us.remove(0);
        us.sort_by(f64::total_cmp);
        times[k] = us[us.len() / 2];
    }
    Ok((bad, Some(times)))
}

fn main() {
    std::process::exit(run_main(clap::Parser::parse()));
}

/// Runs the mesh and prints its table; the exit status (0: every check
/// passed).
pub fn run_main(args: Args) -> i32 {
    let on_gpu = !args.emulator && symm::cuda_available();
    if !args.emulator && !on_gpu {
        eprintln!("no GPU: running on the emulator at toy sizes (--emulator)");
    }
    let world = args
        .world
        .unwrap_or_else(|| if on_gpu { symm::cuda_device_count() } else { 4 });
    let ranks = match on_gpu {
        true => Ranks::gpus(world),
        false => Some(Ranks::Emulator(world)),
    };
    let Some(ranks) = ranks else {
        eprintln!("mesh: no GPUs to place {world} ranks on");
        return 2;
    };
    let grad_bytes = match on_gpu {
        true => args.grad_mib << 20,
        false => 64 << 10,
    };
    // (The emulator interprets every multiply-add: a token of busy work.)
    let work = if on_gpu {
        args.work
    } else {
        Ord::min(args.work, 4)
    };
    let (buckets, nodes) = (args.buckets.max(1), args.nodes);
    let placement = ranks.describe();
    let got = run(ranks, CommOptions::default().with_nodes(nodes), |c| {
        if !c.topology().spans_domains() {
            return Err(other(c, "the ranks are one domain: pass --nodes 2 or more"));
        }
        step(c, grad_bytes / 4, buckets, work)
    });
    let got = match got {
        Ok(g) => g,
        Err(e) => {
            eprintln!("mesh: {e}");
            return 1;
        }
    };
    let l = world / nodes.max(1);
    println!(
        "\n### mesh: {world} ranks as {nodes} simulated nodes × {l} ({placement}; TP {l} in \
         each domain, DP over all {world})\n"
    );
    let failed: Vec<&String> = got.iter().flat_map(|r| &r.0).collect();
    println!(
        "TP forward (fused all-reduce + RMSNorm, {ROWS} × {HIDDEN} f32) and DP backward \
         ({} MiB of f32 gradients per rank in {buckets} buckets, summed across every rank): {}",
        grad_bytes as f64 / f64::from(1 << 20),
        if failed.is_empty() {
            "every rank equals the world-1 reference, and every other rank bit for bit".to_string()
        } else {
            format!("**{} checks FAILED**", failed.len())
        }
    );
    for f in &failed {
        eprintln!("mesh: {f}");
    }
    if let Some([compute, reduce, both]) = got[0].1 {
        // The share of the shorter of the two that the overlap hid (within
        // the all-reduces' own noise, which may exceed it: clamped).
        let hidden = ((compute + reduce - both) / reduce.min(compute) * 100.0).clamp(0.0, 100.0);
        println!(
            "\nµs for the backward pass, rank 0 (CUDA events on the user's stream, median of 5)\n"
        );
        println!(
            "| compute alone | all-reduces alone | overlapped | all-reduce GB/s (alone) | hidden |"
        );
        println!("|---|---|---|---|---|");
        println!(
            "| {compute:.0} | {reduce:.0} | {both:.0} | {:.1} | {hidden:.0}% |",
            grad_bytes as f64 / reduce / 1e3
        );
    }
    i32::from(!failed.is_empty())
}
