use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn check(x: &[f32], n: u32) {
    assert!(x.len() as u32 >= n, "x is too short");
    assert_eq!(block_dim_x(), 256);
    if n == 0 {
        panic!("no work");
    }
}

fn main() {}
