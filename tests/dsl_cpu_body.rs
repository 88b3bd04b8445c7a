//! The CPU body that `#[symm_kernel]` re-emits is real, runnable Rust: run
//! it thread by thread (kernels without block barriers need no scheduler)
//! on host memory, against a float64 reference. The emulator issue builds
//! the full scheduler on the same hook.

use rand::Rng;
use symm::__private::{with_thread, KernelThread};
use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn axpy(x: &[f32], y: &mut [f32], a: f32, n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        y[i] = fma(a, x[i], y[i]);
    }
}

/// One simulated thread, run to completion before the next.
struct Seq {
    thread: u32,
    block: u32,
    dim: u32,
    grid: u32,
}

impl KernelThread for Seq {
    fn indices(&self) -> [[u32; 3]; 4] {
        [
            [self.thread, 0, 0],
            [self.block, 0, 0],
            [self.dim, 1, 1],
            [self.grid, 1, 1],
        ]
    }
    fn rank(&self) -> u32 {
        0
    }
    fn sync_threads(&self) {
        panic!("this sequential test context cannot run block barriers")
    }
    fn shfl_xor(&self, _: u64, _: u32) -> u64 {
        panic!("no warps here")
    }
    fn ballot(&self, _: bool) -> u32 {
        panic!("no warps here")
    }
    fn shared(&self, _: u32, _: usize, _: usize) -> u64 {
        panic!("no shared memory here")
    }
    fn spin(&self, _: &dyn Fn() -> String) {}
    fn globaltimer(&self) -> u64 {
        0
    }
    fn timeout_ns(&self) -> u64 {
        u64::MAX
    }
    fn fail(&self, message: String) -> ! {
        panic!("{message}")
    }
}

#[test]
fn axpy_cpu_body_matches_a_float64_reference() {
    let n: usize = 1000 + rand::rng().random_range(0..77);
    let x: Vec<f32> = (0..n)
        .map(|_| rand::rng().random_range(-1.0..1.0))
        .collect();
    let y0: Vec<f32> = (0..n)
        .map(|_| rand::rng().random_range(-1.0..1.0))
        .collect();
    let a: f32 = rand::rng().random_range(-3.0..3.0);
    // Host memory laid out as device memory: 8-byte words (see hostmem).
    let mut xs = vec![0u64; n.div_ceil(2)];
    let mut ys = vec![0u64; n.div_ceil(2)];
    for i in 0..n {
        let (w, sh) = (i / 2, 32 * (i % 2));
        xs[w] |= u64::from(x[i].to_bits()) << sh;
        ys[w] |= u64::from(y0[i].to_bits()) << sh;
    }
    let xh = Slice::<f32>::__new(xs.as_mut_ptr() as u64, n);
    let yh = SliceMut::<f32>::__new(ys.as_mut_ptr() as u64, n);
    let (dim, grid) = (128u32, (n as u32).div_ceil(128));
    for block in 0..grid {
        for thread in 0..dim {
            with_thread(
                &Seq {
                    thread,
                    block,
                    dim,
                    grid,
                },
                || axpy::cpu(xh, yh, a, n as u32),
            );
        }
    }
    for i in 0..n {
        let got = f32::from_bits((ys[i / 2] >> (32 * (i % 2))) as u32);
        let want = f64::from(a) * f64::from(x[i]) + f64::from(y0[i]);
        assert!(
            (f64::from(got) - want).abs() <= 1e-6 * want.abs().max(1.0),
            "element {i}: {got} vs {want}"
        );
        assert_eq!(
            got.to_bits(),
            a.mul_add(x[i], y0[i]).to_bits(),
            "element {i} is not the single-rounding fma"
        );
    }
}

#[test]
fn out_of_bounds_in_a_cpu_body_is_reported_with_the_index() {
    let mut xs = vec![0u64; 2];
    let mut ys = vec![0u64; 2];
    let xh = Slice::<f32>::__new(xs.as_mut_ptr() as u64, 4);
    let yh = SliceMut::<f32>::__new(ys.as_mut_ptr() as u64, 4);
    // n = 5 lets thread 4 index past both 4-element slices.
    let err = std::panic::catch_unwind(|| {
        with_thread(
            &Seq {
                thread: 4,
                block: 0,
                dim: 8,
                grid: 1,
            },
            || axpy::cpu(xh, yh, 1.0, 5),
        );
    })
    .expect_err("index 4 of 4 elements");
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("index 4 is out of bounds for length 4"),
        "{msg}"
    );
}
