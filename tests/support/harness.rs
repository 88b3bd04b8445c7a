//! The GPU tier's tests (`tests/gpu.rs`, `tests/gpu_dsl.rs`,
//! `tests/multiprocess.rs`): libtest tests, each `#[ignore]`d so that a
//! plain `cargo test` lists it as ignored, never as passed. Run with
//! `--ignored`, each one fails on a machine without a CUDA GPU, and on a
//! GPU says which world size it ran (`CASE test=… world=…`, through
//! `targets.rs`, for `scripts/gpu-summary.py`) and what it measured.
//!
//! Needs `#[path = "support/targets.rs"] mod targets;` beside it.

#![allow(dead_code)]

use std::time::Instant;

use crate::targets;

/// A test's result: a one-line detail on success, the reason on failure.
pub type Outcome = Result<String, String>;

/// What a GPU test's body gives back: an [`Outcome`], or `None` when it
/// did not run here (having said `SKIPPED` and why).
pub trait Ran {
    /// The outcome, or `None` for a skip.
    fn ran(self) -> Option<Outcome>;
}

impl Ran for Outcome {
    fn ran(self) -> Option<Outcome> {
        Some(self)
    }
}

impl Ran for Option<Outcome> {
    fn ran(self) -> Option<Outcome> {
        self
    }
}

/// Where `world` GPU ranks run: [`symm::Ranks::gpus`] (one per GPU while
/// there are enough, sharing GPUs beyond that or as `SYMM_RANKS_PER_GPU`
/// says), or `None` when this machine cannot place them.
pub fn placement(world: usize) -> Option<symm::Ranks> {
    symm::Ranks::gpus(world)
}

/// Runs the GPU test `test` at `world` ranks placed on this machine's GPUs
/// ([`placement`]): as [`gpu_case`], and skipped, loudly, where they cannot
/// be placed.
pub fn gpu_test<R: Ran>(test: &str, world: usize, f: impl FnOnce(usize) -> R) {
    run(test, world, true, f)
}

/// Runs the GPU test `test` at `world`: fails at once without a CUDA GPU;
/// does nothing when `SYMM_GPU_WORLDS` leaves `world` out; otherwise runs
/// `f`, one GPU test at a time, says the case and its detail, and fails
/// with the reason `f` gives.
pub fn gpu_case<R: Ran>(test: &str, world: usize, f: impl FnOnce(usize) -> R) {
    run(test, world, false, f)
}

fn run<R: Ran>(test: &str, world: usize, placed: bool, f: impl FnOnce(usize) -> R) {
    targets::prepare_gpus();
    let gpus = symm::cuda_device_count();
    assert!(
        gpus > 0,
        "no CUDA GPU: `{test}` is a test of the GPU tier, which needs one \
         (run it on a GPU machine; a plain `cargo test` leaves it out)"
    );
    targets::take_gpu_turn();
    if !targets::in_gpu_worlds(world) {
        skip(&format!("world={world} is not in SYMM_GPU_WORLDS"));
        return;
    }
    let ranks = match placed.then(|| placement(world)) {
        Some(None) => {
            skip(&format!(
                "world={world} cannot be placed on {gpus} GPU(s) with SYMM_RANKS_PER_GPU={}",
                std::env::var("SYMM_RANKS_PER_GPU").unwrap_or_else(|_| "(unset)".into())
            ));
            return;
        }
        Some(r) => r,
        None => None,
    };
    let t = Instant::now();
    let Some(outcome) = f(world).ran() else {
        return;
    };
    let secs = t.elapsed().as_secs_f64();
    match outcome {
        Ok(detail) => {
            // Said only once it passed: a test that skipped inside `f`
            // must count as skipped, not passed.
            targets::say_case(test, world, ranks.as_ref());
            targets::say(&format!(
                "    {test} world={world} ({secs:.2} s): {detail}\n"
            ));
        }
        Err(e) => panic!("{test} world={world} ({secs:.2} s): {e}"),
    }
}

/// Says loudly why a GPU test did not run here; its body then gives `None`.
pub fn skip(why: &str) {
    use std::io::Write;
    // Past libtest's capture, which hides a passing test's `eprintln!`.
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("SKIPPED: {why}\n").as_bytes());
}

/// The middle of `v` (NaN when empty).
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median µs of 20 rendezvous of fresh 4 MiB allocations, after one that
/// is not counted (it also waits for the slowest rank to arrive).
pub fn median_rendezvous_us(comm: &symm::Comm) -> symm::Result<f64> {
    let mut times = Vec::new();
    for _ in 0..21 {
        let buf = comm.alloc::<f32>(1 << 20)?;
        let t = Instant::now();
        buf.rendezvous()?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(&mut times[1..]))
}
