//! The foundation's scenarios, written once for either backend: allocation,
//! peer access, rendezvous and its cache, validation, timeouts and the
//! signal operations. Each runs a group on the `Ranks` it is given and
//! panics, naming the world size and every failed rank, when a check fails.
//! `tests/foundation.rs` runs them on the emulator (CI) and, under
//! `SYMM_KERNEL_TESTS_ON=gpu`, on GPU ranks, where the data is GPU-sized.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use symm::dsl::*;
use symm::signal::Channel;
use symm::{run, symm_kernel, Comm, CommOptions, Error, LaunchConfig, Ranks, RunError};

// Each suite brings its own copy, so that a test file may include both.
#[allow(clippy::duplicate_mod)]
#[path = "../support/checks.rs"]
mod checks;
use checks::{check, check_bits};

/// The timeout of the groups whose ranks all take part.
pub const T: Duration = Duration::from_secs(10);

/// Each rank writes `value` into slot `rank` of every rank's buffer.
#[symm_kernel]
pub fn write_slots(buf: SymmBuf<u32>, value: u32) {
    let p = thread_idx_x();
    if p < buf.world_size() {
        buf.peer(p)
            .store(buf.rank(), value, StoreOrder::Relaxed, Scope::System);
    }
}

fn on_gpu(ranks: &Ranks) -> bool {
    matches!(ranks, Ranks::Cuda(_))
}

fn on_gpu_comm(c: &Comm) -> bool {
    c.backend_kind() == symm::BackendKind::Cuda
}

/// `f` on every rank of `ranks`, in a group with the timeout `timeout`.
fn group<R: Send>(
    ranks: Ranks,
    timeout: Duration,
    f: impl Fn(&Comm) -> symm::Result<R> + Sync,
) -> Result<Vec<R>, RunError> {
    run(ranks, CommOptions::default().with_timeout(timeout), f)
}

/// [`group`] with the timeout [`T`], which must succeed on every rank.
fn group_ok<R: Send>(ranks: Ranks, f: impl Fn(&Comm) -> symm::Result<R> + Sync) -> Vec<R> {
    let world = ranks.world_size();
    group(ranks, T, f).unwrap_or_else(|e| panic!("world {world}: {e}"))
}

fn random_u32s(n: usize) -> Vec<u32> {
    (0..n).map(|_| rand::rng().random()).collect()
}

/// Every rank writes a random value into its slot of every rank's buffer of
/// `world + 5` poisoned words, from the host (`peer_buffer`) in even rounds
/// and from a kernel ([`write_slots`]) in odd ones, a fresh group each round
/// (2 rounds on the emulator, 3 on GPUs): every slot of every rank holds
/// its writer's value, the words past the slots are untouched, and each
/// rank's closing barrier left its own signal pad clear.
pub fn peer_writes(ranks: Ranks) {
    let world = ranks.world_size();
    let rounds = if on_gpu(&ranks) { 3 } else { 2 };
    for round in 0..rounds {
        let values = random_u32s(world);
        group_ok(ranks.clone(), |c| {
            let r = c.rank();
            let buf = c.alloc::<u32>(world + 5)?;
            buf.copy_from_host(&vec![0xDEAD_BEEF; world + 5])?;
            let smem = buf.rendezvous()?;
            let ch = Channel::request(c)?;
            smem.barrier(&ch, T)?; // everyone poisoned before anyone writes
            c.synchronize()?;
            if round % 2 == 0 {
                for p in 0..world {
                    smem.peer_buffer::<u32>(p)?.write(r, &values[r..r + 1])?;
                }
            } else {
                write_slots::launch(c, LaunchConfig::linear(1, 32), &smem, values[r])?;
            }
            smem.barrier(&ch, T)?;
            c.synchronize()?;
            let got = buf.to_host()?;
            check_bits(c, &format!("round {round}: slots"), &got[..world], &values)?;
            check_bits(c, "past the slots", &got[world..], &[0xDEAD_BEEF; 5])?;
            // Our barrier consumed every signal sent to us; peers' pads may
            // still hold our signal until they finish their own barrier.
            check(c, smem.read_signal_pad(r)?.iter().all(|&s| s == 0), || {
                "own signal pad not reset".into()
            })
        });
    }
}

