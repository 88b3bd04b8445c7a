//! The foundation's collective protocol: allocation, peer access,
//! rendezvous and its cache, validation, timeouts and the signal
//! operations. Each scenario (in `foundation_suite/mod.rs`) is written once
//! and runs per world size on the emulator (CI), or on GPU ranks under
//! `SYMM_KERNEL_TESTS_ON=gpu` with GPU-sized data (`scripts/gpu-validate.sh`
//! runs this file as `kernels:foundation`). A few tests of the emulator and
//! the no-GPU path run on the emulator only.

use std::sync::Arc;
use std::time::Duration;

use symm::{run, Comm, CommOptions, Error, ErrorKind, Ranks};

#[path = "support/targets.rs"]
mod targets;
use targets::{emulator_only, ranks};
#[macro_use]
#[path = "support/testgen.rs"]
mod testgen;
#[path = "foundation_suite/mod.rs"]
mod foundation_suite;
use foundation_suite as suite;

/// A scenario at a world size, on the ranks [`ranks`] gives (none: skipped).
fn on(scenario: fn(Ranks)) -> impl Fn(usize) {
    move |world| {
        if let Some(r) = ranks(world) {
            scenario(r);
        }
    }
}

per_world! {
    peer_writes_land_in_every_slot: on(suite::peer_writes)
        => [world_1, world_2, world_3, world_4, world_8];
    rendezvous_is_cached_per_allocation_and_dropped_with_it: on(suite::rendezvous_cache)
        => [world_1, world_2, world_3, world_4, world_8];
    mismatched_sizes_give_every_rank_the_same_error: on(suite::mismatched_sizes)
        => [world_2, world_3, world_4, world_8];
    mismatched_dtypes_give_every_rank_the_same_error: on(suite::mismatched_dtypes)
        => [world_3];
    a_missing_rank_is_named_within_the_timeout: on(suite::a_missing_rank_is_named)
        => [world_2, world_3, world_4, world_8];
    a_panicking_rank_is_reported_and_does_not_hang_the_others: on(suite::a_panicking_rank_is_reported)
        => [world_3];
    a_wait_that_never_completes_names_rank_peer_and_channel: on(suite::a_signal_timeout_is_named_and_recovered_from)
        => [world_2, world_3, world_4, world_8];
    put_and_wait_order_data_around_a_ring: on(suite::put_and_wait_around_a_ring)
        => [world_1, world_2, world_3, world_4, world_8];
    peers_keep_memory_alive_after_owner_frees: on(suite::peers_keep_memory_alive_after_the_owner_frees)
        => [world_2];
    bad_arguments_are_errors_not_panics: on(suite::bad_arguments_are_errors_not_panics)
        => [world_2];
    empty_and_odd_sized_allocations_work: on(suite::empty_and_odd_sized_allocations_work)
        => [world_3];
    reading_pads_while_peers_signal_is_sound: on(suite::reading_pads_while_peers_signal_is_sound)
        => [world_2];
    fill_bytes_sets_the_data_and_leaves_the_signal_pad: on(suite::fill_bytes_sets_the_data_and_leaves_the_signal_pad)
        => [world_2];
    device_copies_on_the_rank_stream_are_exact: on(suite::device_copies)
        => [world_1, world_2, world_3, world_4];
    peer_copies_land_exactly_in_every_slot: on(suite::peer_copies)
        => [world_1, world_2, world_3, world_4, world_8];
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
    if !emulator_only() {
        return;
    }
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
fn world_sizes_0_and_73_are_rejected_and_shared_devices_are_not() {
    if !emulator_only() {
        return;
    }
    // 73 ranks fit a group, but not one domain (a group of more spans
    // several), where 72 fit; 0 and 4097 fit no group.
    run(Ranks::Emulator(72), CommOptions::default(), |_| Ok(())).expect("a domain of 72");
    for world in [0, 73, 4097] {
        let e = run(Ranks::Emulator(world), CommOptions::default(), |_| Ok(()))
            .expect_err("no such world size");
        let says = match world {
            73 => "73 ranks share NVLink domain 0".to_string(),
            _ => format!("world size {world} is not supported"),
        };
        assert!(e.to_string().contains(&says), "{e}");
        for (_, err) in &e.errors {
            assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        }
    }
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

/// Each kind of failure says its kind ([`symm::Error::kind`]), so a caller
/// matches kinds rather than messages; and the peers that a failed rank
/// stopped report its kind as their root ([`symm::Error::root_kind`]).
#[test]
fn errors_say_their_kind() {
    if !emulator_only() {
        return;
    }
    use symm::kernels::all_reduce::all_reduce;
    use symm::signal::Channel;
    let opts = || CommOptions::default().with_timeout(Duration::from_secs(5));
    let kinds = |e: &symm::RunError| -> Vec<(ErrorKind, ErrorKind)> {
        e.errors
            .iter()
            .map(|(_, e)| (e.kind(), e.root_kind()))
            .collect()
    };
    // A bad argument on every rank: more elements than the input holds.
    let e = run(Ranks::Emulator(2), opts(), |c| {
        let s = c.alloc::<f32>(16)?.rendezvous()?;
        let mut out = c.device_buffer::<f32>(64)?;
        all_reduce(c, &s, &mut out, 64)
    })
    .expect_err("64 elements of 16");
    assert_eq!(
        kinds(&e),
        vec![(ErrorKind::InvalidArgument, ErrorKind::InvalidArgument); 2],
        "{e}"
    );
    // Ranks that make different calls: every rank, whichever found it.
    let e = run(Ranks::Emulator(3), opts(), |c| {
        let s = c.alloc::<f32>(64)?.rendezvous()?;
        let mut out = c.device_buffer::<f32>(64)?;
        all_reduce(c, &s, &mut out, 16 + c.rank())
    })
    .expect_err("different sizes");
    assert_eq!(e.errors.len(), 3, "{e}");
    for (_, err) in &e.errors {
        assert_eq!(err.root_kind(), ErrorKind::Mismatch, "{err}");
    }
    // A fixed resource used up: a group's signal channels.
    let e = run(Ranks::Emulator(1), opts(), |c| -> symm::Result<()> {
        loop {
            Channel::request(c)?;
        }
    })
    .expect_err("the application has 16 channels");
    assert_eq!(
        kinds(&e),
        vec![(ErrorKind::Capacity, ErrorKind::Capacity)],
        "{e}"
    );
    // A wait that gives up: a rendezvous whose peer never comes.
    let store: Arc<dyn symm::Store> = Arc::new(symm::InProcessStore::new());
    let opts_short = CommOptions::default().with_timeout(Duration::from_millis(200));
    let c = Comm::emulated(0, 2, store, opts_short).unwrap();
    let err = c
        .alloc::<f32>(8)
        .unwrap()
        .rendezvous()
        .expect_err("rank 1 never comes");
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    // A rank that panics: its own error, and its peers' root.
    let e = run(Ranks::Emulator(2), opts(), |c| {
        if c.rank() == 1 {
            panic!("rank 1 gives up");
        }
        c.alloc::<f32>(8)?.rendezvous()?;
        Ok(())
    })
    .expect_err("rank 1 panics");
    for (r, err) in &e.errors {
        if *r == 1 {
            assert_eq!(err.kind(), ErrorKind::Panicked, "{err}");
        } else {
            assert_eq!(err.kind(), ErrorKind::PeerFailed, "{err}");
            assert_eq!(err.root_kind(), ErrorKind::Panicked, "{err}");
        }
    }
}
