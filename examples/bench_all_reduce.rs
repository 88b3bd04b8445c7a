//! All-reduce benchmark: symm's all-reduce (what it picks, and each of its
//! kernels forced, and the book's tutorial steps) against NCCL (plain
//! buffers, and symmetric windows when the loaded NCCL has them), in one
//! process, on the same GPUs. Each number is a CUDA graph of 32
//! back-to-back calls, replayed 9 times after warm-up (ranks aligned by a
//! barrier before each replay, timed with CUDA events); the median replay
//! divided by 32 is µs per call.
//!
//! ```text
//! cargo run --release --example bench_all_reduce -- --worlds 2,4 --csv out.csv
//! ```
//! `--max-bytes B` stops at B bytes; `--no-pdl` turns off programmatic
//! dependent launch for comparison. `--lead-in N` puts N untimed calls in
//! the graph before the 32 timed ones and times those 32 with events
//! recorded inside the graph: the first calls absorb the ranks' skew in
//! starting the replay (each rank's host launches its own graph), so the
//! timed calls run in step on every rank; without it (the default, as in
//! every table so far) the events around the replay include that skew,
//! spread over 32 calls. `--paths pull,two_shot` times only those forced
//! kernels (the names of the table's `symm_*` rows), for A/B runs of a
//! kernel change that need many repeats. Otherwise three floors come first, timed the same
//! way: an empty kernel, one with a single remote store, and a 16-byte LL
//! all-reduce (one all-to-all signal), which bound what any small
//! all-reduce can take.
//! `scripts/bench.sh` runs this and the torch baseline and prints one table.

use std::io::Write;

use rand::Rng;
use symm::cudarc::nccl::sys as nccl_sys;
use symm::dsl::{
    block_idx_x, grid_dependency_wait, launch_dependents, thread_idx_x, Scope, StoreOrder, SymmBuf,
};
use symm::kernels::all_reduce::{
    all_reduce, all_reduce_with, AllReduceElem, AllReducePath, LL_BLOCKS, THREADS,
};
use symm::signal::Channel;
use symm::{bf16, run, symm_kernel, Comm, CommOptions, LaunchConfig, Ranks};

#[path = "support/bench.rs"]
#[allow(dead_code)] // what the other benchmarks use
mod bench;
use bench::{sizes, time_graph, Barrier, Nccl, Window, LEAD_IN, T};

/// A rank's signal channels (requested once: a group has few): the
/// barrier that aligns the ranks before each replay, and the tutorial
/// kernels' entry and exit barriers.
struct Signals {
    sync: Barrier,
    entry: u32,
    exit: u32,
}

impl Signals {
    fn new(c: &Comm) -> symm::Result<Signals> {
        // The same channels in the same order as ever: the barrier's first.
        let sync = Barrier::new(c)?;
        let [b, e] = [(); 2].map(|_| Channel::request(c));
        Ok(Signals {
            sync,
            entry: b?.index(),
            exit: e?.index(),
        })
    }
}

/// The fixed cost of a kernel in a graph of back-to-back calls: the
/// programmatic-launch prologue that every all-reduce kernel starts with,
/// and nothing else.
#[symm_kernel]
fn empty_call() {
    grid_dependency_wait();
    launch_dependents();
}

/// [`empty_call`] plus one 4-byte store into the next rank's memory: a
/// kernel is complete only when its writes have landed, so this is the
/// least a kernel that pushes to a peer can take.
#[symm_kernel]
fn one_remote_store(buf: SymmBuf<u32>) {
    grid_dependency_wait();
    launch_dependents();
    if block_idx_x() == 0 && thread_idx_x() == 0 {
        let next = (buf.rank() + 1) % buf.world_size();
        buf.peer(next)
            .store(0u32, 1u32, StoreOrder::Relaxed, Scope::System);
    }
}

