//! The symmetric memory pool: a random sequence of allocations and frees
//! interleaved with all-reduces on pool tensors, identical on every rank
//! and checked against float64 and bit for bit across ranks; placement
//! mismatches between ranks; trimming.
//!
//! On the emulator by default; on GPU ranks (sharing GPUs where there are
//! fewer) under `SYMM_KERNEL_TESTS_ON=gpu`. The sequence follows from the
//! seed it prints (`SYMM_POOL_SEED` replays one).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use symm::kernels::all_reduce::all_reduce;
use symm::{run, Comm, CommOptions, Error, PoolTensor};

#[path = "support/targets.rs"]
mod targets;
use targets::{on_gpu, ranks};
#[macro_use]
#[path = "support/testgen.rs"]
mod testgen;
#[path = "support/data.rs"]
mod data;
#[path = "support/tier.rs"]
mod tier;

/// A segment's signal pad, which shares its 2 MiB granules with its data:
/// that of every world these tests run (at most 8 ranks).
const PAD: usize = symm::layout::pad_bytes(8);

/// Pool operations (allocations and frees) per run.
const OPS: usize = 10_000;
/// An all-reduce on a live tensor every this many operations.
const REDUCE_EVERY: usize = 50;
/// Largest tensor, in bytes.
const MAX_BYTES: f64 = (8 << 20) as f64;

fn opts() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(60))
}

/// The fixed seed every run replays.
const FIXED_SEED: u64 = 0x5EED_2026_1126;

/// The seeds of this run: the fixed one, then `SYMM_POOL_SEED` or a fresh
/// one; printed, with the start of the sequence each draws.
fn seeds() -> [u64; 2] {
    let other = std::env::var("SYMM_POOL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    for seed in [FIXED_SEED, other] {
        // The first operations, drawn as `random_run` draws them.
        let mut rng = StdRng::seed_from_u64(seed);
        let mut live = 0usize;
        let start: Vec<String> = (0..8)
            .map(|_| {
                if live == 0 || (live < 24 && rng.random_bool(0.5)) {
                    live += 1;
                    format!("alloc {}B", MAX_BYTES.powf(rng.random::<f64>()).ceil())
                } else {
                    let k = rng.random_range(0..live);
                    live -= 1;
                    format!("free #{k} of the live")
                }
            })
            .collect();
        println!(
            "SYMM_POOL_SEED={seed}: the first draws are {}",
            start.join(", ")
        );
    }
    [FIXED_SEED, other]
}

/// FNV-1a over the bits of `v`: what ranks compare.
fn digest(v: &[f32]) -> u64 {
    v.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
        (h ^ u64::from(x.to_bits())).wrapping_mul(0x100_0000_01b3)
    })
}

