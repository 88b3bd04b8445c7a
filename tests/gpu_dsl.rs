//! The DSL on real GPUs, where only a GPU can tell: CUDA graph capture and
//! replay, in-kernel timeouts, bounds checks of safe launches, co-residency
//! of ranks that share a GPU, bad launches, compile times, launch overhead
//! against raw cudarc, what the bounds checks cost, and the fp8 conversions
//! as the GPU runs them.
//! The GPU tier (`support/harness.rs`): each test, `NAME::world_W`, is
//! ignored unless run with `--ignored`, and then fails on a machine without
//! a CUDA GPU.
//!
//! The DSL test kernels against their CPU references and the collectives
//! are not here: `tests/emulator_kernels.rs` runs them on GPU ranks (with
//! GPU-sized data) under `SYMM_KERNEL_TESTS_ON=gpu`, as
//! `scripts/gpu-validate.sh` does.

use std::time::{Duration, Instant};

use symm::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use symm::cudarc::driver::PushKernelArg;
use symm::jit::{Arch, CacheHit, CompileRequest, JitEngine};
use symm::kernels::{broadcast, ping_pong, ring_all_gather};
use symm::signal::Channel;
use symm::{bf16, run, Comm, CommOptions, Error, LaunchConfig, Ranks};

#[path = "support/harness.rs"]
mod harness;
use harness::{placement, Outcome};
#[path = "support/targets.rs"]
mod targets;
#[macro_use]
#[path = "support/testgen.rs"]
mod testgen;

#[path = "dsl_suite/mod.rs"]
mod dsl_suite;
use dsl_suite::*;

const T: Duration = Duration::from_secs(10);

mod oob {
    use symm::dsl::*;
    use symm::symm_kernel;

    /// `y[i] = 2 x[i]` for every `i <= n`: one past the end when `n` is the
    /// length.
    #[symm_kernel]
    pub fn off_by_one(x: &[f32], y: &mut [f32], n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i <= n {
            y[i] = x[i] * 2.0f32; // OOB-SITE
        }
    }

    /// Counts `i` into `y[i]` for every `i <= n`, with an atomic method:
    /// one past the end when `n` is the length.
    #[symm_kernel]
    pub fn count_past_end(y: &mut [u32], n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i <= n {
            let _ = y.atomic_add(i, 1u32, RmwOrder::Relaxed, Scope::Gpu); // OOB-METHOD
        }
    }

    /// Writes one element of rank `r`'s buffer, and signals rank 0 on
    /// `channel` (from thread 0 only): out of bounds when `r` is the world
    /// size, or the channel past the pad's. A bad channel is recorded and
    /// the thread goes on to mark element 1 of its own buffer.
    #[symm_kernel]
    pub fn rank_past_world(buf: SymmBuf<u32>, r: u32, channel: u32) {
        if thread_idx_x() == 0 {
            let p = buf.peer(r);
            p[0] = 5;
            if channel < 1000 {
                buf.put_signal(0, channel);
                buf.local()[1] = 7;
            }
        }
    }
}
use oob::{count_past_end, off_by_one, rank_past_world};

mod pdl {
    use symm::dsl::*;
    use symm::symm_kernel;

    /// Waits for the kernel before (programmatic dependent launch), then
    /// marks its block.
    #[symm_kernel]
    pub fn mark_after(marks: &mut [u32]) {
        grid_dependency_wait();
        if thread_idx_x() == 0 {
            marks[block_idx_x()] = 1u32;
        }
    }
}
use pdl::mark_after;

/// The line of this file that `off_by_one` indexes on.
fn oob_line() -> usize {
    marked_line("// OOB-SITE")
}

/// The line of this file that ends with `marker`.
fn marked_line(marker: &str) -> usize {
    include_str!("gpu_dsl.rs")
        .lines()
        .position(|l| l.ends_with(marker))
        .expect("the marked line")
        + 1
}

fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Runs `f` on `world` GPU ranks, placed as [`harness::placement`] says
/// (sharing GPUs when there are fewer than ranks; `harness::gpu_test` runs
/// only world sizes it can place).
fn gpus<R: Send>(
    world: usize,
    f: impl Fn(&Comm) -> symm::Result<R> + Sync,
) -> Result<Vec<R>, String> {
    gpus_with(world, CommOptions::default().with_timeout(T), f)
}

