//! `#[symm_kernel]` kernels on the CPU emulator: the DSL test suite and the
//! built-in collectives at world sizes 2, 3, 4 and 8 with odd lengths,
//! against CPU references (float64 where floats are summed); hang diagnosis;
//! bounds errors.
//!
//! With `SYMM_KERNEL_TESTS_ON=gpu` the same tests run on GPU ranks instead
//! (world sizes above the GPU count are skipped, loudly); the diagnosis and
//! bounds tests are emulator-only, since a GPU has neither.

use std::time::{Duration, Instant};

use rand::Rng;
#[path = "support/targets.rs"]
mod targets;
use targets::{emulator_only, ranks};

use symm::dsl::*;
use symm::kernels::{broadcast, ping_pong, ring_all_gather};
use symm::signal::Channel;
use symm::{run, symm_kernel, Comm, CommOptions, Error, LaunchConfig, Ranks};

#[path = "dsl_suite/mod.rs"]
mod dsl_suite;
use dsl_suite::*;

const T: Duration = Duration::from_secs(20);

fn emu<R: Send>(world: usize, f: impl Fn(&Comm) -> symm::Result<R> + Sync) -> Vec<R> {
    let Some(ranks) = ranks(world) else {
        return Vec::new();
    };
    let out = run(ranks, CommOptions::default().with_timeout(T), |c| {
        let r = f(c)?;
        c.synchronize()?;
        Ok(r)
    });
    out.unwrap_or_else(|e| panic!("{e}"))
}

fn lin(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig::linear((n as u32).div_ceil(block), block)
}

#[test]
fn arithmetic_matches_the_reference_bitwise() {
    let n: usize = 1000 + rand::rng().random_range(0..99);
    let x: Vec<f32> = (0..n)
        .map(|_| rand::rng().random_range(-2.0..2.0))
        .collect();
    let y: Vec<f32> = (0..n)
        .map(|_| rand::rng().random_range(-2.0..2.0))
        .collect();
    let xh: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let yh: Vec<bf16> = y.iter().map(|&v| bf16::from_f32(v)).collect();
    emu(1, |c| {
        let (dx, dy, mut out) = (
            c.device_buffer_from(&x)?,
            c.device_buffer_from(&y)?,
            c.device_buffer_from(&vec![f32::NAN; n])?,
        );
        arith::launch::<f32>(c, lin(n, 128), &dx, &dy, &mut out, n as u32)?;
        let want: Vec<u32> = x
            .iter()
            .zip(&y)
            .map(|(&a, &b)| arith_ref(a, b).to_bits())
            .collect();
        assert_eq!(
            out.to_host()?
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            want
        );
        let (dx, dy, mut out) = (
            c.device_buffer_from(&xh)?,
            c.device_buffer_from(&yh)?,
            c.device_buffer_from(&vec![bf16::NAN; n])?,
        );
        arith::launch::<bf16>(c, lin(n, 96), &dx, &dy, &mut out, n as u32)?;
        let want: Vec<u16> = xh
            .iter()
            .zip(&yh)
            .map(|(&a, &b)| arith_ref(a, b).to_bits())
            .collect();
        assert_eq!(
            out.to_host()?
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            want
        );
        Ok(())
    });
}

