use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn read_peer(src: Remote<f32>, y: &mut [f32]) {
    let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
    if i < y.len() {
        y[i] = src.load(i, LoadOrder::Relaxed, Scope::System);
    }
}

fn main() {}
