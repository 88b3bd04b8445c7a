//! The foundation on real GPUs: peer writes, the rendezvous cache, mismatch
//! and missing-rank errors, leaks, CUDA graphs, timeouts, and timings.
//!
//! A custom harness, so that a machine without GPUs reports every test as
//! skipped instead of passed. `SYMM_REQUIRE_GPU=1` turns skips into failure.
//! `SYMM_GPU_WORLDS=2,4` picks the world sizes (default: 2 and 4).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use symm::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use symm::jit::{CacheHit, CompileRequest, JitEngine};
use symm::signal::Channel;
use symm::{run, Comm, CommOptions, Error, KernelArg, LaunchConfig, Ranks, RunError};

/// Ranks a test needs at least (it is skipped, loudly, at smaller worlds).
const TWO: usize = 2;

const T: Duration = Duration::from_secs(10);

#[path = "support/harness.rs"]
mod harness;
use harness::{median, median_rendezvous_us, placement, Harness, Outcome};

fn kernels() -> String {
    format!(
        r#"{}
extern "C" __global__ void t_write_slots(const symm_u64* bufs, symm_u32 rank, symm_u32 world, symm_u32 value) {{
    symm_u32 p = threadIdx.x;
    if (p < world) ((symm_u32*)bufs[p])[rank] = value;
}}
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

fn ensure(cond: bool, msg: impl FnOnce() -> String) -> symm::Result<()> {
    if cond {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            rank: usize::MAX,
            message: format!("CHECK FAILED: {}", msg()),
        })
    }
}

/// Each rank writes `value` into slot `rank` of every rank's buffer.
fn write_slots(
    comm: &Comm,
    smem: &symm::SymmetricMemory,
    src: &str,
    value: u32,
) -> symm::Result<()> {
    let args = [
        KernelArg::U64(smem.buffer_ptrs_dev()),
        KernelArg::U32(comm.rank() as u32),
        KernelArg::U32(comm.world_size() as u32),
        KernelArg::U32(value),
    ];
    // SAFETY: t_write_slots(const u64*, u32, u32, u32): the args match, and
    // the table holds `world` pointers to buffers of at least `world` u32s.
    unsafe {
        comm.raw_kernel("t_write_slots", src)?
            .launch(comm, LaunchConfig::linear(1, 32), &args)
    }
}

/// The group's next `N` signal channels.
fn channels<const N: usize>(comm: &Comm) -> symm::Result<[Channel; N]> {
    let v = (0..N)
        .map(|_| Channel::request(comm))
        .collect::<symm::Result<Vec<_>>>()?;
    Ok(v.try_into().unwrap_or_else(|_| unreachable!("N requested")))
}

fn peer_writes(world: usize) -> Outcome {
    let src = kernels();
    for round in 0..3 {
        let values: Vec<u32> = (0..world).map(|_| rand::rng().random()).collect();
        gpus(world, T, |comm| {
            let buf = comm.alloc::<u32>(world + 5)?;
            buf.copy_from_host(&vec![0xDEAD_BEEF; world + 5])?;
            let smem = buf.rendezvous()?;
            let [ch] = channels(comm)?;
            smem.barrier(&ch, T)?;
            write_slots(comm, &smem, &src, values[comm.rank()])?;
            smem.barrier(&ch, T)?;
            comm.synchronize()?;
            let got = buf.to_host()?;
            ensure(got[..world] == values[..], || {
                format!(
                    "round {round} rank {}: {:x?} != {values:x?}",
                    comm.rank(),
                    &got[..world]
                )
            })?;
            ensure(got[world..].iter().all(|&v| v == 0xDEAD_BEEF), || {
                "wrote past the slots".into()
            })?;
            ensure(
                smem.read_signal_pad(comm.rank())?.iter().all(|&s| s == 0),
                || "own pad not reset".into(),
            )
        })
        .map_err(fail)?;
    }
    Ok("3 rounds of random values, every slot of every rank checked".into())
}

