use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn truncate(x: &[f32], out: &mut [u32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let v: u32 = x[i];
        out[i] = v;
    }
}

fn main() {}
