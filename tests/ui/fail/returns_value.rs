use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn first(x: &[f32]) -> f32 {
    x[(thread_idx_x() as usize) % x.len()]
}

fn main() {}
