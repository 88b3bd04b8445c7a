//! `kernel_assert!` in a kernel and a device function, with and without a
//! message; and in host code, where it behaves as `assert!`.
use symm::dsl::*;
use symm::symm_kernel;

/// Half of an even `v`.
#[symm_kernel(device)]
pub fn half_of(v: u32) -> u32 {
    kernel_assert!(v % 2 == 0, "odd");
    v / 2
}

/// Halves `x` into `y`, checking the launch covers it.
#[symm_kernel]
pub fn halve(x: &[u32], y: &mut [u32], n: u32) {
    kernel_assert!(
        grid_dim_x() * block_dim_x() >= n,
        "the grid does not cover `n`"
    );
    kernel_assert!(x.len() as u32 >= n && y.len() == x.len());
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        y[i] = half_of(x[i]);
    }
}

pub fn main() {
    // The message of an assertion without one is its condition as written.
    assert_eq!(halve::ASSERTS.len(), 2);
    assert_eq!(halve::ASSERTS[0].message, "the grid does not cover `n`");
    assert_eq!(
        halve::ASSERTS[1].message,
        "x.len() as u32 >= n && y.len() == x.len()"
    );
    assert_eq!(half_of::DEVICE.asserts()[0].message, "odd");
    // Host code: a passing assertion does nothing, a failing one panics.
    kernel_assert!(1 + 1 == 2);
    std::panic::set_hook(Box::new(|_| {}));
    let failed = std::panic::catch_unwind(|| kernel_assert!(1 + 1 == 3, "arithmetic"));
    let payload = failed.expect_err("a false assertion panics");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        msg.starts_with("assertion failed: arithmetic (at "),
        "{msg}"
    );
}
