use symm::dsl::*;
use symm::symm_kernel;

#[allow(dead_code)]
struct Pair {
    lo: f32,
    hi: f32,
}

#[symm_kernel]
fn pairs(x: &[f32], y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        let _p = Pair { lo: x[i], hi: y[i] };
        y[i] = x[i];
    }
}

fn main() {}
