//! Trust: ranks in different calls get an error, never a value (call
//! identity), and a rank that fails, panics or leaves makes every peer's
//! pending and next group operation fail fast, naming it (fail-fast). On
//! the emulator by default (CI); on GPU ranks with `SYMM_KERNEL_TESTS_ON=gpu`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "support/data.rs"]
mod data;
#[path = "support/targets.rs"]
mod targets;
use targets::ranks;

use symm::kernels::all_reduce::{all_reduce, all_reduce_with, Path};
use symm::{run, Comm, CommOptions, Error, RunError};

/// Long enough that no test below passes by reaching it: a fail-fast
/// error must come well before.
const TIMEOUT: Duration = Duration::from_secs(30);

fn options() -> CommOptions {
    CommOptions::default()
        .with_timeout(TIMEOUT)
        .with_kernel_timeout(TIMEOUT)
}

/// Fresh random f32 inputs, one vector per rank.
fn inputs(world: usize, n: usize) -> Vec<Vec<f32>> {
    (0..world).map(|_| data::mixed_f32s(n)).collect()
}

/// Every rank's error text, or the values some rank returned.
fn errors<R: std::fmt::Debug>(r: Result<Vec<R>, RunError>) -> Vec<(usize, String)> {
    match r {
        Ok(v) => panic!("every rank returned Ok: {v:?}"),
        Err(e) => e
            .errors
            .into_iter()
            .map(|(r, e)| (r, e.to_string()))
            .collect(),
    }
}

/// Rank 0 sums buffer X and then Y; rank 1 sums only Y. Today rank 1's
/// call pairs with rank 0's first and both return `X0 + Y1`; it must be
/// an error on both ranks instead, naming the ranks' different calls.
#[test]
fn ranks_in_different_calls_get_an_error_never_a_sum() {
    for path in [None, Some(Path::Ll), Some(Path::Lamport), Some(Path::Pull)] {
        let world = 2;
        let Some(r) = ranks(world) else { return };
        let n = 256;
        let (xs, ys) = (inputs(world, n), inputs(world, n));
        let res = run(r, options(), |c| {
            let x = c.alloc::<f32>(n)?;
            let y = c.alloc::<f32>(n)?;
            x.copy_from_host(&xs[c.rank()])?;
            y.copy_from_host(&ys[c.rank()])?;
            let (x, y) = (x.rendezvous()?, y.rendezvous()?);
            let mut out = c.device_buffer_from(&vec![f32::NAN; n])?;
            let sum =
                |c: &Comm, s: &symm::SymmetricMemory, out: &mut symm::DeviceBuffer<f32>| match path
                {
                    None => all_reduce(c, s, out, n),
                    Some(p) => all_reduce_with(p, c, s, out, n),
                };
            if c.rank() == 0 {
                sum(c, &x, &mut out)?;
                c.synchronize()?;
            }
            sum(c, &y, &mut out)?;
            c.synchronize()?;
            out.to_host()
        });
        let errs = errors(res);
        assert_eq!(errs.len(), world, "{path:?}: {errs:?}");
        for (r, e) in &errs {
            assert!(
                e.contains("calls differ"),
                "{path:?}: rank {r}'s error does not say the calls differ: {e}"
            );
        }
        eprintln!("{path:?}: {errs:?}");
    }
}

/// The same desynchronisation after both buffers were summed once in step
/// (the host checks each call's identity only the first time): the kernels
/// must still tell the calls apart, and no rank may return a value. Every
/// path but LL trades the identities and fails at once, saying the calls
/// differ; LL's packets carry them in their tags, so its waits never take
/// another call's data and end at the kernel timeout (or when a peer
/// leaves).
#[test]
fn a_desynchronised_call_of_agreed_shapes_returns_no_value() {
    for path in Path::ALL {
        let world = 2;
        let Some(r) = ranks(world) else { return };
        let n = 256;
        let (xs, ys) = (inputs(world, n), inputs(world, n));
        let t = Instant::now();
        let res = run(r, options(), |c| {
            let x = c.alloc::<f32>(n)?;
            let y = c.alloc::<f32>(n)?;
            x.copy_from_host(&xs[c.rank()])?;
            y.copy_from_host(&ys[c.rank()])?;
            let (x, y) = (x.rendezvous()?, y.rendezvous()?);
            let mut out = c.device_buffer_from(&vec![f32::NAN; n])?;
            all_reduce_with(path, c, &x, &mut out, n)?;
            all_reduce_with(path, c, &y, &mut out, n)?;
            c.synchronize()?;
            if c.rank() == 0 {
                all_reduce_with(path, c, &x, &mut out, n)?;
                c.synchronize()?;
            }
            all_reduce_with(path, c, &y, &mut out, n)?;
            c.synchronize()?;
            out.to_host()
        });
        let errs = errors(res);
        eprintln!(
            "{path:?}: every rank failed after {:?}: {errs:?}",
            t.elapsed()
        );
        assert_eq!(errs.len(), world, "{path:?}: {errs:?}");
        if path != Path::Ll {
            for (r, e) in &errs {
                assert!(
                    e.contains("different calls"),
                    "{path:?}: rank {r}'s error does not say the calls differ: {e}"
                );
            }
        }
    }
}

