//! Point-to-point (`symm::kernels::p2p`): rings of sends and receives
//! through `send_recv` at worlds 2 to 8, messages of zero bytes to dozens
//! of chunks (the low-latency path, and the chunked one past it) in
//! several element types, at aligned and unaligned addresses,
//! many rounds (every send after the first waits for its previous
//! chunk's receive); sends and receives as single calls in opposite
//! orders; and misuse: a receive that does not match its send, a peer out
//! of range. Every result exact against the sender's data, outputs
//! poisoned first. On the emulator by default (CI); on GPU ranks with
//! `SYMM_KERNEL_TESTS_ON=gpu`.

use std::time::Duration;

#[path = "support/targets.rs"]
mod targets;
#[path = "support/tier.rs"]
mod tier;
use targets::ranks;

use symm::kernels::p2p::{P2p, P2pOp};
use symm::{run, Comm, CommOptions, Element, ErrorKind};

fn options() -> CommOptions {
    CommOptions::default()
        .with_timeout(Duration::from_secs(30))
        .with_kernel_timeout(Duration::from_secs(5))
}

/// The value rank `r` sends at element `i` of round `k`, as bits of `T`.
fn data<T: Element>(r: usize, k: usize, n: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    let bytes: Vec<u8> = (0..n * size)
        .map(|j| ((r * 131 + k * 31 + j * 7 + (j >> 8)) % 251) as u8)
        .collect();
    bytes
        .chunks(size)
        .map(|c| {
            let mut v = std::mem::MaybeUninit::<T>::uninit();
            // SAFETY: `c` holds `size_of::<T>()` bytes, and every bit
            // pattern is a valid `T` (an Element).
            unsafe {
                std::ptr::copy_nonoverlapping(c.as_ptr(), v.as_mut_ptr().cast::<u8>(), size);
                v.assume_init()
            }
        })
        .collect()
}

fn bits<T: Element>(v: &[T]) -> Vec<u8> {
    // SAFETY: plain data, read as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        .to_vec()
}

/// A ring through `send_recv`: every rank sends `n` elements of `T` to the
/// next and receives the previous rank's, `rounds` times, at element
/// offset `skew` of its buffers (0: 16-byte aligned).
fn ring<T: Element>(c: &Comm, p2p: &P2p, n: usize, skew: usize, rounds: usize) -> symm::Result<()> {
    let (me, world) = (c.rank(), c.world_size());
    let (next, prev) = ((me + 1) % world, (me + world - 1) % world);
    let x = c.alloc::<T>(n + skew)?;
    let y = c.alloc::<T>(n + skew)?;
    for k in 0..rounds {
        x.write(skew, &data::<T>(me, k, n))?;
        y.fill_bytes(0xA5)?;
        let src = x.slice(skew..)?;
        let mut dst = y.slice(skew..)?;
        p2p.send_recv(&mut [
            P2pOp::Send {
                input: &src,
                peer: next,
            },
            P2pOp::Recv {
                out: &mut dst,
                peer: prev,
            },
        ])?;
        c.synchronize()?;
        let got = y.read(skew, n)?;
        assert_eq!(
            bits(&got),
            bits(&data::<T>(prev, k, n)),
            "world {world}, rank {me}, {} × {n} at +{skew}, round {k}",
            T::DTYPE
        );
    }
    Ok(())
}

