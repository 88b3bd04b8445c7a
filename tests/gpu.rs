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
//! The user's CUDA memory, too: a program that keeps its tensors in cudarc
//! slices and all-reduces them without a host copy, the checks that refuse
//! cudarc memory of another device or context (or on an emulated rank),
//! cudarc views of symm memory, and the copy engines' peer copies in a
//! CUDA graph.
//!
//! The GPU tier (`support/harness.rs`): each test, `NAME::world_W`, is
//! ignored unless run with `--ignored`, and then fails on a machine without
//! a CUDA GPU. `SYMM_GPU_WORLDS=2,4` limits the world sizes.

use std::time::{Duration, Instant};

use std::sync::Arc;

use symm::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use symm::cudarc::driver::{CudaContext, CudaSlice, CudaStream, DriverError};
use symm::jit::{CacheHit, CompileRequest, JitEngine};
use symm::kernels::all_reduce::{all_reduce, all_reduce_in_place};
use symm::signal::Channel;
use symm::{run, Comm, CommOptions, Error, KernelArg, LaunchConfig, Ranks, RunError};

const T: Duration = Duration::from_secs(10);

#[path = "support/checks.rs"]
mod checks;
use checks::check;
#[path = "support/harness.rs"]
mod harness;
use harness::{median, median_rendezvous_us, placement, Outcome};
#[path = "support/targets.rs"]
mod targets;
#[macro_use]
#[path = "support/testgen.rs"]
mod testgen;
#[path = "support/data.rs"]
mod data;

mod user {
    use symm::dsl::*;
    use symm::symm_kernel;

    /// `y[i] = a x[i]`: a kernel over plain slices, given cudarc memory.
    #[symm_kernel]
    pub fn scale(x: &[f32], y: &mut [f32], a: f32, n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            y[i] = a * x[i];
        }
    }
}

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
/// (sharing GPUs when there are fewer than ranks; `harness::gpu_test` runs
/// only world sizes it can place).
fn gpus<R: Send>(
    world: usize,
    timeout: Duration,
    f: impl Fn(&Comm) -> symm::Result<R> + Sync,
) -> Result<Vec<R>, RunError> {
    let ranks = placement(world).expect("gpu_test runs only world sizes it can place");
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
            KernelArg::U64(smem.buffer_ptrs_dev()?),
            KernelArg::U32(r as u32),
            KernelArg::U32(n as u32),
        ];
        let check_args = [KernelArg::U64(buf.device_ptr()), KernelArg::U32(n as u32)];
        let drv = |op: &'static str| move |source| comm.driver_error(op, source);
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
                let side = side.map_err(|source| comm.driver_error("cuStreamCreate", source))?;
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

/// A driver error of `comm`'s rank from cudarc's call `op`.
fn drv<'a>(comm: &'a Comm, op: &'static str) -> impl Fn(DriverError) -> Error + 'a {
    move |source| comm.driver_error(op, source)
}

/// A stream of the user's own beside the rank's, in the device's primary
/// context (what `CudaContext::new(ordinal)` gives), made from the context
/// symm holds so that making it waits for no other rank's kernel.
fn user_stream(comm: &Comm) -> symm::Result<Arc<CudaStream>> {
    let rank_stream = comm.cuda_stream().expect("a GPU rank");
    rank_stream
        .context()
        .new_stream()
        .map_err(drv(comm, "cuStreamCreate"))
}

/// `Ok` when `e`'s message contains `what`.
fn says(comm: &Comm, e: Error, what: &str) -> symm::Result<()> {
    let m = e.to_string();
    check(comm, m.contains(what), || format!("{m:?} lacks {what:?}"))
}

