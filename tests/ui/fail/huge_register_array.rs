use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn big(x: &[f32], y: &mut [f32]) {
    let i = thread_idx_x();
    let mut a = [0.0f32; 200000];
    a[0] = x[i];
    y[i] = a[0];
}

fn main() {}