/// The rendezvous cache, with two allocations of 1000 f32 (4 MiB on GPUs):
/// a second rendezvous, and one through a view, give the cached object;
/// a lookup by a pointer inside either allocation finds its entry; the
/// entry's metadata is this rank's; each entry goes with its allocation.
pub fn rendezvous_cache(ranks: Ranks) {
    let world = ranks.world_size();
    let n: usize = if on_gpu(&ranks) { 1 << 20 } else { 1000 };
    group_ok(ranks, |c| {
        let r = c.rank();
        let a = c.alloc::<f32>(n)?;
        let b = c.alloc::<f32>(n)?;
        let sa = a.rendezvous()?;
        check(c, Arc::ptr_eq(&sa, &a.rendezvous()?), || {
            "a second rendezvous must be the cached object".into()
        })?;
        check(
            c,
            Arc::ptr_eq(&sa, &a.slice(n / 10..n / 5)?.rendezvous()?),
            || "a view must resolve to its allocation".into(),
        )?;
        let sb = b.slice(..)?.rendezvous()?;
        check(c, !Arc::ptr_eq(&sa, &sb), || {
            "two allocations share an entry".into()
        })?;
        let last = a.device_ptr() + 4 * (n as u64 - 1);
        check(
            c,
            c.lookup(last).is_some_and(|s| Arc::ptr_eq(&s, &sa)),
            || "a lookup of a's last element".into(),
        )?;
        check(
            c,
            c.lookup(b.device_ptr())
                .is_some_and(|s| Arc::ptr_eq(&s, &sb)),
            || "a lookup of b's first element".into(),
        )?;
        check(c, c.cached_rendezvous_count() == 2, || {
            format!("{} cached entries, want 2", c.cached_rendezvous_count())
        })?;
        let meta = (sa.rank(), sa.world_size(), sa.buffer_size());
        check(c, meta == (r, world, 4 * n), || {
            format!("rank, world and bytes {meta:?}")
        })?;
        check(c, sa.buffer_ptrs()[r] == a.device_ptr(), || {
            "own buffer pointer".into()
        })?;
        check(c, sa.signal_pad_ptrs()[r] == a.signal_pad_ptr(), || {
            "own signal pad pointer".into()
        })?;
        let ptr = a.device_ptr();
        drop((sa, sb));
        drop(a);
        check(c, c.lookup(ptr).is_none(), || {
            "the cache entry must go with the allocation".into()
        })?;
        check(c, c.cached_rendezvous_count() == 1, || {
            "a freed allocation's entry is still counted".into()
        })?;
        drop(b);
        check(c, c.cached_rendezvous_count() == 0, || {
            "entries left after every allocation is freed".into()
        })
    });
}

/// Every rank of a world of `world` failed with one and the same
/// rendezvous-mismatch error: its message.
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

/// Odd ranks allocate one f32 more than even ones (1024, 4096 on GPUs):
/// every rank fails at once (within 5 s; on GPUs, before the group's
/// timeout) with the same error, which names rank 1's size.
pub fn mismatched_sizes(ranks: Ranks) {
    let world = ranks.world_size();
    let (n, within) = if on_gpu(&ranks) {
        (4096, T)
    } else {
        (1024, Duration::from_secs(5))
    };
    let t = Instant::now();
    let err = group(ranks, T, |c| {
        c.alloc::<f32>(n + c.rank() % 2)?.rendezvous().map(|_| ())
    })
    .expect_err("sizes differ");
    assert!(t.elapsed() < within, "took {:?}", t.elapsed());
    let m = same_error_on_every_rank(err, world);
    let rank1 = format!("rank 1: {} × f32 = {} bytes", n + 1, 4 * (n + 1));
    assert!(
        m.contains("buffer sizes differ") && m.contains(&rank1),
        "{m}"
    );
}

/// Rank 1 allocates bf16 where the others allocate f16: every rank fails
/// with the same error, which lists every rank's type.
pub fn mismatched_dtypes(ranks: Ranks) {
    let world = ranks.world_size();
    let err = group(ranks, T, |c| {
        if c.rank() == 1 {
            c.alloc::<symm::bf16>(64)?.rendezvous().map(|_| ())
        } else {
            c.alloc::<symm::f16>(64)?.rendezvous().map(|_| ())
        }
    })
    .expect_err("dtypes differ");
    let m = same_error_on_every_rank(err, world);
    let types: Vec<String> = (0..world)
        .map(|r| format!("rank {r}: {}", if r == 1 { "bf16" } else { "f16" }))
        .collect();
    let want = format!("element types differ across ranks ({})", types.join(", "));
    assert!(m.contains(&want), "{m}");
}