#[test]
fn integers_control_flow_vectors_shared_memory_shuffles_and_atomics() {
    let n: usize = 3000 + rand::rng().random_range(0..99);
    let xs: Vec<u32> = (0..n).map(|_| rand::rng().random()).collect();
    let xi: Vec<i32> = (0..n)
        .map(|_| rand::rng().random_range(-100_000..100_000))
        .collect();
    let xf: Vec<f32> = (0..n.next_multiple_of(8))
        .map(|_| rand::rng().random_range(-1e3..1e3))
        .collect();
    let blocks = 3 + rand::rng().random_range(0..4usize);
    let xr: Vec<f32> = (0..blocks * 256)
        .map(|_| rand::rng().random_range(-1.0..1.0))
        .collect();
    let xa: Vec<u32> = (0..n).map(|_| rand::rng().random::<u32>() >> 1).collect();
    emu(1, |c| {
        let (dx, mut out) = (
            c.device_buffer_from(&xs)?,
            c.device_buffer_from(&vec![0u32; n])?,
        );
        int_ops::launch(c, lin(n, 128), &dx, &mut out, n as u32)?;
        assert_eq!(
            out.to_host()?,
            xs.iter().map(|&a| int_ops_ref(a)).collect::<Vec<_>>()
        );
        let (di, mut oi) = (
            c.device_buffer_from(&xi)?,
            c.device_buffer_from(&vec![0i32; n])?,
        );
        control::launch::<8>(c, lin(n, 64), &di, &mut oi, n as u32)?;
        assert_eq!(
            oi.to_host()?,
            xi.iter().map(|&v| control_ref::<8>(v)).collect::<Vec<_>>()
        );
        let g = xf.len() / 4;
        let h: Vec<bf16> = xf.iter().chain(&xf).map(|&v| bf16::from_f32(v)).collect();
        let (df, mut of, dh, mut oh) = (
            c.device_buffer_from(&xf)?,
            c.device_buffer_from(&vec![0.0f32; xf.len()])?,
            c.device_buffer_from(&h)?,
            c.device_buffer_from(&vec![bf16::ZERO; h.len()])?,
        );
        vectors::launch(c, lin(g, 32), &df, &mut of, &dh, &mut oh, g as u32)?;
        assert_eq!(
            of.to_host()?,
            xf.chunks(4)
                .flat_map(|q| q.iter().rev().copied())
                .collect::<Vec<_>>()
        );
        assert_eq!(
            oh.to_host()?,
            h.chunks(8)
                .flat_map(|q| q.iter().rev().copied())
                .collect::<Vec<_>>()
        );
        let (dr, mut sums, mut rev) = (
            c.device_buffer_from(&xr)?,
            c.device_buffer_from(&vec![0.0f32; blocks])?,
            c.device_buffer_from(&vec![0.0f32; xr.len()])?,
        );
        shared_reduce::launch(
            c,
            LaunchConfig::linear(blocks as u32, 256),
            &dr,
            &mut sums,
            &mut rev,
        )?;
        assert_eq!(
            sums.to_host()?,
            xr.chunks(256).map(shared_reduce_ref).collect::<Vec<_>>()
        );
        assert_eq!(
            rev.to_host()?,
            xr.chunks(256)
                .flat_map(|b| b.iter().rev().copied())
                .collect::<Vec<_>>()
        );
        let m = n / 256 * 256;
        let (ds, mut ss, mut vs) = (
            c.device_buffer_from(&xs[..m])?,
            c.device_buffer_from(&vec![0u32; m])?,
            c.device_buffer_from(&vec![0u32; m / 32])?,
        );
        shuffles::launch(
            c,
            LaunchConfig::linear((m / 256) as u32, 256),
            &ds,
            &mut ss,
            &mut vs,
        )?;
        let want: Vec<u32> = xs[..m]
            .chunks(32)
            .flat_map(|w| std::iter::repeat_n(w.iter().fold(0u32, |a, &b| a.wrapping_add(b)), 32))
            .collect();
        assert_eq!(ss.to_host()?, want);
        let want: Vec<u32> = xs[..m]
            .chunks(32)
            .map(|w| {
                w.iter()
                    .enumerate()
                    .fold(0, |b, (l, &v)| b | ((v & 1) << l))
            })
            .collect();
        assert_eq!(vs.to_host()?, want);
        let mut init = vec![0u32; 19];
        init[12..16].fill(u32::MAX);
        init[18] = u32::MAX;
        let (da, mut ctr, mut fs) = (
            c.device_buffer_from(&xa)?,
            c.device_buffer_from(&init)?,
            c.device_buffer_from(&[0.0f32; 2])?,
        );
        atomics::launch(c, lin(n, 128), &da, &mut ctr, &mut fs, n as u32)?;
        let got = ctr.to_host()?;
        assert_eq!(got[0], (0..n).filter(|i| i % 8 == 0).count() as u32);
        assert_eq!(got[16], *xa.iter().max().unwrap());
        assert_eq!(got[17], n as u32 - 1);
        let want: f64 = xa.iter().step_by(2).map(|&v| f64::from(v % 1024)).sum();
        assert_eq!(f64::from(fs.to_host()?[0]), want);
        Ok(())
    });
}

