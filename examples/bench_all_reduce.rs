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
//! spread over 32 calls. Three floors come first, timed the same
//! way: an empty kernel, one with a single remote store, and a 16-byte LL
//! all-reduce (one all-to-all signal), which bound what any small
//! all-reduce can take.
//! `scripts/bench.sh` runs this and the torch baseline and prints one table.

use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rand::Rng;
use symm::cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use symm::cudarc::nccl::{result as nccl, sys as nccl_sys};
use symm::dsl::{
    block_idx_x, grid_dependency_wait, launch_dependents, thread_idx_x, Scope, StoreOrder, SymmBuf,
};
use symm::kernels::all_reduce::{
    all_reduce, all_reduce_with, AllReduceElem, Path, LL_BLOCKS, THREADS,
};
use symm::signal::Channel;
use symm::{
    bf16, run, symm_kernel, Comm, CommOptions, Error, LaunchConfig, Ranks, SymmetricMemory,
};

const CALLS: usize = 32;
const REPLAYS: usize = 9;
const T: Duration = Duration::from_secs(60);
/// `--lead-in`: untimed calls in each graph before the timed ones.
static LEAD_IN: OnceLock<usize> = OnceLock::new();

/// 1 KiB to 64 MiB in powers of 4, up to `max` bytes.
fn sizes(max: usize) -> Vec<usize> {
    (0..9)
        .map(|k| 1024usize << (2 * k))
        .filter(|&b| b <= max)
        .collect()
}

fn drv<'a>(
    c: &'a Comm,
    op: &'static str,
) -> impl Fn(symm::cudarc::driver::DriverError) -> Error + 'a {
    move |source| Error::Driver {
        rank: c.rank(),
        device: c.device(),
        op,
        source,
    }
}

fn other(c: &Comm, what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument {
        rank: c.rank(),
        message: what.to_string(),
    }
}

/// A rank's signal channels (requested once: a group has few) and the
/// buffer whose pads align the ranks before each replay.
struct Signals {
    sync: Arc<SymmetricMemory>,
    /// The host barrier before each replay.
    barrier: Channel,
    /// The tutorial kernels' entry and exit barriers.
    entry: u32,
    exit: u32,
}

impl Signals {
    fn new(c: &Comm) -> symm::Result<Signals> {
        let [a, b, e] = [(); 3].map(|_| Channel::request(c));
        Ok(Signals {
            sync: c.alloc::<u8>(1)?.rendezvous()?,
            barrier: a?,
            entry: b?.index(),
            exit: e?.index(),
        })
    }
}

