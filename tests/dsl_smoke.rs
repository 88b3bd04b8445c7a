use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel(device)]
fn twice<T: DslFloat>(x: T) -> T {
    x + x
}

#[symm_kernel]
fn scale<T: DslFloat>(x: &[T], y: &mut [T], a: T, n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        y[i] = twice(a * x[i]);
    }
}

#[test]
fn smoke() {
    println!("{}", scale::cuda_source_for::<f32>());
    scale::compile_for::<f32>(symm::jit::Arch { major: 9, minor: 0 }).unwrap();
    scale::compile_for::<symm::bf16>(symm::jit::Arch { major: 9, minor: 0 }).unwrap();
}