/// Floors that bound the small sizes: an empty kernel and one remote store
/// per call (both on the large LL grid), and an LL all-reduce of 16 bytes
/// (one packet pair: one all-to-all signal).
fn floors(c: &Comm, sync: &Signals, rows: &mut Vec<String>) -> symm::Result<()> {
    let world = c.world_size();
    let cfg = LaunchConfig::linear(LL_BLOCKS, THREADS);
    let cfg = if c.options().pdl { cfg.with_pdl() } else { cfg };
    let empty_us = time_graph(c, &sync.sync, &mut || empty_call::launch(c, cfg))?;
    let target = c.alloc::<u32>(1)?.rendezvous()?;
    let store_us = time_graph(c, &sync.sync, &mut || {
        one_remote_store::launch(c, cfg, &target)
    })?;
    let n = 4;
    let buf = c.alloc::<f32>(n)?;
    buf.copy_from_host(&[1.0, 2.0, 3.0, 4.0])?;
    let smem = buf.rendezvous()?;
    let mut out = c.device_buffer::<f32>(n)?;
    let signal_us = time_graph(c, &sync.sync, &mut || {
        all_reduce_with(AllReducePath::Ll, c, &smem, &mut out, n)
    })?;
    if c.rank() == 0 {
        rows.push(format!("floor_empty_kernel,{world},-,0,{empty_us:.3}"));
        rows.push(format!("floor_remote_store,{world},-,4,{store_us:.3}"));
        rows.push(format!("floor_ll_16_bytes,{world},f32,16,{signal_us:.3}"));
    }
    Ok(())
}

/// The book's vectorized tutorial kernel at each element type's vector
/// width (a literal generic argument).
trait Tutorial: AllReduceElem {
    fn vectorized(
        c: &Comm,
        cfg: symm::LaunchConfig,
        s: &symm::SymmetricMemory,
        out: &mut symm::DeviceBuffer<Self>,
        n: u32,
        barriers: (u32, u32),
    ) -> symm::Result<()>;
}

macro_rules! tutorial {
    ($($t:ty => $v:literal),*) => {$(
        impl Tutorial for $t {
            fn vectorized(
                c: &Comm,
                cfg: symm::LaunchConfig,
                s: &symm::SymmetricMemory,
                out: &mut symm::DeviceBuffer<Self>,
                n: u32,
                (entry, exit): (u32, u32),
            ) -> symm::Result<()> {
                symm::kernels::tutorial::vectorized_all_reduce::launch::<$t, $v>(
                    c, cfg, s, out, n, entry, exit,
                )
            }
        }
    )*};
}
tutorial!(f32 => 4, bf16 => 8);

const SUM: nccl_sys::ncclRedOp_t = nccl_sys::ncclRedOp_t::ncclSum;

