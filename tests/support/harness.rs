//! A tiny harness for GPU test binaries (`harness = false`): every test is
//! reported as passed, failed or skipped, never silently passed, and the
//! last line is `<name>: N passed, N failed, N skipped`.

#![allow(dead_code)]

use std::time::Instant;

/// A test's result: a one-line detail on success, the reason on failure.
pub type Outcome = Result<String, String>;

/// Counts and prints outcomes.
pub struct Harness {
    name: &'static str,
    passed: usize,
    failed: usize,
    skipped: usize,
    /// Set by `SYMM_REQUIRE_GPU=1`: a machine without a GPU is then a
    /// failure, not a skip.
    pub require: bool,
    /// CUDA devices present.
    pub gpus: usize,
    /// World sizes to test (`SYMM_GPU_WORLDS`, default 2 and 4).
    pub worlds: Vec<usize>,
}

/// Where `world` GPU ranks run: [`symm::Ranks::gpus`] (one per GPU while
/// there are enough, sharing GPUs beyond that or as `SYMM_RANKS_PER_GPU`
/// says), or `None` when this machine cannot place them.
pub fn placement(world: usize) -> Option<symm::Ranks> {
    symm::Ranks::gpus(world)
}

impl Harness {
    /// Reads the environment and the device count.
    pub fn new(name: &'static str) -> Harness {
        // SAFETY: the harness binaries call this first thing in main,
        // before any other thread exists. Ranks that share a GPU need it
        // before CUDA starts.
        unsafe { symm::prepare_shared_gpus() };
        // A typo would otherwise skip every world size quietly.
        if let Err(e) = symm::Ranks::ranks_per_gpu() {
            panic!("{e}");
        }
        let worlds = std::env::var("SYMM_GPU_WORLDS")
            .unwrap_or_else(|_| "2,4".into())
            .split(',')
            .filter_map(|w| w.trim().parse().ok())
            .collect();
        Harness {
            name,
            passed: 0,
            failed: 0,
            skipped: 0,
            require: std::env::var("SYMM_REQUIRE_GPU").as_deref() == Ok("1"),
            gpus: symm::cuda_device_count(),
            worlds,
        }
    }

    /// Runs one test, catching panics.
    pub fn run(&mut self, name: &str, world: usize, f: &dyn Fn() -> Outcome) {
        let t = Instant::now();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
            Err(p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default())
        });
        let secs = t.elapsed().as_secs_f64();
        match r {
            Ok(detail) => {
                self.passed += 1;
                println!("PASS {name:<28} world={world} ({secs:.2} s) {detail}");
            }
            Err(e) => {
                self.failed += 1;
                println!("FAIL {name:<28} world={world} ({secs:.2} s) {e}");
            }
        }
    }

    /// The placement of `world` ranks, said once; or `None` after
    /// recording `n` skipped tests, loudly, when there is none.
    pub fn place(&mut self, world: usize, n: usize) -> Option<symm::Ranks> {
        match placement(world) {
            Some(r) => {
                println!("placement: world={world}: {}", r.describe());
                Some(r)
            }
            None => {
                self.skip(
                    n,
                    &format!(
                        "world={world} cannot be placed on {} GPU(s) with SYMM_RANKS_PER_GPU={}",
                        self.gpus,
                        std::env::var("SYMM_RANKS_PER_GPU").unwrap_or_else(|_| "(unset)".into())
                    ),
                );
                None
            }
        }
    }

    /// Records `n` skipped tests, loudly.
    pub fn skip(&mut self, n: usize, why: &str) {
        self.skipped += n;
        println!("SKIPPED ({n}): {why}");
    }

    /// Prints the closing line and exits non-zero on failure (or, when a
    /// GPU is required, on a machine without one). Tests skipped for want
    /// of ranks or GPUs on a machine that has one are not failures: they
    /// say why, and `scripts/gpu-validate.sh` counts them.
    pub fn finish(self) -> ! {
        println!(
            "{}: {} passed, {} failed, {} skipped",
            self.name, self.passed, self.failed, self.skipped
        );
        let bad = self.failed > 0 || (self.require && self.gpus == 0);
        std::process::exit(i32::from(bad))
    }
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
