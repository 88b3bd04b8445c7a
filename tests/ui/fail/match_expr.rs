use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn pick(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        y[i] = match i % 2 {
            0 => x[i],
            _ => -x[i],
        };
    }
}

fn main() {}
