use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn check(x: &[f32], n: u32) {
    kernel_assert!();
    kernel_assert!(n > 0, x[0]);
    kernel_assert!(n > 0, "n = {}", n);
    kernel_assert!(n > 0, "n is {n}");
    let ok = kernel_assert!(n > 1);
}

fn main() {}