fn gpus_with<R: Send>(
    world: usize,
    options: CommOptions,
    f: impl Fn(&Comm) -> symm::Result<R> + Sync,
) -> Result<Vec<R>, String> {
    let ranks: Ranks = placement(world).expect("gpu_test runs only world sizes it can place");
    run(ranks, options, f).map_err(fail)
}

fn graph_capture(world: usize) -> Outcome {
    let chunk = 777;
    gpus(world, |c| {
        let r = c.rank();
        let buf = c.alloc::<f32>(chunk * world)?;
        let s = buf.rendezvous()?;
        let (host, ring) = (Channel::request(c)?, Channel::request(c)?);
        // Warm up (loads the module) before capturing.
        ring_all_gather::launch::<f32>(
            c,
            LaunchConfig::linear(2, 128),
            &s,
            chunk as u32,
            ring.index(),
        )?;
        c.synchronize()?;
        s.barrier(&host, T)?;
        c.synchronize()?;
        let stream = c.cuda_stream().expect("GPU rank");
        let drv = |op| move |source| c.driver_error(op, source);
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(drv("begin_capture"))?;
        ring_all_gather::launch::<f32>(
            c,
            LaunchConfig::linear(2, 128),
            &s,
            chunk as u32,
            ring.index(),
        )?;
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(drv("end_capture"))?
            .expect("a graph");
        for it in 0..20u32 {
            // Fresh data each replay; the same seed on every rank gives every rank the full picture.
            let all: Vec<Vec<f32>> = (0..world)
                .map(|q| {
                    (0..chunk)
                        .map(|i| (it * 7919 + q as u32 * 104_729 + i as u32) as f32)
                        .collect()
                })
                .collect();
            buf.copy_from_host(&vec![f32::NAN; chunk * world])?;
            buf.write(r * chunk, &all[r])?;
            s.barrier(&host, T)?;
            c.synchronize()?;
            graph.launch().map_err(drv("cuGraphLaunch"))?;
            c.synchronize()?;
            check(c, buf.to_host()? == all.concat(), || {
                format!("rank {r} replay {it} wrong")
            })?;
            s.barrier(&host, T)?;
            c.synchronize()?;
        }
        Ok(())
    })?;
    Ok("ring all-gather captured once, replayed 20× on fresh data: exact".into())
}

fn kernel_timeout(world: usize) -> Outcome {
    let opts = CommOptions::default()
        .with_timeout(T)
        .with_kernel_timeout(Duration::from_millis(200));
    let res = gpus_with(world, opts, |c| {
        let buf = c.alloc::<u32>(8)?;
        let s = buf.rendezvous()?;
        let [host, ready, done, quiet] = [(); 4].map(|_| Channel::request(c));
        let (host, ready, done, quiet) = (host?, ready?, done?, quiet?);
        let mut report = String::new();
        if c.rank() == 0 {
            let t = Instant::now();
            wait_on::launch(c, LaunchConfig::linear(2, 64), &s, 1, quiet.index())?;
            let e = c.synchronize().err();
            let el = t.elapsed();
            match &e {
                Some(
                    e @ Error::SignalTimeout {
                        rank: 0,
                        block: 0,
                        peer: 1,
                        channel,
                        ..
                    },
                ) if el < Duration::from_millis(400) && *channel == quiet.index() => {
                    report = format!("after {:.0} ms: {e}", el.as_secs_f64() * 1e3)
                }
                other => check(c, false, || {
                    format!("expected a named timeout within 400 ms, got {other:?} after {el:?}")
                })?,
            }
        }
        // The context survives: a broadcast afterwards is right.
        let b = c.alloc::<f32>(100)?;
        b.copy_from_host(
            &(0..100)
                .map(|i| if c.rank() == 0 { i as f32 } else { -1.0 })
                .collect::<Vec<_>>(),
        )?;
        let bs = b.rendezvous()?;
        bs.barrier(&host, T)?;
        broadcast::launch::<f32>(
            c,
            LaunchConfig::linear(1, 128),
            &bs,
            0,
            100,
            ready.index(),
            done.index(),
        )?;
        c.synchronize()?;
        check(
            c,
            b.to_host()? == (0..100).map(|i| i as f32).collect::<Vec<_>>(),
            || "broadcast after the timeout is wrong".into(),
        )?;
        Ok(report)
    })?;
    Ok(res[0].clone())
}

