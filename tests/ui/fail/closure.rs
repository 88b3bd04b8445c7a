use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn double(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    let twice = |v: f32| v * 2.0f32;
    if i < x.len() {
        y[i] = twice(x[i]);
    }
}

fn main() {}
