use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn clear(x: &[f32], y: &mut [f32]) {
    let mut j = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    let stride = (grid_dim_x() * block_dim_x()) as usize;
    while let Some(_) = x.get(j) {
        y[j] = 0.0f32;
        j += stride;
    }
}

fn main() {}
