//! One process per GPU: the foundation's checks (rendezvous and its cache,
//! peer writes, signals, the mismatch error, a rank that dies during
//! rendezvous) and the all-reduce, with every rank a separate process that
//! joined through `Comm::from_env`.
//!
//! The tests are of the GPU tier (`support/harness.rs`): ignored unless run
//! with `--ignored`, and then failing on a machine without a CUDA GPU. Each
//! driver test, `symm_run::world_W` or `torchrun::world_W` (limited by
//! `SYMM_GPU_WORLDS`; skipped, loudly, without W GPUs or without torchrun),
//! launches this binary W times under `symm-run` or `torchrun --no-python`,
//! each running that same test alone. Launched so, the test is a rank: it
//! runs the checks, prints `rank R: PASS|FAIL <check> <detail>` lines and
//! ends the process with its status. The driver also times rendezvous with
//! ranks as threads of this process, for comparison.

use std::process::Command;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use symm::kernels::all_reduce::{all_reduce, all_reduce_in_place, AllReduceElem};
use symm::{bf16, Comm, CommOptions, Error, LaunchConfig, LaunchEnv};

#[path = "support/harness.rs"]
mod harness;
use harness::{median, median_rendezvous_us, Outcome};
#[path = "support/targets.rs"]
mod targets;
#[macro_use]
#[path = "support/testgen.rs"]
mod testgen;
#[path = "support/calls.rs"]
mod calls;
use calls::{check_samples, fill_input, keep};

/// The rendezvous timeout of the ranks; the dying-rank check expects an
/// error within it.
const TIMEOUT: Duration = Duration::from_secs(10);

gpu_per_world! {
    rank_or_driver;
    one_gpu_two_processes_refused: |_| one_gpu_two_processes() => [world_2];
    // A group of processes needs 2 ranks or more.
    symm_run: |w| launch(Launcher::SymmRun, w) => [world_2, world_3, world_4, world_8];
    torchrun: |w| launch(Launcher::Torchrun, w) => [world_2, world_3, world_4, world_8];
}

/// In a process a launcher started (it runs this same test alone), runs
/// this rank's checks and ends the process with their status; otherwise
/// drives the test as `harness::gpu_case` does.
fn rank_or_driver<R: harness::Ran>(test: &str, world: usize, driver: impl FnOnce(usize) -> R) {
    if LaunchEnv::from_env().is_ok() {
        std::process::exit(rank_main());
    }
    harness::gpu_case(test, world, driver)
}

// ---------------------------------------------------------------- driver --

/// What starts the ranks' processes.
#[derive(Clone, Copy)]
enum Launcher {
    SymmRun,
    Torchrun,
}

/// The arguments that make this binary run the test `test` alone, in
/// every process a launcher starts: libtest's own, with the output not
/// captured, so that the driver reads each rank's lines.
fn as_one_test(test: &str) -> [String; 5] {
    [
        test.to_string(),
        "--exact".into(),
        "--ignored".into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ]
}

/// Runs the checks on `world` processes, one per GPU, started by
/// `launcher`: skipped, loudly, where there are fewer GPUs or no torchrun.
fn launch(launcher: Launcher, world: usize) -> Option<Outcome> {
    let gpus = symm::cuda_device_count();
    if world > gpus {
        harness::skip(&format!(
            "world={world}: one process per GPU needs {world} GPUs, this machine has {gpus}"
        ));
        return None;
    }
    let torchrun = match launcher {
        Launcher::SymmRun => None,
        Launcher::Torchrun => match which("torchrun") {
            Some(t) => Some(t),
            None => {
                harness::skip(&format!("world={world}: torchrun is not installed"));
                return None;
            }
        },
    };
    let me = std::env::current_exe().expect("own path");
    let single = single_process_rendezvous_us(world);
    let out = match torchrun {
        None => {
            let Some(bin) = symm_run_bin() else {
                return Some(Err(
                    "symm-run not found next to this binary or in SYMM_RUN_BIN".into(),
                ));
            };
            Command::new(bin)
                .args(["-n", &world.to_string(), "--tag-output", "--"])
                .arg(&me)
                .args(as_one_test(&format!("symm_run::world_{world}")))
                .output()
                .map_err(|e| format!("cannot start symm-run: {e}"))
        }
        Some(torchrun) => free_port().and_then(|port| {
            Command::new(&torchrun)
                .args([
                    &format!("--nproc-per-node={world}"),
                    "--master-addr=127.0.0.1",
                    &format!("--master-port={port}"),
                    "--no-python",
                ])
                .arg(&me)
                .args(as_one_test(&format!("torchrun::world_{world}")))
                .output()
                .map_err(|e| format!("cannot start torchrun: {e}"))
        }),
    };
    Some(out.and_then(|out| judge(world, &out, &single)))
}

