//! The DSL on real GPUs: test kernels against CPU references on fresh
//! random data (bitwise where the operations are deterministic), the three
//! collective kernels on 2 and 4 ranks, CUDA graph capture, in-kernel
//! timeouts, compile times, and launch overhead against raw cudarc.
//! A custom harness (see `support/harness.rs`).

use std::time::{Duration, Instant};

use rand::Rng;
use symm::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use symm::cudarc::driver::PushKernelArg;
use symm::jit::{Arch, CacheHit, CompileRequest, JitEngine};
use symm::kernels::{broadcast, ping_pong, ring_all_gather};
use symm::signal::Channel;
use symm::{bf16, f16, run, Comm, CommOptions, Error, LaunchConfig, Ranks};

#[path = "support/harness.rs"]
mod harness;
use harness::{placement, Harness, Outcome};

#[path = "dsl_suite/mod.rs"]
mod dsl_suite;
use dsl_suite::*;

const T: Duration = Duration::from_secs(10);

fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn check(cond: bool, msg: impl FnOnce() -> String) -> symm::Result<()> {
    if cond {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            rank: 0,
            message: format!("CHECK FAILED: {}", msg()),
        })
    }
}

/// Runs `f` on `world` GPU ranks, placed as [`harness::placement`] says
/// (sharing GPUs when there are fewer than ranks).
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
    let ranks: Ranks = placement(world).expect("main runs only world sizes it can place");
    run(ranks, options, f).map_err(fail)
}

fn rng() -> rand::rngs::ThreadRng {
    rand::rng()
}

fn lin(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig::linear((n as u32).div_ceil(block), block)
}

fn first_diff<X: PartialEq + std::fmt::Debug>(got: &[X], want: &[X]) -> Option<String> {
    got.iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .map(|i| format!("index {i}: got {:?}, want {:?}", got[i], want[i]))
}

fn arith_case<Tt: symm::dsl::DslFloat>(name: &str) -> Outcome {
    let n: usize = 10_000 + rng().random_range(0..999);
    let x: Vec<Tt> = (0..n)
        .map(|_| Tt::from_f32(rng().random_range(-2.0f32..2.0)))
        .collect();
    let y: Vec<Tt> = (0..n)
        .map(|_| Tt::from_f32(rng().random_range(-2.0f32..2.0)))
        .collect();
    let want: Vec<u64> = x
        .iter()
        .zip(&y)
        .map(|(&a, &b)| arith_ref(a, b).__to_bits64())
        .collect();
    gpus(1, |c| {
        let (dx, dy) = (c.device_buffer_from(&x)?, c.device_buffer_from(&y)?);
        let mut out = c.device_buffer_from(&vec![Tt::from_f32(f32::NAN); n])?;
        arith::launch::<Tt>(c, lin(n, 256), &dx, &dy, &mut out, n as u32)?;
        c.synchronize()?;
        let got: Vec<u64> = out.to_host()?.iter().map(|v| v.__to_bits64()).collect();
        check(got == want, || {
            format!("{name}: {}", first_diff(&got, &want).unwrap_or_default())
        })
    })?;
    Ok(format!(
        "{n} random {name} inputs, bitwise equal to the CPU"
    ))
}