/// Ranks that share a GPU: a kernel that waits on peers with a grid too
/// large to be resident beside the other ranks' is refused on every rank
/// (never launched, so nothing hangs), and one at the largest grid allowed
/// has every block of every rank resident at once.
fn co_residency(world: usize) -> Outcome {
    const THREADS: u32 = 256;
    let res = gpus(world, |c| {
        let limit = all_arrive::co_resident_grid(c, THREADS, 0)?;
        let Some(limit) = limit else {
            return check(c, false, || {
                format!(
                    "rank {}: no grid limit although ranks share a GPU",
                    c.rank()
                )
            })
            .map(|_| (0, String::new()));
        };
        let buf = c.alloc::<u32>(4)?;
        buf.copy_from_host(&[0; 4])?;
        let s = buf.rendezvous()?;
        let too_big = LaunchConfig::linear(limit + 1, THREADS);
        let e = match all_arrive::launch(c, too_big, &s, 1_000_000_000) {
            Ok(()) => {
                c.synchronize()?;
                return check(c, false, || format!("a grid of {} was launched", limit + 1))
                    .map(|_| (0, String::new()));
            }
            Err(e) => e.to_string(),
        };
        check(
            c,
            e.contains("cannot be resident") && e.contains(&format!("at most {limit} blocks")),
            || e.clone(),
        )?;
        let host = Channel::request(c)?;
        s.barrier(&host, T)?;
        all_arrive::launch(c, LaunchConfig::linear(limit, THREADS), &s, 2_000_000_000)?;
        c.synchronize()?;
        let words = buf.to_host()?;
        check(c, words[1] == 0, || {
            format!(
                "rank {}: {} blocks gave up waiting: a grid of {limit} is not co-resident",
                c.rank(),
                words[1]
            )
        })?;
        if c.rank() == 0 {
            let all = (c.world_size() as u32) * limit;
            check(c, words[0] == all, || {
                format!("{} blocks arrived, expected {all}", words[0])
            })?;
        }
        s.barrier(&host, T)?;
        c.synchronize()?;
        Ok((limit, e))
    })?;
    let limits: Vec<u32> = res.iter().map(|r| r.0).collect();
    if limits.iter().any(|&l| l != limits[0]) {
        return Err(format!("ranks computed different limits: {limits:?}"));
    }
    Ok(format!(
        "every rank refused {} blocks × {THREADS} and ran {} with all {} × {} blocks resident at once: {}",
        limits[0] + 1,
        limits[0],
        world,
        limits[0],
        res[0].1
    ))
}