/// One rank's part of the random run: the digest of every all-reduce's
/// result, in order.
fn random_run(c: &Comm, seed: u64) -> symm::Result<Vec<u64>> {
    let world = c.world_size();
    // Every rank draws the same sequence, every rank's data included.
    let mut rng = StdRng::seed_from_u64(seed);
    // Free device memory is measured with every rank between the same two
    // points (ranks may share a GPU): a barrier on a buffer of its own.
    let probe = c.alloc::<u8>(8)?;
    let probe = probe.rendezvous()?;
    let ch = symm::signal::Channel::request(c)?;
    let settle = || -> symm::Result<usize> {
        probe.barrier(&ch, Duration::from_secs(30))?;
        c.synchronize()?;
        // The emulator has no device memory to report.
        Ok(match c.backend_kind() {
            symm::BackendKind::Cuda => c.mem_info()?.0,
            _ => 0,
        })
    };
    let free_before = settle()?;
    let pool = c.pool();
    let max_n = if on_gpu() { 1 << 16 } else { 2048 };
    let mut live: Vec<PoolTensor<f32>> = Vec::new();
    let mut digests = Vec::new();
    let mut ops = 0;
    while ops < OPS {
        if live.is_empty() || (live.len() < 24 && rng.random_bool(0.5)) {
            // Sizes log-uniform from 1 byte to 8 MiB.
            let bytes = MAX_BYTES.powf(rng.random::<f64>()).ceil() as usize;
            live.push(pool.alloc::<f32>(bytes.div_ceil(4))?);
        } else {
            let k = rng.random_range(0..live.len());
            live.swap_remove(k);
        }
        ops += 1;
        if ops % REDUCE_EVERY != 0 || live.is_empty() {
            continue;
        }
        let k = rng.random_range(0..live.len());
        let t = &mut live[k];
        let n = t.len().min(rng.random_range(1..=max_n));
        let inputs: Vec<Vec<f32>> = (0..world)
            .map(|_| (0..n).map(|_| data::mixed_f32(&mut rng)).collect())
            .collect();
        t.fill_bytes(0xA5)?;
        t.write(0, &inputs[c.rank()])?;
        let smem = t.rendezvous()?;
        all_reduce(c, &smem, t, n)?;
        let got = t.read(0, n)?;
        for (i, g) in got.iter().enumerate() {
            let want: f64 = inputs.iter().map(|x| f64::from(x[i])).sum();
            let mag: f64 = inputs.iter().map(|x| f64::from(x[i]).abs()).sum();
            if (f64::from(*g) - want).abs() > 1e-6 * mag {
                return Err(Error::InvalidArgument {
                    rank: c.rank(),
                    group: c.group_name().clone(),
                    message: format!(
                        "CHECK FAILED (seed {seed}, op {ops}): element {i} of {t:?} is {g}, \
                         float64 says {want}"
                    ),
                });
            }
        }
        digests.push(digest(&got));
    }
    let stats = pool.stats();
    assert_eq!(stats.tensors, live.len());
    drop(live);
    let used = pool.stats();
    assert_eq!((used.tensors, used.used_bytes), (0, 0), "{used:?}");
    let freed = pool.trim();
    assert_eq!(freed, used.held_bytes);
    assert_eq!(pool.stats().segments, 0);
    let free_after = settle()?;
    if c.backend_kind() == symm::BackendKind::Cuda {
        let total = c.mem_info()?.1;
        println!(
            "rank {}: free device memory {free_before} before the pool, {free_after} after trim \
             (of {total}; the pool held at most {} bytes here)",
            c.rank(),
            used.held_bytes
        );
        assert!(
            free_after + total / 100 >= free_before,
            "free memory {free_after} after trim, {free_before} before: more than 1% of {total} \
             not returned"
        );
    }
    Ok(digests)
}

fn random_allocations(world: usize) {
    let Some(r) = ranks(world) else { return };
    // The quick tier: two ranks and the fixed seed.
    let seeds = tier::split(seeds().into_iter().enumerate(), |&(i, _)| {
        world == 2 && i == 0
    });
    if seeds.is_empty() {
        tier::skipped(&format!(
            "random_allocations_interleaved_with_all_reduces at world size {world}"
        ));
    }
    for (_, seed) in seeds {
        random_allocations_with(r.clone(), seed);
    }
}

fn random_allocations_with(r: symm::Ranks, seed: u64) {
    let out = run(r, opts(), |c| random_run(c, seed))
        .unwrap_or_else(|e| panic!("SYMM_POOL_SEED={seed}: {e}"));
    // A point where no tensor is live skips its all-reduce: most do not
    // (the live count is a random walk that spends about a 25th of its
    // time at 0, but lingers there, so a seed may skip a tenth or more:
    // SYMM_POOL_SEED=8156892499624141723 reduced at 179 of 200).
    assert!(
        out[0].len() >= OPS / REDUCE_EVERY / 2,
        "SYMM_POOL_SEED={seed}: {} all-reduces of {}",
        out[0].len(),
        OPS / REDUCE_EVERY
    );
    for (k, o) in out.iter().enumerate() {
        assert!(
            o == &out[0],
            "SYMM_POOL_SEED={seed}: rank {k}'s results differ from rank 0's"
        );
    }
}

per_world! {
    // Sampled by the seeds too: `random_allocations` asks the tier.
    random_allocations_interleaved_with_all_reduces: random_allocations =>
        [world_2, world_3, world_4, world_8];
}

