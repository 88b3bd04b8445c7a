use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn axpy(x: &[f32], y: &mut [f32], a: f32) {
    use symm::dsl::fma;
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        y[i] = fma(a, x[i], y[i]);
    }
}

fn main() {}