/// A safe launch that indexes one past the end of its slices: the next
/// synchronize reports a `KernelFault` naming the kernel, rank, block,
/// thread, index, length and source line, and the element past the end is
/// untouched (the slices are views of one element less than their buffers);
/// the rank goes on, and the same kernel launched unchecked on buffers big
/// enough is right.
fn out_of_bounds(world: usize) -> Outcome {
    let line = oob_line();
    let res = gpus(world, |c| {
        let r = c.rank();
        let host: Vec<f32> = (0..101).map(|i| (i + 1000 * r) as f32).collect();
        let twice: Vec<f32> = host.iter().map(|v| v * 2.0).collect();
        let x = c.alloc::<f32>(101)?;
        x.copy_from_host(&host)?;
        let y = c.alloc::<f32>(101)?;
        y.copy_from_host(&[-1.0; 101])?;
        let cfg = LaunchConfig::linear(4, 32);
        off_by_one::launch(c, cfg, &x.slice(..100)?, &mut y.slice(..100)?, 100)?;
        let err = match c.synchronize() {
            Err(e) => e,
            Ok(()) => {
                return check(c, false, || format!("rank {r}: no error")).map(|_| String::new())
            }
        };
        let want = format!(
            "kernel `off_by_one` on rank {r}, block 3, thread 4: index 100 is out of bounds for \
             length 100 (at tests/gpu_dsl.rs:{line})"
        );
        check(
            c,
            matches!(&err, Error::KernelFault { kernel, rank, .. }
                if kernel == "off_by_one" && *rank == r && err.to_string() == want),
            || format!("rank {r}: expected KernelFault {want:?}, got {err:?}"),
        )?;
        let got = y.to_host()?;
        check(c, got[..100] == twice[..100] && got[100] == -1.0, || {
            format!("rank {r}: y is {got:?}")
        })?;
        let mut z = c.alloc::<f32>(101)?;
        // SAFETY: `x` and `z` hold 101 elements, and `off_by_one` with
        // n = 100 indexes 0..=100.
        unsafe { off_by_one::launch_unchecked(c, cfg, &x, &mut z, 100)? };
        c.synchronize()?;
        let got = z.to_host()?;
        check(c, got == twice, || {
            format!("rank {r}: unchecked z is {got:?}")
        })?;
        // A method that takes an index is checked alike.
        let u = c.alloc::<u32>(101)?;
        u.copy_from_host(&[7; 101])?;
        count_past_end::launch(c, cfg, &mut u.slice(..100)?, 100)?;
        let merr = match c.synchronize() {
            Err(e) => e.to_string(),
            Ok(()) => {
                return check(c, false, || format!("rank {r}: no error from the method"))
                    .map(|_| String::new())
            }
        };
        let mline = marked_line("// OOB-METHOD");
        let want = format!(
            "kernel `count_past_end` on rank {r}, block 3, thread 4: index 100 is out of bounds \
             for length 100 (at tests/gpu_dsl.rs:{mline})"
        );
        check(c, merr.contains(&want), || {
            format!("rank {r}: expected {want:?}, got {merr:?}")
        })?;
        let got = u.to_host()?;
        check(c, got[..100] == [8; 100] && got[100] == 7, || {
            format!("rank {r}: u is {got:?}")
        })?;
        // So are ranks and signal channels of a symmetric buffer.
        let w = c.world_size() as u32;
        let s = c.alloc::<u32>(4)?;
        s.copy_from_host(&[0; 4])?;
        let sm = s.rendezvous()?;
        rank_past_world::launch(c, LaunchConfig::linear(1, 32), &sm, w, 1000)?;
        let rerr = c
            .synchronize()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        check(
            c,
            rerr.contains(&format!("index {w} is out of bounds for length {w}")),
            || format!("rank {r}: a peer rank past the world gave {rerr:?}"),
        )?;
        let chans = symm::layout::SIGNAL_CHANNELS as u32;
        rank_past_world::launch(c, LaunchConfig::linear(1, 32), &sm, 0, chans)?;
        let cerr = c
            .synchronize()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        check(
            c,
            cerr.contains(&format!(
                "index {chans} is out of bounds for length {chans}"
            )),
            || format!("rank {r}: signal channel {chans} gave {cerr:?}"),
        )?;
        let after = s.to_host()?;
        check(c, after[1] == 7, || {
            format!("rank {r}: the thread stopped at the bad channel ({after:?})")
        })?;
        Ok(format!("{err}; and for a method: {merr}; a rank: {rerr}"))
    })?;
    Ok(format!("every rank: {}", res[0]))
}