/// The acceptance program of "the user's CUDA memory": every rank keeps
/// its tensors in cudarc `CudaSlice`s on a stream of its own, and each
/// iteration copies one into symmetric memory (device to device, on the
/// rank's stream), all-reduces it into a `CudaSlice` output (or in place,
/// then copies the sum out into one), with no host copy or host
/// synchronisation in the loop: cudarc's event tracking orders the user's
/// stream and the rank's. Fresh random data of full mantissas, at a size of
/// each small and large kernel family; every output matches the float64
/// sum and is bitwise the same on every rank.
fn cudarc_tensors_all_reduce(world: usize) -> Outcome {
    const ITERS: usize = 6;
    let mut report = Vec::new();
    for n in [4099usize, (1 << 18) + 3] {
        let inputs: Vec<Vec<Vec<f32>>> = (0..world)
            .map(|_| (0..ITERS).map(|_| data::mixed_f32s(n)).collect())
            .collect();
        let per_rank = gpus(world, T, |comm| {
            let r = comm.rank();
            let user = user_stream(comm)?;
            let up = drv(comm, "cudarc clone_htod");
            let ins = inputs[r]
                .iter()
                .map(|v| user.clone_htod(v))
                .collect::<Result<Vec<CudaSlice<f32>>, _>>()
                .map_err(&up)?;
            let poison = vec![f32::from_bits(0x7FBA_DBAD); n];
            let mut outs = (0..ITERS)
                .map(|_| user.clone_htod(&poison))
                .collect::<Result<Vec<CudaSlice<f32>>, _>>()
                .map_err(&up)?;
            let mut buf = comm.alloc::<f32>(n)?;
            let smem = buf.rendezvous()?;
            for i in 0..ITERS {
                comm.copy(&ins[i], &mut buf)?;
                if i % 2 == 0 {
                    all_reduce(comm, &smem, &mut outs[i], n)?;
                } else {
                    all_reduce_in_place(comm, &buf, n)?;
                    comm.copy(&buf, &mut outs[i])?;
                }
            }
            comm.synchronize()?;
            let got = outs
                .iter()
                .map(|o| user.clone_dtoh(o))
                .collect::<Result<Vec<Vec<f32>>, _>>()
                .map_err(drv(comm, "cudarc clone_dtoh"))?;
            for (i, g) in got.iter().enumerate() {
                let bad = (0..n).find(|&j| {
                    let want: f64 = inputs.iter().map(|p| f64::from(p[i][j])).sum();
                    let size: f64 = inputs.iter().map(|p| f64::from(p[i][j]).abs()).sum();
                    (f64::from(g[j]) - want).abs() > size * world as f64 * 2f64.powi(-23)
                });
                check(comm, bad.is_none(), || {
                    let j = bad.unwrap_or_default();
                    let want: f64 = inputs.iter().map(|p| f64::from(p[i][j])).sum();
                    format!(
                        "n={n} iteration {i}: element {j} is {}, float64 sum {want}",
                        g[j]
                    )
                })?;
            }
            Ok(got)
        })
        .map_err(fail)?;
        for (r, got) in per_rank.iter().enumerate().skip(1) {
            for (i, g) in got.iter().enumerate() {
                if let Err(e) = symm::compare_bits(g, &per_rank[0][i]) {
                    return Err(format!(
                        "n={n} iteration {i}: rank {r} differs from rank 0: {e}"
                    ));
                }
            }
        }
        report.push(n.to_string());
    }
    Ok(format!(
        "{ITERS} iterations of CudaSlice -> symm -> all-reduce -> CudaSlice at n = {}: \
         float64-exact to rounding, bitwise equal on every rank",
        report.join(", ")
    ))
}