/// Captures `body` (CALLS back-to-back calls) in a graph and returns the
/// median µs per call over REPLAYS replays.
fn time_graph(
    c: &Comm,
    sync: &Signals,
    body: &mut dyn FnMut() -> symm::Result<()>,
) -> symm::Result<f64> {
    let stream = c
        .cuda_stream()
        .ok_or_else(|| other(c, "benchmarks need GPU ranks"))?;
    body()?; // warm-up outside the graph (module loads, NCCL setup)
    c.synchronize()?;
    let ctx = stream.context().clone();
    let (start, end) = (
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv(c, "event"))?,
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv(c, "event"))?,
    );
    // An event recorded during capture becomes a timing node of the graph
    // only when recorded as external.
    let record_in_graph = |e: &symm::cudarc::driver::CudaEvent| {
        // SAFETY: a live event and stream of this rank's context; the stream
        // is capturing, which is what CU_EVENT_RECORD_EXTERNAL is for.
        unsafe {
            symm::cudarc::driver::sys::cuEventRecordWithFlags(
                e.cu_event(),
                stream.cu_stream(),
                symm::cudarc::driver::sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32,
            )
        }
        .result()
        .map_err(drv(c, "cuEventRecordWithFlags"))
    };
    let lead_in = *LEAD_IN.get().unwrap_or(&0);
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(drv(c, "begin_capture"))?;
    for _ in 0..lead_in {
        body()?;
    }
    if lead_in > 0 {
        record_in_graph(&start)?;
    }
    for _ in 0..CALLS {
        body()?;
    }
    if lead_in > 0 {
        record_in_graph(&end)?;
    }
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .map_err(drv(c, "end_capture"))?
        .ok_or_else(|| other(c, "empty graph"))?;
    let mut us = Vec::new();
    for rep in 0..REPLAYS + 2 {
        sync.sync.barrier(&sync.barrier, T)?;
        c.synchronize()?;
        if lead_in == 0 {
            start.record(&stream).map_err(drv(c, "record"))?;
        }
        graph.launch().map_err(drv(c, "graph launch"))?;
        if lead_in == 0 {
            end.record(&stream).map_err(drv(c, "record"))?;
        }
        c.synchronize()?;
        if rep >= 2 {
            us.push(
                f64::from(start.elapsed_ms(&end).map_err(drv(c, "elapsed"))?) * 1e3 / CALLS as f64,
            );
        }
    }
    us.sort_by(f64::total_cmp);
    Ok(us[us.len() / 2])
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
    let empty_us = time_graph(c, sync, &mut || empty_call::launch(c, cfg))?;
    let target = c.alloc::<u32>(1)?.rendezvous()?;
    let store_us = time_graph(c, sync, &mut || one_remote_store::launch(c, cfg, &target))?;
    let n = 4;
    let buf = c.alloc::<f32>(n)?;
    buf.copy_from_host(&[1.0, 2.0, 3.0, 4.0])?;
    let smem = buf.rendezvous()?;
    let mut out = c.device_buffer::<f32>(n)?;
    let signal_us = time_graph(c, sync, &mut || {
        all_reduce_with(Path::Ll, c, &smem, &mut out, n)
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

struct Nccl {
    comm: nccl_sys::ncclComm_t,
}

impl Nccl {
    fn new(c: &Comm) -> symm::Result<Nccl> {
        let key = "bench/nccl-id";
        if c.rank() == 0 {
            let id =
                nccl::get_uniqueid().map_err(|e| other(c, format!("ncclGetUniqueId: {e:?}")))?;
            let bytes: Vec<u8> = id.internal.iter().map(|&b| b as u8).collect();
            c.store()
                .set(key, &bytes)
                .map_err(|source| Error::Store { rank: 0, source })?;
        }
        let bytes = c.store().get(key, T).map_err(|source| Error::Store {
            rank: c.rank(),
            source,
        })?;
        let mut id = nccl_sys::ncclUniqueId { internal: [0; 128] };
        for (d, s) in id.internal.iter_mut().zip(bytes) {
            *d = s as _;
        }
        let mut comm = std::ptr::null_mut();
        c.cuda_stream()
            .ok_or_else(|| other(c, "GPU"))?
            .context()
            .bind_to_thread()
            .map_err(drv(c, "bind"))?;
        // SAFETY: `comm` is a valid out-pointer; every rank calls this with
        // the same id, concurrently, from its own thread.
        unsafe { nccl::comm_init_rank(&mut comm, c.world_size() as i32, id, c.rank() as i32) }
            .map_err(|e| other(c, format!("ncclCommInitRank: {e:?}")))?;
        Ok(Nccl { comm })
    }

    fn all_reduce(
        &self,
        c: &Comm,
        src: u64,
        dst: u64,
        n: usize,
        dtype: nccl_sys::ncclDataType_t,
    ) -> symm::Result<()> {
        let stream = c.cuda_stream().ok_or_else(|| other(c, "GPU"))?;
        // SAFETY: src and dst are device buffers of n elements on this rank's
        // device, alive until the benchmark synchronises.
        unsafe {
            nccl::all_reduce(
                src as _,
                dst as _,
                n,
                dtype,
                nccl_sys::ncclRedOp_t::ncclSum,
                self.comm,
                stream.cu_stream() as _,
            )
        }
        .map(|_| ())
        .map_err(|e| other(c, format!("ncclAllReduce: {e:?}")))
    }
}

/// NCCL buffers from ncclMemAlloc, registered as symmetric windows.
struct Window {
    ptr: *mut std::ffi::c_void,
    win: nccl_sys::ncclWindow_t,
}

impl Window {
    fn new(c: &Comm, n: &Nccl, bytes: usize) -> symm::Result<Window> {
        let mut ptr = std::ptr::null_mut();
        let mut win = std::ptr::null_mut();
        // SAFETY: valid out-pointers; the registration is collective and every
        // rank registers the same size in the same order.
        unsafe {
            nccl_sys::ncclMemAlloc(&mut ptr, bytes)
                .result()
                .map_err(|e| other(c, format!("ncclMemAlloc: {e:?}")))?;
            nccl_sys::ncclCommWindowRegister(n.comm, ptr, bytes, &mut win, 1)
                .result()
                .map_err(|e| other(c, format!("ncclCommWindowRegister: {e:?}")))?;
        }
        Ok(Window { ptr, win })
    }

    fn free(self, n: &Nccl) {
        // SAFETY: registered and allocated above; no work uses them any more.
        unsafe {
            let _ = nccl_sys::ncclCommWindowDeregister(n.comm, self.win);
            let _ = nccl_sys::ncclMemFree(self.ptr);
        }
    }
}

fn bench_dtype<T: Tutorial>(
    c: &Comm,
    nc: &Nccl,
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
        let symm_us = time_graph(c, sync, &mut || all_reduce(c, &smem, &mut out, n))?;
        // Each kernel on its own, where its staging fits (else no row).
        let mut paths = Vec::new();
        for p in Path::ALL {
            if let Ok(us) = time_graph(c, sync, &mut || all_reduce_with(p, c, &smem, &mut out, n)) {
                paths.push((p, us));
            }
        }
        // The book's tutorial steps (one vector per thread, as the built-in
        // barrier kernels), on the same buffers.
        let cfg = symm::kernels::all_reduce::config::<T>(n);
        let naive_us = time_graph(c, sync, &mut || {
            symm::kernels::tutorial::naive_all_reduce::launch::<T>(
                c, cfg, &smem, &mut out, n as u32, sync.entry, sync.exit,
            )
        })?;
        let vec_us = time_graph(c, sync, &mut || {
            T::vectorized(c, cfg, &smem, &mut out, n as u32, (sync.entry, sync.exit))
        })?;
        // NCCL, plain buffers
        let src = c.device_buffer_from(&data)?;
        let dst = c.device_buffer::<T>(n)?;
        let nccl_us = time_graph(c, sync, &mut || {
            nc.all_reduce(c, src.device_ptr(), dst.device_ptr(), n, dtype)
        })?;
        // NCCL, symmetric windows
        let win_us = match (Window::new(c, nc, bytes), Window::new(c, nc, bytes)) {
            (Ok(a), Ok(b)) => {
                let r = time_graph(c, sync, &mut || {
                    nc.all_reduce(c, a.ptr as u64, b.ptr as u64, n, dtype)
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
            for (p, us) in &paths {
                let p = match p {
                    Path::Ll => "ll",
                    Path::Push => "push",
                    Path::Lamport => "lamport",
                    Path::Pull => "pull",
                    Path::TwoShot => "two_shot",
                    Path::LamportTwoShot => "lamport_two_shot",
                };
                rows.push(format!("symm_{p},{world},{name},{bytes},{us:.3}"));
            }
            rows.push(format!("nccl,{world},{name},{bytes},{nccl_us:.3}"));
            if let Some(w) = win_us {
                rows.push(format!("nccl_window,{world},{name},{bytes},{w:.3}"));
            }
            eprintln!("world {world} {name} {bytes:>9} B: symm {symm_us:8.2} µs  nccl {nccl_us:8.2} µs  nccl-window {}", win_us.map_or("n/a".into(), |w| format!("{w:.2} µs")));
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
}

fn main() {
    let Args {
        worlds,
        csv,
        max_bytes: max,
        no_pdl,
        lead_in,
    } = clap::Parser::parse();
    let pdl = !no_pdl;
    LEAD_IN.set(lead_in).expect("set once");
    eprintln!(
        "method: CUDA graph of {CALLS} back-to-back calls{}, median of {REPLAYS} replays",
        if lead_in > 0 {
            format!(" after {lead_in} untimed ones in the same graph, timed inside it")
        } else {
            ", timed around the replay".into()
        }
    );
    let gpus = symm::cuda_device_count();
    if gpus == 0 || !worlds.iter().any(|&w| w <= gpus) {
        eprintln!(
            "SKIPPED: the benchmark needs as many GPUs as a world size in {worlds:?}; this \
             machine has {gpus}"
        );
        std::process::exit(2);
    }
    let mut all = vec!["impl,world,dtype,bytes,us".to_string()];
    for w in worlds.into_iter().filter(|&w| w <= gpus) {
        let res = run(
            Ranks::Cuda((0..w).collect()),
            CommOptions::default().with_timeout(T).with_pdl(pdl),
            |c| {
                let nc = Nccl::new(c)?;
                let mut rows = Vec::new();
                let sync = Signals::new(c)?;
                floors(c, &sync, &mut rows)?;
                bench_dtype::<bf16>(
                    c,
                    &nc,
                    &sync,
                    nccl_sys::ncclDataType_t::ncclBfloat16,
                    "bf16",
                    max,
                    &mut rows,
                )?;
                bench_dtype::<f32>(
                    c,
                    &nc,
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
