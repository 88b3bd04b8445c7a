//! A generic kernel with a const generic, calling a generic device helper.
use symm::dsl::*;
use symm::symm_kernel;

/// `a * x + y` with one rounding.
#[symm_kernel(device)]
pub fn axpy<T: DslFloat>(a: T, x: T, y: T) -> T {
    fma(a, x, y)
}

/// Largest of a register array of `W` values.
#[symm_kernel(device)]
pub fn largest<T: DslFloat, const W: usize>(v: [T; W]) -> T {
    let mut m = v[0];
    for k in 1..W {
        m = max(m, v[k]);
    }
    m
}

/// Each thread updates `W` consecutive elements (an unrolled loop), then
/// writes the largest of them to `peaks`.
#[symm_kernel]
pub fn axpy_w<T: DslFloat, const W: usize>(x: &[T], y: &mut [T], peaks: &mut [T], a: T, n: u32) {
    let t = block_idx_x() * block_dim_x() + thread_idx_x();
    let base = t * W as u32;
    if base + (W as u32) <= n {
        let mut r: [T; W] = [T::zero(); W];
        for k in 0..W {
            let j = base + k as u32;
            r[k] = axpy(a, x[j], y[j]);
            y[j] = r[k];
        }
        peaks[t] = largest::<T, W>(r);
    }
}

pub fn main() {
    let src = axpy_w::cuda_source_for::<f32, 4>();
    assert!(src.contains("f_axpy") && src.contains("f_largest"));
}
