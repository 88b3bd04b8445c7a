//! What a collective running beside compute costs that compute: a
//! compute-bound kernel (dependent multiply-adds, `--waves` waves of
//! blocks over every SM) timed alone, then while an all-gather or all-to-all runs
//! back to back on the rank's own stream, three ways: symm's SM kernel
//! (the pull path), symm's copy engines (`CollectivePath::CopyEngine`:
//! one-block barriers around `cuMemcpyAsync` from each peer), and NCCL.
//! Also each collective alone (the same burst, no compute) and beside
//! compute, µs per call; each burst holds enough calls to last as long as
//! the compute alone. Each way runs twice: its collectives on a stream of
//! the default priority, then on one of the highest (the compute stays on
//! the default), whose blocks the GPU dispatches first as SMs free up. One rank per GPU; every number is rank 0's
//! median of `--reps` rounds (CUDA events), after a host barrier each.
//!
//! With `--moe-tokens N` the calls are an MoE step instead (dispatch and
//! combine of `N` tokens a rank, hidden 7168, 256 experts, top-8, bf16,
//! a random routing, nothing between them) in the pull form (SM
//! kernels) and the copy-engine form (`MoeMode::CopyEngine`); no NCCL
//! row. `--world 1`, asked for, runs at one rank (no link: a smoke run).
//!
//! ```text
//! NCCL_NVLS_ENABLE=0 cargo run --release --example bench_overlap -- --bytes 67108864
//! ```

use std::sync::Arc;

use symm::cudarc::driver::sys::CUevent_flags;
use symm::cudarc::driver::{CudaEvent, CudaStream};
use symm::dsl::*;
use symm::kernels::collectives::{all_gather_with, all_to_all_with, CollectivePath};
use symm::kernels::moe::{Moe, MoeConfig, MoeMode};
use symm::{run, symm_kernel, Comm, CommOptions, LaunchConfig, Ranks, Result};

#[path = "support/bench.rs"]
#[allow(dead_code)] // what the other benchmarks use
mod bench;
#[path = "support/gemm.rs"]
mod gemm;
use bench::{drv, other, Nccl};

#[derive(clap::Parser)]
struct Args {
    /// Ranks (one per GPU; default: every GPU).
    #[arg(long)]
    world: Option<usize>,
    /// The message: the all-gather's output, the all-to-all's input, bytes.
    #[arg(long, default_value_t = 64 << 20)]
    bytes: usize,
    /// The fewest collectives in a burst (more where the compute is longer
    /// than this many).
    #[arg(long, default_value_t = 8)]
    calls: usize,
    /// Rounds per number (the median is kept).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// The compute kernel's length, µs (its multiply-adds are sized to it
    /// on each rank's GPU alone).
    #[arg(long, default_value_t = 2000.0)]
    compute_us: f64,
    /// Waves of blocks in the compute kernel (each wave fills every SM):
    /// many short blocks, as a GEMM's tiles, free SMs often; a few long
    /// ones hold them for the whole kernel.
    #[arg(long, default_value_t = 64)]
    waves: u32,
    /// The compute: `fma` (the kernel above, registers only) or `gemm` (a
    /// square bf16 cuBLAS GEMM of `--gemm` rows: tensor cores and shared
    /// memory, as a model's layers).
    #[arg(long, default_value = "fma")]
    compute: String,
    /// The GEMM's side.
    #[arg(long, default_value_t = 8192)]
    gemm: usize,
    /// Tokens a rank of an MoE step to time instead of the collectives
    /// (0: the collectives).
    #[arg(long, default_value_t = 0)]
    moe_tokens: usize,
}

/// An MoE step's buffers on one rank (`--moe-tokens`).
struct MoeStep {
    moe: Moe<symm::bf16>,
    x: symm::DeviceBuffer<symm::bf16>,
    idx: symm::DeviceBuffer<i32>,
    w: symm::DeviceBuffer<f32>,
    y: symm::DeviceBuffer<symm::bf16>,
    out: symm::DeviceBuffer<symm::bf16>,
    tokens: usize,
}

