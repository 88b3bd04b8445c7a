use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
struct Scale {
    factor: f32,
}

fn main() {
    let _ = thread_idx_x;
}