fn local_suite() -> Outcome {
    let mut notes = vec![
        arith_case::<f32>("f32")?,
        arith_case::<f64>("f64")?,
        arith_case::<bf16>("bf16")?,
        arith_case::<f16>("f16")?,
    ];
    let n: usize = 20_000 + rng().random_range(0..999);
    let xs: Vec<u32> = (0..n).map(|_| rng().random()).collect();
    let xi: Vec<i32> = (0..n)
        .map(|_| rng().random_range(-100_000..100_000))
        .collect();
    let xf: Vec<f32> = (0..n.next_multiple_of(8))
        .map(|_| rng().random_range(-1e3f32..1e3))
        .collect();
    let xh: Vec<bf16> = (0..2 * n.next_multiple_of(8))
        .map(|_| bf16::from_f32(rng().random_range(-4.0f32..4.0)))
        .collect();
    let blocks = 40 + rng().random_range(0..20);
    let xr: Vec<f32> = (0..blocks * 256)
        .map(|_| rng().random_range(-1.0f32..1.0))
        .collect();
    let xa: Vec<u32> = (0..n).map(|_| rng().random::<u32>() >> 1).collect();
    gpus(1, |c| {
        // Integer operators.
        let (dx, mut out) = (
            c.device_buffer_from(&xs)?,
            c.device_buffer_from(&vec![0xDEAD_BEEFu32; n])?,
        );
        int_ops::launch(c, lin(n, 128), &dx, &mut out, n as u32)?;
        // Control flow.
        let (di, mut oi) = (
            c.device_buffer_from(&xi)?,
            c.device_buffer_from(&vec![i32::MIN; n])?,
        );
        control::launch::<8>(c, lin(n, 128), &di, &mut oi, n as u32)?;
        // Vectors.
        let groups = xf.len() / 4 / 2;
        let (df, mut of) = (
            c.device_buffer_from(&xf)?,
            c.device_buffer_from(&vec![f32::NAN; xf.len()])?,
        );
        let (dh, mut oh) = (
            c.device_buffer_from(&xh)?,
            c.device_buffer_from(&vec![bf16::NAN; xh.len()])?,
        );
        vectors::launch(
            c,
            lin(groups, 64),
            &df,
            &mut of,
            &dh,
            &mut oh,
            groups as u32,
        )?;
        // Shared memory.
        let (dr, mut sums, mut rev) = (
            c.device_buffer_from(&xr)?,
            c.device_buffer_from(&vec![f32::NAN; blocks])?,
            c.device_buffer_from(&vec![f32::NAN; xr.len()])?,
        );
        shared_reduce::launch(
            c,
            LaunchConfig::linear(blocks as u32, 256),
            &dr,
            &mut sums,
            &mut rev,
        )?;
        // Shuffles over whole warps.
        let m = n / 256 * 256;
        let (ds, mut ss, mut vs) = (
            c.device_buffer_from(&xs[..m])?,
            c.device_buffer_from(&vec![0u32; m])?,
            c.device_buffer_from(&vec![0xDEAD_BEEFu32; m / 32])?,
        );
        shuffles::launch(
            c,
            LaunchConfig::linear((m / 256) as u32, 256),
            &ds,
            &mut ss,
            &mut vs,
        )?;
        // Atomics.
        let mut init = vec![0u32; 19];
        init[12..16].fill(u32::MAX);
        init[18] = u32::MAX;
        let (da, mut ctr, mut fs) = (
            c.device_buffer_from(&xa)?,
            c.device_buffer_from(&init)?,
            c.device_buffer_from(&[0.0f32; 2])?,
        );
        atomics::launch(c, lin(n, 256), &da, &mut ctr, &mut fs, n as u32)?;
        c.synchronize()?;

        let want: Vec<u32> = xs.iter().map(|&a| int_ops_ref(a)).collect();
        let got = out.to_host()?;
        check(got == want, || {
            format!("int_ops: {}", first_diff(&got, &want).unwrap_or_default())
        })?;
        let want: Vec<i32> = xi.iter().map(|&v| control_ref::<8>(v)).collect();
        let got = oi.to_host()?;
        check(got == want, || {
            format!("control: {}", first_diff(&got, &want).unwrap_or_default())
        })?;
        let want: Vec<f32> = xf[..groups * 4]
            .chunks(4)
            .flat_map(|g| g.iter().rev().copied())
            .collect();
        let got = of.read(0, groups * 4)?;
        check(
            got.iter()
                .map(|v| v.to_bits())
                .eq(want.iter().map(|v| v.to_bits())),
            || "vectors f32 differ".into(),
        )?;
        let want: Vec<bf16> = xh[..groups * 8]
            .chunks(8)
            .flat_map(|g| g.iter().rev().copied())
            .collect();
        let got = oh.read(0, groups * 8)?;
        check(
            got.iter()
                .map(|v| v.to_bits())
                .eq(want.iter().map(|v| v.to_bits())),
            || "vectors bf16 differ".into(),
        )?;
        let want: Vec<f32> = xr.chunks(256).map(shared_reduce_ref).collect();
        let got = sums.to_host()?;
        check(
            got.iter()
                .map(|v| v.to_bits())
                .eq(want.iter().map(|v| v.to_bits())),
            || format!("shared sums: {got:?} vs {want:?}"),
        )?;
        let want: Vec<f32> = xr
            .chunks(256)
            .flat_map(|b| b.iter().rev().copied())
            .collect();
        check(rev.to_host()? == want, || "shared reversal differs".into())?;
        let want_s: Vec<u32> = xs[..m]
            .chunks(32)
            .flat_map(|w| {
                let s = w.iter().fold(0u32, |a, &b| a.wrapping_add(b));
                std::iter::repeat_n(s, 32)
            })
            .collect();
        check(ss.to_host()? == want_s, || "warp sums differ".into())?;
        let want_v: Vec<u32> = xs[..m]
            .chunks(32)
            .map(|w| {
                w.iter()
                    .enumerate()
                    .fold(0u32, |b, (l, &v)| b | ((v & 1) << l))
            })
            .collect();
        check(vs.to_host()? == want_v, || "ballots differ".into())?;
        let got = ctr.to_host()?;
        for (k, &g) in got[..8].iter().enumerate() {
            let want = (0..n).filter(|i| i % 8 == k).count() as u32;
            check(g == want, || {
                format!("atomic_add counter {k}: {g} != {want}")
            })?;
        }
        for k in 0..4 {
            let vals = || {
                xa.iter()
                    .enumerate()
                    .filter(move |(i, _)| i % 4 == k)
                    .map(|(_, &v)| v)
            };
            check(got[8 + k] == vals().max().unwrap_or(0), || {
                format!("atomic_max {k}")
            })?;
            check(got[12 + k] == vals().min().unwrap_or(u32::MAX), || {
                format!("atomic_min {k}")
            })?;
        }
        check(got[16] == *xa.iter().max().unwrap_or(&0), || {
            "CAS max".into()
        })?;
        check(got[17] == n as u32 - 1, || {
            format!("exchange saw the sentinel {} times", n as u32 - got[17])
        })?;
        check(xa.contains(&got[18]), || {
            "exchange left a value nobody wrote".into()
        })?;
        let fs = fs.to_host()?;
        for (k, &f) in fs.iter().enumerate() {
            let want: f64 = xa
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == k)
                .map(|(_, &v)| f64::from(v % 1024))
                .sum();
            check(f64::from(f) == want, || {
                format!("float atomic_add {k}: {f} != {want}")
            })?;
        }
        Ok(())
    })?;
    notes.push("int ops, control flow, vectors (f32×4, bf16×8), shared-memory tree sums, warp shuffles and ballots, atomics: all exact".into());
    Ok(notes.join("; "))
}