/// Kernel arguments and copies take cudarc memory of the rank's device and
/// context (`CudaSlice`, `CudaView`, `CudaViewMut`, checked against a CPU
/// reference), and refuse, naming rank, argument and devices: a read-only
/// `CudaView` written to, a slice of another CUDA context on the same GPU
/// (a second context made here), of another GPU (where there is one), or
/// given to an emulated rank; and a stream of another context.
fn cudarc_memory_is_checked(world: usize) -> Outcome {
    let out = gpus(world, T, |comm| {
        let r = comm.rank();
        let n = 1000usize;
        let x: Vec<f32> = data::mixed_f32s(n);
        let user = user_stream(comm)?;
        let ordinal = user.context().ordinal();
        let xs = user.clone_htod(&x).map_err(drv(comm, "clone_htod"))?;
        let mut ys = user
            .alloc_zeros::<f32>(n)
            .map_err(drv(comm, "alloc_zeros"))?;
        let cfg = LaunchConfig::linear((n as u32).div_ceil(256), 256);
        user::scale::launch(comm, cfg, &xs, &mut ys, 3.0, n as u32)?;
        let mut yv = ys.slice_mut(n / 2..);
        user::scale::launch(
            comm,
            cfg,
            &xs.slice(..n - n / 2),
            &mut yv,
            -2.0,
            (n - n / 2) as u32,
        )?;
        let got = user.clone_dtoh(&ys).map_err(drv(comm, "clone_dtoh"))?;
        let want: Vec<f32> = (0..n)
            .map(|i| {
                if i < n / 2 {
                    3.0 * x[i]
                } else {
                    -2.0 * x[i - n / 2]
                }
            })
            .collect();
        check(comm, symm::compare_bits(&got, &want).is_ok(), || {
            format!(
                "scale over cudarc memory: {:?}",
                symm::compare_bits(&got, &want)
            )
        })?;
        says(
            comm,
            user::scale::launch(comm, cfg, &xs, &mut xs.slice(..), 1.0, n as u32).unwrap_err(),
            "argument `y` is a read-only cudarc view",
        )?;
        let mut buf = comm.alloc::<f32>(n)?;
        let smem = buf.rendezvous()?;
        let mut notes = Vec::new();
        // Another context on the same GPU.
        match CudaContext::new_non_primary(ordinal, 0) {
            Ok(ctx2) => {
                let s2 = ctx2.default_stream();
                let mut other = s2.alloc_zeros::<f32>(n).map_err(drv(comm, "alloc_zeros"))?;
                let what = format!("another CUDA context on cuda:{ordinal}");
                says(comm, comm.copy(&other, &mut buf).unwrap_err(), &what)?;
                says(
                    comm,
                    user::scale::launch(comm, cfg, &xs, &mut other, 1.0, n as u32).unwrap_err(),
                    &format!("argument `y` is CUDA memory of {what}"),
                )?;
                says(
                    comm,
                    all_reduce(comm, &smem, &mut other, n).unwrap_err(),
                    &what,
                )?;
                says(
                    comm,
                    comm.with_cuda_stream(s2.clone()).map(|_| ()).unwrap_err(),
                    "another CUDA context",
                )?;
                drop(other);
                notes.push("another context refused");
            }
            Err(e) => notes.push(if r == 0 {
                eprintln!("note: no second CUDA context ({e}); its check did not run");
                "NO second context could be made (check not run)"
            } else {
                "no second context"
            }),
        }
        // Another GPU.
        let count = symm::cuda_device_count();
        if count > 1 {
            let o = (ordinal + 1) % count;
            let ctx = CudaContext::new(o).map_err(drv(comm, "cuDevicePrimaryCtxRetain"))?;
            let s = ctx.default_stream();
            let mut far = s.alloc_zeros::<f32>(n).map_err(drv(comm, "alloc_zeros"))?;
            let what = format!(
                "argument `dst` is CUDA memory of cuda:{o}, but rank {r} runs on cuda:{ordinal}"
            );
            says(comm, comm.copy(&xs, &mut far).unwrap_err(), &what)?;
            says(
                comm,
                all_reduce(comm, &smem, &mut far, n).unwrap_err(),
                &format!("cuda:{o}"),
            )?;
            notes.push("another GPU refused");
        } else {
            notes.push("one GPU: no other-device check");
        }
        // An emulated rank cannot reach GPU memory.
        let emu = Comm::emulated(
            0,
            1,
            Arc::new(symm::InProcessStore::new()),
            CommOptions::default(),
        )?;
        let mut ebuf = emu.alloc::<f32>(n)?;
        let esmem = ebuf.rendezvous()?;
        says(
            comm,
            emu.copy(&xs, &mut ebuf).unwrap_err(),
            "is CUDA memory (cuda:",
        )?;
        says(
            comm,
            user::scale::launch(&emu, cfg, &xs, &mut ebuf, 1.0, n as u32).unwrap_err(),
            "argument `x` is CUDA memory",
        )?;
        says(
            comm,
            all_reduce(&emu, &esmem, &mut ys, n).unwrap_err(),
            "is emulated",
        )?;
        // The good buffer is untouched by the refused calls.
        comm.synchronize()?;
        Ok(notes.join(", "))
    })
    .map_err(fail)?;
    Ok(format!(
        "scale over CudaSlice/CudaView/CudaViewMut exact; {}",
        out[0]
    ))
}

