use symm::dsl::*;
use symm::symm_kernel;

// A const-generic length is checked where the kernel is instantiated.
#[symm_kernel]
fn big<const N: usize>(x: &[f32], y: &mut [f32]) {
    let i = thread_idx_x();
    let mut a = [0.0f32; N];
    a[0] = x[i];
    y[i] = a[0];
}

fn main() {
    println!("{}", big::cuda_source_for::<200000>().len());
}