/// Rank `world / 2` never arrives: every other rank times out within the
/// group's timeout (300 ms, 500 ms on GPUs) naming it, and only it.
pub fn a_missing_rank_is_named(ranks: Ranks) {
    let world = ranks.world_size();
    let missing = world / 2;
    let (timeout, slack) = if on_gpu(&ranks) {
        (Duration::from_millis(500), Duration::from_secs(2))
    } else {
        (Duration::from_millis(300), Duration::from_secs(1))
    };
    // Timed from the first rank's start, after the devices' setup (which on
    // several real GPUs takes seconds and is not the timeout's business).
    let start = std::sync::OnceLock::new();
    let err = group(ranks, timeout, |c| {
        start.get_or_init(Instant::now);
        let buf = c.alloc::<u8>(64)?;
        if c.rank() != missing {
            buf.rendezvous()?;
        }
        Ok(())
    })
    .expect_err("a rank never arrives");
    let took = start
        .get()
        .unwrap_or_else(|| panic!("no rank got past joining the group: {err}"))
        .elapsed();
    assert!(took < 2 * timeout + slack, "took {took:?}");
    assert_eq!(err.errors.len(), world - 1, "{err}");
    for (rank, e) in &err.errors {
        match e {
            Error::RendezvousTimeout {
                rank: r,
                missing: m,
                ..
            } => {
                assert_eq!((r, m.as_slice()), (rank, &[missing][..]));
                let named = format!("missing ranks [{missing}]");
                assert!(e.to_string().contains(&named), "{e}");
            }
            // The rank that never arrives returned: its exit reaches its
            // peers at once (fail-fast), naming it.
            Error::PeerFailed { rank: r, peer, .. } => {
                assert_eq!((r, peer), (rank, &missing), "{e}");
                assert!(e.to_string().contains(&format!("rank {missing}")), "{e}");
            }
            other => panic!("rank {rank}: {other}"),
        }
    }
}

/// Rank 0 panics before the rendezvous: the panic is reported as rank 0's,
/// and every other rank fails naming rank 0 (no hang): at once, as its
/// panic reaches them, or at the timeout.
pub fn a_panicking_rank_is_reported(ranks: Ranks) {
    let err = group(ranks, Duration::from_millis(200), |c| {
        let buf = c.alloc::<u8>(16)?;
        if c.rank() == 0 {
            panic!("boom on purpose");
        }
        buf.rendezvous().map(|_| ())
    })
    .expect_err("rank 0 panicked");
    assert!(
        matches!(&err.errors[0], (0, Error::RankPanicked { message, .. }) if message.contains("boom on purpose")),
        "{err}"
    );
    assert!(
        err.errors[1..]
            .iter()
            .all(|(_, e)| matches!(e, Error::RendezvousTimeout { missing, .. } if missing == &[0])
                || matches!(e, Error::PeerFailed { peer: 0, cause, .. } if cause.contains("boom on purpose"))
                // A peer that timed out first (the panic hook's backtrace
                // can take longer than the timeout) told the others why.
                || matches!(e, Error::PeerFailed { cause, .. } if cause.contains("missing ranks [0]"))),
        "{err}"
    );
}