fn cache(world: usize) -> Outcome {
    gpus(world, T, |comm| {
        let a = comm.alloc::<f32>(1 << 20)?;
        let sa = a.rendezvous()?;
        ensure(Arc::ptr_eq(&sa, &a.rendezvous()?), || {
            "second rendezvous is a new object".into()
        })?;
        ensure(
            Arc::ptr_eq(&sa, &a.slice(1000..2000)?.rendezvous()?),
            || "view did not resolve to its allocation".into(),
        )?;
        ensure(
            comm.lookup(a.device_ptr() + 4096)
                .is_some_and(|s| Arc::ptr_eq(&s, &sa)),
            || "lookup by pointer".into(),
        )?;
        ensure(sa.buffer_ptrs()[comm.rank()] == a.device_ptr(), || {
            "own pointer".into()
        })?;
        let ptr = a.device_ptr();
        drop(sa);
        drop(a);
        ensure(
            comm.lookup(ptr).is_none() && comm.cached_rendezvous_count() == 0,
            || "cache entry survived free".into(),
        )
    })
    .map_err(fail)?;
    Ok("ptr_eq on 2nd call and via a view; entry gone after free".into())
}

fn mismatch(world: usize) -> Outcome {
    let t = Instant::now();
    let err = match gpus(world, T, |comm| {
        comm.alloc::<f32>(4096 + comm.rank() % 2)?
            .rendezvous()
            .map(|_| ())
    }) {
        Ok(_) => return Err("mismatched sizes were accepted".into()),
        Err(e) => e,
    };
    let elapsed = t.elapsed();
    let msgs: Vec<String> = err.errors.iter().map(|(_, e)| e.to_string()).collect();
    if msgs.len() != world
        || msgs.iter().any(|m| m != &msgs[0])
        || !msgs[0].contains("buffer sizes differ")
    {
        return Err(format!("errors differ or are wrong: {msgs:#?}"));
    }
    Ok(format!(
        "identical error on all {world} ranks in {:.0} ms: {}",
        elapsed.as_secs_f64() * 1e3,
        msgs[0]
    ))
}

