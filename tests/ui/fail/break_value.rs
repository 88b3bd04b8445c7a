use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
#[rustfmt::skip] // keeps the `;` after `loop`, which discards its value in Rust
fn first_negative(x: &[f32], y: &mut [f32]) {
    let mut j = thread_idx_x() as usize;
    loop {
        if j >= x.len() || x[j] < 0.0f32 {
            break j;
        }
        j += 1;
    };
    y[0] = j as f32;
}

fn main() {}