/// The last rank waits 200 ms on channel 3 for rank 0, which never signals:
/// its synchronize reports a `SignalTimeout` naming rank, block, peer,
/// channel and timeout, within a second of the timeout, and only once. The group
/// still works afterwards: a kernel ([`write_slots`]) and host peer writes
/// from every rank land in every rank's buffer.
pub fn a_signal_timeout_is_named_and_recovered_from(ranks: Ranks) {
    let world = ranks.world_size();
    let waiter = world - 1;
    let timeout = Duration::from_millis(200);
    let values = random_u32s(2 * world);
    group_ok(ranks, |c| {
        let r = c.rank();
        let buf = c.alloc::<u32>(2 * world)?;
        let smem = buf.rendezvous()?;
        // The fourth channel requested, so that the error must name it.
        let [ch, _, _, quiet] = [(); 4].map(|_| Channel::request(c));
        let (ch, quiet) = (ch?, quiet?);
        if r == waiter {
            let t = Instant::now();
            smem.wait_signal(0, &quiet, timeout)?;
            let err = c.synchronize().err();
            let took = t.elapsed();
            let named = matches!(
                err,
                Some(Error::SignalTimeout {
                    rank,
                    block: 0,
                    peer: 0,
                    channel,
                    timeout_ms: 200,
                    ..
                }) if rank == waiter && channel == quiet.index()
            );

            check(c, named, || {
                format!("expected a timeout naming rank {waiter}, block 0, peer 0, channel {} and 200 ms, got {err:?}", quiet.index())
            })?;
            // The kernel's own 200 ms, not the group's 10 s (with slack for
            // a GPU that other ranks share).
            check(c, took < timeout + Duration::from_secs(1), || {
                format!("the timeout took {took:?}")
            })?;
            c.synchronize()?; // the error is reported once, then cleared
        }
        smem.barrier(&ch, T)?;
        write_slots::launch(c, LaunchConfig::linear(1, 32), &smem, values[r])?;
        c.synchronize()?;
        for p in 0..world {
            smem.peer_buffer::<u32>(p)?
                .write(world + r, &values[world + r..world + r + 1])?;
        }
        smem.barrier(&ch, T)?;
        c.synchronize()?;
        check_bits(
            c,
            "slots written after the timeout",
            &buf.to_host()?,
            &values,
        )
    });
}

/// Rounds of random data around the ring (20 of 33 words on the emulator,
/// 50 of 1001 on GPUs): each rank writes its next neighbour's buffer from
/// the host, signals it on channel 1, waits for its previous neighbour's
/// data, checks it, and acknowledges on channel 2 (on GPUs, from a stream
/// of the caller's); a rank overwrites only after the acknowledgement.
pub fn put_and_wait_around_a_ring(ranks: Ranks) {
    let world = ranks.world_size();
    let (iters, len) = if on_gpu(&ranks) { (50, 1001) } else { (20, 33) };
    let data: Vec<Vec<Vec<u32>>> = (0..iters)
        .map(|_| (0..world).map(|_| random_u32s(len)).collect())
        .collect();
    group_ok(ranks, |c| {
        let r = c.rank();
        let (next, prev) = ((r + 1) % world, (r + world - 1) % world);
        let buf = c.alloc::<u32>(len)?;
        let smem = buf.rendezvous()?;
        let (ch0, data_ch, ack) = (
            Channel::request(c)?,
            Channel::request(c)?,
            Channel::request(c)?,
        );
        let user = match c.cuda_stream() {
            Some(s) => {
                let u = s
                    .context()
                    .new_stream()
                    .map_err(|source| c.driver_error("cuStreamCreate", source))?;
                Some((c.with_cuda_stream(u.clone())?, u))
            }
            None => None,
        };
        for (i, round) in data.iter().enumerate() {
            if i > 0 {
                // The next rank has read the previous round.
                match &user {
                    Some((on_user, u)) => {
                        smem.wait_signal_on(u, next, &ack, T)?;
                        on_user.synchronize()?;
                    }
                    None => smem.wait_signal(next, &ack, T)?,
                }
            }
            smem.peer_buffer::<u32>(next)?.write(0, &round[r])?;
            smem.put_signal(next, &data_ch, T)?;
            smem.wait_signal(prev, &data_ch, T)?;
            c.synchronize()?;
            let what = format!("round {i}: data from rank {prev}");
            check_bits(c, &what, &buf.to_host()?, &round[prev])?;
            match &user {
                Some((_, u)) => smem.put_signal_on(u, prev, &ack, T)?,
                None => smem.put_signal(prev, &ack, T)?,
            }
        }
        smem.wait_signal(next, &ack, T)?;
        if let Some((on_user, u)) = &user {
            smem.barrier_on(u, &ch0, T)?;
            on_user.synchronize()?;
        }
        c.synchronize()
    });
}

/// Rank 0 frees its buffer right after the rendezvous; rank 1 then reads
/// rank 0's data through its own mapping, which keeps the memory alive.
pub fn peers_keep_memory_alive_after_the_owner_frees(ranks: Ranks) {
    let v: Vec<u64> = (0..64).map(|_| rand::rng().random()).collect();
    let got = group_ok(ranks, |c| {
        let buf = c.alloc::<u64>(64)?;
        if c.rank() == 0 {
            buf.copy_from_host(&v)?;
        }
        let smem = buf.rendezvous()?;
        smem.barrier(&Channel::request(c)?, T)?;
        c.synchronize()?;
        if c.rank() == 0 {
            drop(smem);
            drop(buf);
            Ok(None)
        } else {
            // Rank 0 may have freed by now; our mapping keeps its memory.
            std::thread::sleep(Duration::from_millis(20));
            Ok(Some(smem.peer_buffer::<u64>(0)?.read(0, 64)?))
        }
    });
    for (r, got) in got.iter().enumerate().skip(1) {
        assert_eq!(got.as_deref(), Some(&v[..]), "rank {r}");
    }
}

