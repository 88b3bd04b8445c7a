use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel(device)]
fn stage(tile: Shared<f32, 256>, v: f32) {
    tile[thread_idx_x()] = v;
}

#[symm_kernel]
fn load_tile(x: &[f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < x.len() {
        stage(shared_array::<f32, 256>(), x[i]);
    }
}

fn main() {}
