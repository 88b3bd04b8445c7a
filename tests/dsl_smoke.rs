//! The README's and the docs' example kernels translate, type-check and
//! compile with NVRTC.

use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel(device)]
fn twice<T: DslFloat>(x: T) -> T {
    x + x
}

/// The example of `symm_kernel`'s docs, with a helper.
#[symm_kernel]
fn scale<T: DslFloat>(x: &[T], y: &mut [T], a: T, n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        y[i] = twice(a * x[i]);
    }
}

/// The README's example.
#[symm_kernel]
fn ring_shift<T: Scalar>(buf: SymmBuf<T>, n: u32) {
    let next = (buf.rank() + 1) % buf.world_size();
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        buf.peer(next)[i] = buf.local()[i];
    }
}

symm::check_kernels!(
    fn examples_compile;
    scale::<f32>,
    scale::<symm::bf16>,
    ring_shift::<f32>,
);

#[test]
fn device_functions_are_called_with_the_context() {
    // The C calls a dependency by its index, the Rust name in a comment.
    assert!(scale::cuda_source().contains("/*twice*/(__ctx"));
}
