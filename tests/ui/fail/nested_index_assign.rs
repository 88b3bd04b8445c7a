use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn tile(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        let mut t: [[f32; 2]; 2] = [[0.0f32; 2]; 2];
        t[1][0] = x[i];
        y[i] = t[1][0];
    }
}

fn main() {}
