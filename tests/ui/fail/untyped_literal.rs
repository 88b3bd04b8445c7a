use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn scale(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    let factor = 2.0;
    if i < x.len() {
        y[i] = x[i] * factor;
    }
}

fn main() {}
