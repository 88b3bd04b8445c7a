//! `#[symm_kernel]` kernels on the CPU emulator: the DSL test suite and the
//! built-in collectives at world sizes 1, 2, 3, 4 and 8 with odd lengths,
//! against CPU references (bitwise, or float64 where floats are summed);
//! hang diagnosis; bounds errors; failed `kernel_assert!`s. The drivers
//! live in `dsl_suite/mod.rs`.
//!
//! With `SYMM_KERNEL_TESTS_ON=gpu` the same tests run on GPU ranks instead,
//! with GPU-sized data (world sizes that cannot be placed are skipped,
//! loudly); the diagnosis and bounds tests are emulator-only, since a GPU
//! has neither.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
#[path = "support/targets.rs"]
mod targets;
use targets::{emulator_only, on_gpu, ranks};
#[macro_use]
#[path = "support/testgen.rs"]
mod testgen;

use symm::dsl::*;
use symm::signal::{Channel, SignalKind};
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
    emu(1, |c| {
        run_arith::<f32>(c, 128)?;
        run_arith::<f64>(c, 256)?;
        run_arith::<bf16>(c, 96)?;
        run_arith::<f16>(c, 64)?;
        run_arith::<f8e4m3>(c, 64)?;
        run_arith::<f8e5m2>(c, 32)
    });
}

/// `#[symm_kernel(max_threads = N)]`: blocks up to N run, larger ones are
/// refused alike on both backends (and on a GPU, a kernel whose registers
/// do not fit its block is a clear error).
#[test]
fn max_threads_bounds_a_kernels_blocks() {
    emu(1, run_block_bounds);
}

#[test]
fn exp_is_within_two_ulp() {
    emu(1, run_exp);
}

/// Every fp8 bit pattern widened, and every probe of `fp8_probes` rounded,
/// by a kernel: bit for bit the Rust conversions.
#[test]
fn fp8_conversions_in_kernels_match_the_rust_ones_bitwise() {
    emu(1, |c| {
        run_fp8_convert::<f8e4m3>(c)?;
        run_fp8_convert::<f8e5m2>(c)
    });
}

/// Symmetric buffers of fp8 filled from the host, read back, and copied
/// from the next rank with 16-element vectors, bit for bit.
fn fp8_copies(world: usize) {
    let seed = rand::rng().random();
    emu(world, |c| {
        run_fp8_copies::<f8e4m3>(c, seed, T)?;
        run_fp8_copies::<f8e5m2>(c, seed ^ 1, T)
    });
}

#[test]
fn integers_control_flow_vectors_shared_memory_shuffles_and_atomics() {
    emu(1, run_local_suite);
}

/// Ring all-gather, broadcast, ping-pong and message passing.
fn collectives(world: usize) {
    let seed = rand::rng().random();
    emu(world, |c| run_collectives(c, seed, T));
}

/// Gathers that receive from every rank at once.
fn gathers(world: usize) {
    let seed = rand::rng().random();
    emu(world, |c| run_gathers(c, seed, T));
}

/// The 8-byte sentinel and LL receives, one rank and every rank at once.
fn receives64(world: usize) {
    let seed = rand::rng().random();
    emu(world, |c| run_receives64(c, seed, T));
}

per_world! {
    collectives_match_the_reference: collectives => [world_1, world_2, world_3, world_4, world_8];
    gathers_receive_every_rank_at_once: gathers => [world_1, world_2, world_3, world_4, world_8];
    eight_byte_receives_take_every_rank: receives64 => [world_1, world_2, world_3, world_4, world_5, world_6, world_7, world_8];
    fp8_symmetric_buffers_copy_bit_for_bit: fp8_copies => [world_1, world_2, world_3];
}

/// `+=` and the other compound assignments on generic `Num` and `DslInt`
/// kernels, for every element type.
#[test]
fn generic_kernels_use_compound_assignment() {
    emu(1, run_compounds);
}