/// cudarc views of symm memory, read and written on the user's stream with
/// no host synchronisation between the two streams' work: a copy queued on
/// the rank's stream is what the view reads; a device-to-device write
/// through a writable view of the symmetric buffer is what the in-place
/// all-reduce that follows sums (float64 and bitwise across ranks), and a
/// sub-range view of it (zeroed by cudarc) and of a plain buffer change
/// exactly their range.
fn cuda_view_round_trip(world: usize) -> Outcome {
    let n = 4099usize;
    let (a, b) = (1000usize, 2001usize);
    let fresh: Vec<(Vec<f32>, Vec<f32>)> = (0..world)
        .map(|_| (data::mixed_f32s(n), data::mixed_f32s(n)))
        .collect();
    let per_rank = gpus(world, T, |comm| {
        let r = comm.rank();
        let (d0, d1) = &fresh[r];
        let user = user_stream(comm)?;
        let mut buf = comm.alloc::<f32>(n)?;
        buf.fill_bytes(0xFF)?;
        let smem = buf.rendezvous()?;
        // A copy queued on the rank's stream, read on the user's.
        let plain = comm.device_buffer_from(d0)?;
        comm.copy(&plain, &mut buf)?;
        let seen = {
            let v = buf.cuda_view()?;
            user.clone_dtoh(&*v).map_err(drv(comm, "clone_dtoh"))?
        };
        check_bits_f32(comm, "read through cuda_view", &seen, d0)?;
        // Written on the user's stream, summed on the rank's.
        let src = user.clone_htod(d1).map_err(drv(comm, "clone_htod"))?;
        {
            let mut w = buf.cuda_view_mut()?;
            user.memcpy_dtod(&src, &mut w.as_view_mut())
                .map_err(drv(comm, "memcpy_dtod"))?;
        }
        all_reduce_in_place(comm, &buf, n)?;
        // A sub-range zeroed through a view of a view.
        {
            let mut part = buf.slice(a..b)?;
            let mut w = part.cuda_view_mut()?;
            user.memset_zeros(&mut w.as_view_mut())
                .map_err(drv(comm, "memset_zeros"))?;
        }
        // A plain buffer, through its view and the generic `Comm::cuda_view`.
        let mut plain2 = comm.device_buffer_from(d1)?;
        {
            let mut w = plain2.cuda_view_mut()?;
            let mut head = w.slice_mut(..a).expect("in bounds");
            user.memset_zeros(&mut head)
                .map_err(drv(comm, "memset_zeros"))?;
        }
        let plain_seen = {
            let v = comm.cuda_view(&plain2)?;
            user.clone_dtoh(&*v).map_err(drv(comm, "clone_dtoh"))?
        };
        let mut want_plain = d1.clone();
        want_plain[..a].iter_mut().for_each(|x| *x = 0.0);
        check_bits_f32(
            comm,
            "plain buffer through its views",
            &plain_seen,
            &want_plain,
        )?;
        comm.synchronize()?;
        let got = buf.to_host()?;
        for j in (0..n).filter(|j| !(a..b).contains(j)) {
            let want: f64 = fresh.iter().map(|(_, d)| f64::from(d[j])).sum();
            let size: f64 = fresh.iter().map(|(_, d)| f64::from(d[j]).abs()).sum();
            check(
                comm,
                (f64::from(got[j]) - want).abs() <= size * world as f64 * 2f64.powi(-23),
                || {
                    format!(
                        "element {j}: {} after the all-reduce, float64 sum {want}",
                        got[j]
                    )
                },
            )?;
        }
        check(comm, got[a..b].iter().all(|&x| x.to_bits() == 0), || {
            "the zeroed range is not zero".into()
        })?;
        drop(smem);
        Ok(got)
    })
    .map_err(fail)?;
    for (r, got) in per_rank.iter().enumerate().skip(1) {
        symm::compare_bits(got, &per_rank[0])
            .map_err(|e| format!("rank {r} differs from rank 0: {e}"))?;
    }
    Ok("cuda_view/cuda_view_mut on symmetric, view and plain memory: exact, ordered across streams".into())
}