/// A rank that allocates one more tensor than the others places the next
/// one elsewhere: the first all-reduce on it fails on every rank, naming
/// every rank's placement, and nothing hangs.
fn mismatch(world: usize) {
    let Some(r) = ranks(world) else { return };
    let err = run(r, opts(), |c| {
        let pool = c.pool();
        let _extra = if c.rank() == 1 {
            Some(pool.alloc::<u8>(300)?)
        } else {
            None
        };
        let mut t = pool.alloc::<f32>(1000)?;
        t.write(0, &vec![1.0f32; 1000])?;
        let smem = t.rendezvous()?;
        all_reduce(c, &smem, &mut t, 1000)?;
        c.synchronize()
    })
    .expect_err("mismatched pools");
    assert_eq!(err.errors.len(), world, "{err}");
    let first = err.errors[0].1.to_string();
    for (rank, e) in &err.errors {
        let m = e.to_string();
        // The pool's check of its collective uses, or, first where the use
        // is an all-reduce, the all-reduce's check of its call's identity:
        // either names where each rank's tensor lies.
        match e {
            Error::AllocationMismatch { .. } => assert!(
                m.contains("rank 0: allocation #0 (segment 0, offset 0, 4000 bytes of f32)")
                    && m.contains(
                        "rank 1: allocation #1 (segment 0, offset 384, 4000 bytes of f32)"
                    ),
                "{m}"
            ),
            _ => assert!(
                m.contains("the ranks' calls differ")
                    && m.contains("rank 0: 1000 f32 of allocation #1 at byte 0")
                    && m.contains("rank 1: 1000 f32 of allocation #1 at byte 384"),
                "{m}"
            ),
        }
        // The same text on every rank, but for the reporting rank.
        assert_eq!(
            m.replacen(&format!("rank {rank}:"), "", 1),
            first.replacen("rank 0:", "", 1)
        );
    }
}

per_world! {
    sampled;
    a_mismatched_allocation_sequence_is_an_error_on_every_rank: mismatch =>
        [world_2, world_3, world_4];
}