/// What the bounds checks cost: µs per launch of DSL-suite kernels over 4M
/// elements, checked (`launch`) against unchecked (`launch_unchecked`),
/// median of 7 rounds of 100 back-to-back launches (wall time to the
/// synchronize, after a warm-up), interleaved.
fn checked_launch_cost() -> Outcome {
    let res = gpus(1, |c| {
        let n = 1usize << 22;
        let cfg = LaunchConfig::linear((n as u32).div_ceil(256), 256);
        let xi: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let xu = c.device_buffer_from(&xi)?;
        let mut ou = c.device_buffer::<u32>(n)?;
        let xf = c.device_buffer_from(&vec![1.5f32; n])?;
        let mut of = c.device_buffer::<f32>(n)?;
        let mut rows = vec![];
        for kernel in ["int_ops", "copy_n"] {
            let mut launch = |checked: bool| -> symm::Result<()> {
                match (kernel, checked) {
                    ("int_ops", true) => int_ops::launch(c, cfg, &xu, &mut ou, n as u32),
                    // SAFETY: `int_ops` indexes below n, and both buffers
                    // hold n elements.
                    ("int_ops", false) => unsafe {
                        int_ops::launch_unchecked(c, cfg, &xu, &mut ou, n as u32)
                    },
                    (_, true) => copy_n::launch(c, cfg, &xf, &mut of, n as u32),
                    // SAFETY: as above, for `copy_n`.
                    (_, false) => unsafe {
                        copy_n::launch_unchecked(c, cfg, &xf, &mut of, n as u32)
                    },
                }
            };
            let (mut checked, mut unchecked) = (vec![], vec![]);
            for round in 0..8 {
                for on in [true, false] {
                    launch(on)?;
                    c.synchronize()?;
                    let t = Instant::now();
                    for _ in 0..100 {
                        launch(on)?;
                    }
                    c.synchronize()?;
                    let us = t.elapsed().as_secs_f64() * 1e6 / 100.0;
                    // Round 0 is the warm-up (compiles and loads both).
                    if round > 0 {
                        if on {
                            checked.push(us)
                        } else {
                            unchecked.push(us)
                        }
                    }
                }
            }
            let (ch, un) = (
                harness::median(&mut checked),
                harness::median(&mut unchecked),
            );
            rows.push(format!(
                "{kernel}: checked {ch:.2} µs/launch, unchecked {un:.2} ({:+.1}%)",
                (ch / un - 1.0) * 100.0
            ));
        }
        let got = ou.to_host()?;
        for i in [0, 1, n / 3, n - 1] {
            check(c, got[i] == int_ops_ref(xi[i]), || {
                format!("int_ops[{i}] wrong")
            })?;
        }
        check(c, of.to_host()? == vec![1.5f32; n], || {
            "copy_n wrong".into()
        })?;
        Ok(rows.join("; "))
    })?;
    Ok(format!("over 4M elements: {}", res[0]))
}

fn bad_launches() -> Outcome {
    gpus(2, |c| {
        let x = c.device_buffer::<f32>(10)?;
        let mut y = c.device_buffer::<f32>(10)?;
        let e = copy_n::launch(c, LaunchConfig::linear(0, 32), &x, &mut y, 10)
            .unwrap_err()
            .to_string();
        check(c, e.contains("zero dimension"), || e.clone())?;
        let e = copy_n::launch(c, LaunchConfig::linear(1, 2048), &x, &mut y, 10)
            .unwrap_err()
            .to_string();
        check(c, e.contains("2048 threads"), || e.clone())?;
        let wrong = c.alloc::<u32>(4)?;
        let ws = wrong.rendezvous()?;
        let e = ring_all_gather::launch::<f32>(c, LaunchConfig::linear(1, 32), &ws, 1, 0)
            .unwrap_err()
            .to_string();
        check(
            c,
            e.contains("holds u32, but the kernel expects f32"),
            || e.clone(),
        )?;
        // A raw kernel whose registers do not fit its block: the driver's
        // refusal, said plainly.
        let k = c.raw_kernel("t_many_live", RAW_MANY_LIVE)?;
        let xs = c.device_buffer::<f32>(1024 * 128)?;
        let ys = c.device_buffer::<f32>(1024)?;
        // SAFETY: t_many_live takes two pointers, reads 128 floats a thread
        // of `xs` (1024 × 128) and writes one of `ys` (1024), for the one
        // block of 1024 threads launched.
        let e = unsafe {
            k.launch(
                c,
                LaunchConfig::linear(1, 1024),
                &[
                    symm::KernelArg::U64(xs.device_ptr()),
                    symm::KernelArg::U64(ys.device_ptr()),
                ],
            )
        }
        .map(|_| "launched".to_string())
        .unwrap_or_else(|e| e.to_string());
        check(
            c,
            e.contains("registers") && e.contains("`__launch_bounds__(1024)`"),
            || format!("a raw kernel of many registers at 1024 threads: {e}"),
        )?;
        Ok(())
    })?;
    Ok("zero grid, oversized block, a mistyped symmetric buffer and a raw kernel whose registers do not fit its block are clear errors".into())
}

