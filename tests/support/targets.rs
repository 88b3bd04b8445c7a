//! Where the kernel test files run: the emulator by default (CI), or GPU
//! ranks under `SYMM_KERNEL_TESTS_ON=gpu`.

#![allow(dead_code)]

use symm::jit::{nvrtc_available, Arch};
use symm::Ranks;

/// Whether the tests target GPU ranks.
pub fn on_gpu() -> bool {
    std::env::var("SYMM_KERNEL_TESTS_ON").as_deref() == Ok("gpu")
}

/// `world` ranks on the current target, or `None` (said loudly) when the
/// machine has too few GPUs.
pub fn ranks(world: usize) -> Option<Ranks> {
    if !on_gpu() {
        return Some(Ranks::Emulator(world));
    }
    let n = symm::cuda_device_count();
    if world > n {
        eprintln!("SKIPPED: world size {world} needs {world} GPUs, this machine has {n}");
        return None;
    }
    Some(Ranks::Cuda((0..world).collect()))
}

/// True on the emulator; on GPU ranks says loudly that a test of the
/// emulator's own diagnostics is skipped.
pub fn emulator_only() -> bool {
    if on_gpu() {
        eprintln!("SKIPPED: emulator-only diagnostics");
        return false;
    }
    true
}

/// Whether NVRTC can be used; without it, fails under
/// `SYMM_REQUIRE_NVRTC=1` and otherwise says loudly that `what` was not
/// compiled.
pub fn nvrtc(what: &str) -> bool {
    if nvrtc_available() {
        return true;
    }
    assert!(
        std::env::var("SYMM_REQUIRE_NVRTC").as_deref() != Ok("1"),
        "NVRTC required but not found"
    );
    eprintln!("SKIPPED: NVRTC not found; {what} were not compiled");
    false
}

/// The architectures the CPU tests compile kernels for.
pub const ARCHES: [Arch; 2] = [Arch { major: 9, minor: 0 }, Arch { major: 8, minor: 0 }];