/// `check_bits` of the f32s `got` against `want`.
fn check_bits_f32(comm: &Comm, what: &str, got: &[f32], want: &[f32]) -> symm::Result<()> {
    let d = symm::compare_bits(got, want);
    check(comm, d.is_ok(), || format!("{what}: {d:?}"))
}

/// The copy engines' peer copies. Eagerly, with cudarc memory: every rank
/// copies a `CudaSlice` into its slot of the next rank's buffer, signals
/// it, and copies the previous rank's slot of its own back into a
/// `CudaSlice`. Then in a CUDA graph of [copy to the next rank, signal it,
/// wait for the previous, copy the next rank's slot back], replayed with
/// fresh data each time: each rank's buffer holds the previous rank's data
/// and its copy back its own, exactly, with the poison around untouched.
fn ce_peer_copies_in_a_graph(world: usize) -> Outcome {
    const REPLAYS: usize = 20;
    let n = 3001usize;
    let len = n + 2;
    let fresh: Vec<Vec<Vec<f32>>> = (0..=REPLAYS)
        .map(|_| (0..world).map(|_| data::mixed_f32s(n)).collect())
        .collect();
    gpus(world, T, |comm| {
        let (r, w) = (comm.rank(), world);
        let (next, prev) = ((r + 1) % w, (r + w - 1) % w);
        let poison = f32::from_bits(0x7FBA_DBAD);
        let buf = comm.alloc::<f32>(len)?;
        buf.copy_from_host(&vec![poison; len])?;
        let smem = buf.rendezvous()?;
        let [sync, ring] = channels::<2>(comm)?;
        smem.barrier(&sync, T)?;
        let expect = |k: usize, from: usize| {
            let mut v = vec![poison; len];
            v[1..=n].copy_from_slice(&fresh[k][from]);
            v
        };
        // Eagerly, cudarc on both sides.
        let user = user_stream(comm)?;
        let src = user
            .clone_htod(&fresh[0][r])
            .map_err(drv(comm, "clone_htod"))?;
        let mut dst = user
            .alloc_zeros::<f32>(n)
            .map_err(drv(comm, "alloc_zeros"))?;
        smem.copy_to_peer(next, 1, &src)?;
        smem.put_signal(next, &ring, T)?;
        smem.wait_signal(prev, &ring, T)?;
        smem.copy_from_peer(r, 1, &mut dst)?;
        comm.synchronize()?;
        let got = user.clone_dtoh(&dst).map_err(drv(comm, "clone_dtoh"))?;
        check_bits_f32(
            comm,
            "eager copy from the previous rank",
            &got,
            &fresh[0][prev],
        )?;
        smem.barrier(&sync, T)?;
        comm.synchronize()?;
        // In a graph, symm memory on both sides.
        let plain = comm.device_buffer::<f32>(n)?;
        let mut back = comm.device_buffer::<f32>(n)?;
        let stream = comm.cuda_stream().expect("GPU rank");
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(drv(comm, "begin_capture"))?;
        smem.copy_to_peer(next, 1, &plain)?;
        smem.put_signal(next, &ring, T)?;
        smem.wait_signal(prev, &ring, T)?;
        smem.copy_from_peer(next, 1, &mut back)?;
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(drv(comm, "end_capture"))?
            .expect("a non-empty graph");
        for (k, round) in fresh.iter().enumerate().skip(1) {
            plain.write(0, &round[r])?;
            graph.launch().map_err(drv(comm, "cuGraphLaunch"))?;
            comm.synchronize()?;
            check_bits_f32(
                comm,
                &format!("replay {k}: own buffer"),
                &buf.to_host()?,
                &expect(k, prev),
            )?;
            check_bits_f32(
                comm,
                &format!("replay {k}: copied back"),
                &back.to_host()?,
                &round[r],
            )?;
            // Nobody writes a peer's buffer again before the peer has read it.
            smem.barrier(&sync, T)?;
            comm.synchronize()?;
        }
        Ok(())
    })
    .map_err(fail)?;
    Ok(format!(
        "cudarc to/from peers eagerly, then a graph [copy to next, put, wait, copy back] replayed {REPLAYS}x: exact"
    ))
}

