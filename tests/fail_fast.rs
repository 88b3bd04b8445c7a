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

use symm::kernels::all_reduce::{all_reduce, all_reduce_with, AllReducePath};
use symm::{run, Comm, CommOptions, Error, ErrorKind, RunError};

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

/// This rank's `xs` and `ys` in two rendezvoused buffers, and an output
/// of as many NaNs.
fn two_inputs(
    c: &Comm,
    xs: &[Vec<f32>],
    ys: &[Vec<f32>],
) -> symm::Result<(
    std::sync::Arc<symm::SymmetricMemory>,
    std::sync::Arc<symm::SymmetricMemory>,
    symm::DeviceBuffer<f32>,
)> {
    let n = xs[c.rank()].len();
    let x = c.alloc::<f32>(n)?;
    let y = c.alloc::<f32>(n)?;
    x.copy_from_host(&xs[c.rank()])?;
    y.copy_from_host(&ys[c.rank()])?;
    let out = c.device_buffer_from(&vec![f32::NAN; n])?;
    Ok((x.rendezvous()?, y.rendezvous()?, out))
}

/// This rank's `xs` in a rendezvoused buffer, and an output of as many
/// NaNs.
fn one_input(
    c: &Comm,
    xs: &[Vec<f32>],
) -> symm::Result<(
    std::sync::Arc<symm::SymmetricMemory>,
    symm::DeviceBuffer<f32>,
)> {
    let n = xs[c.rank()].len();
    let x = c.alloc::<f32>(n)?;
    x.copy_from_host(&xs[c.rank()])?;
    Ok((x.rendezvous()?, c.device_buffer_from(&vec![f32::NAN; n])?))
}

/// Every rank's error text, or the values some rank returned.
fn errors<R: std::fmt::Debug>(r: Result<Vec<R>, RunError>) -> Vec<(usize, ErrorKind, String)> {
    match r {
        Ok(v) => panic!("every rank returned Ok: {v:?}"),
        Err(e) => e
            .errors
            .into_iter()
            .map(|(r, e)| (r, e.root_kind(), e.to_string()))
            .collect(),
    }
}

/// Asserts that every rank failed because the ranks made different calls:
/// the rank that found it, and the peers its failure stopped.
fn every_rank_says_mismatch(errs: &[(usize, ErrorKind, String)], what: &str) {
    for (r, kind, e) in errs {
        assert_eq!(
            *kind,
            ErrorKind::Mismatch,
            "{what}: rank {r}'s error is not a mismatch: {e}"
        );
    }
}

