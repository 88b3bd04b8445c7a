use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn copy(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        println!("x[{i}] = {}", x[i]);
        y[i] = x[i];
    }
}

fn main() {}