/// An 8-byte LL packet whose words carry different tags is polled until
/// it is whole.
#[test]
fn a_torn_eight_byte_packet_is_never_taken() {
    emu(1, run_torn_packet);
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

/// A kernel's own bounded wait gives up after its timeout, records it and
/// goes on; the next synchronisation reports it, as on a GPU.
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
                c.synchronize()?;
            }
            Ok(())
        },
    )
    .expect_err("nobody signals");
    assert_eq!(err.errors.len(), 1, "{err}");
    assert!(
        matches!(
            err.errors[0],
            (
                0,
                Error::SignalTimeout {
                    rank: 0,
                    block: 0,
                    thread: 0,
                    peer: 1,
                    channel: 0,
                    timeout_ms: 200,
                    ..
                }
            )
        ),
        "{err}"
    );
    // The kernel's own 200 ms, not the group's 20 s (nor the 2 s stall).
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        t.elapsed()
    );
    let msg = err.to_string();
    assert!(
        msg.contains(
            "rank 0, block 0, thread 0: wait_signal (peer never signalled) on channel 0 with peer 1 did not complete within 200 ms"
        ),
        "{msg}"
    );
}

/// Thread 0 of block 0 makes one unbounded signal operation that `peer`
/// never answers: `op` 0 puts twice (the second finds its slot still
/// full), 1 waits for a signal, 2 waits for a flag to reach 1. The store
/// after it runs only if the operation returned.
#[symm_kernel]
fn unanswered(buf: SymmBuf<u32>, op: u32, peer: u32, ch: u32, out: &mut [u32]) {
    if block_idx_x() == 0u32 && thread_idx_x() == 0u32 {
        if op == 0u32 {
            buf.put_signal(peer, ch);
            buf.put_signal(peer, ch);
        } else if op == 1u32 {
            buf.wait_signal(peer, ch);
        } else {
            buf.wait_flag(peer, ch, 1u32);
        }
        out[0] = 1u32;
    }
}

/// Tells a rank waiting on the host that rank 0 is done, however it ends.
struct Answered<'a>(&'a (Mutex<bool>, Condvar));

impl Drop for Answered<'_> {
    fn drop(&mut self) {
        let (done, cv) = self.0;
        *done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
    }
}

/// An unbounded in-kernel put, wait or flag wait that nobody answers,
/// while the peer waits on the host (so no hang can be diagnosed, and on a
/// GPU no departure stops the wait): past the kernel timeout the thread
/// records the timeout and ends, without the store after it, and the next
/// synchronisation reports it, naming kind, rank, block, thread, peer and
/// channel. The same on the emulator as on a GPU: both run the signal
/// protocol's one source.
#[test]
fn an_unanswered_wait_records_its_timeout_and_ends_its_thread() {
    for (op, kind) in [
        (0u32, SignalKind::Put),
        (1, SignalKind::Wait),
        (2, SignalKind::Wait),
    ] {
        let Some(placed) = ranks(2) else { return };
        let options = CommOptions::default()
            .with_timeout(T)
            .with_kernel_timeout(Duration::from_millis(200));
        // Rank 1 stays on the host until rank 0 has its answer, or has
        // failed or panicked (its guard says so), or for at most `T`: a
        // regression then fails the test instead of hanging it.
        let answered = (Mutex::new(false), Condvar::new());
        let out = run(placed, options, |c| {
            let guard = (c.rank() == 0).then(|| Answered(&answered));
            let s = c.alloc::<u32>(8)?.rendezvous()?;
            let ch = Channel::request(c)?;
            if guard.is_none() {
                let (done, cv) = &answered;
                let done = done.lock().unwrap_or_else(|p| p.into_inner());
                let _ = cv.wait_timeout_while(done, T, |d| !*d);
                return Ok(None);
            }
            let mut out = c.device_buffer_from(&[7u32])?;
            unanswered::launch(
                c,
                LaunchConfig::linear(2, 32),
                &s,
                op,
                1,
                ch.index(),
                &mut out,
            )?;
            let e = c.synchronize().expect_err("nobody answers");
            Ok(Some((e, ch.index(), out.to_host()?)))
        })
        .unwrap_or_else(|e| panic!("op {op}: {e}"));
        let Some((e, ch, out)) = &out[0] else {
            panic!("op {op}: rank 0 returned nothing")
        };
        assert!(
            matches!(e, Error::SignalTimeout { rank: 0, block: 0, thread: 0, peer: 1, channel, kind: k, timeout_ms: 200, .. }
                if channel == ch && *k == kind),
            "op {op}: {e}"
        );
        assert_eq!(out, &[7], "op {op}: the thread went on past its timeout");
    }
}