fn compile_times() -> Outcome {
    let arch = Arch { major: 9, minor: 0 };
    let mut rows = vec![];
    let sources: Vec<(&str, String)> = vec![
        (
            "ring_all_gather<f32>",
            ring_all_gather::cuda_source_for::<f32>(),
        ),
        ("broadcast<bf16>", broadcast::cuda_source_for::<bf16>()),
        ("ping_pong", ping_pong::cuda_source_for()),
        ("arith<f32>", arith::cuda_source_for::<f32>()),
        ("message_passing", message_passing::cuda_source_for()),
    ];
    let opts: Vec<String> = symm::__private_0_1_0::KERNEL_OPTIONS
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (name, src) in &sources {
        let dir = tempfile::tempdir().map_err(fail)?;
        let req = CompileRequest {
            kernel_name: name,
            source: src,
            arch,
            options: &opts,
        };
        let t = Instant::now();
        let (_, hit) = JitEngine::new(Some(dir.path().into()))
            .compile(&req)
            .map_err(fail)?;
        let cold = t.elapsed();
        let t = Instant::now();
        let (_, hit2) = JitEngine::new(Some(dir.path().into()))
            .compile(&req)
            .map_err(fail)?;
        let disk = t.elapsed();
        if hit != CacheHit::Compiled || hit2 != CacheHit::Disk {
            return Err(format!("{name}: cache outcomes {hit:?}, {hit2:?}"));
        }
        rows.push(format!(
            "{name}: cold {:.0} ms, disk {:.2} ms",
            cold.as_secs_f64() * 1e3,
            disk.as_secs_f64() * 1e3
        ));
    }
    Ok(rows.join("; "))
}

/// Host time per launch: the DSL launcher against cudarc's launch builder on
/// the same CUBIN, interleaved, median of 15 rounds of 2000 launches.
fn launch_overhead() -> Outcome {
    let res = gpus(1, |c| {
        let n = 256usize;
        let x = c.device_buffer_from(&vec![1.0f32; n])?;
        let mut y = c.device_buffer::<f32>(n)?;
        let status = c.device_buffer_from(&[0u32; 16])?;
        let cfg = LaunchConfig::linear(1, 256);
        copy_n::launch(c, cfg, &x, &mut y, n as u32)?;
        let src = copy_n::cuda_source_for();
        let opts: Vec<String> = symm::__private_0_1_0::KERNEL_OPTIONS
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (compiled, _) = JitEngine::global().compile(&CompileRequest {
            kernel_name: "copy_n",
            source: &src,
            arch: Arch { major: 9, minor: 0 },
            options: &opts,
        })?;
        let stream = c.cuda_stream().expect("GPU");
        let ctx = stream.context().clone();
        let drv = |op| move |source| c.driver_error(op, source);
        let module = ctx
            .load_module(symm::cudarc::nvrtc::Ptx::from_binary(
                compiled.cubin.clone(),
            ))
            .map_err(drv("load"))?;
        let f = module.load_function("copy_n").map_err(drv("function"))?;
        let (sp, to, rk, xp, xl, yp, yl, nn) = (
            status.device_ptr(),
            1_000_000_000u64,
            0u32,
            x.device_ptr(),
            n as u64,
            y.device_ptr(),
            n as u64,
            n as u32,
        );
        let raw_cfg = symm::cudarc::driver::LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let raw = || -> symm::Result<()> {
            let mut b = stream.launch_builder(&f);
            b.arg(&sp)
                .arg(&to)
                .arg(&rk)
                .arg(&xp)
                .arg(&xl)
                .arg(&yp)
                .arg(&yl)
                .arg(&nn);
            // SAFETY: the arguments match copy_n's entry signature and the
            // buffers outlive the launch (synchronised below).
            unsafe { b.launch(raw_cfg) }.map_err(drv("launch"))?;
            Ok(())
        };
        let (mut dsl_us, mut raw_us) = (vec![], vec![]);
        for _ in 0..15 {
            let t = Instant::now();
            for _ in 0..2000 {
                copy_n::launch(c, cfg, &x, &mut y, n as u32)?;
            }
            dsl_us.push(t.elapsed().as_secs_f64() * 1e6 / 2000.0);
            c.synchronize()?;
            let t = Instant::now();
            for _ in 0..2000 {
                raw()?;
            }
            raw_us.push(t.elapsed().as_secs_f64() * 1e6 / 2000.0);
            c.synchronize()?;
        }
        dsl_us.sort_by(f64::total_cmp);
        raw_us.sort_by(f64::total_cmp);
        check(c, y.to_host()? == vec![1.0; n], || "copy_n wrong".into())?;
        Ok((dsl_us[7], raw_us[7]))
    })?;
    let (d, r) = res[0];
    Ok(format!(
        "host µs/launch: DSL {d:.2}, raw cudarc {r:.2}, ratio {:.2}×",
        d / r
    ))
}