/// Out-of-range channels, ranks, offsets and lengths, and an overflowing
/// allocation, are errors that say so, not panics; and the group works
/// afterwards. On the emulator, raw CUDA kernels are refused and there is
/// no CUDA stream; on GPUs there is one.
pub fn bad_arguments_are_errors_not_panics(ranks: Ranks) {
    group_ok(ranks, |c| {
        let buf = c.alloc::<f32>(10)?;
        let smem = buf.rendezvous()?;
        let says = |e: Error, what: &str| {
            let m = e.to_string();
            check(c, m.contains(what), || format!("{m:?} lacks {what:?}"))
        };
        let world = c.world_size();
        let ch = Channel::request(c)?;
        // A channel of another group (or rank) is refused, not used.
        let other = Comm::emulated(
            0,
            1,
            Arc::new(symm::InProcessStore::new()),
            Default::default(),
        )?;
        says(
            smem.barrier(&Channel::request(&other)?, T).unwrap_err(),
            "was requested on another rank or group",
        )?;
        says(
            smem.put_signal(world, &ch, T).unwrap_err(),
            &format!("destination rank {world} is out of range"),
        )?;
        says(
            smem.wait_signal(world + 3, &ch, T).unwrap_err(),
            &format!("source rank {}", world + 3),
        )?;
        says(
            smem.peer_buffer::<f32>(world).map(|_| ()).unwrap_err(),
            &format!("peer rank {world}"),
        )?;
        says(
            smem.peer_buffer::<f32>(0)?
                .write(9, &[1.0, 2.0])
                .unwrap_err(),
            "out of bounds",
        )?;
        says(buf.slice(5..11).map(|_| ()).unwrap_err(), "out of bounds")?;
        says(
            buf.copy_from_host(&[1.0; 3]).unwrap_err(),
            "3 elements for a buffer of 10",
        )?;
        says(buf.read(8, 3).unwrap_err(), "out of bounds")?;
        says(
            c.alloc::<f64>(usize::MAX / 4).map(|_| ()).unwrap_err(),
            "overflow",
        )?;
        if c.backend_kind() == symm::BackendKind::Cuda {
            check(c, c.cuda_stream().is_some(), || {
                "a GPU rank without a stream".into()
            })?;
        } else {
            says(c.raw_kernel("k", "").map(|_| ()).unwrap_err(), "need a GPU")?;
            check(c, c.cuda_stream().is_none(), || {
                "an emulated CUDA stream".into()
            })?;
        }
        smem.barrier(&Channel::request(c)?, T)?;
        c.synchronize()
    });
}

/// An empty allocation rendezvouses and reads back empty; an odd-sized one
/// is 128-byte aligned (data and signal pad) with the sizes it asked for,
/// and its channel 4 barrier works.
pub fn empty_and_odd_sized_allocations_work(ranks: Ranks) {
    group_ok(ranks, |c| {
        let empty = c.alloc::<f32>(0)?;
        let s = empty.rendezvous()?;
        check(c, s.buffer_size() == 0, || {
            "an empty allocation has bytes".into()
        })?;
        check(c, empty.to_host()?.is_empty(), || {
            "an empty allocation reads back data".into()
        })?;
        let odd = c.alloc::<symm::bf16>(4097)?;
        let aligned = (odd.device_ptr() % 128, odd.signal_pad_ptr() % 128);
        check(c, aligned == (0, 0), || {
            format!("misaligned by {aligned:?}")
        })?;
        let s = odd.rendezvous()?;
        let sizes = (s.buffer_size(), s.signal_pad_size());
        check(
            c,
            sizes == (4097 * 2, symm::layout::pad_bytes(c.world_size())),
            || format!("buffer and pad bytes {sizes:?}"),
        )?;
        s.barrier(&Channel::request(c)?, T)?;
        c.synchronize()
    });
}