/// Two processes on one GPU (every rank sees only GPU 0) must both be
/// refused at `Comm::from_env`, with the same message: their kernels would
/// take turns on the GPU, and a kernel waiting on the other's would only
/// time out.
fn one_gpu_two_processes() -> Outcome {
    let Some(bin) = symm_run_bin() else {
        return Err("symm-run not found next to this binary or in SYMM_RUN_BIN".into());
    };
    let out = Command::new(bin)
        .args(["-n", "2", "--tag-output", "--"])
        .arg(std::env::current_exe().map_err(|e| e.to_string())?)
        .args(as_one_test("one_gpu_two_processes_refused::world_2"))
        .env("CUDA_VISIBLE_DEVICES", "0")
        .env(EXPECT_REFUSAL, "1")
        .output()
        .map_err(|e| format!("cannot start symm-run: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let msgs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split(": REFUSED ").nth(1))
        .collect();
    let same = msgs.len() == 2 && msgs[0] == msgs[1];
    if !out.status.success() || !same || !msgs[0].contains("run in different processes") {
        return Err(format!(
            "exit {:?}; output:\n{text}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(format!("both ranks refused alike: {}", msgs[0]))
}

/// Set by the driver for ranks that must be refused at `Comm::from_env`.
const EXPECT_REFUSAL: &str = "SYMM_TEST_EXPECT_SHARED_GPU_REFUSAL";

/// Passes when the launcher exited 0 and every rank reported all its
/// checks passed; the detail carries the rendezvous times.
fn judge(world: usize, out: &std::process::Output, single: &Result<f64, String>) -> Outcome {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for line in text.lines().filter(|l| l.contains("rank ")) {
        println!("    {line}");
    }
    let fails: Vec<&str> = text.lines().filter(|l| l.contains(": FAIL ")).collect();
    let done = (0..world)
        .filter(|r| text.contains(&format!("rank {r}: all checks passed")))
        .count();
    if !out.status.success() || !fails.is_empty() || done != world {
        return Err(format!(
            "launcher exit {:?}, {} ranks of {world} passed everything; failures: {fails:?}",
            out.status.code(),
            done
        ));
    }
    let multi: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("rendezvous_median_us=").nth(1))
        .filter_map(|v| v.split_whitespace().next()?.parse().ok())
        .collect();
    Ok(format!(
        "all checks passed on {world} processes; median rendezvous (4 MiB) {} µs across processes \
         vs {} µs across threads of one process",
        median(&mut multi.clone()).round(),
        single
            .as_ref()
            .map(|v| format!("{:.0}", v))
            .unwrap_or_else(|e| e.clone())
    ))
}

fn single_process_rendezvous_us(world: usize) -> Result<f64, String> {
    let per_rank = symm::run_local(&(0..world).collect::<Vec<_>>(), median_rendezvous_us)
        .map_err(|e| e.to_string())?;
    Ok(median(&mut per_rank.clone()))
}

fn symm_run_bin() -> Option<std::path::PathBuf> {
    if let Ok(p) = std::env::var("SYMM_RUN_BIN") {
        return Some(p.into());
    }
    let me = std::env::current_exe().ok()?;
    // .gpu-bin/ keeps them side by side; cargo puts tests in deps/.
    let dirs = [me.parent()?, me.parent()?.parent()?];
    dirs.iter()
        .map(|d| d.join("symm-run"))
        .find(|p| p.is_file())
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

// ------------------------------------------------------------------ rank --

type Check = fn(&Comm, u64) -> Result<String, String>;

fn rank_main() -> i32 {
    let comm = Comm::from_env(CommOptions::default().with_timeout(TIMEOUT));
    if std::env::var_os(EXPECT_REFUSAL).is_some() {
        let rank = LaunchEnv::from_env().map_or(usize::MAX, |e| e.rank);
        return match comm {
            Err(e) => {
                // The message names the ranks; only its own prefix differs.
                let msg = e.to_string();
                let msg = msg.split_once("invalid argument: ").map_or(&*msg, |m| m.1);
                println!("rank {rank}: REFUSED {msg}");
                0
            }
            Ok(_) => {
                println!("rank {rank}: FAIL two processes on one GPU were accepted");
                1
            }
        };
    }
    let comm = match comm {
        Ok(c) => c,
        Err(e) => {
            println!("rank ?: FAIL from_env {e}");
            return 1;
        }
    };
    let r = comm.rank();
    // One seed for the whole job, from rank 0 through the store, so every
    // rank can generate every rank's inputs for its float64 reference.
    let seed = match shared_seed(&comm) {
        Ok(s) => s,
        Err(e) => {
            println!("rank {r}: FAIL seed {e}");
            return 1;
        }
    };
    let checks: [(&str, Check); 8] = [
        ("rendezvous_cache", rendezvous_cache),
        ("peer_writes", peer_writes),
        ("signals", signals),
        ("mismatch_same_error", mismatch),
        ("all_reduce", all_reduce_checks),
        ("back_to_back", back_to_back),
        ("functional_subgroups", functional_subgroups),
        ("rendezvous_time", |c, _| {
            median_rendezvous_us(c)
                .map(|us| format!("rendezvous_median_us={us:.0}"))
                .map_err(|e| e.to_string())
        }),
    ];
    let mut failed = 0;
    for (name, check) in checks {
        let t = Instant::now();
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&comm, seed)))
            .unwrap_or_else(|_| Err("panicked".into()));
        match res {
            Ok(d) => println!(
                "rank {r}: PASS {name} ({:.2} s) {d}",
                t.elapsed().as_secs_f64()
            ),
            Err(e) => {
                failed += 1;
                println!("rank {r}: FAIL {name} {e}");
            }
        }
    }
    // Last, since it ends a rank: the highest rank's process exits without
    // unwinding or joining one more rendezvous, and the others must get an
    // error naming it within 1 s (the store's host says its last word).
    let last = comm.world_size() - 1;
    if r == last && r != 0 {
        println!("rank {r}: all checks passed (leaving before the last rendezvous)");
        std::process::exit(if failed == 0 { 0 } else { 1 });
    }
    match dead_rank(&comm, last) {
        Ok(d) => println!("rank {r}: PASS dead_rank {d}"),
        Err(e) => {
            failed += 1;
            println!("rank {r}: FAIL dead_rank {e}");
        }
    }
    if failed == 0 {
        println!("rank {r}: all checks passed");
        0
    } else {
        println!("rank {r}: {failed} checks failed");
        1
    }
}

/// The functional collectives on a TP × DP mesh of the processes: an
/// all-reduce on the row group and an all-gather on the column group, on
/// symm's kernels and then on NCCL (one process per GPU, so NCCL may run;
/// its communicators come from each subgroup's store namespace), with
/// pool inputs registered with NCCL. Small integers: exact in any order.
fn functional_subgroups(comm: &Comm, seed: u64) -> Result<String, String> {
    use symm::functional::{Collectives, Options, Prefer};
    use symm::kernels::collectives::ReduceOp;
    let e = |e: Error| e.to_string();
    let (world, me) = (comm.world_size(), comm.rank());
    let rows = if world % 2 == 0 { 2 } else { 1 };
    let cols = world / rows;
    let (tp, dp) = comm.mesh(rows).map_err(e)?;
    let (row, col) = (me / cols, me % cols);
    let tp_members: Vec<usize> = (0..cols).map(|p| row * cols + p).collect();
    let dp_members: Vec<usize> = (0..rows).map(|p| p * cols + col).collect();
    let n = 4099;
    let val = |r: usize, i: usize| ((seed as usize % 1000 + r * 31 + i * 7) % 101) as f32;
    let mut said = Vec::new();
    for prefer in [Prefer::Symm, Prefer::Nccl] {
        for (g, members, name) in [(&tp, &tp_members, "tp"), (&dp, &dp_members, "dp")] {
            let coll =
                Collectives::with_options(g, Options::default().with_backend(prefer)).map_err(e)?;
            if prefer == Prefer::Nccl && coll.group_facts().no_nccl.is_some() {
                said.push(format!(
                    "{name} NCCL skipped: {:?}",
                    coll.group_facts().no_nccl
                ));
                continue;
            }
            let pool = g.pool();
            coll.register_pool(&pool);
            let x = pool.alloc::<f32>(n).map_err(e)?;
            x.write(0, &(0..n).map(|i| val(me, i)).collect::<Vec<_>>())
                .map_err(e)?;
            let sum = g.device_buffer::<f32>(n).map_err(e)?;
            let sum = coll
                .all_reduce(&x, sum, ReduceOp::Sum)
                .map_err(e)?
                .wait_host()
                .map_err(e)?;
            let want: Vec<f32> = (0..n)
                .map(|i| members.iter().map(|&r| val(r, i)).sum())
                .collect();
            if sum.to_host().map_err(e)? != want {
                return Err(format!(
                    "{name} all_reduce on {prefer:?} differs from the reference"
                ));
            }
            let all = g.device_buffer::<f32>(n * members.len()).map_err(e)?;
            let all = coll
                .all_gather(&x, all)
                .map_err(e)?
                .wait_host()
                .map_err(e)?;
            let want: Vec<f32> = members
                .iter()
                .flat_map(|&r| (0..n).map(move |i| val(r, i)))
                .collect();
            if all.to_host().map_err(e)? != want {
                return Err(format!(
                    "{name} all_gather on {prefer:?} differs from the reference"
                ));
            }
            said.push(format!("{name} {prefer:?} ok"));
        }
    }
    Ok(said.join(", "))
}

fn shared_seed(comm: &Comm) -> Result<u64, String> {
    let key = "multiprocess/seed";
    if comm.rank() == 0 {
        let s: u64 = rand::rng().random();
        comm.store()
            .set(key, &s.to_le_bytes())
            .map_err(|e| e.to_string())?;
    }
    let v = comm.store().get(key, TIMEOUT).map_err(|e| e.to_string())?;
    Ok(u64::from_le_bytes(v.try_into().map_err(|_| "bad seed")?))
}

/// Every rank's value under `key/<rank>`, after publishing this rank's.
fn all_values(comm: &Comm, key: &str, mine: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let s = comm.store();
    s.set(&format!("{key}/{}", comm.rank()), mine)
        .map_err(|e| e.to_string())?;
    (0..comm.world_size())
        .map(|r| {
            s.get(&format!("{key}/{r}"), TIMEOUT)
                .map_err(|e| e.to_string())
        })
        .collect()
}

fn rendezvous_cache(comm: &Comm, _: u64) -> Result<String, String> {
    let buf = comm.alloc::<f32>(1 << 20).map_err(|e| e.to_string())?;
    let a = buf.rendezvous().map_err(|e| e.to_string())?;
    let b = buf.rendezvous().map_err(|e| e.to_string())?;
    let v = buf.slice(16..).map_err(|e| e.to_string())?;
    let c = v.rendezvous().map_err(|e| e.to_string())?;
    if !std::sync::Arc::ptr_eq(&a, &b) || !std::sync::Arc::ptr_eq(&a, &c) {
        return Err("a second rendezvous made a new SymmetricMemory".into());
    }
    Ok(format!(
        "{} peers mapped, one cached object",
        a.world_size()
    ))
}

/// The group's next signal channel.
fn channel(comm: &Comm) -> Result<symm::signal::Channel, String> {
    symm::signal::Channel::request(comm).map_err(|e| e.to_string())
}

fn peer_writes(comm: &Comm, seed: u64) -> Result<String, String> {
    let (w, r) = (comm.world_size(), comm.rank());
    let buf = comm.alloc::<u32>(w).map_err(|e| e.to_string())?;
    let s = buf.rendezvous().map_err(|e| e.to_string())?;
    let (written, read) = (channel(comm)?, channel(comm)?);
    for round in 0..3u64 {
        let value = |rank: usize| {
            rand::rngs::StdRng::seed_from_u64(seed ^ (round << 32) ^ rank as u64).random::<u32>()
        };
        for p in 0..w {
            s.peer_buffer::<u32>(p)
                .and_then(|pb| pb.write(r, &[value(r)]))
                .map_err(|e| e.to_string())?;
        }
        s.barrier(&written, TIMEOUT).map_err(|e| e.to_string())?;
        comm.synchronize().map_err(|e| e.to_string())?;
        let got = buf.to_host().map_err(|e| e.to_string())?;
        let want: Vec<u32> = (0..w).map(value).collect();
        if got != want {
            return Err(format!("round {round}: slots {got:?}, expected {want:?}"));
        }
        s.barrier(&read, TIMEOUT).map_err(|e| e.to_string())?;
    }
    Ok("3 rounds of random values written into every peer's memory".into())
}

fn signals(comm: &Comm, _: u64) -> Result<String, String> {
    let (w, r) = (comm.world_size(), comm.rank());
    let buf = comm.alloc::<u8>(1).map_err(|e| e.to_string())?;
    let s = buf.rendezvous().map_err(|e| e.to_string())?;
    let (ring, bar) = (channel(comm)?, channel(comm)?);
    for _ in 0..50 {
        s.put_signal((r + 1) % w, &ring, TIMEOUT)
            .and_then(|_| s.wait_signal((r + w - 1) % w, &ring, TIMEOUT))
            .and_then(|_| s.barrier(&bar, TIMEOUT))
            .map_err(|e| e.to_string())?;
    }
    comm.synchronize().map_err(|e| e.to_string())?;
    Ok("50 rounds of put/wait around the ring and a barrier".into())
}

fn mismatch(comm: &Comm, _: u64) -> Result<String, String> {
    let buf = comm
        .alloc::<f32>(4096 + comm.rank() % 2)
        .map_err(|e| e.to_string())?;
    let err = match buf.rendezvous() {
        Ok(_) => return Err("sizes that differ across ranks were accepted".into()),
        Err(e) => e.to_string(),
    };
    let all = all_values(comm, "multiprocess/mismatch", err.as_bytes())?;
    if all.iter().any(|e| e.as_slice() != err.as_bytes()) {
        return Err(format!("ranks report different errors: {err}"));
    }
    Ok(format!("the same error on every rank: {err}"))
}

/// Rank `r`'s input for test case `case`, element `i`, from the job's seed.
fn input<T: AllReduceElem>(seed: u64, case: u64, r: usize, n: usize) -> Vec<T> {
    let mut g = rand::rngs::StdRng::seed_from_u64(seed ^ (case << 20) ^ r as u64);
    (0..n)
        .map(|_| T::from_f32(g.random_range(-1.0..1.0)))
        .collect()
}

fn all_reduce_checks(comm: &Comm, seed: u64) -> Result<String, String> {
    let mut case = 0;
    for n in [1usize, 7, 4095, 65536, (1 << 20) + 3] {
        case += 1;
        check_sum::<f32>(comm, seed, case, n, 1e-6, false)?;
        case += 1;
        check_sum::<bf16>(comm, seed, case, n, 1e-2, false)?;
    }
    for n in [4097usize, (1 << 20) + 5] {
        case += 1;
        check_sum::<f32>(comm, seed, case, n, 1e-6, true)?;
    }
    Ok(format!(
        "{case} cases (f32 and bf16, 1 to 1M+3 elements, in place too) match float64 and agree bitwise"
    ))
}

fn check_sum<T: AllReduceElem>(
    comm: &Comm,
    seed: u64,
    case: u64,
    n: usize,
    tol: f64,
    in_place: bool,
) -> Result<(), String> {
    let w = comm.world_size();
    let inputs: Vec<Vec<T>> = (0..w).map(|r| input(seed, case, r, n)).collect();
    let e = |e: Error| format!("case {case} (n {n}): {e}");
    let buf = comm.alloc::<T>(n).map_err(e)?;
    buf.copy_from_host(&inputs[comm.rank()]).map_err(e)?;
    let got = if in_place {
        all_reduce_in_place(comm, &buf, n).map_err(e)?;
        comm.synchronize().map_err(e)?;
        buf.to_host().map_err(e)?
    } else {
        let s = buf.rendezvous().map_err(e)?;
        let mut out = comm
            .device_buffer_from(&vec![T::from_f32(f32::NAN); n])
            .map_err(e)?;
        all_reduce(comm, &s, &mut out, n).map_err(e)?;
        comm.synchronize().map_err(e)?;
        out.to_host().map_err(e)?
    };
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for i in 0..n {
        let want: f64 = inputs.iter().map(|v| f64::from(v[i].to_f32())).sum();
        let g = f64::from(got[i].to_f32());
        if !g.is_finite() {
            return Err(format!("case {case} (n {n}): element {i} was not written"));
        }
        num += (g - want).powi(2);
        den += want.powi(2);
    }
    let rel = (num / den.max(f64::MIN_POSITIVE)).sqrt();
    if rel > tol {
        return Err(format!(
            "case {case} (n {n}): relative error {rel:e} > {tol:e}"
        ));
    }
    let bits: Vec<u8> = got
        .iter()
        .flat_map(|v| v.to_bits64().to_le_bytes())
        .collect();
    let digest = fnv(&bits).to_le_bytes();
    let all = all_values(comm, &format!("multiprocess/sum/{case}"), &digest)?;
    if all.iter().any(|d| d.as_slice() != digest) {
        return Err(format!(
            "case {case} (n {n}): ranks' results differ bitwise"
        ));
    }
    Ok(())
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100000001b3)
    })
}

