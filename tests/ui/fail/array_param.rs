use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn poly(coeffs: [f32; 4], x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        y[i] = coeffs[0] + x[i] * coeffs[1];
    }
}

fn main() {}
