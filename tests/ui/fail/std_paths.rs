use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn clamp(x: &[f32], y: &mut [f32], n: u32) {
    let i = std::cmp::min(block_idx_x() * block_dim_x() + thread_idx_x(), n - 1);
    let v = f32::max(x[i], 0.0f32);
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    std::mem::drop(v);
    y[i] = v;
}

fn main() {}