/// 200 barriers, each rank reading its peer's signal pad between them while
/// the peer signals (under Miri or TSan, a mixed-size race would show):
/// a pad word is only ever 0 or 1.
pub fn reading_pads_while_peers_signal_is_sound(ranks: Ranks) {
    group_ok(ranks, |c| {
        let buf = c.alloc::<u8>(3)?;
        let smem = buf.rendezvous()?;
        let peer = (c.rank() + 1) % c.world_size();
        let ch = Channel::request(c)?;
        for _ in 0..200 {
            smem.barrier(&ch, T)?;
            let pad = smem.read_signal_pad(peer)?;
            check(c, pad.iter().all(|&v| v <= 1), || {
                format!("pad word above 1: {pad:?}")
            })?;
        }
        c.synchronize()
    });
}

/// `fill_bytes` over 70 001+ random f32 (more than the host backend's fill
/// piece, odd length) sets every byte, leaves the signal pad (signalling
/// still works), and does so for bf16 too.
pub fn fill_bytes_sets_the_data_and_leaves_the_signal_pad(ranks: Ranks) {
    let n = 70_001 + rand::rng().random_range(0..100usize);
    group_ok(ranks, |c| {
        let buf = c.alloc::<f32>(n)?;
        let data: Vec<f32> = (0..n)
            .map(|_| rand::rng().random_range(-1.0..1.0))
            .collect();
        buf.copy_from_host(&data)?;
        let smem = buf.rendezvous()?;
        buf.fill_bytes(0xFF)?;
        check_bits(
            c,
            "fill 0xFF",
            &buf.to_host()?,
            &vec![f32::from_bits(u32::MAX); n],
        )?;
        // The pad is not part of the data: signalling still works.
        smem.barrier(&Channel::request(c)?, T)?;
        c.synchronize()?;
        let pad = smem.read_signal_pad(c.rank())?;
        check(c, pad.iter().all(|&v| v <= 1), || {
            format!("pad word above 1: {pad:?}")
        })?;
        buf.fill_bytes(0)?;
        check_bits(c, "fill 0", &buf.to_host()?, &vec![0.0f32; n])?;
        let h = c.alloc::<symm::bf16>(7)?;
        h.fill_bytes(0xFF)?;
        check_bits(
            c,
            "fill bf16 0xFF",
            &h.to_host()?,
            &[symm::bf16::from_bits(0xFFFF); 7],
        )
    });
}

/// Fresh random f32s (any bits but NaN's, so a mismatch prints readably).
fn random_f32s(n: usize) -> Vec<f32> {
    let mut rng = rand::rng();
    (0..n).map(|_| rng.random_range(-1e6f32..1e6)).collect()
}

/// `Comm::copy` device to device on the rank's stream, with no host
/// synchronisation between the copies: user memory (a plain buffer) into
/// a poisoned symmetric buffer and a range of it back, views of one buffer
/// into another's, every length odd, fresh data per round; each
/// destination holds exactly its source, and the poison around the ranges
/// is untouched. Mismatched lengths and overlapping ranges are errors.
pub fn device_copies(ranks: Ranks) {
    let world = ranks.world_size();
    for _round in 0..2 {
        let n = rand::rng().random_range(1000..3000) | 1;
        let (a, b) = (n / 3, n / 3 + n / 4);
        let data: Vec<Vec<f32>> = (0..world).map(|_| random_f32s(n)).collect();
        group_ok(ranks.clone(), |c| {
            let r = c.rank();
            let poison = f32::from_bits(0xDEAD_BEEF);
            let src = c.device_buffer_from(&data[r])?;
            let mut sym = c.alloc::<f32>(n)?;
            sym.copy_from_host(&vec![poison; n])?;
            let mut back = c.device_buffer_from(&vec![poison; n])?;
            let other = c.alloc::<f32>(n)?;
            other.copy_from_host(&vec![poison; n])?;
            // Whole, then a view into a view, then a view back into plain
            // memory: all enqueued before anything is read.
            c.copy(&src, &mut sym)?;
            c.copy(&sym.slice(a..b)?, &mut other.slice(b - a..2 * (b - a))?)?;
            c.copy(&sym, &mut back)?;
            c.synchronize()?;
            check_bits(c, "symmetric copy of the source", &sym.to_host()?, &data[r])?;
            check_bits(c, "plain copy back", &back.to_host()?, &data[r])?;
            let mut want = vec![poison; n];
            want[b - a..2 * (b - a)].copy_from_slice(&data[r][a..b]);
            check_bits(c, "view into view", &other.to_host()?, &want)?;
            let says = |e: Error, what: &str| {
                let m = e.to_string();
                check(c, m.contains(what), || format!("{m:?} lacks {what:?}"))
            };
            says(
                c.copy(&sym.slice(..a)?, &mut back).unwrap_err(),
                "the lengths differ",
            )?;
            says(
                c.copy(&sym.slice(..b)?, &mut sym.slice(1..b + 1)?)
                    .unwrap_err(),
                "overlap",
            )?;
            c.copy(&sym.slice(..0)?, &mut other.slice(n..)?)?;
            // cudarc views of symm memory exist on GPU ranks only.
            if on_gpu_comm(c) {
                let v = sym.slice(a..b)?.cuda_view()?;
                check(c, v.len() == b - a, || {
                    format!("a view of {} elements", v.len())
                })?;
                check(c, c.cuda_view(&back)?.len() == n, || {
                    "a view of `back`".into()
                })?;
            } else {
                says(sym.cuda_view().map(|_| ()).unwrap_err(), "is emulated")?;
                says(c.cuda_view(&back).map(|_| ()).unwrap_err(), "is emulated")?;
            }
            c.synchronize()
        });
    }
}

