use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel(device)]
fn countdown(n: u32) -> u32 {
    if n == 0 {
        0
    } else {
        countdown(n - 1)
    }
}

#[symm_kernel(device)]
fn ping(n: u32) -> u32 {
    if n == 0 {
        0
    } else {
        pong(n - 1)
    }
}

#[symm_kernel(device)]
fn pong(n: u32) -> u32 {
    if n == 0 {
        1
    } else {
        ping(n - 1)
    }
}

#[symm_kernel]
fn uses(x: &[u32], y: &mut [u32]) {
    let i = thread_idx_x();
    y[i] = ping(x[i]);
}

fn main() {}
