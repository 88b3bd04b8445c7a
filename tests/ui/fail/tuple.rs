use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn pairs(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        let _pair = (x[i], 2.0f32 * x[i]);
        y[i] = x[i];
    }
}

fn main() {}