/// How the victim rank leaves the group.
#[derive(Clone, Copy, Debug)]
enum Death {
    /// Its closure returns `Ok` early.
    Exit,
    /// It panics.
    Panic,
    /// It returns an error.
    Error,
}

/// Where the peers are when the victim leaves.
#[derive(Clone, Copy, Debug)]
enum Pending {
    /// In an all-reduce kernel, waiting for the victim's data.
    Kernel,
    /// In a rendezvous, waiting for the victim's store entry.
    Store,
}

/// The victim (the last rank) waits until its peers are blocked in `pending`,
/// then leaves by `death`; every peer must fail within 1 s of that (on GPU
/// ranks; see `bound`), with an
/// error that names the victim. Returns the slowest peer's time.
fn fail_fast(world: usize, death: Death, pending: Pending) -> Option<Duration> {
    let r = ranks(world)?;
    // 1 s on GPU ranks. An emulated kernel ends only once its round of
    // simulated threads has run (every rank's, on the CPU's cores: 0.5 s at
    // world 8 on 2 loaded cores), so the emulator's bound is its own; the
    // measured time is printed either way.
    let bound = match r {
        symm::Ranks::Emulator(_) => Duration::from_secs(5),
        _ => Duration::from_secs(1),
    };
    let n = 1024;
    let victim = world - 1;
    let left: Mutex<Option<Instant>> = Mutex::new(None);
    let failed: Mutex<Vec<(usize, Instant)>> = Mutex::new(Vec::new());
    let xs = inputs(world, n);
    let res = run(r, options(), |c| {
        let x = c.alloc::<f32>(n)?;
        x.copy_from_host(&xs[c.rank()])?;
        let x = x.rendezvous()?;
        let mut out = c.device_buffer_from(&vec![f32::NAN; n])?;
        // One call in step first, so the victim leaves mid-job.
        all_reduce(c, &x, &mut out, n)?;
        c.synchronize()?;
        if c.rank() == victim {
            std::thread::sleep(Duration::from_millis(300));
            *left.lock().unwrap() = Some(Instant::now());
            match death {
                Death::Exit => return Ok(()),
                Death::Panic => panic!("the victim panics on purpose"),
                Death::Error => {
                    return Err(Error::InvalidArgument {
                        rank: c.rank(),
                        message: "the victim fails on purpose".into(),
                    })
                }
            }
        }
        let r = match pending {
            Pending::Kernel => all_reduce(c, &x, &mut out, n).and_then(|_| c.synchronize()),
            Pending::Store => c.alloc::<f32>(n).and_then(|b| b.rendezvous().map(|_| ())),
        };
        failed.lock().unwrap().push((c.rank(), Instant::now()));
        // The next group operation fails at once too.
        let t = Instant::now();
        let next = all_reduce(c, &x, &mut out, n).and_then(|_| c.synchronize());
        assert!(
            next.is_err(),
            "rank {}: the next call returned Ok",
            c.rank()
        );
        assert!(
            t.elapsed() < bound,
            "rank {}: the next call took {:?} to fail",
            c.rank(),
            t.elapsed()
        );
        r
    });
    let errs = errors(res);
    let left = left.lock().unwrap().expect("the victim left");
    let failed = failed.lock().unwrap().clone();
    assert_eq!(failed.len(), world - 1, "{failed:?}");
    let mut slowest = Duration::ZERO;
    for (rank, at) in failed {
        let took = at.saturating_duration_since(left);
        slowest = slowest.max(took);
        let e = errs
            .iter()
            .find(|(r, _)| *r == rank)
            .unwrap_or_else(|| panic!("rank {rank} returned Ok: {errs:?}"));
        assert!(
            e.1.contains(&format!("rank {victim}")),
            "rank {rank}'s error does not name rank {victim}: {}",
            e.1
        );
        assert!(
            e.1.len() < 600 + 80 * world,
            "rank {rank}'s error is long: {}",
            e.1
        );
        assert!(
            took < bound,
            "world {world}, {death:?} while {pending:?}: rank {rank} failed {took:?} after \
             the victim left: {}",
            e.1
        );
    }
    eprintln!(
        "FAILFAST world={world} death={death:?} pending={pending:?} slowest={:.1}ms; rank 0: {}",
        slowest.as_secs_f64() * 1e3,
        errs.iter().find(|(r, _)| *r == 0).map_or("", |e| &e.1)
    );
    Some(slowest)
}

macro_rules! fail_fast_tests {
    ($($name:ident: $death:ident, $pending:ident;)*) => {$(
        #[test]
        fn $name() {
            for world in [2, 4, 8] {
                fail_fast(world, Death::$death, Pending::$pending);
            }
        }
    )*};
}

fail_fast_tests! {
    an_exited_rank_fails_its_peers_kernels_fast: Exit, Kernel;
    a_panicking_rank_fails_its_peers_kernels_fast: Panic, Kernel;
    an_erroring_rank_fails_its_peers_kernels_fast: Error, Kernel;
    an_exited_rank_fails_its_peers_store_waits_fast: Exit, Store;
    a_panicking_rank_fails_its_peers_store_waits_fast: Panic, Store;
    an_erroring_rank_fails_its_peers_store_waits_fast: Error, Store;
}