#[test]
fn rings_of_every_size_type_and_alignment() {
    for world in [2, 3, 4, 8] {
        if !tier::runs(world == 2 || world == 3) {
            continue;
        }
        let Some(r) = ranks(world) else { continue };
        run(r, options(), |c| {
            // Chunks of 1 KiB: messages past the low-latency path's 64 KiB
            // take dozens, the last one shorter.
            let p2p = P2p::with_chunk(c, 1024)?;
            let long = symm::kernels::p2p::LL_MAX_BYTES / 4 + 113;
            for n in [0, 1, 37, 64, 300, long] {
                ring::<f32>(c, &p2p, n, 0, 2)?;
                ring::<u8>(c, &p2p, n, 3, 2)?;
                ring::<f64>(c, &p2p, n, 1, 2)?;
                ring::<symm::bf16>(c, &p2p, n, 0, 2)?;
            }
            // Many rounds: every send waits for its pair's earlier receive
            // (the chunk before, or the low-latency message two before).
            ring::<f32>(c, &p2p, 200, 0, 50)?;
            ring::<f32>(c, &p2p, long, 0, 5)
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
    }
}

/// Single calls: even ranks send then receive, odd ranks receive then
/// send, with messages of several chunks, between pairs (0, 1), (2, 3).
#[test]
fn single_sends_and_receives_in_opposite_orders() {
    if !tier::quick_test() {
        return;
    }
    let world = 4;
    let Some(r) = ranks(world) else { return };
    run(r, options(), |c| {
        let p2p = P2p::with_chunk(c, 1024)?;
        let me = c.rank();
        let peer = me ^ 1;
        let n = 1000;
        for k in 0..5 {
            let x = c.device_buffer_from(&data::<u32>(me, k, n))?;
            let mut y = c.device_buffer_from(&vec![0u32; n])?;
            if me % 2 == 0 {
                p2p.send(&x, peer)?;
                p2p.recv(&mut y, peer)?;
            } else {
                p2p.recv(&mut y, peer)?;
                p2p.send(&x, peer)?;
            }
            c.synchronize()?;
            assert_eq!(
                y.to_host()?,
                data::<u32>(peer, k, n),
                "rank {me}, round {k}"
            );
        }
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

/// A receive longer than its send fails on the receiver as a mismatch
/// (the digest differs), on the low-latency path and the chunked one, and
/// a peer out of range is an invalid argument.
#[test]
fn misuse_is_an_error() {
    if !tier::quick_test() {
        return;
    }
    let Some(r) = ranks(2) else { return };
    let long = symm::kernels::p2p::LL_MAX_BYTES / 4 + 100;
    let e = run(r, options(), |c| {
        let p2p = P2p::with_chunk(c, 4096)?;
        if c.rank() == 0 {
            p2p.send(&c.device_buffer_from(&vec![1.0f32; long])?, 1)?;
        } else {
            let mut y = c.device_buffer::<f32>(long + 1)?;
            p2p.recv(&mut y, 0)?;
        }
        c.synchronize()
    })
    .expect_err("a chunked receive one element longer than its send");
    let (_, m) = e
        .errors
        .iter()
        .find(|(r, _)| *r == 1)
        .expect("the receiver fails");
    assert_eq!(m.root_kind(), ErrorKind::Mismatch, "{m}");
    assert!(
        m.to_string()
            .contains("p2p: the ranks made different calls"),
        "{m}"
    );
    let Some(r) = ranks(2) else { return };
    let e = run(r, options(), |c| {
        let p2p = P2p::new(c)?;
        let me = c.rank();
        let x = c.device_buffer_from(&[1.0f32; 8])?;
        let oob = p2p.send(&x, 2).expect_err("rank 2 of 2");
        assert_eq!(oob.kind(), ErrorKind::InvalidArgument, "{oob}");
        assert!(oob.to_string().contains("destination rank 2"), "{oob}");
        if me == 0 {
            p2p.send(&x, 1)?;
        } else {
            let mut y = c.device_buffer::<f32>(9)?;
            p2p.recv(&mut y, 0)?;
        }
        c.synchronize()
    })
    .expect_err("a receive of 9 elements for a send of 8");
    let (r, m) = e
        .errors
        .iter()
        .find(|(r, _)| *r == 1)
        .expect("the receiver fails");
    assert_eq!(m.root_kind(), ErrorKind::Mismatch, "rank {r}: {m}");
    assert!(
        m.to_string()
            .contains("p2p: the ranks made different calls"),
        "{m}"
    );
}

/// `Comm::barrier` (stream-ordered) and `Comm::host_barrier`: the last
/// rank arrives 300 ms late, and no rank passes either barrier before it
/// arrives; then a rank that never arrives is an error on the others.
#[test]
fn barriers_wait_for_the_last_rank() {
    if !tier::quick_test() {
        return;
    }
    for world in [2, 3, 4] {
        let Some(r) = ranks(world) else { continue };
        let late = Duration::from_millis(300);
        // When the late rank called each barrier: no rank may pass one
        // before.
        let entered: std::sync::Mutex<Vec<Option<std::time::Instant>>> =
            std::sync::Mutex::new(vec![None; 6]);
        let passed_after = |k: usize, what: &str, me: usize| {
            let now = std::time::Instant::now();
            let at = entered.lock().unwrap()[k];
            assert!(
                at.is_some_and(|at| now >= at),
                "world {world}, rank {me}: {what} {k} passed at {now:?}, before the late rank \
                 entered it ({at:?})"
            );
        };
        run(r, options(), |c| {
            let me = c.rank();
            for round in 0..3 {
                c.host_barrier()?;
                if me == world - 1 {
                    std::thread::sleep(late);
                    entered.lock().unwrap()[2 * round] = Some(std::time::Instant::now());
                }
                c.barrier()?;
                c.synchronize()?;
                passed_after(2 * round, "device barrier", me);
                if me == 0 {
                    std::thread::sleep(late);
                    entered.lock().unwrap()[2 * round + 1] = Some(std::time::Instant::now());
                }
                c.host_barrier()?;
                passed_after(2 * round + 1, "host barrier", me);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
    }
    // A rank that never comes: the others fail, naming it.
    let Some(r) = ranks(3) else { return };
    let short = options().with_timeout(Duration::from_secs(2));
    let e = run(r, short, |c| {
        c.host_barrier()?;
        if c.rank() == 2 {
            std::thread::sleep(Duration::from_secs(3));
            return Ok(());
        }
        c.host_barrier()
    })
    .expect_err("rank 2 never reaches the second barrier");
    for (r, m) in &e.errors {
        assert!(*r != 2, "rank 2 returned Ok: {m}");
        assert!(m.to_string().contains("rank 2"), "rank {r}: {m}");
    }
}

/// Several messages between one pair in one batch, both ways: four
/// low-latency ones (one empty) and two of several chunks each (the
/// second's first chunk waits for the first's last acknowledgement), every rank's batch
/// holding its sends and receives in a different order; then the same
/// messages sent as one batch and received by single calls. Every
/// message exact.
#[test]
fn many_messages_per_pair_in_one_batch() {
    for world in [2, 4] {
        if !tier::runs(world == 2) {
            continue;
        }
        let Some(r) = ranks(world) else { continue };
        run(r, options(), |c| {
            let p2p = P2p::with_chunk(c, 1024)?;
            let me = c.rank();
            let peer = me ^ 1;
            let ll_words = symm::kernels::p2p::LL_MAX_BYTES / 4;
            let lens = [5, 3000, 17, ll_words + 600, 0, ll_words + 1234];
            for round in 0..3 {
                let xs = lens
                    .iter()
                    .enumerate()
                    .map(|(m, &n)| c.device_buffer_from(&data::<u32>(me, round * 10 + m, n)))
                    .collect::<symm::Result<Vec<_>>>()?;
                let mut ys = lens
                    .iter()
                    .map(|&n| c.device_buffer_from(&vec![0xDEAD_BEEFu32; n]))
                    .collect::<symm::Result<Vec<_>>>()?;
                let mut ops: Vec<P2pOp<'_, u32>> = Vec::new();
                let mut sends: Vec<P2pOp<'_, u32>> =
                    xs.iter().map(|x| P2pOp::Send { input: x, peer }).collect();
                let mut recvs: Vec<P2pOp<'_, u32>> = ys
                    .iter_mut()
                    .map(|y| P2pOp::Recv { out: y, peer })
                    .collect();
                // Even ranks list receives first, odd ranks sends first,
                // and the later rounds interleave them.
                match (me % 2, round) {
                    (0, 0) => {
                        ops.append(&mut recvs);
                        ops.append(&mut sends);
                    }
                    (_, 0) => {
                        ops.append(&mut sends);
                        ops.append(&mut recvs);
                    }
                    _ => {
                        for (s, r) in sends.drain(..).zip(recvs.drain(..)) {
                            ops.push(r);
                            ops.push(s);
                        }
                    }
                }
                p2p.send_recv(&mut ops)?;
                drop(ops);
                c.synchronize()?;
                for (m, y) in ys.iter().enumerate() {
                    assert_eq!(
                        y.to_host()?,
                        data::<u32>(peer, round * 10 + m, lens[m]),
                        "world {world}, rank {me}, round {round}, message {m}"
                    );
                }
            }
            // One batch of sends against single receives, in order: the
            // even rank sends, the odd one receives.
            let xs = lens
                .iter()
                .enumerate()
                .map(|(m, &n)| c.device_buffer_from(&data::<u32>(me, 100 + m, n)))
                .collect::<symm::Result<Vec<_>>>()?;
            if me % 2 == 0 {
                let mut ops: Vec<P2pOp<'_, u32>> =
                    xs.iter().map(|x| P2pOp::Send { input: x, peer }).collect();
                p2p.send_recv(&mut ops)?;
            } else {
                for (m, &n) in lens.iter().enumerate() {
                    let mut y = c.device_buffer_from(&vec![0u32; n])?;
                    p2p.recv(&mut y, peer)?;
                    c.synchronize()?;
                    assert_eq!(
                        y.to_host()?,
                        data::<u32>(peer, 100 + m, n),
                        "rank {me}, single {m}"
                    );
                }
            }
            c.synchronize()
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
    }
}

/// Chunk sizes that are no multiple of 16, or differ from the group's
/// stage, are refused.
#[test]
fn chunk_sizes_are_checked() {
    if !tier::quick_test() {
        return;
    }
    let Some(r) = ranks(2) else { return };
    run(r, options(), |c| {
        for bad in [1000, 100, 8] {
            let e = P2p::with_chunk(c, bad).err().expect("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad}: {e}");
            assert!(e.to_string().contains("multiple of 16"), "{e}");
        }
        let p = P2p::with_chunk(c, 4096)?;
        assert!(p.chunk_bytes() <= 4096 && p.chunk_bytes().is_multiple_of(16));
        let e = P2p::with_chunk(c, 8192)
            .err()
            .expect("another size than the stage's");
        assert!(e.to_string().contains("shares one stage"), "{e}");
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

/// A ring of `send_recv`s captured in a CUDA graph and replayed with new
/// data each time: the epochs and acknowledgements live on the device, so
/// every replay's messages arrive. GPU only (skipped, loudly, elsewhere).
#[test]
fn a_ring_replays_in_a_cuda_graph() {
    if !tier::quick_test() {
        return;
    }
    if !targets::on_gpu() {
        eprintln!("SKIPPED: a_ring_replays_in_a_cuda_graph needs a GPU (SYMM_KERNEL_TESTS_ON=gpu)");
        return;
    }
    for world in [2, 4] {
        let Some(r) = ranks(world) else { continue };
        run(r, options(), |c| {
            let p2p = P2p::with_chunk(c, 1 << 16)?;
            let (me, w) = (c.rank(), c.world_size());
            let (next, prev) = ((me + 1) % w, (me + w - 1) % w);
            for n in [100, 50_000] {
                let x = c.device_buffer_from(&data::<u32>(me, 0, n))?;
                let mut y = c.device_buffer_from(&vec![0u32; n])?;
                // Warm-up, outside the graph.
                p2p.send_recv(&mut [
                    P2pOp::Send { input: &x, peer: next },
                    P2pOp::Recv { out: &mut y, peer: prev },
                ])?;
                c.synchronize()?;
                let err = |e: symm::cudarc::driver::DriverError| c.error(symm::ErrorKind::InvalidArgument, format!("{e:?}"));
                let s = c.cuda_stream().expect("GPU rank");
                s.begin_capture(
                    symm::cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                )
                .map_err(err)?;
                for _ in 0..3 {
                    p2p.send_recv(&mut [
                        P2pOp::Send { input: &x, peer: next },
                        P2pOp::Recv { out: &mut y, peer: prev },
                    ])?;
                }
                let g = s
                    .end_capture(
                        symm::cudarc::driver::sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
                    )
                    .map_err(err)?
                    .expect("a graph");
                for k in 1..6 {
                    c.synchronize()?;
                    x.write(0, &data::<u32>(me, k, n))?;
                    y.write(0, &vec![0u32; n])?;
                    c.host_barrier()?;
                    g.launch().map_err(err)?;
                    c.synchronize()?;
                    assert_eq!(y.to_host()?, data::<u32>(prev, k, n), "world {w}, rank {me}, n {n}, replay {k}");
                    c.host_barrier()?;
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
    }
}