/// Every rank's input for one call: rank `r`'s element `i` of call `k`
/// (the same on every rank, so each can check the sum).
fn pool_input(k: usize, r: usize, i: usize) -> f32 {
    let h = (k as u32).wrapping_mul(0x9E37_79B9) ^ (r as u32).wrapping_mul(0x85EB_CA6B) ^ i as u32;
    // A full mantissa: sums round, so a wrong order would show.
    f32::from_bits(0x3e00_0000 | (h.wrapping_mul(0x27D4_EB2F) >> 9))
        * if h & 1 == 0 { 1.0 } else { -1.0 }
}

/// The all-reduce under `use_pool` (its staging a pool tensor), captured
/// once in a graph and replayed with new inputs: every replay exact, and
/// the pool makes nothing after the capture (the staging stays at its
/// offset).
fn pool_staging_in_a_graph(world: usize) -> Outcome {
    const REPLAYS: usize = 20;
    let n = 65_537;
    gpus(world, T, |comm| {
        let r = comm.rank();
        let pool = comm.pool();
        let _g = comm.use_pool(&pool)?;
        let buf = comm.alloc::<f32>(n)?;
        let mut out = comm.alloc::<f32>(n)?;
        let smem = buf.rendezvous()?;
        let input = |k: usize| (0..n).map(|i| pool_input(k, r, i)).collect::<Vec<f32>>();
        buf.copy_from_host(&input(0))?;
        all_reduce(comm, &smem, &mut out, n)?; // warm-up: staging, first use
        comm.synchronize()?;
        let made = pool.stats();
        let stream = comm.cuda_stream().expect("GPU rank");
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(drv(comm, "begin_capture"))?;
        all_reduce(comm, &smem, &mut out, n)?;
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(drv(comm, "end_capture"))?
            .expect("non-empty graph");
        for k in 1..=REPLAYS {
            buf.copy_from_host(&input(k))?;
            graph.launch().map_err(drv(comm, "cuGraphLaunch"))?;
            comm.synchronize()?;
            let got = out.to_host()?;
            for (i, g) in got.iter().enumerate() {
                let want: f64 = (0..world).map(|q| f64::from(pool_input(k, q, i))).sum();
                let mag: f64 = (0..world)
                    .map(|q| f64::from(pool_input(k, q, i)).abs())
                    .sum();
                check(comm, (f64::from(*g) - want).abs() <= 1e-6 * mag, || {
                    format!("replay {k}, element {i}: {g}, float64 {want}")
                })?;
            }
        }
        check(comm, pool.stats() == made, || {
            format!(
                "the pool changed over the replays: {made:?} then {:?}",
                pool.stats()
            )
        })
    })
    .map_err(fail)?;
    Ok(format!(
        "all-reduce of {n} f32 with pool staging, captured, replayed {REPLAYS}x with new inputs: exact; the pool unchanged"
    ))
}