#[test]
fn collectives_at_world_sizes_2_3_4_and_8() {
    for world in [2, 3, 4, 8] {
        let chunk = 101 + rand::rng().random_range(0..50usize);
        let data: Vec<Vec<f32>> = (0..world)
            .map(|_| (0..chunk).map(|_| rand::rng().random()).collect())
            .collect();
        let root = rand::rng().random_range(0..world);
        let nb = 333 + rand::rng().random_range(0..50usize);
        let bdata: Vec<f64> = (0..nb).map(|_| rand::rng().random()).collect();
        let start: u32 = rand::rng().random_range(0..1000);
        let rounds: u32 = rand::rng().random_range(3..12);
        let seed: u32 = rand::rng().random();
        emu(world, |c| {
            let r = c.rank();
            let buf = c.alloc::<f32>(chunk * world)?;
            buf.copy_from_host(&vec![f32::NAN; chunk * world])?;
            buf.write(r * chunk, &data[r])?;
            let s = buf.rendezvous()?;
            let [ch, ready, done] = [(); 3].map(|_| Channel::request(c));
            let (ch, ready, done) = (ch?, ready?, done?);
            s.barrier(&ch, T)?;
            let cfg = LaunchConfig::linear(3, 32);
            ring_all_gather::launch::<f32>(c, cfg, &s, chunk as u32, ch.index())?;
            assert_eq!(
                buf.to_host()?,
                data.concat(),
                "world {world} rank {r} all-gather"
            );
            let bb = c.alloc::<f64>(nb)?;
            bb.copy_from_host(&if r == root {
                bdata.clone()
            } else {
                vec![f64::NAN; nb]
            })?;
            let bs = bb.rendezvous()?;
            bs.barrier(&ch, T)?;
            let (cfg, (ready, done)) = (LaunchConfig::linear(2, 64), (ready.index(), done.index()));
            broadcast::launch::<f64>(c, cfg, &bs, root as u32, nb as u32, ready, done)?;
            assert_eq!(bb.to_host()?, bdata, "world {world} rank {r} broadcast");
            let pb = c.alloc::<u32>(4)?;
            pb.copy_from_host(&[start, 0, 0, 0])?;
            let ps = pb.rendezvous()?;
            ps.barrier(&ch, T)?;
            ping_pong::launch(c, LaunchConfig::linear(1, 32), &ps, rounds, ch.index())?;
            if (r ^ 1) < world {
                let want = (0..rounds)
                    .rev()
                    .find(|&k| (k & 1) != (r as u32 & 1))
                    .map_or(start, |k| start + k + 1);
                assert_eq!(pb.read(0, 1)?[0], want, "world {world} rank {r} ping-pong");
            }
            let mb = c.alloc::<u32>(64)?;
            mb.copy_from_host(&[0; 64])?;
            let ms = mb.rendezvous()?;
            ms.barrier(&ch, T)?;
            message_passing::launch(c, LaunchConfig::linear(1, 32), &ms, 50, seed)?;
            let m = mb.read(0, 4)?;
            assert_eq!(
                (m[0], m[2], m[3]),
                (50, 0, 0),
                "world {world} rank {r}: flag, ordering errors, timeouts"
            );
            s.barrier(&ch, T)?;
            c.synchronize()
        });
    }
}