#[symm_kernel]
fn off_by_one(x: &[f32], y: &mut [f32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i <= n {
        y[i] = x[i] * 2.0f32;
    }
}

/// A checked launch on a GPU names the line of a bad index as the kernel's
/// `LINE` (of its name, in `FILE`) plus the offset its indexing site
/// carries in the CUDA C: both come from the spans of the source.
#[test]
fn indexing_sites_carry_their_line_from_the_kernels_name() {
    let src = include_str!("emulator_kernels.rs");
    let line_of = |prefix: &str| {
        src.lines()
            .position(|l| l.trim_start().starts_with(prefix))
            .expect("the line")
            + 1
    };
    let (name, site) = (line_of("fn off_by_one("), line_of("y[i] = x[i] * 2.0f32;"));
    assert_eq!(off_by_one::FILE, "tests/emulator_kernels.rs");
    assert_eq!(off_by_one::LINE as usize, name);
    let want = format!(
        "SYMM_AT(__ctx, v_y, v_i, {0}) = symm_mul(SYMM_AT(__ctx, v_x, v_i, {0}), 2.0f);",
        site - name
    );
    assert!(
        off_by_one::CUDA_BODY.contains(&want),
        "{}",
        off_by_one::CUDA_BODY
    );
}

/// On the emulator the launch fails; on GPU ranks the safe launch's bounds
/// check records the index and the synchronize reports it, in the same
/// words.
#[test]
fn out_of_bounds_names_kernel_rank_block_thread_index_and_length() {
    let Some(ranks) = ranks(2) else { return };
    let err = run(ranks, CommOptions::default(), |c| {
        let x = c.device_buffer_from(&[1.0f32; 100])?;
        let mut y = c.device_buffer::<f32>(100)?;
        off_by_one::launch(c, LaunchConfig::linear(4, 32), &x, &mut y, 100)?;
        c.synchronize()
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

/// One misplaced access per `which`, each a fault on the emulator.
#[symm_kernel]
fn misplaced(buf: SymmBuf<u64>, x: &mut [f32], which: u32) {
    if which == 0 {
        let v = x.load_vec_volatile::<4>(1u32); // misaligned
        x[0] = v[0];
    }
    if which == 1 {
        x.store_vec_volatile::<4>(2u32, [0.0f32; 4]); // misaligned
    }
    if which == 2 {
        let p = buf.pad(9u32); // past the world
        p.store(0u32, 1u32, StoreOrder::Relaxed, Scope::System);
    }
    if which == 3 {
        buf.local().store_tagged64(1u32, 7u64, 1u32); // misaligned
    }
}

/// The emulator's faults in the memory methods name the kernel's line of
/// the call, not a line of the runtime.
#[test]
fn memory_method_faults_name_the_line_of_the_call() {
    if !emulator_only() {
        return;
    }
    let src = include_str!("emulator_kernels.rs");
    let calls = [
        "let v = x.load_vec_volatile::<4>(1u32);",
        "x.store_vec_volatile::<4>(2u32, [0.0f32; 4]);",
        "let p = buf.pad(9u32);",
        "buf.local().store_tagged64(1u32, 7u64, 1u32);",
    ];
    for (which, call) in calls.into_iter().enumerate() {
        let line = src
            .lines()
            .position(|l| l.trim_start().starts_with(call))
            .expect("the call's line")
            + 1;
        let err = run(Ranks::Emulator(1), CommOptions::default(), |c| {
            let buf = c.alloc::<u64>(4)?;
            let s = buf.rendezvous()?;
            let mut x = c.device_buffer_from(&[0.0f32; 8])?;
            misplaced::launch(c, LaunchConfig::linear(1, 1), &s, &mut x, which as u32)?;
            c.synchronize()
        })
        .expect_err("a fault");
        let msg = err.to_string();
        let want = format!("tests/emulator_kernels.rs:{line}");
        assert!(msg.contains(&want), "{call}: {msg:?} lacks {want:?}");
    }
}

#[test]
fn warp_shuffles_down_up_and_by_index() {
    emu(1, run_warp_moves);
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

/// A checked LL gather (`gather_tagged2_checked`) that finds a peer's
/// packets of this round from another call (rank `world - 1`'s tag differs
/// outside the round's bits) fails every rank at once, where a plain
/// gather would wait until the kernel timeout: each with a call mismatch
/// naming that rank and the failing thread (block 0, thread 0), or with
/// the first such failure of a peer when it reaches the rank first.
#[test]
fn a_checked_gather_names_the_rank_in_another_call() {
    for world in [2, 3] {
        let Some(r) = ranks(world) else { return };
        let odd = world - 1;
        let t0 = Instant::now();
        let err = run(r, assert_options(), |c| {
            run_gather_mismatch(c, odd as u32, T)
        })
        .expect_err("every rank takes the odd rank's packets of another call");
        let took = t0.elapsed();
        assert_eq!(err.errors.len(), world, "{err}");
        let mut found = 0;
        for (rank, e) in &err.errors {
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("rank {odd}'s data belongs to another call"))
                    && msg.contains("different calls"),
                "rank {rank}: {msg}"
            );
            if let Error::CallMismatch {
                kernel,
                rank: r,
                block,
                thread,
                peer,
                ..
            } = e
            {
                assert_eq!(
                    (kernel.as_str(), *r, *block, *thread, *peer),
                    ("gather_packets", *rank, 0, 0, odd),
                    "{e}"
                );
                found += 1;
            }
        }
        assert!(found > 0, "no rank found the mismatch itself: {err}");
        // At once: well within the kernel timeout (2 s on a GPU, T here).
        assert!(
            took < Duration::from_secs(2),
            "world {world}: failed after {took:?}"
        );
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

/// Options of the assertion tests. The kernel timeout bounds how long GPU
/// threads left waiting on a thread that stopped take to give up (short, to
/// keep the tests quick); on the emulator it is long, so that such a wait
/// is diagnosed as a hang (after 2 s without progress) rather than timing
/// out, and the outcome does not depend on which comes first.
fn assert_options() -> CommOptions {
    let kernel = if on_gpu() { Duration::from_secs(2) } else { T };
    CommOptions::default()
        .with_timeout(T)
        .with_kernel_timeout(kernel)
}

/// Checks that `e` is the failed assertion of `kernel` on `rank`, in
/// `(block, thread)`, with `message`, at the `kernel_assert!` of
/// `tests/dsl_suite/mod.rs` whose text contains `needle`: every field, and
/// the whole message.
fn check_assert(
    e: Option<&Error>,
    kernel: &str,
    rank: usize,
    (block, thread): (u32, u32),
    message: &str,
    needle: &str,
) {
    let location = assert_place(needle);
    let Some(e) = e else {
        panic!("rank {rank}: `{kernel}` returned Ok, but its assertion at {location} fails")
    };
    let Error::KernelAssert {
        kernel: k,
        rank: r,
        block: b,
        thread: t,
        message: m,
        location: l,
        ..
    } = e
    else {
        panic!("rank {rank}: expected the failed assertion at {location}, got: {e}")
    };
    assert_eq!(
        (k.as_str(), *r, *b, *t, m.as_str(), l.as_str()),
        (kernel, rank, block, thread, message, location.as_str()),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "kernel `{kernel}` on rank {rank}, block {block}, thread {thread}: assertion failed: \
             {message} (at {location})"
        )
    );
}

/// The host keeps each function's assertions (place and message) in the
/// order the CUDA C numbers them; the device records only that number.
#[test]
fn kernel_asserts_are_listed_on_the_host_in_the_order_the_cuda_c_numbers_them() {
    let place =
        |a: &symm::dsl::AssertSite| format!("{}:{}:{}", one_thread_asserts::FILE, a.line, a.column);
    let kernel = one_thread_asserts::ASSERTS;
    assert_eq!(kernel.len(), 1);
    assert_eq!(kernel[0].message, "i != bad");
    assert_eq!(place(&kernel[0]), assert_place("kernel_assert!(i != bad);"));
    assert!(
        one_thread_asserts::CUDA_BODY
            .contains("if (!((v_i != v_bad))) symm_assert_failed(__ctx, SYMM_SITE_FN, 0u);"),
        "{}",
        one_thread_asserts::CUDA_BODY
    );
    let helper = &not_the_bad_one::DEVICE;
    assert_eq!(helper.asserts().len(), 1);
    assert_eq!(
        helper.asserts()[0].message,
        "not_the_bad_one reached the bad index"
    );
    assert_eq!(
        place(&helper.asserts()[0]),
        assert_place("not_the_bad_one reached the bad index")
    );
    assert!(
        helper
            .source()
            .contains("symm_assert_failed(__ctx, SYMM_SITE_FN, 0u);"),
        "{}",
        helper.source()
    );
    let rs = reduce_scatter_w::ASSERTS;
    assert_eq!(rs.len(), 1);
    assert_eq!(
        place(&rs[0]),
        assert_place("reduce_scatter_w was compiled for another world size")
    );
}

/// On each rank one thread, at a different index per rank, fails an
/// assertion: the kernel's own (safe `launch`), then a device function's
/// (`launch_unchecked`: assertions hold in both). Each is reported with
/// its rank, linear block and thread (of a 16 × 4 block), message and
/// place; afterwards the same ranks launch again, and every thread writes.
fn kernel_assert_names_rank_block_thread_message_and_line(world: usize) {
    let Some(ranks) = ranks(world) else { return };
    let cfg = LaunchConfig {
        grid: (3, 1, 1),
        block: (16, 4, 1),
        ..LaunchConfig::linear(1, 1)
    };
    let bad = |r: usize| (37 * r as u32 + 50) % 192;
    let got = run(ranks, assert_options(), |c| {
        let mut out = c.device_buffer_from(&[u32::MAX; 192])?;
        let in_kernel = one_thread_asserts::launch(c, cfg, &mut out, bad(c.rank()), false)
            .and_then(|()| c.synchronize())
            .err();
        // SAFETY: every thread indexes `out` at its linear index in the
        // grid, below 3 × 64 = 192 = `out.len()`.
        let in_helper =
            unsafe { one_thread_asserts::launch_unchecked(c, cfg, &mut out, bad(c.rank()), true) }
                .and_then(|()| c.synchronize())
                .err();
        // The rank goes on: a launch in which no thread asserts.
        one_thread_asserts::launch(c, cfg, &mut out, u32::MAX, true)?;
        c.synchronize()?;
        Ok((in_kernel, in_helper, out.to_host()?))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), world);
    for (rank, (in_kernel, in_helper, out)) in got.iter().enumerate() {
        let at = (bad(rank) / 64, bad(rank) % 64);
        let kernel = "one_thread_asserts";
        let needle = "kernel_assert!(i != bad);";
        check_assert(in_kernel.as_ref(), kernel, rank, at, "i != bad", needle);
        let message = "not_the_bad_one reached the bad index";
        check_assert(in_helper.as_ref(), kernel, rank, at, message, message);
        assert_eq!(out, &(0..192).collect::<Vec<u32>>(), "rank {rank}");
    }
}

/// A reduce-scatter compiled for a world size `W`: right, it sums exactly;
/// launched with `W` one more or one less than the world size on every
/// rank, every rank reports the assertion that checks it (the issue's
/// `Ok` with wrong data, and a hang, before); with a wrong `W` on the last
/// rank only, that rank reports the assertion, and every other rank, left
/// waiting for its signal, reports that wait: a timeout naming it on the
/// GPU, a hang naming it on the emulator. Never `Ok`, never hung.
fn kernel_assert_stops_a_reduce_scatter_of_another_world_size(world: usize) {
    let Some(placed) = ranks(world) else { return };
    let seed = rand::rng().random();
    run(placed, assert_options(), |c| {
        run_reduce_scatter(c, world, seed)
    })
    .unwrap_or_else(|e| panic!("W = world = {world}: {e}"));
    let message = "reduce_scatter_w was compiled for another world size";
    for w in [world + 1, world - 1].into_iter().filter(|&w| w >= 1) {
        let again = ranks(world).expect("placed above");
        let err = run(again, assert_options(), |c| run_reduce_scatter(c, w, seed))
            .expect_err("W is not the world size");
        assert_eq!(err.errors.len(), world, "W = {w}: {err}");
        for (rank, e) in &err.errors {
            check_assert(Some(e), "reduce_scatter_w", *rank, (0, 0), message, message);
        }
    }
    if world < 2 {
        return;
    }
    let odd = world - 1;
    let again = ranks(world).expect("placed above");
    let err = run(again, assert_options(), |c| {
        let w = if c.rank() == odd { world + 1 } else { world };
        run_reduce_scatter(c, w, seed)
    })
    .expect_err("rank `odd` asserts, and its peers wait for it");
    assert_eq!(err.errors.len(), world, "{err}");
    for (rank, e) in &err.errors {
        let rank = *rank;
        if rank == odd {
            check_assert(Some(e), "reduce_scatter_w", rank, (0, 0), message, message);
            continue;
        }
        let msg = e.to_string();
        // The asserting rank's failure reaches its peers at once (their
        // waits on it stop), naming it.
        if matches!(e, Error::PeerFailed { rank: r, peer, .. } if *r == rank && *peer == odd) {
            assert!(
                msg.contains(&format!("rank {odd} failed")),
                "rank {rank}: {msg}"
            );
            continue;
        }
        if on_gpu() {
            assert!(
                matches!(e, Error::SignalTimeout { rank: r, block: 0, thread: 0, peer, channel: 0, kind: SignalKind::Wait, .. }
                    if *r == rank && *peer == odd),
                "rank {rank}: {msg}"
            );
        } else {
            assert!(
                matches!(e, Error::KernelHang { rank: r, .. } if *r == rank),
                "rank {rank}: {msg}"
            );
            let want =
                format!("rank {rank}, block 0 thread 0: wait_signal from peer {odd} on channel 0");
            assert!(msg.contains(&want), "rank {rank}: {msg:?} lacks {want:?}");
        }
    }
}

/// An all-to-all with a handshake per peer: with a thread per rank it
/// delivers every word; with one thread too few, every rank reports thread
/// 0's assertion (before, ranks whose partner thread did not exist hung):
/// its own, or a peer's whose failure stopped its launch first.
fn kernel_assert_stops_an_all_to_all_with_too_few_threads(world: usize) {
    let Some(placed) = ranks(world) else { return };
    run(placed, assert_options(), |c| run_all_to_all(c, 32)).unwrap_or_else(|e| panic!("{e}"));
    let again = ranks(world).expect("placed above");
    let err = run(again, assert_options(), |c| {
        run_all_to_all(c, world as u32 - 1)
    })
    .expect_err("too few threads");
    assert_eq!(err.errors.len(), world, "{err}");
    let message = "all_to_all_one needs a thread per rank";
    let mut own = 0;
    for (rank, e) in &err.errors {
        if let Error::PeerFailed { .. } = e {
            let text = e.to_string();
            assert!(
                text.contains("kernel `all_to_all_one` on rank")
                    && text.contains(&format!("assertion failed: {message}")),
                "rank {rank}: {text}"
            );
            continue;
        }
        own += 1;
        check_assert(Some(e), "all_to_all_one", *rank, (0, 0), message, message);
    }
    assert!(own > 0, "no rank reported its own assertion: {err}");
}

/// A handle method defined by path (`SymmBuf::ring_peer`) computes the
/// same on every rank as its 64-bit reference.
fn ring_peer_is_the_rank_steps_ahead(world: usize) {
    let Some(placed) = ranks(world) else { return };
    let seed: u64 = rand::rng().random();
    run(placed, assert_options(), |c| run_ring_peers(c, seed))
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
}

/// A domain of more than 8 ranks: every pair of ranks handshakes through
/// the signal pad's slots past the first group of 8 peers (the
/// all-to-all's put and wait per peer, after a host barrier on every
/// peer), and a handle method computes as its reference.
#[test]
fn a_domain_past_8_ranks_signals_every_peer() {
    for world in [12, 17] {
        let Some(placed) = ranks(world) else { continue };
        run(placed, assert_options(), |c| run_all_to_all(c, 32))
            .unwrap_or_else(|e| panic!("world {world}: {e}"));
    }
    // (Its 64 threads hold the steps of up to 12 ranks.)
    ring_peer_is_the_rank_steps_ahead(12);
}

per_world! {
    ring_peer: ring_peer_is_the_rank_steps_ahead
        => [world_1, world_2, world_3, world_4, world_5, world_6, world_7, world_8];
}

per_world! {
    kernel_assert_names_the_thread: kernel_assert_names_rank_block_thread_message_and_line
        => [world_1, world_2, world_3, world_4];
    kernel_assert_reduce_scatter: kernel_assert_stops_a_reduce_scatter_of_another_world_size
        => [world_1, world_2, world_3, world_4];
    kernel_assert_all_to_all: kernel_assert_stops_an_all_to_all_with_too_few_threads
        => [world_2, world_3, world_4];
}