/// The prelude's fp8 conversions as a GPU runs them, bit for bit against
/// the Rust ones (the emulator's): every pattern widened, and every value,
/// midpoint, neighbour, special and 4M random f32s rounded, per format.
/// Without a GPU, `tests/fp8.rs` of symm-runtime checks the same CUDA C
/// with NVRTC at compile time, on fewer inputs.
fn fp8_conversions() -> Outcome {
    let n = gpus(1, |c| {
        Ok((
            run_fp8_convert::<symm::f8e4m3>(c)?,
            run_fp8_convert::<symm::f8e5m2>(c)?,
        ))
    })?;
    let (e4m3, e5m2) = n[0];
    Ok(format!(
        "256 patterns widened, {e4m3} (f8e4m3) and {e5m2} (f8e5m2) f32s rounded"
    ))
}

/// A kernel that cannot wait on peers, launched with programmatic
/// dependent launch right after symm's all-reduce (a barrier kernel, which
/// lets its dependents start at once) with a grid of 4096 blocks of 1024
/// threads, while the last rank starts its all-reduce 300 ms late. Where
/// ranks share a GPU the runtime launches that kernel without PDL, so its
/// blocks never fill the GPU while they wait; with PDL they took the room
/// the late rank's all-reduce needed, and both ranks waited until the
/// kernel timeout (3 s here; bench/NOTES.md v46). The sums and every
/// block's mark are checked. `raw`: the same kernel as a raw CUDA C
/// kernel (`Comm::raw_kernel`), whose launch takes the same rule.
fn pdl_after_a_barrier_kernel(world: usize, raw: bool) -> Outcome {
    const BLOCKS: usize = 4096;
    let opts = CommOptions::default()
        .with_timeout(T)
        .with_kernel_timeout(Duration::from_secs(3));
    let n = 2048usize;
    let res = gpus_with(world, opts, |c| {
        let buf = c.alloc::<f32>(n)?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer::<f32>(n)?;
        let mut marks = c.device_buffer::<u32>(BLOCKS)?;
        let host = Channel::request(c)?;
        let cfg = LaunchConfig::linear(BLOCKS as u32, 1024).with_pdl();
        let raw_mark = if raw {
            Some(c.raw_kernel("t_mark_after", RAW_MARK_AFTER)?)
        } else {
            None
        };
        let mark = |marks: &mut symm::DeviceBuffer<u32>| -> symm::Result<()> {
            match &raw_mark {
                // SAFETY: `t_mark_after` takes one pointer to at least
                // `BLOCKS` u32s (one a block of the grid), and `marks` is
                // this rank's device buffer of `BLOCKS`.
                Some(k) => unsafe { k.launch(c, cfg, &[symm::KernelArg::U64(marks.device_ptr())]) },
                None => mark_after::launch(c, cfg, marks),
            }
        };
        // Once to compile and load both, so that the late rank is late by
        // its sleep alone.
        symm::kernels::all_reduce::all_reduce(c, &s, &mut out, n)?;
        mark(&mut marks)?;
        c.synchronize()?;
        buf.copy_from_host(&vec![(c.rank() + 1) as f32; n])?;
        marks.write(0, &vec![0u32; BLOCKS])?;
        s.barrier(&host, T)?;
        if c.rank() + 1 == c.world_size() {
            std::thread::sleep(Duration::from_millis(300));
        }
        let t = Instant::now();
        symm::kernels::all_reduce::all_reduce(c, &s, &mut out, n)?;
        mark(&mut marks)?;
        c.synchronize()?;
        let el = t.elapsed();
        let want = (c.world_size() * (c.world_size() + 1) / 2) as f32;
        let sums = out.to_host()?;
        check(c, sums.iter().all(|&v| v == want), || {
            format!("rank {}: a sum is not {want}", c.rank())
        })?;
        let got = marks.to_host()?;
        check(c, got.iter().all(|&m| m == 1), || {
            format!(
                "rank {}: {} of {BLOCKS} blocks unmarked",
                c.rank(),
                got.iter().filter(|&&m| m != 1).count()
            )
        })?;
        s.barrier(&host, T)?;
        Ok(el)
    })?;
    let slowest = res.iter().max().copied().unwrap_or_default();
    Ok(format!(
        "{world} ranks sharing a GPU: all-reduce then {BLOCKS} blocks ({}) launched with PDL, the last rank 300 ms late: done in {:.0} ms at the most",
        if raw { "a raw kernel" } else { "a DSL kernel" },
        slowest.as_secs_f64() * 1e3
    ))
}