#[test]
fn a_wait_nobody_answers_is_diagnosed_within_5_s() {
    if !emulator_only() {
        return;
    }
    let t = Instant::now();
    let err = run(
        Ranks::Emulator(3),
        CommOptions::default().with_timeout(T),
        |c| {
            let buf = c.alloc::<u32>(8)?;
            let s = buf.rendezvous()?;
            // The group's first channel: 0 on every rank.
            let ch = Channel::request(c)?;
            if c.rank() != 2 {
                // Ranks 0 and 1 wait for a signal from rank 2; rank 2 never sends.
                wait_on::launch(c, LaunchConfig::linear(2, 64), &s, 2, ch.index())?;
            }
            Ok(())
        },
    )
    .expect_err("a deadlock");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(err.errors.len(), 2, "{err}");
    for (rank, e) in &err.errors {
        let msg = e.to_string();
        assert!(matches!(e, Error::KernelHang { .. }), "{msg}");
        for needle in [
            format!("kernel `wait_on` on rank {rank} made no progress"),
            format!("rank {rank}, block 0 thread 0: wait_signal from peer 2 on channel 0"),
            "expects 1".to_string(),
            "tests/dsl_suite/mod.rs:".to_string(),
        ] {
            assert!(
                msg.contains(&needle),
                "rank {rank}: {msg:?} lacks {needle:?}"
            );
        }
    }
}

