use symm::dsl::*;
use symm::symm_kernel;

const SCALE: f32 = 2.0;

#[symm_kernel]
fn scale(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        y[i] = x[i] * SCALE;
    }
}

fn main() {}