impl MoeStep {
    /// Plans `mode` for `tokens` tokens a rank (collective) and a random
    /// routing of distinct experts.
    fn new(c: &Comm, tokens: usize, mode: MoeMode) -> Result<MoeStep> {
        use rand::{Rng, SeedableRng};
        let (hidden, experts, top_k) = (7168, 256, 8);
        let cfg = MoeConfig::new(hidden, experts, top_k, tokens).with_mode(mode);
        let moe = Moe::<symm::bf16>::new(c, cfg)?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(5 + c.rank() as u64);
        let mut idx = Vec::with_capacity(tokens * top_k);
        for _ in 0..tokens {
            let mut chosen: Vec<i32> = Vec::new();
            while chosen.len() < top_k {
                let e = rng.random_range(0..experts as i32);
                if !chosen.contains(&e) {
                    chosen.push(e);
                }
            }
            idx.extend(chosen);
        }
        let x = vec![symm::bf16::from_f32(0.5); tokens * hidden];
        Ok(MoeStep {
            x: c.device_buffer_from(&x)?,
            idx: c.device_buffer_from(&idx)?,
            w: c.device_buffer_from(&vec![0.125f32; tokens * top_k])?,
            y: c.device_buffer_from(&vec![
                symm::bf16::from_f32(0.25);
                moe.received_rows() * hidden
            ])?,
            out: c.device_buffer::<symm::bf16>(tokens * hidden)?,
            moe,
            tokens,
        })
    }

    /// One step: dispatch, then combine of the plan's own rows.
    fn run(&mut self, c: &Comm) -> Result<()> {
        self.moe.dispatch(c, &self.x, &self.idx, self.tokens)?;
        self.moe.combine(c, &self.y, &self.w, &mut self.out)
    }
}

/// The compute: `iters` dependent multiply-adds per thread, in registers.
#[symm_kernel]
fn busy(x: &mut [f32], iters: u32) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        let mut a = x[i];
        let mut b = a * 0.5f32;
        for _ in 0..iters {
            a = a * 0.999_9f32 + 0.000_1f32;
            b = b * 0.999_7f32 + a;
        }
        x[i] = a + b;
    }
}

/// The ways a burst runs.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Pull,
    CopyEngine,
    Nccl,
}

impl Way {
    const ALL: [Way; 3] = [Way::Pull, Way::CopyEngine, Way::Nccl];

    fn name(self) -> &'static str {
        match self {
            Way::Pull => "symm, SM kernel (pull)",
            Way::CopyEngine => "symm, copy engines",
            Way::Nccl => "NCCL",
        }
    }
}

struct Rank<'a> {
    c: &'a Comm,
    comp: Comm,
    stream: Arc<CudaStream>,
    comp_stream: Arc<CudaStream>,
    events: [CudaEvent; 4],
    nccl: Nccl,
}

impl Rank<'_> {
    /// µs between two of this rank's events.
    fn us(&self, a: usize, b: usize) -> Result<f64> {
        Ok(f64::from(
            self.events[a]
                .elapsed_ms(&self.events[b])
                .map_err(drv(self.c, "elapsed"))?,
        ) * 1e3)
    }
}

/// One row: the way, the collective, the calls in its burst, µs per call alone and beside
/// compute, the compute's µs alone and beside the collective, and µs
/// until both were done.
type Row = (&'static str, &'static str, usize, f64, f64, f64, f64, f64);

/// The largest of every rank's `mine`, through the store.
fn agree_max(c: &Comm, mine: usize) -> Result<usize> {
    let n = c.extension(|_: &Rounds| true, |_| Ok(Rounds::default()))?;
    let k = n.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let key = |r: usize| format!("bench_overlap/{k}/{r}");
    let err = |e| c.store_error(e);
    c.store()
        .set(&key(c.rank()), mine.to_string().as_bytes())
        .map_err(err)?;
    let mut most = mine;
    for r in 0..c.world_size() {
        let v = c.store().get(&key(r), bench::T).map_err(err)?;
        most = most.max(String::from_utf8_lossy(&v).parse().unwrap_or(mine));
    }
    Ok(most)
}