#[allow(clippy::too_many_arguments)]
fn bench_dtype<T: Tutorial>(
    c: &Comm,
    nc: Option<&Nccl>,
    only: Option<&[AllReducePath]>,
    sync: &Signals,
    dtype: nccl_sys::ncclDataType_t,
    name: &str,
    max: usize,
    rows: &mut Vec<String>,
) -> symm::Result<()> {
    let world = c.world_size();
    for bytes in sizes(max) {
        let n = bytes / std::mem::size_of::<T>();
        let data: Vec<T> = (0..n)
            .map(|_| T::from_f32(rand::rng().random_range(-1.0..1.0)))
            .collect();
        // symm
        let buf = c.alloc::<T>(n)?;
        buf.copy_from_host(&data)?;
        let smem = buf.rendezvous()?;
        let mut out = c.device_buffer::<T>(n)?;
        if let Some(only) = only {
            for &p in only {
                // A path whose staging does not fit gives no row; any other
                // failure ends the run (a later row would be refused).
                let us = match time_graph(c, &sync.sync, &mut || {
                    all_reduce_with(p, c, &smem, &mut out, n)
                }) {
                    Ok(us) => us,
                    Err(e) if e.kind() == symm::ErrorKind::Capacity => continue,
                    Err(e) => return Err(e),
                };
                if c.rank() == 0 {
                    let p = row_name(p);
                    rows.push(format!("symm_{p},{world},{name},{bytes},{us:.3}"));
                }
            }
            continue;
        }
        let symm_us = time_graph(c, &sync.sync, &mut || all_reduce(c, &smem, &mut out, n))?;
        // Each kernel on its own, where its staging fits (else no row).
        let mut paths = Vec::new();
        for p in AllReducePath::ALL {
            if let Ok(us) = time_graph(c, &sync.sync, &mut || {
                all_reduce_with(p, c, &smem, &mut out, n)
            }) {
                paths.push((p, us));
            }
        }
        // The book's tutorial steps (one vector per thread, as the built-in
        // barrier kernels), on the same buffers.
        let cfg = symm::kernels::all_reduce::config::<T>(n);
        let naive_us = time_graph(c, &sync.sync, &mut || {
            symm::kernels::tutorial::naive_all_reduce::launch::<T>(
                c, cfg, &smem, &mut out, n as u32, sync.entry, sync.exit,
            )
        })?;
        let vec_us = time_graph(c, &sync.sync, &mut || {
            T::vectorized(c, cfg, &smem, &mut out, n as u32, (sync.entry, sync.exit))
        })?;
        // NCCL, plain buffers (not where ranks share a GPU, which NCCL
        // refuses)
        let src = c.device_buffer_from(&data)?;
        let dst = c.device_buffer::<T>(n)?;
        let nccl_us = match nc {
            Some(nc) => Some(time_graph(c, &sync.sync, &mut || {
                nc.all_reduce(c, (src.device_ptr(), dst.device_ptr()), n, dtype, SUM)
            })?),
            None => None,
        };
        // NCCL, symmetric windows
        let windows = nc.map(|nc| (nc, Window::new(c, nc, bytes), Window::new(c, nc, bytes)));
        let win_us = match windows {
            Some((nc, Ok(a), Ok(b))) => {
                let r = time_graph(c, &sync.sync, &mut || {
                    nc.all_reduce(c, (a.ptr as u64, b.ptr as u64), n, dtype, SUM)
                })
                .ok();
                a.free(nc);
                b.free(nc);
                r
            }
            _ => None,
        };
        if c.rank() == 0 {
            rows.push(format!("symm,{world},{name},{bytes},{symm_us:.3}"));
            rows.push(format!(
                "tutorial_naive,{world},{name},{bytes},{naive_us:.3}"
            ));
            rows.push(format!(
                "tutorial_vectorized,{world},{name},{bytes},{vec_us:.3}"
            ));
            for &(p, us) in &paths {
                let p = row_name(p);
                rows.push(format!("symm_{p},{world},{name},{bytes},{us:.3}"));
            }
            if let Some(u) = nccl_us {
                rows.push(format!("nccl,{world},{name},{bytes},{u:.3}"));
            }
            if let Some(w) = win_us {
                rows.push(format!("nccl_window,{world},{name},{bytes},{w:.3}"));
            }
            let us = |u: Option<f64>| u.map_or("n/a".into(), |u| format!("{u:.2} µs"));
            eprintln!(
                "world {world} {name} {bytes:>9} B: symm {symm_us:8.2} µs  nccl {}  nccl-window {}",
                us(nccl_us),
                us(win_us)
            );
        }
    }
    Ok(())
}

