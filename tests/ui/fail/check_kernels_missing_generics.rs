use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn copy<T: Scalar>(x: &[T], y: &mut [T]) {
    let i = thread_idx_x();
    y[i] = x[i];
}

// A generic kernel is listed once per instantiation: `copy::<f32>`.
symm::check_kernels!(copy);

fn main() {}
