use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
#[allow(unused_labels)]
fn grid_copy(x: &[f32], y: &mut [f32]) {
    let mut j = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    let stride = (grid_dim_x() * block_dim_x()) as usize;
    'grid: while j < x.len() {
        y[j] = x[j];
        j += stride;
    }
}

fn main() {}