fn missing_rank(world: usize) -> Outcome {
    let timeout = Duration::from_millis(500);
    let t = Instant::now();
    let err = match gpus(world, timeout, |comm| {
        let buf = comm.alloc::<u8>(64)?;
        if comm.rank() != world - 1 {
            buf.rendezvous()?;
        }
        Ok(())
    }) {
        Ok(_) => return Err("rendezvous completed without the last rank".into()),
        Err(e) => e,
    };
    let elapsed = t.elapsed();
    let ok = err.errors.len() == world - 1
        && err.errors.iter().all(|(_, e)| matches!(e, Error::RendezvousTimeout { missing, .. } if missing == &[world - 1]));
    if !ok || elapsed > 2 * timeout + Duration::from_secs(2) {
        return Err(format!("{err} after {elapsed:?}"));
    }
    Ok(format!(
        "named rank {} after {:.0} ms (timeout 500 ms)",
        world - 1,
        elapsed.as_secs_f64() * 1e3
    ))
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
        ensure(diff.abs() <= 0.01 * free0 as f64, || {
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

fn graphs(world: usize) -> Outcome {
    const REPLAYS: u32 = 1000;
    let src = kernels();
    gpus(world, T, |comm| {
        let (r, n) = (comm.rank(), world);
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        let bump = comm.raw_kernel("t_bump", &src)?;
        let check = comm.raw_kernel("t_check", &src)?;
        let buf = comm.alloc::<u32>(world + 2)?;
        buf.copy_from_host(&vec![0; world + 2])?; // counters must start at zero
        let smem = buf.rendezvous()?;
        let [sync, bar, ring] = channels(comm)?;
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
        unsafe { check.launch(comm, LaunchConfig::linear(1, 32), &check_args)? };
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
        ensure(got[..n].iter().all(|&c| c == REPLAYS), || {
            format!("rank {r}: bump counts {:?}", &got[..n])
        })?;
        ensure(got[n] == REPLAYS, || {
            format!("rank {r}: {} checks ran", got[n])
        })?;
        ensure(got[n + 1] == 0, || {
            format!("rank {r}: {} barrier-ordering violations", got[n + 1])
        })?;
        ensure(smem.read_signal_pad(r)?.iter().all(|&s| s == 0), || {
            "own pad not reset after replays".into()
        })
    })
    .map_err(fail)?;
    Ok(format!("graph [peer atomics, barrier, ordering check, put, wait] replayed {REPLAYS}×: counts exact, 0 violations"))
}

fn timeout(world: usize) -> Outcome {
    let timeout = Duration::from_millis(200);
    let src = kernels();
    let values: Vec<u32> = (0..world).map(|_| rand::rng().random()).collect();
    let out = gpus(world, T, |comm| {
        let buf = comm.alloc::<u32>(world)?;
        let smem = buf.rendezvous()?;
        let [sync, quiet] = channels(comm)?;
        let mut report = String::new();
        if comm.rank() == 0 {
            let t = Instant::now();
            smem.wait_signal(1, &quiet, timeout)?;
            let err = comm.synchronize().err();
            let elapsed = t.elapsed();
            match &err {
                Some(
                    e @ Error::SignalTimeout {
                        rank: 0,
                        block: 0,
                        peer: 1,
                        channel: 1,
                        ..
                    },
                ) => {
                    ensure(elapsed < 2 * timeout, || format!("took {elapsed:?}"))?;
                    report = format!("after {:.0} ms: {e}", elapsed.as_secs_f64() * 1e3);
                }
                other => ensure(false, || format!("expected a named timeout, got {other:?}"))?,
            }
        }
        // The context survives: a kernel launched afterwards runs correctly.
        smem.barrier(&sync, T)?;
        write_slots(comm, &smem, &src, values[comm.rank()])?;
        smem.barrier(&sync, T)?;
        comm.synchronize()?;
        ensure(buf.to_host()? == values, || {
            "kernel after the timeout computed wrong values".into()
        })?;
        Ok(report)
    })
    .map_err(fail)?;
    Ok(out[0].clone())
}

fn ring(world: usize) -> Outcome {
    let iters = 50;
    let data: Vec<Vec<Vec<f32>>> = (0..iters)
        .map(|_| {
            (0..world)
                .map(|_| (0..1001).map(|_| rand::rng().random()).collect())
                .collect()
        })
        .collect();
    gpus(world, T, |comm| {
        let (r, n) = (comm.rank(), comm.world_size());
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        let buf = comm.alloc::<f32>(1001)?;
        let smem = buf.rendezvous()?;
        let ctx = comm
            .cuda_stream()
            .expect("a GPU rank has a stream")
            .context()
            .clone();
        let user = ctx.new_stream().map_err(|source| Error::Driver {
            rank: r,
            device: comm.device(),
            op: "cuStreamCreate",
            source,
        })?;
        let on_user = comm.with_cuda_stream(user.clone())?;
        let [sync, data_ch, read_ch] = channels(comm)?;
        for (i, round) in data.iter().enumerate() {
            if i > 0 {
                smem.wait_signal_on(&user, next, &read_ch, T)?; // next has read the previous round
                on_user.synchronize()?;
            }
            smem.peer_buffer::<f32>(next)?.write(0, &round[r])?;
            smem.put_signal(next, &data_ch, T)?;
            smem.wait_signal(prev, &data_ch, T)?;
            comm.synchronize()?;
            ensure(buf.to_host()? == round[prev], || {
                format!("rank {r} round {i}: data from rank {prev} wrong")
            })?;
            smem.put_signal_on(&user, prev, &read_ch, T)?;
        }
        smem.wait_signal(next, &read_ch, T)?;
        smem.barrier_on(&user, &sync, T)?;
        on_user.synchronize()?;
        comm.synchronize()
    })
    .map_err(fail)?;
    Ok(format!(
        "{iters} rounds of random data passed around the ring, acked on a user stream"
    ))
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
        let [sync, go] = channels(comm)?;
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
                ensure(took < Duration::from_secs(2), || {
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
    let tests: [(&str, WorldTest, usize); 10] = [
        ("peer_writes", peer_writes, 1),
        ("rendezvous_cache", cache, 1),
        ("mismatch_same_error", mismatch, TWO),
        ("missing_rank_timeout", missing_rank, TWO),
        ("leaks_1000_cycles", leaks, 1),
        ("graph_replay_1000", graphs, 1),
        ("signal_timeout_recovers", timeout, TWO),
        ("frees_while_a_peer_waits", frees_while_a_peer_waits, TWO),
        ("put_wait_ring", ring, 1),
        ("rendezvous_time", rendezvous_time, 1),
    ];
    let mut h = Harness::new("gpu");
    if h.gpus == 0 {
        h.skip(
            1 + tests.len() * h.worlds.len(),
            "no CUDA device; set SYMM_REQUIRE_GPU=1 to fail instead",
        );
        // The kernels still get compiled, so CI catches a broken test kernel.
        if symm::jit::nvrtc_available() {
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
