use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn total(x: &[f32], y: &mut [f32]) {
    let mut acc = 0.0f32;
    for v in x.iter() {
        acc += *v;
    }
    y[thread_idx_x() as usize] = acc;
}

fn main() {}