/// A pool whose segments are host memory of NUMA node 0, mapped for the
/// GPU: pool tensors all-reduce exactly from there too.
fn pool_on_host_numa(world: usize) -> Outcome {
    let n = 4099;
    gpus(world, T, |comm| {
        let r = comm.rank();
        let pool = comm.pool_with(Arc::new(symm::DeviceSegments::on_host_numa(0)));
        let mut t = pool.alloc::<f32>(n)?;
        t.write(
            0,
            &(0..n).map(|i| pool_input(7, r, i)).collect::<Vec<f32>>(),
        )?;
        let smem = t.rendezvous()?;
        all_reduce(comm, &smem, &mut t, n)?;
        let got = t.to_host()?;
        for (i, g) in got.iter().enumerate() {
            let want: f64 = (0..world).map(|q| f64::from(pool_input(7, q, i))).sum();
            let mag: f64 = (0..world)
                .map(|q| f64::from(pool_input(7, q, i)).abs())
                .sum();
            check(comm, (f64::from(*g) - want).abs() <= 1e-6 * mag, || {
                format!("element {i}: {g}, float64 {want}")
            })?;
        }
        Ok(())
    })
    .map_err(fail)?;
    Ok(format!(
        "pool segments on host NUMA node 0: all-reduce of {n} f32 in place exact"
    ))
}

gpu_per_world! {
    harness::gpu_test;
    jit_compile_times: |_| jit_times() => [world_1];
    leaks_1000_cycles: leaks => [world_1, world_2, world_3, world_4, world_8];
    pool_staging_in_a_graph: pool_staging_in_a_graph => [world_1, world_2, world_3, world_4, world_8];
    pool_on_host_numa: pool_on_host_numa => [world_1, world_2, world_3, world_4, world_8];
    graph_replay_1000: graphs => [world_1, world_2, world_3, world_4, world_8];
    // Two ranks at least: one frees while the other waits.
    frees_while_a_peer_waits: frees_while_a_peer_waits => [world_2, world_3, world_4, world_8];
    rendezvous_time: rendezvous_time => [world_1, world_2, world_3, world_4, world_8];
    cudarc_tensors_all_reduce: cudarc_tensors_all_reduce => [world_1, world_2, world_3, world_4, world_8];
    cudarc_memory_is_checked: cudarc_memory_is_checked => [world_1, world_2, world_3, world_4, world_8];
    cuda_view_round_trip: cuda_view_round_trip => [world_1, world_2, world_3, world_4, world_8];
    ce_peer_copies_in_a_graph: ce_peer_copies_in_a_graph => [world_1, world_2, world_3, world_4, world_8];
}

/// The test kernels compile (NVRTC, no GPU), so that CI catches a broken
/// one on a machine that runs none of the tests above.
#[test]
fn test_kernels_compile() {
    if !symm::jit::require_nvrtc("the GPU tests' kernels") {
        return;
    }
    let src = kernels();
    let req = CompileRequest {
        kernel_name: "gpu_test_kernels",
        source: &src,
        arch: symm::jit::Arch { major: 9, minor: 0 },
        options: &[],
    };
    let (c, _) = JitEngine::new(None)
        .compile(&req)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!c.cubin.is_empty(), "an empty CUBIN");
    let sm90 = symm::jit::Arch { major: 9, minor: 0 };
    user::scale::compile_checked_for(sm90).unwrap_or_else(|e| panic!("{e}"));
}