/// Counts [`agree_max`]'s exchanges.
#[derive(Default)]
struct Rounds(std::sync::atomic::AtomicU64);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The rows of one group; `high`: its collectives on a stream of the
/// highest priority (the compute on one of the default).
fn measure(c: &Comm, args: &Args, high: bool) -> Result<Vec<Row>> {
    let own = c
        .cuda_stream()
        .ok_or_else(|| other(c, "bench_overlap needs GPU ranks"))?
        .clone();
    let ctx = own.context().clone();
    let hp;
    let c = match high {
        true => {
            let (_, greatest) = symm::cudarc::driver::result::stream::get_priority_range()
                .map_err(drv(c, "cuCtxGetStreamPriorityRange"))?;
            let s = ctx
                .new_stream_with_priority(greatest)
                .map_err(drv(c, "cuStreamCreateWithPriority"))?;
            hp = c.with_cuda_stream(s)?;
            &hp
        }
        false => c,
    };
    let stream = c.cuda_stream().expect("a GPU rank").clone();
    let comp_stream = ctx.new_stream().map_err(drv(c, "cuStreamCreate"))?;
    let comp = c.with_cuda_stream(comp_stream.clone())?;
    let event = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT));
    let events = [event(), event(), event(), event()].map(|e| e.expect("cuEventCreate"));
    let r = Rank {
        c,
        comp,
        stream,
        comp_stream,
        events,
        nccl: Nccl::new(c)?,
    };
    use symm::cudarc::driver::sys::CUdevice_attribute as A;
    let sms = ctx
        .attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(drv(c, "attribute"))? as u32;
    // `--waves` waves of full SMs (8 blocks of 256 threads each).
    let blocks = sms * 8 * args.waves;
    let mut x = r
        .comp
        .device_buffer_from(&vec![1.0f32; (blocks * 256) as usize])?;
    let cfg = LaunchConfig::linear(blocks, 256);
    // Size the compute to `--compute-us` alone.
    // The GEMM's operands (any values time the same).
    let g = args.gemm;
    let gemm = match args.compute.as_str() {
        "gemm" => {
            let blas = symm::cudarc::cublas::CudaBlas::new(r.comp_stream.clone())
                .map_err(|e| other(c, format!("cuBLAS: {e:?}")))?;
            let one = vec![symm::bf16::from_f32(0.01); g * g];
            let a = r.comp.device_buffer_from(&one)?;
            let y = r.comp.device_buffer::<symm::bf16>(g * g)?;
            Some((blas, a, y))
        }
        "fma" => None,
        kind => return Err(other(c, format!("--compute {kind}: fma or gemm"))),
    };
    let is_gemm = gemm.is_some();
    let mut launch_compute = |iters: u32| -> Result<()> {
        r.events[2]
            .record(&r.comp_stream)
            .map_err(drv(c, "record"))?;
        match &gemm {
            Some((blas, a, y)) => {
                // SAFETY: `a` and `y` hold g × g bf16 elements of this
                // rank, on the compute stream cuBLAS runs on.
                unsafe {
                    gemm::gemm_bf16_xwt(
                        blas,
                        (a.device_ptr(), a.device_ptr(), y.device_ptr()),
                        (g, g, g),
                    )
                }
                .map_err(|e| other(c, format!("cublasGemmEx: {e:?}")))?;
            }
            None => busy::launch(&r.comp, cfg, &mut x, iters)?,
        }
        r.events[3].record(&r.comp_stream).map_err(drv(c, "record"))
    };
    let compute = |launch: &mut dyn FnMut(u32) -> Result<()>, iters: u32| -> Result<f64> {
        launch(iters)?;
        r.comp.synchronize()?;
        r.us(2, 3)
    };
    compute(&mut launch_compute, 256)?;
    let probe = compute(&mut launch_compute, 4096)?;
    let iters = Ord::max((4096.0 * args.compute_us / probe) as u32, 1);
    let world = c.world_size();
    let mut rows = Vec::new();
    let calls_of: &[(usize, &'static str)] = match args.moe_tokens {
        0 => &[(0, "all_gather"), (1, "all_to_all")],
        _ => &[(2, "MoE step")],
    };
    for &(coll, name) in calls_of {
        let n = args.bytes / 4 / world;
        let buf = c.alloc::<f32>(args.bytes / 4)?;
        buf.copy_from_host(&vec![1.0f32; args.bytes / 4])?;
        let smem = buf.rendezvous()?;
        let src = c.device_buffer_from(&vec![1.0f32; args.bytes / 4])?;
        let mut out = c.device_buffer::<f32>(args.bytes / 4)?;
        let nccl_out = c.device_buffer::<f32>(args.bytes / 4)?;
        for way in Way::ALL {
            let mut step = match (coll, way) {
                (2, Way::Nccl) => continue,
                (2, Way::Pull) => Some(MoeStep::new(c, args.moe_tokens, MoeMode::Pull)?),
                (2, _) => Some(MoeStep::new(c, args.moe_tokens, MoeMode::CopyEngine)?),
                _ => None,
            };
            let mut burst = |calls: usize| -> Result<()> {
                for _ in 0..calls {
                    if let Some(s) = &mut step {
                        s.run(c)?;
                        continue;
                    }
                    match (way, coll) {
                        (Way::Nccl, 0) => {
                            // SAFETY: `src` holds n and `nccl_out` world × n
                            // floats of this rank, alive past the wait.
                            unsafe {
                                symm::cudarc::nccl::result::all_gather(
                                    src.device_ptr() as _,
                                    nccl_out.device_ptr() as _,
                                    n,
                                    symm::cudarc::nccl::sys::ncclDataType_t::ncclFloat32,
                                    r.nccl.comm,
                                    Nccl::stream(c)?,
                                )
                            }
                            .map_err(|e| other(c, format!("ncclAllGather: {e:?}")))?;
                        }
                        (Way::Nccl, _) => {
                            // An all-to-all as NCCL's tests run it: a send
                            // and a receive of n floats per peer, grouped.
                            use symm::cudarc::nccl::result as nr;
                            nr::group_start().map_err(|e| other(c, format!("{e:?}")))?;
                            for p in 0..world {
                                // SAFETY: chunks of n floats inside `src` and
                                // `nccl_out` (world × n each), alive past
                                // the wait.
                                unsafe {
                                    nr::send(
                                        (src.device_ptr() + (p * n * 4) as u64) as _,
                                        n,
                                        symm::cudarc::nccl::sys::ncclDataType_t::ncclFloat32,
                                        p as i32,
                                        r.nccl.comm,
                                        Nccl::stream(c)?,
                                    )
                                    .map_err(|e| other(c, format!("ncclSend: {e:?}")))?;
                                    nr::recv(
                                        (nccl_out.device_ptr() + (p * n * 4) as u64) as _,
                                        n,
                                        symm::cudarc::nccl::sys::ncclDataType_t::ncclFloat32,
                                        p as i32,
                                        r.nccl.comm,
                                        Nccl::stream(c)?,
                                    )
                                    .map_err(|e| other(c, format!("ncclRecv: {e:?}")))?;
                                }
                            }
                            nr::group_end().map_err(|e| other(c, format!("{e:?}")))?;
                        }
                        (w, k) => {
                            let path = match w {
                                Way::Pull => CollectivePath::Pull,
                                _ => CollectivePath::CopyEngine,
                            };
                            match k {
                                0 => all_gather_with(path, c, &smem, &mut out, n)?,
                                _ => all_to_all_with(path, c, &smem, &mut out, n)?,
                            }
                        }
                    }
                }
                Ok(())
            };
            burst(2)?;
            c.synchronize()?;
            // Enough calls to cover the compute: the burst alone, then
            // as many calls as the compute's length holds (at least
            // `--calls`), the same on every rank (the largest count).
            r.events[0].record(&r.stream).map_err(drv(c, "record"))?;
            burst(args.calls)?;
            r.events[1].record(&r.stream).map_err(drv(c, "record"))?;
            c.synchronize()?;
            let per_call = r.us(0, 1)? / args.calls as f64;
            let length = if is_gemm { probe } else { args.compute_us };
            let mine = ((length / per_call).ceil() as usize).max(args.calls);
            let calls = agree_max(c, mine)?;
            let (mut alone, mut beside, mut comp_alone, mut comp_beside, mut both) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..args.reps {
                // The burst alone.
                c.host_barrier()?;
                r.events[0].record(&r.stream).map_err(drv(c, "record"))?;
                burst(calls)?;
                r.events[1].record(&r.stream).map_err(drv(c, "record"))?;
                c.synchronize()?;
                alone.push(r.us(0, 1)? / calls as f64);
                // The compute alone.
                comp_alone.push(compute(&mut launch_compute, iters)?);
                // Both: the burst first, then the compute on its stream.
                c.host_barrier()?;
                r.events[0].record(&r.stream).map_err(drv(c, "record"))?;
                burst(calls)?;
                r.events[1].record(&r.stream).map_err(drv(c, "record"))?;
                launch_compute(iters)?;
                c.synchronize()?;
                r.comp.synchronize()?;
                beside.push(r.us(0, 1)? / calls as f64);
                comp_beside.push(r.us(2, 3)?);
                both.push(r.us(0, 1)?.max(r.us(0, 3)?));
            }
            rows.push((
                way.name(),
                name,
                calls,
                median(alone),
                median(beside),
                median(comp_alone),
                median(comp_beside),
                median(both),
            ));
        }
    }
    Ok(rows)
}