fn collectives(world: usize) -> Outcome {
    let chunk = 1000 + rng().random_range(0..100usize);
    let data: Vec<Vec<f32>> = (0..world)
        .map(|_| (0..chunk).map(|_| rng().random()).collect())
        .collect();
    let hdata: Vec<Vec<bf16>> = (0..world)
        .map(|_| (0..chunk).map(|_| bf16::from_f32(rng().random())).collect())
        .collect();
    let root = rng().random_range(0..world);
    let nb = 4097 + rng().random_range(0..100usize);
    let bdata: Vec<f32> = (0..nb).map(|_| rng().random()).collect();
    let start: u32 = rng().random_range(0..1_000_000);
    let rounds: u32 = rng().random_range(10..60);
    let seed: u32 = rng().random();
    let vecs: Vec<f32> = (0..4 * world)
        .map(|_| rng().random_range(-1e3..1e3))
        .collect();
    gpus(world, |c| {
        let r = c.rank();
        // Ring all-gather, f32 then bf16.
        let buf = c.alloc::<f32>(chunk * world)?;
        buf.copy_from_host(&vec![f32::NAN; chunk * world])?;
        buf.write(r * chunk, &data[r])?;
        let s = buf.rendezvous()?;
        let [a, b, d] = [(); 3].map(|_| Channel::request(c));
        let (ch, ready, done) = (a?, b?.index(), d?.index());
        s.barrier(&ch, T)?;
        let cfg = LaunchConfig::linear(3, 128);
        ring_all_gather::launch::<f32>(c, cfg, &s, chunk as u32, ch.index())?;
        let hb = c.alloc::<bf16>(chunk * world)?;
        hb.copy_from_host(&vec![bf16::NAN; chunk * world])?;
        hb.write(r * chunk, &hdata[r])?;
        let hs = hb.rendezvous()?;
        hs.barrier(&ch, T)?;
        let cfg = LaunchConfig::linear(5, 64);
        ring_all_gather::launch::<bf16>(c, cfg, &hs, chunk as u32, ch.index())?;
        c.synchronize()?;
        check(buf.to_host()? == data.concat(), || {
            format!("rank {r}: f32 all-gather wrong")
        })?;
        let want: Vec<u16> = hdata.concat().iter().map(|v| v.to_bits()).collect();
        check(
            hb.to_host()?
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
                == want,
            || format!("rank {r}: bf16 all-gather wrong"),
        )?;
        // Broadcast.
        let bb = c.alloc::<f32>(nb)?;
        bb.copy_from_host(&if r == root {
            bdata.clone()
        } else {
            vec![f32::NAN; nb]
        })?;
        let bs = bb.rendezvous()?;
        bs.barrier(&ch, T)?;
        let cfg = LaunchConfig::linear(4, 256);
        broadcast::launch::<f32>(c, cfg, &bs, root as u32, nb as u32, ready, done)?;
        c.synchronize()?;
        check(bb.to_host()? == bdata, || {
            format!("rank {r}: broadcast from {root} wrong")
        })?;
        // Ping-pong.
        let pb = c.alloc::<u32>(4)?;
        pb.copy_from_host(&[start, 0, 0, 0])?;
        let ps = pb.rendezvous()?;
        ps.barrier(&ch, T)?;
        ping_pong::launch(c, LaunchConfig::linear(1, 32), &ps, rounds, ch.index())?;
        c.synchronize()?;
        let v = pb.read(0, 1)?[0];
        if (r ^ 1) < world {
            // The odd rank receives in even rounds (0, 2, ...), the even in odd ones.
            let last_recv_round = (0..rounds).rev().find(|&k| (k & 1) != (r as u32 & 1));
            let want = last_recv_round.map_or(start, |k| start + k + 1);
            check(v == want, || {
                format!("rank {r}: ping-pong slot {v}, want {want}")
            })?;
        }
        // Message passing with release/acquire on peer memory.
        let mb = c.alloc::<u32>(64)?;
        mb.copy_from_host(&[0; 64])?; // flags must start at zero
        let ms = mb.rendezvous()?;
        ms.barrier(&ch, T)?;
        message_passing::launch(c, LaunchConfig::linear(1, 32), &ms, 2000, seed)?;
        c.synchronize()?;
        let m = mb.read(0, 4)?;
        check(m[0] == 2000 && m[2] == 0 && m[3] == 0, || {
            format!(
                "rank {r}: flag {}, {} ordering errors, {} timeouts",
                m[0], m[2], m[3]
            )
        })?;
        // Gathers: every peer's sentinel-marked vector, and every rank's
        // LL packets over two rounds of tags, polled together.
        let got = run_gather_vectors::<f32, 4>(c, &vecs[4 * r..4 * r + 4], T)?;
        for p in (0..world).filter(|&p| p != r) {
            check(got[4 * p..4 * p + 4] == vecs[4 * p..4 * p + 4], || {
                format!(
                    "rank {r}: gather_ready from rank {p}: {:?}",
                    &got[4 * p..4 * p + 4]
                )
            })?;
        }
        for (round, got) in run_gather_packets(c, seed, T)?.into_iter().enumerate() {
            let tag = round as u32 + 1;
            let want = gather_packets_ref(world as u32, tag, seed ^ tag);
            check(got == want, || {
                format!("rank {r}: gather_tagged2, tag {tag}: {got:?}")
            })?;
        }
        s.barrier(&ch, T)?;
        c.synchronize()
    })?;
    Ok(format!(
        "ring all-gather (f32, bf16; chunk {chunk}), broadcast from rank {root} ({nb} elems), ping-pong ({rounds} rounds), 2000 release/acquire messages, gather_ready and gather_tagged2 from every rank: all exact"
    ))
}

