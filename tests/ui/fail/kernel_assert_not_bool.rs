use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn check(x: &[u32], n: u32) {
    kernel_assert!(x[0] & n, "a mask, not a condition");
}

fn main() {}