/// Rank 0 sums buffer X and then Y; rank 1 sums only Y. Today rank 1's
/// call pairs with rank 0's first and both return `X0 + Y1`; it must be
/// an error on both ranks instead, naming the ranks' different calls.
#[test]
fn ranks_in_different_calls_get_an_error_never_a_sum() {
    for path in [
        None,
        Some(AllReducePath::Ll),
        Some(AllReducePath::Lamport),
        Some(AllReducePath::Pull),
    ] {
        let world = 2;
        let Some(r) = ranks(world) else { return };
        let n = 256;
        let (xs, ys) = (inputs(world, n), inputs(world, n));
        let res = run(r, options(), |c| {
            let (x, y, mut out) = two_inputs(c, &xs, &ys)?;
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
        every_rank_says_mismatch(&errs, &format!("{path:?}"));
        eprintln!("{path:?}: {errs:?}");
    }
}

/// The same desynchronisation after both buffers were summed once in step
/// (the store checks each call's identity only the first time), with the
/// host's check of the calls' sequence off (as between ranks in different
/// processes): the kernels must still tell the calls apart, and no rank
/// may return a value: every path fails at once, saying the calls differ
/// (LL's wait finds packets of its epoch whose tags carry another
/// identity, and fails naming the peer).
#[test]
fn a_desynchronised_call_of_agreed_shapes_returns_no_value() {
    for path in AllReducePath::ALL {
        let world = 2;
        let Some(r) = ranks(world) else { return };
        let n = 256;
        let (xs, ys) = (inputs(world, n), inputs(world, n));
        let t = Instant::now();
        let res = run(r, options().with_check_calls(false), |c| {
            let (x, y, mut out) = two_inputs(c, &xs, &ys)?;
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
        every_rank_says_mismatch(&errs, &format!("{path:?}"));
        // At once, not at a wait's timeout (30 s here): the whole job,
        // rendezvous, the calls in step and a GPU's first compiles
        // included, well within it.
        assert!(
            t.elapsed() < TIMEOUT / 3,
            "{path:?}: the ranks failed only after {:?}",
            t.elapsed()
        );
    }
}

/// One rank of the desync between kernels: sums X on path `a` and then Y
/// on path `b` in step with its peers (and notes when that was done),
/// then rank 0 sums X on `a` again where the others go on to Y on `b`.
fn desynchronised_calls(
    c: &Comm,
    (a, b): (AllReducePath, AllReducePath),
    xs: &[Vec<f32>],
    ys: &[Vec<f32>],
    started: &Mutex<Option<Instant>>,
) -> symm::Result<Vec<f32>> {
    let n = xs[c.rank()].len();
    let (x, y, mut out) = two_inputs(c, xs, ys)?;
    all_reduce_with(a, c, &x, &mut out, n)?;
    all_reduce_with(b, c, &y, &mut out, n)?;
    c.synchronize()?;
    started.lock().unwrap().get_or_insert_with(Instant::now);
    if c.rank() == 0 {
        all_reduce_with(a, c, &x, &mut out, n)?;
    }
    all_reduce_with(b, c, &y, &mut out, n)?;
    c.synchronize()?;
    out.to_host()
}

/// Ranks desynchronised between calls on different kernels (each pair of
/// paths, every shape agreed in step first): rank 0 sums X on path `a`
/// and then Y on path `b`, rank 1 only Y. No two such kernels share a
/// signal, so they would wait on each other until the kernel timeout; the
/// host's check of the calls' sequence ([`Comm::check_call`]) fails both
/// ranks at once instead, saying the calls differ. Also with the second
/// call empty on one rank (a rank with nothing to sum must not leave its
/// peers waiting).
#[test]
fn a_desynchronised_call_on_another_kernel_fails_at_once() {
    let pairs = [
        (AllReducePath::Ll, AllReducePath::Pull),
        (AllReducePath::Pull, AllReducePath::Ll),
        (AllReducePath::Push, AllReducePath::TwoShot),
        (AllReducePath::Lamport, AllReducePath::LamportTwoShot),
    ];
    for (a, b) in pairs {
        let world = 2;
        let Some(r) = ranks(world) else { return };
        let bound = match r {
            symm::Ranks::Emulator(_) => Duration::from_secs(5),
            _ => Duration::from_secs(1),
        };
        let n = 256;
        let (xs, ys) = (inputs(world, n), inputs(world, n));
        let started: Mutex<Option<Instant>> = Mutex::new(None);
        let res = run(r, options(), |c| {
            desynchronised_calls(c, (a, b), &xs, &ys, &started)
        });
        let took = started.lock().unwrap().map(|t| t.elapsed());
        let errs = errors(res);
        eprintln!("{a:?} then {b:?}: every rank failed after {took:?}: {errs:?}");
        assert_eq!(errs.len(), world, "{errs:?}");
        every_rank_says_mismatch(&errs, &format!("{a:?}/{b:?}"));
        let took = took.expect("the ranks made their calls in step first");
        assert!(
            took < bound,
            "{a:?}/{b:?}: the ranks failed only after {took:?}"
        );
    }
    // An empty call on rank 1 where rank 0 sums 256 elements (both agreed
    // before): rank 1 launches nothing, and rank 0 must not wait for it.
    let world = 2;
    let Some(r) = ranks(world) else { return };
    let n = 256;
    let xs = inputs(world, n);
    let res = run(r, options(), |c| {
        let (x, mut out) = one_input(c, &xs)?;
        all_reduce(c, &x, &mut out, n)?;
        all_reduce(c, &x, &mut out, 0)?;
        c.synchronize()?;
        all_reduce(c, &x, &mut out, if c.rank() == 0 { n } else { 0 })?;
        c.synchronize()?;
        // Rank 1's empty call may return before rank 0 learns of it; its
        // next group operation fails.
        all_reduce(c, &x, &mut out, n)?;
        c.synchronize()?;
        out.to_host()
    });
    let errs = errors(res);
    eprintln!("an empty call on one rank: {errs:?}");
    assert_eq!(errs.len(), world, "{errs:?}");
    every_rank_says_mismatch(&errs, "an empty call on one rank");
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
        let (x, mut out) = one_input(c, &xs)?;
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
                        group: c.group_name().clone(),
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
            .find(|(r, _, _)| *r == rank)
            .unwrap_or_else(|| panic!("rank {rank} returned Ok: {errs:?}"));
        assert!(
            e.2.contains(&format!("rank {victim}")),
            "rank {rank}'s error does not name rank {victim}: {}",
            e.2
        );
        assert!(
            e.2.len() < 600 + 80 * world,
            "rank {rank}'s error is long: {}",
            e.2
        );
        assert!(
            took < bound,
            "world {world}, {death:?} while {pending:?}: rank {rank} failed {took:?} after \
             the victim left: {}",
            e.2
        );
    }
    eprintln!(
        "FAILFAST world={world} death={death:?} pending={pending:?} slowest={:.1}ms; rank 0: {}",
        slowest.as_secs_f64() * 1e3,
        errs.iter().find(|(r, _, _)| *r == 0).map_or("", |e| &e.2)
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

// ------------------------------------------------ processes that are killed

/// Set in a child process of the killed-process tests: "addr world rank".
const CHILD: &str = "SYMM_TEST_KILLED_PROCESS_CHILD";

/// Milliseconds since the epoch: one clock for the test and its children.
fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
        * 1e3
}

/// The torchrun-style environment of `rank` of a job of `world` whose
/// store is at 127.0.0.1:`port`, with the job's token.
fn job_env(port: u16, world: usize, rank: usize) -> Vec<(&'static str, String)> {
    vec![
        ("RANK", rank.to_string()),
        ("LOCAL_RANK", rank.to_string()),
        ("WORLD_SIZE", world.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
        ("SYMM_STORE_TOKEN", format!("job-{port}")),
    ]
}

/// The launch environment that torchrun-style `vars` describe.
fn launch_env(vars: &[(&'static str, String)]) -> symm::LaunchEnv {
    symm::LaunchEnv::from_vars(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()))
        .expect("a torchrun-style environment")
}

/// An emulated rank of the job that `vars` describe, joined through the
/// job's TCP store as `Comm::from_env` opens it (rank 0 hosts it): the
/// group's store is what these tests exercise.
fn emulated_job_rank(vars: &[(&'static str, String)]) -> Comm {
    let env = launch_env(vars);
    let store = env.open_store(TIMEOUT).expect("the job's store");
    Comm::emulated(env.rank, env.world_size, store, options()).expect("join")
}

/// One rank of a killed-process job, in this process, from its
/// torchrun-style environment `vars`: opens the group's TCP store as
/// `Comm::from_env` does (rank 0 hosts it), joins the group (emulated: the
/// group's store is what these tests exercise), says it is ready, and then
/// waits on a key that no rank sets, until a departure ends the wait.
/// Returns the error and when it came (the epoch clock).
fn killed_job_rank(vars: &[(&'static str, String)]) -> (String, f64) {
    let comm = emulated_job_rank(vars);
    let rank = comm.rank();
    comm.store()
        .set(&comm.store_key(&format!("ready/{rank}")), b"1")
        .expect("ready");
    let e = comm
        .store()
        .get(&comm.store_key("never"), TIMEOUT)
        .map(|_| ())
        .map_err(|e| comm.store_error(e))
        .expect_err("nobody sets this key");
    let at = now_ms();
    // Hold the rank until every rank has seen the departure, so that this
    // rank's own exit is not what another rank sees first.
    std::thread::sleep(Duration::from_millis(400));
    drop(comm);
    (e.to_string(), at)
}

/// A process that dies without unwinding (SIGKILL) makes every peer's
/// pending store wait fail within 1 s, naming its rank: the store's host
/// writes the last word a killed client left, and a killed host is seen as
/// the end of every client's last-word connection. At worlds 2, 4 and 8,
/// the victim a client and then the host; this test's process is one of
/// the survivors, the others its children, each started as torchrun starts
/// a worker (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and the job's
/// token in its environment; no launcher stops the survivors).
#[test]
fn a_killed_process_fails_its_peers_store_waits_fast() {
    if std::env::var_os(CHILD).is_some() {
        let vars: Vec<(&'static str, String)> = job_env(0, 0, 0)
            .into_iter()
            .map(|(k, _)| (k, std::env::var(k).expect("set by the test")))
            .collect();
        let (e, at) = killed_job_rank(&vars);
        println!("KILLED-CHILD rank={} at={at} error={e}", vars[0].1);
        return;
    }
    let me = std::env::current_exe().unwrap();
    for world in [2, 4, 8] {
        for victim in [world - 1, 0] {
            // The test's own rank: a survivor.
            let own = if victim == 0 { 1 } else { 0 };
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let children: Vec<(usize, std::process::Child)> = (0..world)
                .filter(|&r| r != own)
                .map(|r| {
                    let child = std::process::Command::new(&me)
                        .args([
                            "--exact",
                            "a_killed_process_fails_its_peers_store_waits_fast",
                            "--nocapture",
                            "--test-threads=1",
                        ])
                        .env(CHILD, "1")
                        .envs(job_env(port, world, r))
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .unwrap();
                    (r, child)
                })
                .collect();
            let killed_at = Mutex::new(None::<f64>);
            let (mine, at) = std::thread::scope(|s| {
                let waiter = s.spawn(|| killed_job_rank(&job_env(port, world, own)));
                // Every rank ready (read from a client of our own), then
                // the victim dies.
                use symm::Store as _;
                let token = format!("job-{port}");
                let probe = symm::TcpStore::connect(addr, Some(&token), TIMEOUT).expect("probe");
                let keys: Vec<String> = (0..world).map(|r| format!("symm/1/ready/{r}")).collect();
                probe.wait(&keys, TIMEOUT).expect("every rank ready");
                drop(probe);
                std::thread::sleep(Duration::from_millis(200));
                let (_, victim_child) = children.iter().find(|(r, _)| *r == victim).unwrap();
                let pid = victim_child.id() as i32;
                *killed_at.lock().unwrap() = Some(now_ms());
                std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status()
                    .unwrap();
                waiter.join().unwrap()
            });
            let killed_at = killed_at.lock().unwrap().unwrap();
            let mut seen = vec![(own, mine, at)];
            for (r, child) in children {
                let out = child.wait_with_output().unwrap();
                if r == victim {
                    continue;
                }
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let line = text
                    .lines()
                    .find_map(|l| {
                        // libtest may print the test's name first on the line.
                        l.split_once(&format!("KILLED-CHILD rank={r} at="))
                            .map(|(_, rest)| rest)
                    })
                    .unwrap_or_else(|| panic!("rank {r} said nothing: {text}"));
                let (at, e) = line.split_once(" error=").unwrap();
                seen.push((r, e.to_string(), at.parse().unwrap()));
            }
            let mut slowest: f64 = 0.0;
            for (r, e, at) in &seen {
                let took = at - killed_at;
                slowest = slowest.max(took);
                assert!(
                    e.contains(&format!("rank {victim} ended without leaving")),
                    "world {world}, victim {victim}: rank {r}'s error: {e}"
                );
                assert!(
                    took < 1000.0,
                    "world {world}, victim {victim}: rank {r} failed {took:.0} ms after the kill"
                );
            }
            eprintln!(
                "FAILFAST killed world={world} victim={victim} slowest={slowest:.1}ms; rank {own}: {}",
                seen[0].1
            );
        }
    }
}

/// One rank of the cross-process desync job, from its torchrun-style
/// environment `vars`: joins (emulated: the host's check is what this
/// exercises), numbers three calls on channel 3 as its peer does, then a
/// fourth with a digest of its own (rank 0 first, rank 1 once rank 0
/// says its call is recorded, so that rank 1's is the call that finds the
/// difference). Rank 0 then waits on a key that no rank sets, until the
/// group's failure ends the wait. Returns what the fourth call returned
/// and when, and rank 0's wait's error and when it ended (epoch ms).
fn desync_job_rank(vars: &[(&'static str, String)]) -> (String, f64, String, f64) {
    let comm = emulated_job_rank(vars);
    let rank = comm.rank();
    for d in [1, 2, 3] {
        comm.check_call(3, d, || format!("call {d}"))
            .expect("calls in step");
    }
    let recorded = comm.store_key("rank-0-made-its-fourth-call");
    if rank == 1 {
        comm.store().get(&recorded, TIMEOUT).expect("rank 0's word");
    }
    let fourth = match comm.check_call(3, 10 + rank as u32, || format!("rank {rank}'s fourth")) {
        Ok(()) => "Ok".to_string(),
        Err(e) => e.to_string(),
    };
    let fourth_at = now_ms();
    if rank == 0 {
        comm.store().set(&recorded, b"1").expect("say so");
    }
    let (mut waited, mut waited_at) = (String::new(), 0.0);
    if rank == 0 {
        waited = comm
            .store()
            .get(&comm.store_key("never"), TIMEOUT)
            .map(|_| ())
            .map_err(|e| comm.store_error(e))
            .expect_err("nobody sets this key")
            .to_string();
        waited_at = now_ms();
    } else {
        // Rank 1 stays in the group until rank 0, the store's host, has
        // seen its failure (its exit would also end rank 0's wait).
        std::thread::sleep(Duration::from_millis(1500));
    }
    drop(comm);
    (fourth, fourth_at, waited, waited_at)
}

/// Ranks in different processes that part in their sequence of calls fail
/// on the host at once, as ranks of one process do: the group's processes
/// share one call ledger (mapped at join), so the later rank's call finds
/// the difference and its abort ends rank 0's pending wait. Before, each
/// process compared only its own ranks, and calls on kernels that share
/// no signal waited for the kernel timeout. Rank 1 is a child process
/// started as torchrun starts a worker; rank 0 is this process.
#[test]
fn ranks_of_different_processes_in_different_calls_fail_at_once() {
    const DESYNC_CHILD: &str = "SYMM_TEST_DESYNC_PROCESS_CHILD";
    if std::env::var_os(DESYNC_CHILD).is_some() {
        let vars: Vec<(&'static str, String)> = job_env(0, 0, 0)
            .into_iter()
            .map(|(k, _)| (k, std::env::var(k).expect("set by the test")))
            .collect();
        let (fourth, at, _, _) = desync_job_rank(&vars);
        println!("DESYNC-CHILD at={at} fourth={fourth}");
        return;
    }
    let world = 2;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "ranks_of_different_processes_in_different_calls_fail_at_once",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DESYNC_CHILD, "1")
        .envs(job_env(port, world, 1))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The child must not outlive a failure here.
    struct Reap(Option<std::process::Child>);
    impl Drop for Reap {
        fn drop(&mut self) {
            if let Some(c) = self.0.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
    let mut child = Reap(Some(child));
    let (fourth0, _, waited0, waited_at) = desync_job_rank(&job_env(port, world, 0));
    let out = child.0.take().unwrap().wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find_map(|l| l.split_once("DESYNC-CHILD at=").map(|(_, rest)| rest))
        .unwrap_or_else(|| {
            panic!(
                "rank 1 said nothing ({}): {text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert!(out.status.success(), "rank 1's process: {}", out.status);
    let (at1, fourth1) = line.split_once(" fourth=").unwrap();
    let took = waited_at - at1.parse::<f64>().unwrap();
    eprintln!(
        "FAILFAST cross-process desync: rank 0 failed {took:.1} ms after rank 1 found the \
         difference; rank 0: {waited0}"
    );
    // Rank 1's call came second: it finds rank 0's, and fails.
    assert_eq!(fourth0, "Ok");
    assert!(
        fourth1.contains("different calls") && fourth1.contains("ranks 0 and 1"),
        "rank 1's fourth call: {fourth1}"
    );
    // Rank 0 learns it at once, from rank 1's abort, with the cause.
    assert!(
        waited0.contains("rank 1 failed") && waited0.contains("different calls"),
        "rank 0's wait did not end with rank 1's mismatch: {waited0}"
    );
    assert!(took < 1000.0, "rank 0 failed {took:.0} ms after rank 1");
}

/// One GPU rank of the user-stream scenario: a call in step on a stream
/// of its own (`Comm::with_cuda_stream`), then the victim leaves with an
/// error after 300 ms (saying when in `left`), and every other rank
/// launches the next call and waits for the stream outside symm, where
/// only the abort word can end the kernel before its timeout. Returns when
/// that wait ended, and what the rank's own synchronize said next.
fn user_stream_rank(
    c: &Comm,
    xs: &[Vec<f32>],
    victim: usize,
    left: &Mutex<Option<Instant>>,
) -> symm::Result<(Instant, symm::Result<()>)> {
    let n = xs[c.rank()].len();
    let stream = c
        .cuda_stream()
        .expect("a GPU rank")
        .context()
        .new_stream()
        .map_err(|e| Error::InvalidArgument {
            rank: c.rank(),
            group: c.group_name().clone(),
            message: format!("cuStreamCreate: {e:?}"),
        })?;
    let u = c.with_cuda_stream(stream.clone())?;
    let (x, mut out) = one_input(&u, xs)?;
    all_reduce(&u, &x, &mut out, n)?;
    u.synchronize()?;
    if c.rank() == victim {
        std::thread::sleep(Duration::from_millis(300));
        *left.lock().unwrap() = Some(Instant::now());
        return Err(Error::InvalidArgument {
            rank: c.rank(),
            group: c.group_name().clone(),
            message: "the victim fails on purpose".into(),
        });
    }
    all_reduce(&u, &x, &mut out, n)?;
    let _ = stream.synchronize();
    Ok((Instant::now(), u.synchronize()))
}

/// Runs `f` on `world` GPU ranks that know each other only through the
/// store, as ranks of different processes do: threads of this process,
/// each joined from its own torchrun-style environment
/// (`Comm::from_launch_env`: its own TCP store connection, so no group
/// state is shared, and memory shared through file descriptors). A rank
/// whose `f` fails aborts the group with its error. Every rank's result.
fn store_only_ranks<R: Send>(
    world: usize,
    f: impl Fn(&Comm) -> symm::Result<R> + Sync,
) -> Vec<symm::Result<R>> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = (0..world)
            .map(|rank| {
                s.spawn(move || {
                    let env = launch_env(&job_env(port, world, rank));
                    let c = Comm::from_launch_env(&env, options())?;
                    let r = f(&c);
                    if let Err(e) = &r {
                        c.abort_with(e);
                    }
                    r
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Ranks that know each other only through the store (as ranks of
/// different processes; see `store_only_ranks`), desynchronised between
/// calls on kernels that share no signal, fail at once on a GPU: the
/// group's shared call ledger (mapped at join) finds the difference on
/// the host, and the finder's abort ends its peer's kernel (the peer's
/// `synchronize` reads it from the store). GPU ranks only (two sharing one
/// GPU where the machine has one); world 2.
#[test]
fn ranks_seen_only_through_the_store_in_different_calls_fail_at_once() {
    if !targets::on_gpu() {
        eprintln!(
            "SKIPPED: ranks_seen_only_through_the_store_in_different_calls_fail_at_once needs \
             GPU ranks (memory shared by file descriptors)"
        );
        return;
    }
    let world = 2;
    for (a, b) in [
        (AllReducePath::Ll, AllReducePath::Pull),
        (AllReducePath::Push, AllReducePath::TwoShot),
    ] {
        // Prepares shared GPUs and takes this test's turn on them.
        if ranks(world).is_none() {
            return;
        }
        let n = 256;
        let (xs, ys) = (inputs(world, n), inputs(world, n));
        let started: Mutex<Option<Instant>> = Mutex::new(None);
        let res = store_only_ranks(world, |c| {
            desynchronised_calls(c, (a, b), &xs, &ys, &started)
        });
        let took = started
            .lock()
            .unwrap()
            .expect("calls in step first")
            .elapsed();
        let errs: Vec<(usize, ErrorKind, String)> = res
            .iter()
            .enumerate()
            .map(|(r, res)| match res {
                Ok(v) => panic!("{a:?}/{b:?}: a rank returned Ok: {v:?}"),
                Err(e) => (r, e.root_kind(), e.to_string()),
            })
            .collect();
        eprintln!("FAILFAST store-only desync {a:?} then {b:?}: {took:?}: {errs:?}");
        every_rank_says_mismatch(&errs, &format!("{a:?}/{b:?}"));
        assert!(
            took < Duration::from_secs(1),
            "{a:?}/{b:?}: the ranks failed only after {took:?}"
        );
    }
}

/// A rank whose departure only the store can tell (as a rank of another
/// process: here a rank of this process on a TCP store connection of its
/// own, so that the group state of one process knows nothing of the
/// other, with memory shared through file descriptors as `Comm::from_env`
/// shares it) ends its peer's kernel on a user's stream while no symm code
/// waits for it: the store watch (`watch_departures`) writes the abort
/// word. Before it, that kernel waited until its timeout (30 s here). GPU
/// ranks only (two sharing one GPU where the machine has one); world 2.
#[test]
fn a_rank_seen_only_through_the_store_ends_kernels_on_a_users_stream() {
    if !targets::on_gpu() {
        eprintln!(
            "SKIPPED: a_rank_seen_only_through_the_store_ends_kernels_on_a_users_stream needs \
             GPU ranks (user streams)"
        );
        return;
    }
    let world = 2;
    // Prepares shared GPUs and takes this test's turn on them.
    if ranks(world).is_none() {
        return;
    }
    let n = 1024;
    let victim = 1;
    let xs = inputs(world, n);
    let left: Mutex<Option<Instant>> = Mutex::new(None);
    let ended: Mutex<Option<(Instant, symm::Result<()>)>> = Mutex::new(None);
    let res = store_only_ranks(world, |c| {
        let (at, r) = user_stream_rank(c, &xs, victim, &left)?;
        *ended.lock().unwrap() = Some((at, r));
        Ok(())
    });
    let left = left
        .lock()
        .unwrap()
        .unwrap_or_else(|| panic!("the victim left: {res:?}"));
    let (at, r) = ended
        .lock()
        .unwrap()
        .take()
        .unwrap_or_else(|| panic!("rank 0 ended: {res:?}"));
    let took = at.saturating_duration_since(left);
    let e = r.expect_err("rank 0's call failed").to_string();
    eprintln!(
        "FAILFAST store-only user-stream world=2 took={:.1}ms: {e}",
        took.as_secs_f64() * 1e3
    );
    assert!(e.contains("rank 1"), "rank 0's error: {e}");
    assert!(
        took < Duration::from_secs(1),
        "a kernel on a user's stream ended {took:?} after a rank seen only through the store \
         left"
    );
}

/// A kernel on a stream the user gave (`Comm::with_cuda_stream`) reads
/// that stream's own abort word: a rank that fails must end its peers'
/// waits there too, with nothing on the host watching (the peers block in
/// a plain `cuStreamSynchronize`). GPU ranks only: emulated kernels watch
/// the group themselves.
#[test]
fn a_failed_rank_ends_kernels_on_a_users_stream() {
    if !targets::on_gpu() {
        eprintln!(
            "SKIPPED: a_failed_rank_ends_kernels_on_a_users_stream needs GPU ranks (user streams)"
        );
        return;
    }
    for world in [2, 4, 8] {
        let Some(r) = ranks(world) else { continue };
        let n = 1024;
        let victim = world - 1;
        let left: Mutex<Option<Instant>> = Mutex::new(None);
        let ended: Mutex<Vec<(usize, Instant)>> = Mutex::new(Vec::new());
        let xs = inputs(world, n);
        let res = run(r, options(), |c| {
            let (at, r) = user_stream_rank(c, &xs, victim, &left)?;
            ended.lock().unwrap().push((c.rank(), at));
            r
        });
        let errs = errors(res);
        let left = left.lock().unwrap().expect("the victim left");
        let ended = ended.lock().unwrap().clone();
        assert_eq!(ended.len(), world - 1, "{ended:?}");
        let slowest = ended
            .iter()
            .map(|(_, t)| t.saturating_duration_since(left))
            .max()
            .expect("peers");
        for (rank, _, e) in &errs {
            if *rank != victim {
                assert!(e.contains(&format!("rank {victim}")), "rank {rank}: {e}");
            }
        }
        assert!(
            slowest < Duration::from_secs(1),
            "world {world}: a kernel on a user's stream ended {slowest:?} after the victim left"
        );
        eprintln!(
            "FAILFAST user-stream world={world} slowest={:.1}ms",
            slowest.as_secs_f64() * 1e3
        );
    }
}
