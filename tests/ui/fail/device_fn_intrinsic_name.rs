use symm::dsl::*;
use symm::symm_kernel;

// Kernels resolve `min(..)` as the DSL's typed intrinsic, so a device
// function of that name would run on the emulator only.
#[symm_kernel(device)]
fn min(a: u32, b: u32) -> u32 {
    a.wrapping_add(b)
}

#[symm_kernel]
fn uses(x: &[u32], y: &mut [u32]) {
    let i = thread_idx_x();
    y[i] = x[i] + 1;
}

fn main() {}
