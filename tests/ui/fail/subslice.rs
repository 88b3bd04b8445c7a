use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn shift(x: &[f32], y: &mut [f32], off: usize) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i + off < x.len() && i < y.len() {
        y[i] = x[off..][i];
    }
}

fn main() {}
