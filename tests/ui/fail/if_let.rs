use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn mark(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if let Some(_) = x.get(i) {
        y[i] = 1.0f32;
    }
}

fn main() {}
