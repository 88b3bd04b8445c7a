//! The foundation on real GPUs, where only a GPU can tell: leaks (device
//! memory over 1000 allocation cycles), CUDA graphs of peer atomics and
//! signals, frees that must not wait for a peer's kernel on a shared GPU,
//! and rendezvous and JIT timings.
//!
//! The foundation's scenarios that hold on any backend (peer writes, the
//! rendezvous cache, mismatch and missing-rank errors, signal timeouts, the
//! put/wait ring, ...) are in `tests/foundation.rs`, which runs them on GPU
//! ranks under `SYMM_KERNEL_TESTS_ON=gpu`, as `scripts/gpu-validate.sh` does.
//!
//! A custom harness, so that a machine without GPUs reports every test as
//! skipped instead of passed. `SYMM_REQUIRE_GPU=1` turns skips into failure.
//! `SYMM_GPU_WORLDS=2,4` picks the world sizes (default: 2 and 4).

use std::time::{Duration, Instant};

use symm::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use symm::jit::{CacheHit, CompileRequest, JitEngine};
use symm::signal::Channel;
use symm::{run, Comm, CommOptions, Error, KernelArg, LaunchConfig, Ranks, RunError};

/// Ranks a test needs at least (it is skipped, loudly, at smaller worlds).
const TWO: usize = 2;

const T: Duration = Duration::from_secs(10);

#[path = "support/checks.rs"]
mod checks;
use checks::check;
#[path = "support/harness.rs"]
mod harness;
use harness::{median, median_rendezvous_us, placement, Harness, Outcome};

fn kernels() -> String {
    format!(
        r#"{}
extern "C" __global__ void t_bump(const symm_u64* bufs, symm_u32 rank, symm_u32 world) {{
    symm_u32 p = threadIdx.x;
    if (p < world) symm_atom_add_relaxed_sys_u32(((symm_u32*)bufs[p]) + rank, 1u);
}}
/* local: [0, world) bump counts from each rank, [world] replays done, [world + 1] violations */
extern "C" __global__ void t_check(symm_u32* local, symm_u32 world) {{
    symm_u32 p = threadIdx.x;
    symm_u32 done = symm_ld_volatile_u32(local + world);
    if (p < world && symm_ld_volatile_u32(local + p) < done + 1u) symm_atom_add_relaxed_sys_u32(local + world + 1, 1u);
    __syncthreads();
    if (p == 0) local[world] = done + 1u;
}}
"#,
        symm::cuda_prelude::PRELUDE
    )
}

/// Runs `f` on `world` GPU ranks, placed as [`harness::placement`] says
/// (sharing GPUs when there are fewer than ranks).
fn gpus<R: Send>(
    world: usize,
    timeout: Duration,
    f: impl Fn(&Comm) -> symm::Result<R> + Sync,
) -> Result<Vec<R>, RunError> {
    let ranks = placement(world).expect("main runs only world sizes it can place");
    run(ranks, CommOptions::default().with_timeout(timeout), f)
}

fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn leaks(world: usize) -> Outcome {
    const CYCLES: usize = 1000;
    let per_rank = gpus(world, T, |comm| {
        let cycle = || -> symm::Result<()> {
            let buf = comm.alloc::<f32>(256 * 1024)?;
            buf.rendezvous()?;
            Ok(())
        };
        for _ in 0..5 {
            cycle()?;
        }
        comm.synchronize()?;
        let (free0, total) = comm.mem_info()?;
        let t = Instant::now();
        for _ in 0..CYCLES {
            cycle()?;
        }
        let secs = t.elapsed().as_secs_f64();
        comm.synchronize()?;
        let (free1, _) = comm.mem_info()?;
        let diff = free0 as f64 - free1 as f64;
        check(comm, diff.abs() <= 0.01 * free0 as f64, || {
            format!("rank {}: free memory moved by {diff} bytes", comm.rank())
        })?;
        Ok((diff / (1 << 20) as f64, total, secs))
    })
    .map_err(fail)?;
    let worst = per_rank.iter().map(|r| r.0.abs()).fold(0.0, f64::max);
    Ok(format!(
        "{CYCLES} alloc/rendezvous/free cycles: worst free-memory drift {worst:.1} MiB of {:.0} GiB; {:.0} µs/cycle",
        per_rank[0].1 as f64 / (1u64 << 30) as f64,
        per_rank[0].2 / CYCLES as f64 * 1e6
    ))
}

/// `N` channels of `comm`'s group, requested in order (the same on every rank).
fn channels<const N: usize>(comm: &Comm) -> symm::Result<[Channel; N]> {
    let mut v = Vec::with_capacity(N);
    for _ in 0..N {
        v.push(Channel::request(comm)?);
    }
    Ok(v.try_into().unwrap_or_else(|_| unreachable!("N channels")))
}

