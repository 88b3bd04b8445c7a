use symm::dsl::*;
use symm::symm_kernel;

// Not a multiple of 32: a block is whole warps.
#[symm_kernel(max_threads = 1000)]
fn copy(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        y[i] = x[i];
    }
}

fn main() {}