/// Blocks are reused once freed, neighbours coalesce, large tensors get a
/// segment of their own, and `trim` frees exactly the empty segments.
#[test]
fn blocks_are_reused_and_segments_trimmed() {
    if !tier::quick_test() {
        return;
    }
    let Some(r) = ranks(2) else { return };
    run(r, opts(), |c| {
        let pool = c.pool();
        let a = pool.alloc::<u8>(1)?;
        let b = pool.alloc::<f32>(100)?;
        let cc = pool.alloc::<u8>(129)?;
        assert_eq!(
            [a.place(), b.place(), cc.place()],
            [(0, 0, 0), (1, 0, 128), (2, 0, 640)]
        );
        drop(a);
        drop(b);
        // The two freed blocks coalesced into one of 640 bytes.
        let d = pool.alloc::<u8>(600)?;
        assert_eq!(d.place(), (3, 0, 0));
        let big = pool.alloc::<u8>(3 << 20)?;
        assert_eq!(big.place(), (4, 1, 0));
        let s = pool.stats();
        // Data and signal pad fill whole 2 MiB granules.
        assert_eq!(
            (s.segments, s.held_bytes),
            (2, (2 << 20) + (4 << 20) - 2 * PAD)
        );
        assert_eq!((s.tensors, s.used_bytes), (3, 640 + 256 + (3 << 20)));
        drop(big);
        assert_eq!(pool.trim(), (4 << 20) - PAD);
        assert_eq!(pool.stats().segments, 1);
        // Element 0 of every tensor is 128-byte aligned.
        assert_eq!(d.device_ptr() % 128, 0);
        assert_eq!(cc.device_ptr() % 128, 0);
        // A mapping made of a tensor keeps its block: freed only once both
        // are gone (the all-reduce keeps mappings of its staging, say).
        let t = pool.alloc::<f32>(10)?;
        let view = t.rendezvous()?;
        let live = pool.stats().tensors;
        drop(t);
        assert_eq!(pool.stats().tensors, live);
        drop(view);
        assert_eq!(pool.stats().tensors, live - 1);
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

/// A hook registered late first hears of every live segment (the
/// snapshot), then of each new segment once it is ready, and of each
/// segment about to be freed, by `trim` or by the pool's end; a removed
/// hook hears nothing more.
#[test]
fn hooks_hear_the_snapshot_then_allocations_then_frees() {
    if !tier::quick_test() {
        return;
    }
    use std::sync::{Arc, Mutex};
    use symm::SegmentEvent;
    let Some(r) = ranks(2) else { return };
    let logs = run(r, opts(), |c| {
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let pool = c.pool();
        let small = pool.alloc::<f32>(10)?;
        let hook = {
            let log = log.clone();
            move |e: &SegmentEvent<'_>| {
                let (what, s) = match e {
                    SegmentEvent::Allocated(s) => ("allocated", s),
                    SegmentEvent::Freeing(s) => ("freeing", s),
                };
                // The segment is mapped for every rank while the hook runs.
                assert_eq!(s.memory.buffer_size(), s.bytes);
                log.lock()
                    .unwrap()
                    .push(format!("{what} {} ({} bytes)", s.index, s.bytes));
            }
        };
        let id = pool.add_hook(hook);
        log.lock().unwrap().push("registered".into());
        let big = pool.alloc::<u8>(5 << 20)?;
        let other = pool.alloc::<u8>(100)?; // fits segment 0: no event
        drop(big);
        assert_eq!(pool.trim(), (6 << 20) - PAD);
        let extra = pool.add_hook(|_| {});
        pool.remove_hook(extra);
        // A second hook, kept to the end: it hears the pool's last frees.
        let end: Arc<Mutex<Vec<String>>> = Arc::default();
        let _kept = pool.add_hook({
            let end = end.clone();
            move |e: &SegmentEvent<'_>| {
                let (what, s) = match e {
                    SegmentEvent::Allocated(s) => ("allocated", s.index),
                    SegmentEvent::Freeing(s) => ("freeing", s.index),
                };
                end.lock().unwrap().push(format!("{what} {s}"));
            }
        });
        let more = pool.alloc::<u8>(2 << 20)?;
        pool.remove_hook(id);
        let after = pool.alloc::<u8>(2 << 20)?; // unheard by the first hook
        drop((more, other, small, after, pool));
        let l = log.lock().unwrap().clone();
        let e = end.lock().unwrap().clone();
        assert_eq!(
            e,
            [
                "allocated 0",
                "allocated 2",
                "allocated 3",
                "freeing 0",
                "freeing 2",
                "freeing 3"
            ]
        );
        Ok(l)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    for l in &logs {
        assert_eq!(
            l,
            &[
                format!("allocated 0 ({} bytes)", (2 << 20) - PAD),
                "registered".into(),
                format!("allocated 1 ({} bytes)", (6 << 20) - PAD),
                format!("freeing 1 ({} bytes)", (6 << 20) - PAD),
                format!("allocated 2 ({} bytes)", (4 << 20) - PAD),
            ],
            "{l:?}"
        );
    }
}

/// Segments from allocate and free functions of the user's (here: host
/// memory from `std::alloc`, as the emulator's device memory): the pool
/// works on them as on its own, and every segment goes back through the
/// user's `free`, once, with the size `alloc` gave.
#[test]
fn segments_from_the_users_allocate_and_free_functions() {
    if !tier::quick_test() {
        return;
    }
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::sync::{Arc, Mutex};
    if !targets::emulator_only() {
        return; // on a GPU, the functions must return cuMemCreate memory
    }
    let log: Arc<Mutex<Vec<(char, u64, usize)>>> = Arc::default();
    let world = 3;
    let out = run(ranks(world).expect("emulator"), opts(), |c| {
        let (la, lf) = (log.clone(), log.clone());
        let alloc = move |bytes: usize| {
            let l = Layout::from_size_align(bytes, 4096).ok()?;
            // SAFETY: `bytes` is a whole segment, never 0.
            let p = unsafe { alloc_zeroed(l) } as u64;
            la.lock().unwrap().push(('a', p, bytes));
            (p != 0).then_some(p)
        };
        let free = move |p: u64, bytes: usize| {
            lf.lock().unwrap().push(('f', p, bytes));
            let l = Layout::from_size_align(bytes, 4096).expect("as allocated");
            // SAFETY: allocated by `alloc` with this layout.
            unsafe { dealloc(p as *mut u8, l) }
        };
        // SAFETY: the functions hand out 4096-aligned host memory (the
        // emulator's device memory) of the size asked for, and free exactly
        // what they allocated.
        let segments = unsafe { symm::FnSegments::new(alloc, free) };
        let pool = c.pool_with(Arc::new(segments));
        let n = 3000;
        let mut t = pool.alloc::<f32>(n)?;
        let big = pool.alloc::<u8>(3 << 20)?;
        let x: Vec<f32> = data::mixed_f32s(n);
        t.write(0, &x)?;
        let smem = t.rendezvous()?;
        all_reduce(c, &smem, &mut t, n)?;
        let got = t.read(0, n)?;
        drop((big, t, smem));
        assert_eq!(pool.trim(), (2 << 20) + (4 << 20) - 2 * PAD);
        Ok((x, got))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    for (_, got) in &out {
        for (i, g) in got.iter().enumerate() {
            let want: f64 = out.iter().map(|(x, _)| f64::from(x[i])).sum();
            let mag: f64 = out.iter().map(|(x, _)| f64::from(x[i]).abs()).sum();
            assert!(
                (f64::from(*g) - want).abs() <= 1e-6 * mag,
                "{i}: {g} vs {want}"
            );
        }
        assert_eq!(digest(got), digest(&out[0].1));
    }
    let log = log.lock().unwrap().clone();
    let allocs: Vec<_> = log.iter().filter(|e| e.0 == 'a').collect();
    let frees: Vec<_> = log.iter().filter(|e| e.0 == 'f').collect();
    // Two segments per rank, each freed once, with its size.
    assert_eq!(allocs.len(), 2 * world, "{log:?}");
    let mut a: Vec<(u64, usize)> = allocs.iter().map(|e| (e.1, e.2)).collect();
    let mut f: Vec<(u64, usize)> = frees.iter().map(|e| (e.1, e.2)).collect();
    a.sort();
    f.sort();
    assert_eq!(a, f, "{log:?}");
}

/// Under `use_pool`, `comm.alloc` takes its memory from the pool, the
/// all-reduce's staging included: no allocation of its own, the same
/// results, and every buffer given back when it goes. Guards nest.
fn allocations_into_the_pool(world: usize) {
    let Some(r) = ranks(world) else { return };
    run(r, opts(), |c| {
        let pool = c.pool();
        let outer = c.pool();
        let n = 5000;
        let x: Vec<Vec<f32>> = (0..world).map(|_| data::mixed_f32s(n)).collect();
        // Every rank's inputs, from rank 0's draw: a plain buffer shares them.
        let all = c.alloc::<f32>(world * n)?;
        if c.rank() == 0 {
            all.copy_from_host(&x.concat())?;
        }
        let all_s = all.rendezvous()?;
        let ch = symm::signal::Channel::request(c)?;
        all_s.barrier(&ch, Duration::from_secs(30))?;
        c.synchronize()?;
        let x: Vec<f32> = all_s.peer_buffer::<f32>(0)?.read(0, world * n)?;
        let _o = c.use_pool(&outer)?;
        let g = c.use_pool(&pool)?;
        let buf = c.alloc::<f32>(n)?;
        assert!(pool.stats().tensors == 1 && outer.stats().tensors == 0);
        buf.copy_from_host(&x[c.rank() * n..(c.rank() + 1) * n])?;
        let smem = buf.rendezvous()?;
        let mut out = c.alloc::<f32>(n)?;
        out.fill_bytes(0xA5)?;
        for _ in 0..3 {
            all_reduce(c, &smem, &mut out, n)?;
        }
        // The staging the all-reduce made lives in the pool too.
        let tensors = pool.stats().tensors;
        assert!(tensors > 2, "{:?}", pool.stats());
        let got = out.to_host()?;
        for (i, g) in got.iter().enumerate() {
            let want: f64 = (0..world).map(|r| f64::from(x[r * n + i])).sum();
            let mag: f64 = (0..world).map(|r| f64::from(x[r * n + i]).abs()).sum();
            assert!(
                (f64::from(*g) - want).abs() <= 1e-6 * mag,
                "{i}: {g} vs {want}"
            );
        }
        drop(g);
        // The outer pool is current again.
        let b2 = c.alloc::<u8>(10)?;
        assert_eq!(outer.stats().tensors, 1);
        drop((b2, buf, out, smem));
        assert_eq!(pool.stats().tensors, tensors - 2);
        Ok(digest(&got))
    })
    .map(|d| assert!(d.iter().all(|x| *x == d[0]), "ranks differ"))
    .unwrap_or_else(|e| panic!("{e}"));
}

per_world! {
    sampled;
    allocations_go_into_the_current_pool: allocations_into_the_pool =>
        [world_1, world_2, world_3, world_4, world_8];
}

/// What the review of the pool found, each now an error or fixed: the
/// all-reduce's staging in a pool does not keep the rank alive (every
/// segment is freed once the group ends); a peer copy on a mismatched
/// tensor is refused; `lookup` never mistakes a segment for a tensor; a
/// segment allocator that allocates from its own pool is an error, not a
/// deadlock; nested guards of one pool restore in order.
#[test]
fn review_cases() {
    if !tier::quick_test() {
        return;
    }
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use symm::{SegmentAllocator, SegmentEvent, SymmBuffer};
    if !targets::emulator_only() {
        return;
    }
    // The staging under `use_pool`: every segment made is freed with the group.
    let (made, freed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    run(ranks(2).expect("emulator"), opts(), |c| {
        let pool = c.pool();
        let (m, f) = (made.clone(), freed.clone());
        pool.add_hook(move |e: &SegmentEvent<'_>| {
            match e {
                SegmentEvent::Allocated(_) => m.fetch_add(1, Ordering::SeqCst),
                SegmentEvent::Freeing(_) => f.fetch_add(1, Ordering::SeqCst),
            };
        });
        let _g = c.use_pool(&pool)?;
        let buf = c.alloc::<f32>(300)?;
        buf.copy_from_host(&[1.0; 300])?;
        let smem = buf.rendezvous()?;
        let mut out = c.alloc::<f32>(300)?;
        all_reduce(c, &smem, &mut out, 300)?;
        assert_eq!(out.read(0, 1)?, [2.0]);
        // `lookup` finds the buffer itself, never its whole segment.
        let found = c.lookup(buf.device_ptr()).expect("rendezvoused");
        assert_eq!(found.buffer_size(), 1200);
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let m = made.load(Ordering::SeqCst);
    assert!(m > 0);
    assert_eq!(
        freed.load(Ordering::SeqCst),
        m,
        "segments left alive after the group"
    );

    // A peer copy on a mismatched tensor fails on every rank.
    let err = run(ranks(2).expect("emulator"), opts(), |c| {
        let pool = c.pool();
        let _extra = if c.rank() == 1 {
            Some(pool.alloc::<u8>(1)?)
        } else {
            None
        };
        let t = pool.alloc::<f32>(64)?;
        let smem = t.rendezvous()?;
        let src = c.device_buffer_from(&[3.0f32; 8])?;
        smem.copy_to_peer(1 - c.rank(), 0, &src)
    })
    .expect_err("mismatched placements");
    assert_eq!(err.errors.len(), 2, "{err}");
    assert!(
        err.errors
            .iter()
            .all(|(_, e)| matches!(e, Error::AllocationMismatch { .. })),
        "{err}"
    );

    // A pool tensor is not an allocation `lookup` knows.
    run(ranks(1).expect("emulator"), opts(), |c| {
        let pool = c.pool();
        let t = pool.alloc::<f32>(64)?;
        let _m = t.rendezvous()?;
        assert!(c.lookup(t.device_ptr()).is_none());
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));

    // A segment allocator that allocates from the pool it serves.
    struct Reentrant;
    impl SegmentAllocator for Reentrant {
        fn allocate(&self, comm: &Comm, bytes: usize) -> symm::Result<SymmBuffer<u8>> {
            comm.alloc::<u8>(bytes)
        }
    }
    let err = run(ranks(1).expect("emulator"), opts(), |c| {
        let pool = c.pool_with(Arc::new(Reentrant));
        let _g = c.use_pool(&pool)?;
        c.alloc::<u8>(10).map(|_| ())
    })
    .expect_err("re-entry");
    assert!(
        err.to_string().contains("allocated from that same pool"),
        "{err}"
    );

    // Guards [a, b, a]: dropping the outer `a` keeps the inner `a` current.
    run(ranks(1).expect("emulator"), opts(), |c| {
        let (a, b) = (c.pool(), c.pool());
        let ga = c.use_pool(&a)?;
        let gb = c.use_pool(&b)?;
        let ga2 = c.use_pool(&a)?;
        drop(ga);
        let x = c.alloc::<u8>(1)?;
        assert_eq!((a.stats().tensors, b.stats().tensors), (1, 0));
        drop((ga2, x));
        let y = c.alloc::<u8>(1)?;
        assert_eq!(b.stats().tensors, 1);
        drop((gb, y));
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}