/// 128 values live in each thread (`tests/dsl_suite`'s `many_live` as raw
/// CUDA C): more registers than a block of 1024 threads holds.
const RAW_MANY_LIVE: &str = r#"
extern "C" __global__ void t_many_live(const float* x, float* y) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    float a[128];
#pragma unroll
    for (int i = 0; i < 128; i++) a[i] = x[t * 128 + i];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 128; i++) s += a[i];
    float o = 0.0f;
#pragma unroll
    for (int i = 0; i < 128; i++) o += a[i] * (s + (float)i);
    y[t] = o;
}
"#;

/// [`mark_after`] as a raw CUDA C kernel.
const RAW_MARK_AFTER: &str = r#"
extern "C" __global__ void t_mark_after(unsigned int* marks) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (threadIdx.x == 0) marks[blockIdx.x] = 1u;
}
"#;

/// [`pdl_after_a_barrier_kernel`] where the ranks of `world` share a GPU;
/// skipped, loudly, where none do.
fn pdl_where_shared(world: usize) -> Option<Outcome> {
    pdl_where_shared_as(world, false)
}

/// [`pdl_where_shared`] with a raw kernel.
fn pdl_where_shared_raw(world: usize) -> Option<Outcome> {
    pdl_where_shared_as(world, true)
}

/// [`pdl_after_a_barrier_kernel`] (`raw` or not) where the ranks of
/// `world` share a GPU; skipped, loudly, where none do or before sm_90.
fn pdl_where_shared_as(world: usize, raw: bool) -> Option<Outcome> {
    let name = if raw {
        "dsl_pdl_where_shared_raw"
    } else {
        "dsl_pdl_where_shared"
    };
    if !placement(world)?.shares_a_gpu() {
        harness::skip(&format!(
            "world={world}: {name} needs ranks that share a GPU, and none do (see SYMM_RANKS_PER_GPU)"
        ));
        return None;
    }
    // (Before sm_90 there is no programmatic dependent launch, so the
    // test would pass with or without the rule it checks.)
    let major = gpus(1, |c| {
        use symm::cudarc::driver::sys::CUdevice_attribute as A;
        let stream = c.cuda_stream().expect("a GPU rank has a stream");
        Ok(stream
            .context()
            .attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .unwrap_or(0))
    });
    match major.as_deref() {
        Ok([m, ..]) if *m >= 9 => Some(pdl_after_a_barrier_kernel(world, raw)),
        Ok(_) => {
            harness::skip(&format!(
                "world={world}: {name} needs sm_90 or later (programmatic dependent launch)"
            ));
            None
        }
        Err(e) => Some(Err(e.clone())),
    }
}

/// [`co_residency`] where the ranks of `world` share a GPU; skipped,
/// loudly, where none do.
fn co_residency_where_shared(world: usize) -> Option<Outcome> {
    if !placement(world)?.shares_a_gpu() {
        harness::skip(&format!(
            "world={world}: dsl_co_residency needs ranks that share a GPU, and none do (see SYMM_RANKS_PER_GPU)"
        ));
        return None;
    }
    Some(co_residency(world))
}

gpu_per_world! {
    harness::gpu_test;
    dsl_fp8_conversions: |_| fp8_conversions() => [world_1];
    dsl_compile_times: |_| compile_times() => [world_1];
    dsl_launch_overhead: |_| launch_overhead() => [world_1];
    dsl_checked_launch_cost: |_| checked_launch_cost() => [world_1];
    dsl_out_of_bounds: out_of_bounds => [world_1, world_2];
    dsl_bad_launches: |_| bad_launches() => [world_2];
    dsl_graph_capture: graph_capture => [world_1, world_2, world_3, world_4, world_8];
    // Two ranks at least: one waits on a peer that never signals.
    dsl_kernel_timeout: kernel_timeout => [world_2, world_3, world_4, world_8];
    dsl_co_residency: co_residency_where_shared => [world_1, world_2, world_3, world_4, world_8];
    dsl_pdl_where_shared: pdl_where_shared => [world_2, world_4];
    dsl_pdl_where_shared_raw: pdl_where_shared_raw => [world_2, world_4];
}