fn main() {
    let args: Args = clap::Parser::parse();
    let world = args.world.unwrap_or_else(symm::cuda_device_count);
    let Some(ranks) = Ranks::gpus(world).filter(|_| world >= 2 || args.world == Some(1)) else {
        eprintln!("SKIPPED: bench_overlap needs 2 or more GPUs (one rank per GPU)");
        return;
    };
    let placement = ranks.describe();
    let mut got = Vec::new();
    for high in [false, true] {
        match run(ranks.clone(), CommOptions::default(), |c| {
            measure(c, &args, high)
        }) {
            Ok(g) => got.push((high, g.into_iter().next().unwrap_or_default())),
            Err(e) => {
                eprintln!("bench_overlap: {e}");
                std::process::exit(1);
            }
        }
    }
    println!(
        "\n### A collective beside compute: {world} ranks ({placement}), {}, bursts of at least {} \
         calls, compute: {}, median of {} rounds, rank 0\n",
        match args.moe_tokens {
            0 => format!("{} MiB", args.bytes >> 20),
            t => format!("MoE steps of {t} tokens a rank (hidden 7168, 256 experts, top-8, bf16)"),
        },
        args.calls,
        match args.compute.as_str() {
            "gemm" => format!("a bf16 GEMM of {0} × {0} × {0} (cuBLAS)", args.gemm),
            _ => format!("multiply-adds in {} waves of blocks", args.waves),
        },
        args.reps
    );
    println!(
        "| way | call | stream | calls | µs per call alone | beside compute | compute µs alone \
         | beside the calls | compute slowdown | both done, µs | one after the other, µs |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (high, rows) in &got {
        let stream = if *high { "high priority" } else { "default" };
        for (way, call, calls, alone, beside, ca, cb, both) in rows {
            println!(
                "| {way} | {call} | {stream} | {calls} | {alone:.1} | {beside:.1} | {ca:.1} | \
                 {cb:.1} | {:+.1}% | {both:.0} | {:.0} |",
                (cb / ca - 1.0) * 100.0,
                alone * *calls as f64 + ca
            );
        }
    }
}
