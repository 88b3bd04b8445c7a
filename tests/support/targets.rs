//! Where the kernel test files run: the emulator by default (CI), or GPU
//! ranks under `SYMM_KERNEL_TESTS_ON=gpu`.

#![allow(dead_code)]

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
