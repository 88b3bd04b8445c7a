//! Prints the CUDA C that `#[symm_kernel]` generates: a kernel's translated
//! body, then the complete source compiled for one instantiation.
//!
//! ```text
//! cargo run --example print_cuda
//! ```

use symm::dsl::*;
use symm::symm_kernel;

/// `y = a * x + y` over any float type.
#[symm_kernel]
pub fn axpy<T: DslFloat>(x: &[T], y: &mut [T], a: T, n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        y[i] = fma(a, x[i], y[i]);
    }
}

fn main() {
    println!("// ---- axpy: the translated body (a C++ template) ----");
    println!("{}", axpy::cuda_source());
    let full = axpy::cuda_source_for::<symm::bf16>();
    let entry = full.find("extern \"C\"").unwrap_or(0);
    println!(
        "// ---- axpy::<bf16>: the entry point (after {} lines of support code) ----",
        full[..entry].lines().count()
    );
    println!("{}", &full[entry..]);
    println!("// ---- ring_all_gather, a built-in kernel ----");
    println!("{}", symm::kernels::ring_all_gather::cuda_source());
}
