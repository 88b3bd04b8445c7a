use symm::dsl::*;
use symm::symm_kernel;

struct Scaler;

impl Scaler {
    #[symm_kernel]
    fn scale(&self, x: &[f32], y: &mut [f32]) {
        let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
        if i < x.len() {
            y[i] = 2.0f32 * x[i];
        }
    }
}

fn main() {
    let _ = Scaler;
}