fn graph_capture(world: usize) -> Outcome {
    let chunk = 777;
    gpus(world, |c| {
        let r = c.rank();
        let buf = c.alloc::<f32>(chunk * world)?;
        let s = buf.rendezvous()?;
        let ch = Channel::request(c)?;
        let cfg = LaunchConfig::linear(2, 128);
        // Warm up (loads the module) before capturing.
        ring_all_gather::launch::<f32>(c, cfg, &s, chunk as u32, ch.index())?;
        c.synchronize()?;
        s.barrier(&ch, T)?;
        c.synchronize()?;
        let stream = c.cuda_stream().expect("GPU rank");
        let drv = |op| {
            move |source| Error::Driver {
                rank: r,
                device: c.device(),
                op,
                source,
            }
        };
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(drv("begin_capture"))?;
        ring_all_gather::launch::<f32>(c, cfg, &s, chunk as u32, ch.index())?;
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
            s.barrier(&ch, T)?;
            c.synchronize()?;
            graph.launch().map_err(drv("cuGraphLaunch"))?;
            c.synchronize()?;
            check(buf.to_host()? == all.concat(), || {
                format!("rank {r} replay {it} wrong")
            })?;
            s.barrier(&ch, T)?;
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
        let [a, b, d] = [(); 3].map(|_| Channel::request(c));
        let (quiet, ready, done) = (a?, b?, d?);
        let mut report = String::new();
        if c.rank() == 0 {
            let t = Instant::now();
            // Rank 1 never signals on `quiet` (channel 0 on every rank).
            wait_on::launch(c, LaunchConfig::linear(2, 64), &s, 1, quiet.index())?;
            let e = c.synchronize().err();
            let el = t.elapsed();
            match &e {
                Some(
                    e @ Error::SignalTimeout {
                        rank: 0,
                        block: 0,
                        peer: 1,
                        channel: 0,
                        ..
                    },
                ) if el < Duration::from_millis(400) => {
                    report = format!("after {:.0} ms: {e}", el.as_secs_f64() * 1e3)
                }
                other => check(false, || {
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
        bs.barrier(&quiet, T)?;
        let cfg = LaunchConfig::linear(1, 128);
        broadcast::launch::<f32>(c, cfg, &bs, 0, 100, ready.index(), done.index())?;
        c.synchronize()?;
        check(
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
            return check(false, || {
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
                return check(false, || format!("a grid of {} was launched", limit + 1))
                    .map(|_| (0, String::new()));
            }
            Err(e) => e.to_string(),
        };
        check(
            e.contains("cannot be resident") && e.contains(&format!("at most {limit} blocks")),
            || e.clone(),
        )?;
        let ch = Channel::request(c)?;
        s.barrier(&ch, T)?;
        all_arrive::launch(c, LaunchConfig::linear(limit, THREADS), &s, 2_000_000_000)?;
        c.synchronize()?;
        let words = buf.to_host()?;
        check(words[1] == 0, || {
            format!(
                "rank {}: {} blocks gave up waiting: a grid of {limit} is not co-resident",
                c.rank(),
                words[1]
            )
        })?;
        if c.rank() == 0 {
            let all = (c.world_size() as u32) * limit;
            check(words[0] == all, || {
                format!("{} blocks arrived, expected {all}", words[0])
            })?;
        }
        s.barrier(&ch, T)?;
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

fn bad_launches() -> Outcome {
    gpus(2, |c| {
        let x = c.device_buffer::<f32>(10)?;
        let mut y = c.device_buffer::<f32>(10)?;
        let e = copy_n::launch(c, LaunchConfig::linear(0, 32), &x, &mut y, 10)
            .unwrap_err()
            .to_string();
        check(e.contains("zero dimension"), || e.clone())?;
        let e = copy_n::launch(c, LaunchConfig::linear(1, 2048), &x, &mut y, 10)
            .unwrap_err()
            .to_string();
        check(e.contains("2048 threads"), || e.clone())?;
        let wrong = c.alloc::<u32>(4)?;
        let ws = wrong.rendezvous()?;
        let e = ring_all_gather::launch::<f32>(c, LaunchConfig::linear(1, 32), &ws, 1, 0)
            .unwrap_err()
            .to_string();
        check(e.contains("holds u32, but the kernel expects f32"), || {
            e.clone()
        })?;
        Ok(())
    })?;
    Ok("zero grid, oversized block and a mistyped symmetric buffer are clear errors".into())
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
    let opts: Vec<String> = symm::__private::KERNEL_OPTIONS
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
        let status = c.device_buffer_from(&[0u32; 8])?;
        let cfg = LaunchConfig::linear(1, 256);
        copy_n::launch(c, cfg, &x, &mut y, n as u32)?;
        let src = copy_n::cuda_source_for();
        let opts: Vec<String> = symm::__private::KERNEL_OPTIONS
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
        let drv = |op| {
            move |source| Error::Driver {
                rank: 0,
                device: c.device(),
                op,
                source,
            }
        };
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
        check(y.to_host()? == vec![1.0; n], || "copy_n wrong".into())?;
        Ok((dsl_us[7], raw_us[7]))
    })?;
    let (d, r) = res[0];
    Ok(format!(
        "host µs/launch: DSL {d:.2}, raw cudarc {r:.2}, ratio {:.2}×",
        d / r
    ))
}

fn main() {
    let mut h = Harness::new("gpu_dsl");
    if h.gpus == 0 {
        h.skip(4 + 4 * h.worlds.len(), "no CUDA device; set SYMM_REQUIRE_GPU=1 to fail instead (the CPU tests compile every kernel)");
        h.finish();
    }
    h.run("dsl_compile_times", 1, &compile_times);
    h.run("dsl_local_suite", 1, &local_suite);
    h.run("dsl_launch_overhead", 1, &launch_overhead);
    if h.place(2, 1).is_some() {
        h.run("dsl_bad_launches", 2, &bad_launches);
    }
    for w in h.worlds.clone() {
        let Some(ranks) = h.place(w, 4) else {
            continue;
        };
        h.run("dsl_collectives", w, &|| collectives(w));
        h.run("dsl_graph_capture", w, &|| graph_capture(w));
        if w < 2 {
            h.skip(1, &format!("world={w}: dsl_kernel_timeout needs 2 ranks"));
        } else {
            h.run("dsl_kernel_timeout", w, &|| kernel_timeout(w));
        }
        if ranks.shares_a_gpu() {
            h.run("dsl_co_residency", w, &|| co_residency(w));
        } else {
            h.skip(
                1,
                &format!("world={w}: dsl_co_residency needs ranks that share a GPU, and none do (see SYMM_RANKS_PER_GPU)"),
            );
        }
    }
    h.finish();
}
