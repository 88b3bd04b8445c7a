use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn square(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        y[i] = x[i].powi(2);
    }
}

fn main() {}
