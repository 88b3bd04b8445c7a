//! Where the kernel test files run: the emulator by default (CI), or GPU
//! ranks under `SYMM_KERNEL_TESTS_ON=gpu`.

#![allow(dead_code)]

use symm::jit::Arch;
use symm::Ranks;

/// Whether the tests target GPU ranks.
pub fn on_gpu() -> bool {
    std::env::var("SYMM_KERNEL_TESTS_ON").as_deref() == Ok("gpu")
}

/// `world` ranks on the current target, or `None` (said loudly) when the
/// machine cannot place them. GPU ranks share GPUs when there are fewer
/// GPUs than ranks, or as `SYMM_RANKS_PER_GPU` says ([`Ranks::gpus`]); the
/// placement is said once per world size.
///
/// On GPU ranks, `SYMM_GPU_WORLDS` (when set) limits the world sizes, and
/// each test says which world sizes it ran (`CASE test=… world=…`), so that
/// `scripts/gpu-validate.sh` can count every test as passed, failed or
/// skipped per world size.
pub fn ranks(world: usize) -> Option<Ranks> {
    if !on_gpu() {
        return Some(Ranks::Emulator(world));
    }
    // libtest runs each test on a thread named after it.
    let test = std::thread::current().name().unwrap_or("?").to_string();
    gpu_ranks(&test, world)
}

/// `world` GPU ranks for the test `test`, or `None` (said loudly, unless
/// `SYMM_GPU_WORLDS` leaves the world out) when there are none: the GPU
/// half of [`ranks`], which the GPU tier's tests call directly.
pub fn gpu_ranks(test: &str, world: usize) -> Option<Ranks> {
    prepare_gpus();
    take_gpu_turn();
    if !in_gpu_worlds(world) {
        return None;
    }
    let Some(r) = Ranks::gpus(world) else {
        loud(&format!(
            "SKIPPED: world size {world} cannot be placed on {} GPU(s) (SYMM_RANKS_PER_GPU={})\n",
            symm::cuda_device_count(),
            std::env::var("SYMM_RANKS_PER_GPU").unwrap_or_else(|_| "unset".into())
        ));
        return None;
    };
    // A GPU runs at most 31 ranks: each needs a hardware work queue, and
    // one more serves the device (CUDA_DEVICE_MAX_CONNECTIONS is at most
    // 32), which the run refuses past.
    if let Ranks::Cuda(devices) = &r {
        let most = devices
            .iter()
            .map(|d| devices.iter().filter(|x| *x == d).count())
            .max()
            .unwrap_or(0);
        if most > 31 {
            loud(&format!(
                "SKIPPED: world size {world} puts {most} ranks on one of {} GPU(s); a GPU \
                 takes at most 31\n",
                symm::cuda_device_count()
            ));
            return None;
        }
    }
    say_case(test, world, Some(&r));
    Some(r)
}

/// Readies the process for ranks that share a GPU, once, before CUDA
/// starts.
pub fn prepare_gpus() {
    static PREPARED: std::sync::Once = std::sync::Once::new();
    PREPARED.call_once(|| {
        // SAFETY: ranks that share a GPU need this before CUDA starts, and
        // CUDA starts here at the earliest (the first GPU test), so no
        // driver thread reads the environment yet; the other test threads
        // go through `std::env`, which serialises.
        unsafe { symm::prepare_shared_gpus() };
        // A typo would otherwise skip every world size quietly.
        if let Err(e) = Ranks::ranks_per_gpu() {
            panic!("{e}");
        }
    });
}

/// Makes this test thread wait for the GPU until it ends. GPU tests run one
/// at a time: the groups of two tests on one GPU would compete for its SMs
/// and queues, and the co-residency rule holds per group.
pub fn take_gpu_turn() {
    thread_local! {
        static GPU_TURN: std::cell::OnceCell<std::sync::MutexGuard<'static, ()>> =
            const { std::cell::OnceCell::new() };
    }
    static GPU: std::sync::Mutex<()> = std::sync::Mutex::new(());
    GPU_TURN.with(|t| {
        t.get_or_init(|| GPU.lock().unwrap_or_else(|p| p.into_inner()));
    });
}

/// Whether `SYMM_GPU_WORLDS` (when set) lists `world`.
pub fn in_gpu_worlds(world: usize) -> bool {
    match std::env::var("SYMM_GPU_WORLDS") {
        Ok(list) => list.split(',').any(|w| w.trim().parse() == Ok(world)),
        Err(_) => true,
    }
}

/// Says that `test` ran at `world` (`CASE test=… world=…`), once per test
/// and world, and the placement `r` once per world.
pub fn say_case(test: &str, world: usize, r: Option<&Ranks>) {
    static SAID: std::sync::Mutex<Vec<(String, usize)>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if !said.iter().any(|(t, w)| *w == world && t == test) {
        let mut lines = String::new();
        if let Some(r) = r.filter(|_| !said.iter().any(|(_, w)| *w == world)) {
            lines += &format!("placement: world={world}: {}\n", r.describe());
        }
        lines += &format!("CASE test={test} world={world}\n");
        say(&lines);
        said.push((test.to_string(), world));
    }
}

/// Appends `lines` to the file `SYMM_CASE_LOG` names (libtest hides a
/// passing test's output), or prints them.
pub fn say(lines: &str) {
    use std::io::Write;
    match std::env::var_os("SYMM_CASE_LOG") {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path);
            if let Err(e) = f.and_then(|mut f| f.write_all(lines.as_bytes())) {
                eprintln!("SYMM_CASE_LOG: {e}");
            }
        }
        None => eprint!("{lines}"),
    }
}

/// True on the emulator; on GPU ranks says loudly that a test of the
/// emulator's own diagnostics is skipped.
pub fn emulator_only() -> bool {
    if on_gpu() {
        loud("SKIPPED: emulator-only diagnostics\n");
        return false;
    }
    true
}

/// Whether NVRTC can be used; without it, fails saying how to install it,
/// or under `SYMM_SKIP_NVRTC=1` says `SKIPPED` past the harness's capture
/// ([`symm::jit::require_nvrtc`]).
pub fn nvrtc(what: &str) -> bool {
    symm::jit::require_nvrtc(what)
}

/// The architectures the CPU tests compile kernels for.
pub const ARCHES: [Arch; 2] = [Arch { major: 9, minor: 0 }, Arch { major: 8, minor: 0 }];

/// Writes `line` past libtest's capture (which hides a passing test's
/// `eprintln!`), so that a skip is seen.
fn loud(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