fn graphs(world: usize) -> Outcome {
    const REPLAYS: u32 = 1000;
    let src = kernels();
    gpus(world, T, |comm| {
        let (r, n) = (comm.rank(), world);
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        let bump = comm.raw_kernel("t_bump", &src)?;
        let t_check = comm.raw_kernel("t_check", &src)?;
        let buf = comm.alloc::<u32>(world + 2)?;
        buf.copy_from_host(&vec![0; world + 2])?; // counters must start at zero
        let smem = buf.rendezvous()?;
        let [bar, ring, sync] = channels::<3>(comm)?;
        // Warm up outside the capture so module loading never happens inside it.
        smem.barrier(&bar, T)?;
        smem.put_signal(next, &ring, T)?;
        smem.wait_signal(prev, &ring, T)?;
        smem.barrier(&sync, T)?;
        comm.synchronize()?;
        let stream = comm.cuda_stream().expect("GPU rank");
        let bump_args = [
            KernelArg::U64(smem.buffer_ptrs_dev()),
            KernelArg::U32(r as u32),
            KernelArg::U32(n as u32),
        ];
        let check_args = [KernelArg::U64(buf.device_ptr()), KernelArg::U32(n as u32)];
        let drv = |op: &'static str| {
            move |source| Error::Driver {
                rank: r,
                device: comm.device(),
                op,
                source,
            }
        };
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(drv("begin_capture"))?;
        // SAFETY: t_bump(const u64*, u32, u32) and t_check(u32*, u32) match
        // these args; every buffer holds world + 2 u32s.
        unsafe { bump.launch(comm, LaunchConfig::linear(1, 32), &bump_args)? };
        smem.barrier(&bar, T)?;
        // SAFETY: as above.
        unsafe { t_check.launch(comm, LaunchConfig::linear(1, 32), &check_args)? };
        smem.put_signal(next, &ring, T)?;
        smem.wait_signal(prev, &ring, T)?;
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(drv("end_capture"))?
            .expect("non-empty graph");
        for _ in 0..REPLAYS {
            graph.launch().map_err(drv("cuGraphLaunch"))?;
        }
        comm.synchronize()?;
        smem.barrier(&sync, T)?;
        comm.synchronize()?;
        let got = buf.to_host()?;
        check(comm, got[..n].iter().all(|&c| c == REPLAYS), || {
            format!("rank {r}: bump counts {:?}", &got[..n])
        })?;
        check(comm, got[n] == REPLAYS, || {
            format!("rank {r}: {} checks ran", got[n])
        })?;
        check(comm, got[n + 1] == 0, || {
            format!("rank {r}: {} barrier-ordering violations", got[n + 1])
        })?;
        check(
            comm,
            smem.read_signal_pad(r)?.iter().all(|&s| s == 0),
            || "own pad not reset after replays".into(),
        )
    })
    .map_err(fail)?;
    Ok(format!("graph [peer atomics, barrier, ordering check, put, wait] replayed {REPLAYS}×: counts exact, 0 violations"))
}

/// Rank 1 allocates and frees memory of every kind while rank 0's kernel
/// spins waiting for rank 1's signal, which comes only after the frees.
/// Where the two ranks share a GPU, a free that waited for the whole
/// device (as `cuCtxSynchronize` and `cuMemFree` do) would wait for rank 0's
/// kernel until it timed out.
fn frees_while_a_peer_waits(world: usize) -> Outcome {
    let wait = Duration::from_secs(5);
    let out = gpus(world, T, |comm| {
        let buf = comm.alloc::<u32>(4)?;
        let smem = buf.rendezvous()?;
        let [sync, go] = channels::<2>(comm)?;
        smem.barrier(&sync, T)?;
        comm.synchronize()?;
        let mut report = String::new();
        match comm.rank() {
            0 => {
                smem.wait_signal(1, &go, wait)?;
                let t = Instant::now();
                comm.synchronize()?;
                report = format!(
                    "rank 0's wait ended {:.0} ms after it started waiting on the host",
                    t.elapsed().as_secs_f64() * 1e3
                );
            }
            1 => {
                // Give rank 0's wait time to start spinning.
                std::thread::sleep(Duration::from_millis(200));
                let t = Instant::now();
                for _ in 0..20 {
                    // Never rendezvoused: nothing collective happens.
                    let sym = comm.alloc::<f32>(1 << 20)?;
                    let plain = comm.device_buffer::<f32>(1 << 20)?;
                    drop((sym, plain));
                }
                let side = comm
                    .cuda_stream()
                    .expect("a GPU rank")
                    .context()
                    .new_stream();
                let side = side.map_err(|source| Error::Driver {
                    rank: 1,
                    device: comm.device(),
                    op: "cuStreamCreate",
                    source,
                })?;
                let on_side = comm.with_cuda_stream(side)?;
                drop(on_side.device_buffer::<u8>(4096)?);
                let took = t.elapsed();
                smem.put_signal(0, &go, T)?;
                comm.synchronize()?;
                check(comm, took < Duration::from_secs(2), || {
                    format!("rank 1's allocations and frees took {took:?} (waited for rank 0?)")
                })?;
                report = format!(
                    "20 symmetric and 20 plain 4 MiB allocations freed in {:.1} ms",
                    took.as_secs_f64() * 1e3
                );
            }
            _ => {}
        }
        smem.barrier(&sync, T)?;
        comm.synchronize()?;
        Ok(report)
    })
    .map_err(fail)?;
    Ok(format!("{}; {}", out[1], out[0]))
}