/// 1000 calls with the input (drawn from the job's seed) rewritten on the
/// stream before each and no host synchronisation, at an LL size and at a
/// size past the LL range; sampled calls are checked on the host, and
/// bitwise across ranks through the store.
fn back_to_back(comm: &Comm, seed: u64) -> Result<String, String> {
    let seed = seed as u32;
    let (calls, every) = (1000u32, 97u32);
    let w = comm.world_size() as u32;
    let e = |e: Error| e.to_string();
    for n in [4099u32, (1 << 20) + 3] {
        let samples: Vec<u32> = (0..calls).filter(|k| k % every == 5).collect();
        let buf = comm.alloc::<f32>(n as usize).map_err(e)?;
        let s = buf.rendezvous().map_err(e)?;
        let mut out = comm.device_buffer::<f32>(n as usize).map_err(e)?;
        let mut hist = comm
            .device_buffer_from(&vec![f32::NAN; samples.len() * n as usize])
            .map_err(e)?;
        let cfg = LaunchConfig::linear(64, 256);
        for k in 0..calls {
            fill_input::launch(comm, cfg, &s, n, k, seed).map_err(e)?;
            all_reduce(comm, &s, &mut out, n as usize).map_err(e)?;
            if let Ok(slot) = samples.binary_search(&k) {
                keep::launch(comm, cfg, &out, &mut hist, slot as u32 * n, n).map_err(e)?;
            }
        }
        comm.synchronize().map_err(e)?;
        let h = hist.to_host().map_err(e)?;
        check_samples(w, n, seed, &samples, &h).map_err(|e| format!("n {n}, {e}"))?;
        let bits: Vec<u8> = h.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
        let digest = fnv(&bits).to_le_bytes();
        let all = all_values(comm, &format!("multiprocess/back-to-back/{n}"), &digest)?;
        if all.iter().any(|d| d.as_slice() != digest) {
            return Err(format!("n {n}: ranks' sampled results differ bitwise"));
        }
    }
    Ok(format!(
        "{calls} calls at 4099 and 1M+3 elements, no host sync; sampled calls exact"
    ))
}

fn dead_rank(comm: &Comm, gone: usize) -> Result<String, String> {
    let buf = comm.alloc::<f32>(1024).map_err(|e| e.to_string())?;
    let t = Instant::now();
    match buf.rendezvous() {
        Ok(_) => Err(format!("rendezvous succeeded without rank {gone}")),
        Err(e) => {
            let msg = e.to_string();
            let took = t.elapsed();
            // Its process ended without unwinding (`process::exit`), so
            // the word it left with the store's host says so, at once.
            if !msg.contains(&format!("rank {gone} ended without leaving"))
                || took > Duration::from_secs(1)
            {
                return Err(format!("after {took:?}: {msg}"));
            }
            Ok(format!("after {:.1} ms: {msg}", took.as_secs_f64() * 1e3))
        }
    }
}
