//! The foundation's collective protocol on the CPU backend: allocation,
//! rendezvous and its cache, validation, timeouts and the signal operations.
//! The same scenarios run on GPUs in `tests/gpu.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use symm::signal::Channel;
use symm::{run, Comm, CommOptions, Error, Ranks, RunError};

const WORLDS: [usize; 4] = [2, 3, 4, 8];
const T: Duration = Duration::from_secs(10);

fn emu<R: Send>(
    world: usize,
    f: impl Fn(&Comm) -> symm::Result<R> + Sync,
) -> Result<Vec<R>, RunError> {
    run(Ranks::Emulator(world), CommOptions::default(), f)
}

fn emu_timeout<R: Send>(
    world: usize,
    t: Duration,
    f: impl Fn(&Comm) -> symm::Result<R> + Sync,
) -> Result<Vec<R>, RunError> {
    run(
        Ranks::Emulator(world),
        CommOptions::default().with_timeout(t),
        f,
    )
}

#[test]
fn peer_writes_land_in_every_slot() {
    for world in WORLDS {
        let values: Vec<u32> = (0..world).map(|_| rand::rng().random()).collect();
        emu(world, |comm| {
            let buf = comm.alloc::<u32>(world + 3)?;
            buf.copy_from_host(&vec![0xDEAD_BEEF; world + 3])?;
            let smem = buf.rendezvous()?;
            let ch = Channel::request(comm)?;
            smem.barrier(&ch, T)?; // everyone poisoned before anyone writes
            comm.synchronize()?;
            for p in 0..world {
                smem.peer_buffer::<u32>(p)?
                    .write(comm.rank(), &[values[comm.rank()]])?;
            }
            smem.barrier(&ch, T)?;
            comm.synchronize()?;
            let got = buf.to_host()?;
            assert_eq!(&got[..world], &values[..], "rank {}", comm.rank());
            assert_eq!(
                &got[world..],
                &[0xDEAD_BEEF; 3],
                "rank {} wrote past the slots",
                comm.rank()
            );
            // Our barrier consumed every signal sent to us; peers' pads may
            // still hold our signal until they finish their own barrier.
            assert!(
                smem.read_signal_pad(comm.rank())?.iter().all(|&s| s == 0),
                "own pad not reset"
            );
            Ok(())
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
    }
}

#[test]
fn rendezvous_is_cached_per_allocation_and_dropped_with_it() {
    emu(3, |comm| {
        let a = comm.alloc::<f32>(1000)?;
        let b = comm.alloc::<f32>(1000)?;
        let sa = a.rendezvous()?;
        assert!(
            Arc::ptr_eq(&sa, &a.rendezvous()?),
            "second rendezvous must be the cached object"
        );
        assert!(
            Arc::ptr_eq(&sa, &a.slice(100..200)?.rendezvous()?),
            "a view resolves to its allocation"
        );
        let sb = b.slice(..)?.rendezvous()?;
        assert!(!Arc::ptr_eq(&sa, &sb));
        assert!(Arc::ptr_eq(
            &comm.lookup(a.device_ptr() + 4 * 999).expect("inside a"),
            &sa
        ));
        assert!(Arc::ptr_eq(
            &comm.lookup(b.device_ptr()).expect("inside b"),
            &sb
        ));
        assert_eq!(comm.cached_rendezvous_count(), 2);
        assert_eq!(
            (sa.rank(), sa.world_size(), sa.buffer_size()),
            (comm.rank(), 3, 4000)
        );
        assert_eq!(sa.buffer_ptrs()[comm.rank()], a.device_ptr());
        assert_eq!(sa.signal_pad_ptrs()[comm.rank()], a.signal_pad_ptr());
        let ptr = a.device_ptr();
        drop((sa, sb));
        drop(a);
        assert!(
            comm.lookup(ptr).is_none(),
            "cache entry must go with the allocation"
        );
        assert_eq!(comm.cached_rendezvous_count(), 1);
        drop(b);
        assert_eq!(comm.cached_rendezvous_count(), 0);
        Ok(())
    })
    .unwrap();
}

#[test]
fn peers_keep_memory_alive_after_owner_frees() {
    let v: Vec<u64> = (0..64).map(|_| rand::rng().random()).collect();
    emu(2, |comm| {
        let buf = comm.alloc::<u64>(64)?;
        if comm.rank() == 0 {
            buf.copy_from_host(&v)?;
        }
        let smem = buf.rendezvous()?;
        smem.barrier(&Channel::request(comm)?, T)?;
        comm.synchronize()?;
        if comm.rank() == 0 {
            drop(smem);
            drop(buf);
            Ok(None)
        } else {
            // Rank 0 may have freed by now; our mapping keeps its memory.
            std::thread::sleep(Duration::from_millis(20));
            Ok(Some(smem.peer_buffer::<u64>(0)?.read(0, 64)?))
        }
    })
    .map(|r| assert_eq!(r[1].as_deref(), Some(&v[..])))
    .unwrap();
}

fn same_error_on_every_rank(err: RunError, world: usize) -> String {
    assert_eq!(err.errors.len(), world, "every rank must fail: {err}");
    let msgs: Vec<String> = err.errors.iter().map(|(_, e)| e.to_string()).collect();
    assert!(
        msgs.iter().all(|m| m == &msgs[0]),
        "ranks disagree: {msgs:#?}"
    );
    for (_, e) in &err.errors {
        assert!(matches!(e, Error::RendezvousMismatch { .. }), "{e}");
    }
    msgs[0].clone()
}

#[test]
fn mismatched_sizes_give_every_rank_the_same_error() {
    for world in [2, 4] {
        let t = Instant::now();
        let err = emu(world, |comm| {
            comm.alloc::<f32>(1024 + comm.rank() % 2)?
                .rendezvous()
                .map(|_| ())
        })
        .expect_err("sizes differ");
        assert!(t.elapsed() < Duration::from_secs(5));
        let m = same_error_on_every_rank(err, world);
        assert!(
            m.contains("buffer sizes differ") && m.contains("rank 1: 1025 × f32 = 4100 bytes"),
            "{m}"
        );
    }
}

#[test]
fn mismatched_dtypes_give_every_rank_the_same_error() {
    let err = emu(3, |comm| {
        if comm.rank() == 1 {
            comm.alloc::<symm::bf16>(64)?.rendezvous().map(|_| ())
        } else {
            comm.alloc::<symm::f16>(64)?.rendezvous().map(|_| ())
        }
    })
    .expect_err("dtypes differ");
    let m = same_error_on_every_rank(err, 3);
    assert!(
        m.contains("element types differ across ranks (rank 0: f16, rank 1: bf16, rank 2: f16)"),
        "{m}"
    );
}

#[test]
fn a_missing_rank_is_named_within_the_timeout() {
    let timeout = Duration::from_millis(300);
    let t = Instant::now();
    let err = emu_timeout(4, timeout, |comm| {
        let buf = comm.alloc::<u8>(16)?;
        if comm.rank() != 2 {
            buf.rendezvous()?;
        }
        Ok(())
    })
    .expect_err("rank 2 never arrives");
    assert!(t.elapsed() < 2 * timeout + Duration::from_secs(1));
    assert_eq!(err.errors.len(), 3);
    for (rank, e) in &err.errors {
        match e {
            Error::RendezvousTimeout {
                rank: r, missing, ..
            } => {
                assert_eq!((r, missing.as_slice()), (rank, &[2][..]));
                assert!(e.to_string().contains("missing ranks [2]"));
            }
            other => panic!("rank {rank}: {other}"),
        }
    }
}

#[test]
fn a_panicking_rank_is_reported_and_does_not_hang_the_others() {
    let err = emu_timeout(3, Duration::from_millis(200), |comm| {
        let buf = comm.alloc::<u8>(16)?;
        if comm.rank() == 0 {
            panic!("boom on purpose");
        }
        buf.rendezvous().map(|_| ())
    })
    .expect_err("rank 0 panicked");
    assert!(
        matches!(&err.errors[0], (0, Error::RankPanicked { message, .. }) if message.contains("boom on purpose"))
    );
    assert!(err.errors[1..]
        .iter()
        .all(|(_, e)| matches!(e, Error::RendezvousTimeout { missing, .. } if missing == &[0])));
}

#[test]
fn a_wait_that_never_completes_names_rank_peer_and_channel() {
    let timeout = Duration::from_millis(200);
    let values: Vec<f32> = (0..2).map(|_| rand::rng().random()).collect();
    emu(2, |comm| {
        let buf = comm.alloc::<f32>(2)?;
        let smem = buf.rendezvous()?;
        let [a, b] = [(), ()].map(|_| Channel::request(comm));
        let (ch, quiet) = (a?, b?);
        assert_eq!(quiet.index(), 1);
        if comm.rank() == 1 {
            let t = Instant::now();
            smem.wait_signal(0, &quiet, timeout)?;
            let err = comm.synchronize().expect_err("nobody signals channel 1");
            assert!(t.elapsed() < 2 * timeout, "took {:?}", t.elapsed());
            match &err {
                Error::SignalTimeout {
                    rank: 1,
                    peer: 0,
                    channel: 1,
                    block: 0,
                    timeout_ms: 200,
                    ..
                } => {}
                other => panic!("{other}"),
            }
            comm.synchronize()?; // the error is reported once, then cleared
        }
        // The group still works afterwards.
        smem.barrier(&ch, T)?;
        smem.peer_buffer::<f32>(1 - comm.rank())?
            .write(comm.rank(), &values[comm.rank()..comm.rank() + 1])?;
        smem.barrier(&ch, T)?;
        comm.synchronize()?;
        assert_eq!(buf.read(1 - comm.rank(), 1)?[0], values[1 - comm.rank()]);
        Ok(())
    })
    .unwrap();
}

/// The emulator runs the signal kernels a GPU launches; a timeout in them
/// is still recorded for the next `synchronize` (never a failed launch),
/// naming the kind, rank, block, thread, peer, channel and timeout.
#[test]
fn emulated_signal_timeouts_name_kind_rank_block_thread_peer_and_channel() {
    use symm::signal::SignalKind;
    let short = Duration::from_millis(150);
    let timeout = |e: Option<Error>| match e {
        Some(Error::SignalTimeout {
            kind,
            rank,
            block,
            thread,
            peer,
            channel,
            timeout_ms,
        }) => (kind, rank, block, thread, peer, channel, timeout_ms),
        other => panic!("expected a signal timeout, got {other:?}"),
    };
    let got = emu(2, |comm| {
        let smem = comm.alloc::<u8>(1)?.rendezvous()?;
        let (ch, quiet) = (Channel::request(comm)?, Channel::request(comm)?);
        let mut got = Vec::new();
        if comm.rank() == 0 {
            // Rank 1 never consumes: the second put finds the slot full ...
            smem.put_signal(1, &ch, short)?;
            smem.put_signal(1, &ch, short)?;
            got.push(timeout(comm.synchronize().err()));
            // ... and so does a barrier's put (thread 1 signals rank 1).
            smem.barrier(&ch, short)?;
            got.push(timeout(comm.synchronize().err()));
            smem.wait_signal(1, &quiet, short)?;
            got.push(timeout(comm.synchronize().err()));
            comm.synchronize()?; // reported once
        }
        Ok(got)
    })
    .unwrap();
    assert_eq!(
        got[0],
        [
            (SignalKind::Put, 0, 0, 0, 1, 0, 150),
            (SignalKind::BarrierPut, 0, 0, 1, 1, 0, 150),
            (SignalKind::Wait, 0, 0, 0, 1, 1, 150),
        ]
    );
    // Ranks 0 and 1 meet at a barrier that rank 2 never joins: each waits
    // for rank 2 in thread 2.
    let got = emu(3, |comm| {
        let smem = comm.alloc::<u8>(1)?.rendezvous()?;
        let ch = Channel::request(comm)?;
        if comm.rank() == 2 {
            return Ok(None);
        }
        smem.barrier(&ch, short)?;
        Ok(Some(timeout(comm.synchronize().err())))
    })
    .unwrap();
    for (r, t) in got[..2].iter().enumerate() {
        assert_eq!(
            *t,
            Some((SignalKind::BarrierWait, r, 0, 2, 2, 0, 150)),
            "rank {r}"
        );
    }
}

/// A host wait is bounded by its own timeout only: longer than the
/// emulator's stall window (2 s) it is still a `SignalTimeout`, not a hang.
#[test]
fn a_long_host_wait_times_out_rather_than_hangs() {
    let wait = Duration::from_millis(2300);
    let errs = emu(2, |comm| {
        let smem = comm.alloc::<u8>(1)?.rendezvous()?;
        let ch = Channel::request(comm)?;
        if comm.rank() == 1 {
            return Ok(None); // finished: the group is settled
        }
        let t = Instant::now();
        smem.wait_signal(1, &ch, wait)?;
        let e = comm.synchronize().err();
        assert!(t.elapsed() >= wait, "gave up after {:?}", t.elapsed());
        Ok(e)
    })
    .unwrap();
    assert!(
        matches!(
            errs[0],
            Some(Error::SignalTimeout {
                rank: 0,
                peer: 1,
                timeout_ms: 2300,
                ..
            })
        ),
        "{:?}",
        errs[0]
    );
}

#[test]
fn put_and_wait_order_data_around_a_ring() {
    for world in WORLDS {
        let iters = 20;
        let data: Vec<Vec<Vec<u32>>> = (0..iters)
            .map(|_| {
                (0..world)
                    .map(|_| (0..33).map(|_| rand::rng().random()).collect())
                    .collect()
            })
            .collect();
        emu(world, |comm| {
            let (r, n) = (comm.rank(), comm.world_size());
            let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
            let buf = comm.alloc::<u32>(33)?;
            let smem = buf.rendezvous()?;
            let (data_ch, read_ch) = (Channel::request(comm)?, Channel::request(comm)?);
            for (i, round) in data.iter().enumerate() {
                if i > 0 {
                    smem.wait_signal(next, &read_ch, T)?; // next has read the previous round
                }
                smem.peer_buffer::<u32>(next)?.write(0, &round[r])?;
                smem.put_signal(next, &data_ch, T)?;
                smem.wait_signal(prev, &data_ch, T)?;
                comm.synchronize()?;
                assert_eq!(buf.to_host()?, round[prev], "world {n} rank {r} round {i}");
                smem.put_signal(prev, &read_ch, T)?;
            }
            smem.wait_signal(next, &read_ch, T)?;
            comm.synchronize()
        })
        .unwrap_or_else(|e| panic!("world {world}: {e}"));
    }
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    emu(2, |comm| {
        let buf = comm.alloc::<f32>(10)?;
        let smem = buf.rendezvous()?;
        let msg = |e: Error| e.to_string();
        let ch = Channel::request(comm)?;
        // A channel of another group (or rank) is refused, not used.
        let other = Comm::emulated(
            0,
            1,
            Arc::new(symm::InProcessStore::new()),
            Default::default(),
        )?;
        assert!(
            msg(smem.barrier(&Channel::request(&other)?, T).unwrap_err())
                .contains("channel 0 was requested on another rank or group")
        );
        assert!(msg(smem.put_signal(2, &ch, T).unwrap_err())
            .contains("destination rank 2 is out of range"));
        assert!(msg(smem.wait_signal(5, &ch, T).unwrap_err()).contains("source rank 5"));
        assert!(msg(smem.peer_buffer::<f32>(2).map(|_| ()).unwrap_err()).contains("peer rank 2"));
        assert!(msg(smem
            .peer_buffer::<f32>(0)?
            .write(9, &[1.0, 2.0])
            .unwrap_err())
        .contains("out of bounds"));
        assert!(msg(buf.slice(5..11).map(|_| ()).unwrap_err()).contains("out of bounds"));
        assert!(msg(buf.copy_from_host(&[1.0; 3]).unwrap_err())
            .contains("3 elements for a buffer of 10"));
        assert!(msg(buf.read(8, 3).unwrap_err()).contains("out of bounds"));
        assert!(
            msg(comm.alloc::<f64>(usize::MAX / 4).map(|_| ()).unwrap_err()).contains("overflow")
        );
        assert!(msg(comm.raw_kernel("k", "").map(|_| ()).unwrap_err()).contains("need a GPU"));
        assert!(comm.cuda_stream().is_none());
        smem.barrier(&ch, T)?;
        comm.synchronize()
    })
    .unwrap();
    let err = emu(9, |_| Ok(())).expect_err("too many ranks");
    assert!(
        err.to_string().contains("world size 9 is not supported"),
        "{err}"
    );
}

#[test]
fn empty_and_odd_sized_allocations_work() {
    emu(3, |comm| {
        let empty = comm.alloc::<f32>(0)?;
        let s = empty.rendezvous()?;
        assert_eq!(s.buffer_size(), 0);
        assert!(empty.to_host()?.is_empty());
        let odd = comm.alloc::<symm::bf16>(4097)?;
        assert_eq!(odd.device_ptr() % 128, 0);
        assert_eq!(odd.signal_pad_ptr() % 128, 0);
        let s = odd.rendezvous()?;
        assert_eq!(s.buffer_size(), 4097 * 2);
        assert_eq!(s.signal_pad_size(), symm::layout::SIGNAL_PAD_BYTES);
        s.barrier(&Channel::request(comm)?, T)?;
        comm.synchronize()
    })
    .unwrap();
}

#[test]
fn without_a_driver_cuda_ranks_fail_cleanly() {
    if symm::cuda_available() {
        eprintln!("SKIPPED: this machine has CUDA; the no-driver path is not reachable here");
        return;
    }
    assert_eq!(symm::cuda_device_count(), 0);
    let err = symm::run_local(&[0, 1], |_| Ok(())).expect_err("no GPU here");
    assert_eq!(err.errors.len(), 2);
    assert!(
        err.errors
            .iter()
            .all(|(_, e)| matches!(e, Error::CudaUnavailable(_))),
        "{err}"
    );
    assert!(matches!(Ranks::auto(3), Ranks::Emulator(3)));
}

#[test]
fn a_store_reused_by_a_later_group_serves_no_stale_entries() {
    let store: Arc<dyn symm::Store> = Arc::new(symm::InProcessStore::new());
    let opts = CommOptions::default().with_timeout(Duration::from_millis(300));
    // A first two-rank group completes a rendezvous on the store.
    std::thread::scope(|s| {
        for r in 0..2 {
            let (store, opts) = (store.clone(), opts.clone());
            s.spawn(move || {
                let c = Comm::emulated(r, 2, store, opts).unwrap();
                let b = c.alloc::<f32>(64).unwrap();
                b.rendezvous().unwrap();
                c.synchronize().unwrap();
            });
        }
    });
    // A second group on the same store, with rank 1 absent, must time out
    // naming rank 1, not reuse the first group's entries.
    let c = Comm::emulated(0, 2, store, opts).unwrap();
    let b = c.alloc::<f32>(64).unwrap();
    match b.rendezvous() {
        Err(Error::RendezvousTimeout { missing, .. }) => assert_eq!(missing, vec![1]),
        other => panic!("expected a timeout naming rank 1, got {other:?}"),
    }
}

#[test]
fn zero_ranks_are_rejected_and_shared_devices_are_not() {
    let e = emu(0, |_| Ok(())).expect_err("no ranks");
    assert!(
        e.to_string().contains("world size 0 is not supported"),
        "{e}"
    );
    // Ranks may share a GPU now: a device listed twice is no error of its
    // own. Here there is no such device, and each rank says so.
    if symm::cuda_device_count() < 2 {
        let opts = CommOptions::default().with_timeout(Duration::from_secs(1));
        let e = run(Ranks::Cuda(vec![1, 0, 1]), opts, |_| Ok(()))
            .expect_err("no cuda:1 on this machine");
        assert_eq!(e.errors.len(), 3, "{e}");
        for (r, err) in &e.errors {
            let m = err.to_string();
            assert!(
                m.contains("CUDA is not available")
                    || (*r != 1 && m.contains("cuda:1 does not exist"))
                    || m.contains("joining the group"),
                "rank {r}: {m}"
            );
        }
    }
    let e = symm::run_local(&[], |_| Ok(())).expect_err("no devices");
    assert!(e.to_string().contains("world size 0"), "{e}");
}

#[test]
fn reading_pads_while_peers_signal_is_sound() {
    // Pad reads and signal CASes use the same access width on the emulator;
    // run them concurrently (under Miri or TSan this is where a mixed-size
    // race would show).
    emu(2, |comm| {
        let buf = comm.alloc::<u8>(3)?;
        let smem = buf.rendezvous()?;
        let ch = Channel::request(comm)?;
        for _ in 0..200 {
            smem.barrier(&ch, T)?;
            let pad = smem.read_signal_pad(1 - comm.rank())?;
            assert!(pad.iter().all(|&v| v <= 1));
        }
        comm.synchronize()
    })
    .unwrap();
}

#[test]
fn fill_bytes_sets_the_data_and_leaves_the_signal_pad() {
    // Larger than the host backend's fill piece, and of odd length.
    let n = 70_001 + rand::rng().random_range(0..100usize);
    emu(2, |comm| {
        let buf = comm.alloc::<f32>(n)?;
        let data: Vec<f32> = (0..n)
            .map(|_| rand::rng().random_range(-1.0..1.0))
            .collect();
        buf.copy_from_host(&data)?;
        let smem = buf.rendezvous()?;
        buf.fill_bytes(0xFF)?;
        assert!(buf.to_host()?.iter().all(|v| v.to_bits() == u32::MAX));
        // The pad is not part of the data: signalling still works.
        smem.barrier(&Channel::request(comm)?, T)?;
        comm.synchronize()?;
        assert!(smem.read_signal_pad(comm.rank())?.iter().all(|&v| v <= 1));
        buf.fill_bytes(0)?;
        assert!(buf.to_host()?.iter().all(|v| v.to_bits() == 0));
        let h = comm.alloc::<symm::bf16>(7)?;
        h.fill_bytes(0xFF)?;
        assert!(h.to_host()?.iter().all(|v| v.to_bits() == 0xFFFF));
        Ok(())
    })
    .unwrap();
}