fn rendezvous_time(world: usize) -> Outcome {
    let per_rank = gpus(world, T, median_rendezvous_us).map_err(fail)?;
    let mut m = per_rank.clone();
    Ok(format!(
        "median rendezvous (4 MiB) {:.0} µs (ranks: {:?})",
        median(&mut m),
        per_rank.iter().map(|v| v.round()).collect::<Vec<_>>()
    ))
}

fn jit_times() -> Outcome {
    let arch = run(Ranks::Cuda(vec![0]), CommOptions::default(), |comm| {
        Ok(comm.device())
    })
    .map_err(fail)?;
    let src = symm::kernels::broadcast::cuda_source_for::<f32>();
    let req = |arch| CompileRequest {
        kernel_name: "broadcast",
        source: &src,
        arch,
        options: &[],
    };
    let a = symm::jit::Arch { major: 9, minor: 0 };
    let dir = tempfile::tempdir().map_err(fail)?;
    let time = |e: &JitEngine| -> Result<(f64, CacheHit), String> {
        let t = Instant::now();
        let (_, hit) = e.compile(&req(a)).map_err(fail)?;
        Ok((t.elapsed().as_secs_f64() * 1e3, hit))
    };
    let cold = time(&JitEngine::new(Some(dir.path().into())))?;
    let disk = time(&JitEngine::new(Some(dir.path().into())))?;
    let e = JitEngine::new(None);
    time(&e)?;
    let mem = time(&e)?;
    if cold.1 != CacheHit::Compiled || disk.1 != CacheHit::Disk || mem.1 != CacheHit::Memory {
        return Err(format!(
            "unexpected cache outcomes {cold:?} {disk:?} {mem:?}"
        ));
    }
    Ok(format!(
        "broadcast<f32> on {}: cold NVRTC {:.1} ms, disk hit {:.2} ms, memory hit {:.3} ms",
        arch[0], cold.0, disk.0, mem.0
    ))
}

type WorldTest = fn(usize) -> Outcome;

fn main() {
    let tests: [(&str, WorldTest, usize); 4] = [
        ("leaks_1000_cycles", leaks, 1),
        ("graph_replay_1000", graphs, 1),
        ("frees_while_a_peer_waits", frees_while_a_peer_waits, TWO),
        ("rendezvous_time", rendezvous_time, 1),
    ];
    let mut h = Harness::new("gpu");
    if h.gpus == 0 {
        h.skip(
            1 + tests.len() * h.worlds.len(),
            "no CUDA device; set SYMM_REQUIRE_GPU=1 to fail instead",
        );
        // The kernels still get compiled, so CI catches a broken test kernel.
        if symm::jit::require_nvrtc("the GPU tests' kernels") {
            h.run("test_kernels_compile", 0, &|| {
                let src = kernels();
                let req = CompileRequest {
                    kernel_name: "gpu_test_kernels",
                    source: &src,
                    arch: symm::jit::Arch { major: 9, minor: 0 },
                    options: &[],
                };
                let (c, _) = JitEngine::new(None).compile(&req).map_err(fail)?;
                Ok(format!("CUBIN for sm_90, {} bytes", c.cubin.len()))
            });
        }
        h.finish();
    }
    h.run("jit_compile_times", 1, &jit_times);
    for world in h.worlds.clone() {
        if h.place(world, tests.len()).is_none() {
            continue;
        }
        for (name, f, least) in tests {
            if world < least {
                h.skip(1, &format!("world={world}: {name} needs {least} ranks"));
                continue;
            }
            h.run(name, world, &|| f(world));
        }
    }
    h.finish();
}