/// The copy engines' peer copies: every rank copies its fresh data into
/// its slot of every peer's poisoned buffer (`copy_to_peer`, odd offsets
/// and lengths), and after a barrier copies each peer's whole buffer back
/// (`copy_from_peer`) into its own plain memory, all on the rank's stream
/// with no host synchronisation between copy and barrier. Every slot of
/// every buffer holds its writer's data exactly, the poison between slots
/// is untouched, and out-of-bounds or overlapping copies are errors.
pub fn peer_copies(ranks: Ranks) {
    let world = ranks.world_size();
    for _round in 0..2 {
        let chunk = rand::rng().random_range(200..700) | 1;
        // Each slot starts one element past a chunk boundary and leaves one
        // poisoned element at its end.
        let len = world * (chunk + 2);
        let at = |p: usize| p * (chunk + 2) + 1;
        let data: Vec<Vec<f32>> = (0..world).map(|_| random_f32s(chunk)).collect();
        let poison = f32::from_bits(0x7FBA_DBAD);
        let mut want = vec![poison; len];
        for (p, d) in data.iter().enumerate() {
            want[at(p)..at(p) + chunk].copy_from_slice(d);
        }
        group_ok(ranks.clone(), |c| {
            let r = c.rank();
            let buf = c.alloc::<f32>(len)?;
            buf.copy_from_host(&vec![poison; len])?;
            let smem = buf.rendezvous()?;
            let ch = Channel::request(c)?;
            smem.barrier(&ch, T)?; // every buffer poisoned before any copy
            let src = c.device_buffer_from(&data[r])?;
            for p in 0..world {
                smem.copy_to_peer(p, at(r), &src)?;
            }
            smem.barrier(&ch, T)?;
            let mut back: Vec<_> = (0..world)
                .map(|_| c.device_buffer::<f32>(len))
                .collect::<symm::Result<_>>()?;
            for (p, b) in back.iter_mut().enumerate() {
                smem.copy_from_peer(p, 0, b)?;
            }
            c.synchronize()?;
            check_bits(c, "own buffer", &buf.to_host()?, &want)?;
            for (p, b) in back.iter().enumerate() {
                check_bits(
                    c,
                    &format!("rank {p}'s buffer, copied back"),
                    &b.to_host()?,
                    &want,
                )?;
            }
            let says = |e: Error, what: &str| {
                let m = e.to_string();
                check(c, m.contains(what), || format!("{m:?} lacks {what:?}"))
            };
            says(
                smem.copy_to_peer(0, len - chunk + 1, &src).unwrap_err(),
                "out of bounds",
            )?;
            says(
                smem.copy_from_peer(world, 0, &mut back[0]).unwrap_err(),
                &format!("peer rank {world}"),
            )?;
            // Into this rank's own buffer from a range of it that overlaps.
            says(
                smem.copy_to_peer(r, 1, &buf.slice(..chunk)?).unwrap_err(),
                "overlap",
            )?;
            smem.barrier(&ch, T)?; // no rank frees while a peer still copies
            c.synchronize()
        });
    }
}