#[test]
fn a_rank_busy_on_the_host_is_not_a_hang() {
    if !emulator_only() {
        return;
    }
    // Rank 0 waits in a kernel while rank 1 spends longer than the stall
    // window on the host before it signals: slow, not deadlocked.
    run(
        Ranks::Emulator(2),
        CommOptions::default().with_timeout(T),
        |c| {
            let buf = c.alloc::<u32>(8)?;
            let s = buf.rendezvous()?;
            let ch = Channel::request(c)?;
            if c.rank() == 0 {
                wait_on::launch(c, LaunchConfig::linear(1, 32), &s, 1, ch.index())?;
            } else {
                std::thread::sleep(Duration::from_millis(3500));
                s.put_signal(0, &ch, T)?;
            }
            c.synchronize()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn device_functions_own_their_shared_arrays_and_lanes_follow_the_linear_id() {
    emu(2, |c| {
        let x: Vec<u32> = (0..32)
            .map(|_| rand::rng().random_range(0..1 << 20))
            .collect();
        let dx = c.device_buffer_from(&x)?;
        let mut out = c.device_buffer_from(&[u32::MAX; 32])?;
        shared_scopes::launch(c, LaunchConfig::linear(1, 32), &dx, &mut out)?;
        let want: Vec<u32> = (0..32).map(|t| x[t] + 3 * x[31 - t] + 1).collect();
        assert_eq!(out.to_host()?, want, "rank {}", c.rank());
        let mut l = c.device_buffer_from(&vec![u32::MAX; 64])?;
        let cfg = LaunchConfig {
            grid: (1, 1, 1),
            block: (16, 4, 1),
            ..LaunchConfig::linear(1, 1)
        };
        lanes::launch(c, cfg, &mut l)?;
        assert_eq!(l.to_host()?, (0..64).map(|t| t % 32).collect::<Vec<u32>>());
        Ok(())
    });
}

#[symm_kernel]
fn wait_briefly(buf: SymmBuf<u32>, src: u32, channel: u32) {
    if thread_idx_x() == 0 {
        let _ = buf.wait_signal_within(src, channel, 200_000_000, false);
    }
}

#[test]
fn an_explicit_signal_timeout_is_honoured() {
    if !emulator_only() {
        return;
    }
    let t = Instant::now();
    let err = run(
        Ranks::Emulator(2),
        CommOptions::default().with_timeout(T),
        |c| {
            let buf = c.alloc::<u32>(8)?;
            let s = buf.rendezvous()?;
            let ch = Channel::request(c)?;
            if c.rank() == 0 {
                wait_briefly::launch(c, LaunchConfig::linear(1, 32), &s, 1, ch.index())?;
            }
            Ok(())
        },
    )
    .expect_err("nobody signals");
    // The kernel's own 200 ms, not the group's 20 s (nor the 2 s stall).
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        t.elapsed()
    );
    let msg = err.to_string();
    assert!(
        msg.contains(
            "rank 0, block 0: wait_signal on channel 0 with peer 1 did not complete within 200 ms"
        ),
        "{msg}"
    );
}

#[symm_kernel]
fn off_by_one(x: &[f32], y: &mut [f32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i <= n {
        y[i] = x[i] * 2.0f32;
    }
}

#[test]
fn out_of_bounds_names_kernel_rank_block_thread_index_and_length() {
    if !emulator_only() {
        return;
    }
    let err = run(Ranks::Emulator(2), CommOptions::default(), |c| {
        let x = c.device_buffer_from(&[1.0f32; 100])?;
        let mut y = c.device_buffer::<f32>(100)?;
        off_by_one::launch(c, LaunchConfig::linear(4, 32), &x, &mut y, 100)
    })
    .expect_err("index 100 of 100");
    assert_eq!(err.errors.len(), 2);
    for (rank, e) in &err.errors {
        let msg = e.to_string();
        assert!(matches!(e, Error::KernelFault { .. }), "{msg}");
        for needle in [
            format!("kernel `off_by_one` on rank {rank}, block 3, thread 4"),
            "index 100 is out of bounds for length 100".to_string(),
            "emulator_kernels.rs:".to_string(),
        ] {
            assert!(msg.contains(&needle), "{msg:?} lacks {needle:?}");
        }
    }
}

#[symm_kernel]
fn divergent_warp(out: &mut [u32]) {
    let t = thread_idx_x();
    if t < 16 {
        out[t] = ballot(true);
    } else {
        out[t] = shfl_xor(t, 1);
    }
}

#[test]
fn a_warp_split_across_collectives_is_an_error() {
    if !emulator_only() {
        return;
    }
    let err = run(Ranks::Emulator(1), CommOptions::default(), |c| {
        let mut out = c.device_buffer::<u32>(32)?;
        divergent_warp::launch(c, LaunchConfig::linear(1, 32), &mut out)
    })
    .expect_err("divergent collectives");
    assert!(
        err.to_string().contains("reached different collectives"),
        "{err}"
    );
}

#[allow(dead_code)]
#[path = "../examples/print_cuda.rs"]
mod print_cuda_example;

#[test]
fn the_examples_kernel_runs_against_a_float64_reference() {
    let n: usize = 777 + rand::rng().random_range(0..50);
    let x: Vec<f32> = (0..n)
        .map(|_| rand::rng().random_range(-1.0..1.0))
        .collect();
    let y: Vec<f32> = (0..n)
        .map(|_| rand::rng().random_range(-1.0..1.0))
        .collect();
    let a: f32 = rand::rng().random_range(-2.0..2.0);
    emu(1, |c| {
        let (dx, mut dy) = (c.device_buffer_from(&x)?, c.device_buffer_from(&y)?);
        print_cuda_example::axpy::launch::<f32>(c, lin(n, 64), &dx, &mut dy, a, n as u32)?;
        for (i, got) in dy.to_host()?.into_iter().enumerate() {
            let want = f64::from(a) * f64::from(x[i]) + f64::from(y[i]);
            assert!(
                (f64::from(got) - want).abs() <= 1e-6,
                "element {i}: {got} vs {want}"
            );
        }
        Ok(())
    });
}

/// `gather_vectors` on `world` ranks with fresh random data from `draw`:
/// every rank receives every other rank's vector, bit for bit.
fn gathered<T: Scalar, const N: usize>(world: usize, draw: impl Fn() -> T) {
    let data: Vec<Vec<T>> = (0..world)
        .map(|_| (0..N).map(|_| draw()).collect())
        .collect();
    let outs = emu(world, |c| run_gather_vectors::<T, N>(c, &data[c.rank()], T));
    for (rank, out) in outs.iter().enumerate() {
        for (r, want) in data.iter().enumerate().filter(|&(r, _)| r != rank) {
            let got: Vec<u32> = out[r * N..(r + 1) * N]
                .iter()
                .map(|v| v.to_bits32())
                .collect();
            let want: Vec<u32> = want.iter().map(|v| v.to_bits32()).collect();
            assert_eq!(
                got, want,
                "world {world}: rank {rank}'s copy of rank {r}'s vector"
            );
        }
    }
}

#[test]
fn gathers_receive_every_rank_at_once() {
    for world in [2, 3, 4, 8] {
        gathered::<f32, 4>(world, || rand::rng().random_range(-1e3..1e3));
        gathered::<bf16, 8>(world, || {
            bf16::from_f32(rand::rng().random_range(-1.0..1.0))
        });
        let seed: u32 = rand::rng().random();
        let outs = emu(world, |c| run_gather_packets(c, seed, T));
        for (rank, rounds) in outs.iter().enumerate() {
            for (round, out) in rounds.iter().enumerate() {
                let tag = round as u32 + 1;
                let want = gather_packets_ref(world as u32, tag, seed ^ tag);
                assert_eq!(out, &want, "world {world}, rank {rank}, tag {tag}");
            }
        }
    }
}

#[test]
fn a_gather_names_the_rank_whose_data_never_came() {
    if !emulator_only() {
        return;
    }
    let err = run(
        Ranks::Emulator(3),
        CommOptions::default().with_timeout(T),
        |c| {
            let stage = c.alloc::<f32>(12)?;
            stage.copy_from_host(&[f32::from_bits(u32::MAX); 12])?;
            let s = stage.rendezvous()?;
            let src = c.device_buffer_from(&[1.0f32, 2.0, 3.0, 4.0])?;
            let mut out = c.device_buffer::<f32>(12)?;
            s.barrier(&Channel::request(c)?, T)?;
            // Rank 2 receives from ranks 0 and 1, but never sends.
            gather_vectors::launch::<f32, 4>(
                c,
                LaunchConfig::linear(1, 32),
                &s,
                &src,
                &mut out,
                2,
            )?;
            c.synchronize()
        },
    )
    .expect_err("ranks 0 and 1 wait for rank 2 forever");
    let failed: Vec<usize> = err.errors.iter().map(|(r, _)| *r).collect();
    assert_eq!(failed, vec![0, 1], "{err}");
    for (rank, e) in &err.errors {
        let msg = e.to_string();
        for needle in [
            format!("rank {rank}, block 0 thread 0: gather_ready: pushed data from rank 2"),
            "tests/dsl_suite/mod.rs:".to_string(),
        ] {
            assert!(
                msg.contains(&needle),
                "rank {rank}: {msg:?} lacks {needle:?}"
            );
        }
    }
}

/// `all_arrive` (the GPU co-residency test's kernel) at worlds 1–8: every
/// block of every rank counts itself in rank 0's word and waits for all the
/// others; none gives up, and rank 0 counts exactly `world × grid`.
#[test]
fn every_block_of_every_rank_arrives() {
    for world in 1..=8 {
        let grid = 1 + rand::rng().random_range(0..3u32);
        let words = emu(world, |c| {
            let buf = c.alloc::<u32>(4)?;
            buf.copy_from_host(&[0; 4])?;
            let s = buf.rendezvous()?;
            let ch = Channel::request(c)?;
            s.barrier(&ch, T)?;
            all_arrive::launch(c, LaunchConfig::linear(grid, 32), &s, 5_000_000_000)?;
            c.synchronize()?;
            s.barrier(&ch, T)?;
            c.synchronize()?;
            buf.to_host()
        });
        for (r, w) in words.iter().enumerate() {
            assert_eq!(w[1], 0, "world {world}, rank {r}: blocks gave up");
        }
        if let Some(w) = words.first() {
            assert_eq!(w[0], world as u32 * grid, "world {world}: arrivals");
        }
    }
}