/// The benchmark's command line.
#[derive(clap::Parser)]
struct Args {
    /// World sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4")]
    worlds: Vec<usize>,
    /// Where the rows go.
    #[arg(long, default_value = "bench_symm.csv")]
    csv: String,
    /// The largest message, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    max_bytes: usize,
    /// Without programmatic dependent launch, for comparison.
    #[arg(long)]
    no_pdl: bool,
    /// Untimed calls in each graph before the timed ones (see the top of
    /// this file).
    #[arg(long, default_value_t = 0)]
    lead_in: usize,
    /// Every rank on GPU 0, without NCCL (which refuses ranks that share a
    /// GPU): the cost of symm's own kernel code where it talks to a peer,
    /// for A/B comparisons on one GPU. Not a speed: ranks that share a GPU
    /// share its SMs and talk through its memory, not NVLink.
    #[arg(long)]
    share: bool,
    /// Only these forced kernels (`ll`, `push`, `lamport`, `pull`,
    /// `two_shot`, `lamport_two_shot`), comma-separated: no floors, no
    /// default dispatch, no tutorial steps and no NCCL.
    #[arg(long, value_delimiter = ',', value_parser = parse_path)]
    paths: Option<Vec<AllReducePath>>,
}

/// A path by its row name (`symm_<name>` in the table).
fn row_name(p: AllReducePath) -> &'static str {
    match p {
        AllReducePath::Ll => "ll",
        AllReducePath::Push => "push",
        AllReducePath::Lamport => "lamport",
        AllReducePath::Pull => "pull",
        AllReducePath::TwoShot => "two_shot",
        AllReducePath::LamportTwoShot => "lamport_two_shot",
    }
}

fn parse_path(s: &str) -> Result<AllReducePath, String> {
    AllReducePath::ALL
        .into_iter()
        .find(|&p| row_name(p) == s)
        .ok_or_else(|| {
            let names: Vec<_> = AllReducePath::ALL.into_iter().map(row_name).collect();
            format!("no path `{s}`; the paths are {}", names.join(", "))
        })
}

fn main() {
    let Args {
        worlds,
        csv,
        max_bytes: max,
        no_pdl,
        lead_in,
        share,
        paths,
    } = clap::Parser::parse();
    let pdl = !no_pdl;
    LEAD_IN.set(lead_in).expect("set once");
    eprintln!("{}", bench::method_line());
    if share {
        // SAFETY: first thing in main, before any CUDA call or thread.
        unsafe { symm::prepare_shared_gpus() };
    }
    let gpus = symm::cuda_device_count();
    let fits = |w: usize| w <= gpus || (share && gpus > 0);
    if gpus == 0 || !worlds.iter().any(|&w| fits(w)) {
        eprintln!(
            "SKIPPED: the benchmark needs as many GPUs as a world size in {worlds:?}; this \
             machine has {gpus}"
        );
        std::process::exit(2);
    }
    let mut all = vec!["impl,world,dtype,bytes,us".to_string()];
    for w in worlds.into_iter().filter(|&w| fits(w)) {
        let devices = if share { vec![0; w] } else { (0..w).collect() };
        let res = run(
            Ranks::Cuda(devices),
            CommOptions::default().with_timeout(T).with_pdl(pdl),
            |c| {
                let nc = if share || paths.is_some() {
                    None
                } else {
                    Some(Nccl::new(c)?)
                };
                let mut rows = Vec::new();
                let sync = Signals::new(c)?;
                if paths.is_none() {
                    floors(c, &sync, &mut rows)?;
                }
                let only = paths.as_deref();
                bench_dtype::<bf16>(
                    c,
                    nc.as_ref(),
                    only,
                    &sync,
                    nccl_sys::ncclDataType_t::ncclBfloat16,
                    "bf16",
                    max,
                    &mut rows,
                )?;
                bench_dtype::<f32>(
                    c,
                    nc.as_ref(),
                    only,
                    &sync,
                    nccl_sys::ncclDataType_t::ncclFloat32,
                    "f32",
                    max,
                    &mut rows,
                )?;
                Ok(rows)
            },
        );
        match res {
            Ok(r) => all.extend(r.into_iter().flatten()),
            Err(e) => {
                eprintln!("world {w} failed: {e}");
                std::process::exit(1);
            }
        }
    }
    let mut f = std::fs::File::create(&csv).expect("create the CSV");
    writeln!(f, "{}", all.join("\n")).expect("write the CSV");
    eprintln!("wrote {csv}");
}
