//! Kernels for back-to-back call tests: a generator that rewrites every
//! rank's input on the stream before each call (so a stale read shows),
//! its host reference, and a copy that keeps sampled outputs.

#![allow(dead_code)]

use symm::dsl::*;
use symm::symm_kernel;

/// Input for rank `r`, call `k`, element `i` of a test run drawn with
/// `seed`: cheap, reproducible on the host, and different for every call,
/// so a stale read shows.
#[symm_kernel]
pub fn fill_input(buf: SymmBuf<f32>, n: u32, k: u32, seed: u32) {
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    let r = buf.rank();
    let mine = buf.local();
    while i < n {
        let h = i.wrapping_mul(2654435761u32)
            ^ k.wrapping_mul(40503u32)
            ^ r.wrapping_mul(2246822519u32)
            ^ seed;
        let x = h ^ (h >> 15);
        mine[i] = ((x % 2001u32) as f32 - 1000.0f32) / 1000.0f32;
        i += grid_dim_x() * block_dim_x();
    }
}

/// What `fill_input` writes, on the host.
pub fn fill_ref(seed: u32, r: u32, k: u32, i: u32) -> f32 {
    let h = i.wrapping_mul(2654435761) ^ k.wrapping_mul(40503) ^ r.wrapping_mul(2246822519) ^ seed;
    let x = h ^ (h >> 15);
    ((x % 2001) as f32 - 1000.0) / 1000.0
}

/// Checks the sampled outputs `hist` (`n` elements per entry of `samples`,
/// the calls kept) against the float64 sum over `world` ranks of what
/// `fill_input` wrote with `seed`; names the first element off by more than
/// 1e-5.
pub fn check_samples(
    world: u32,
    n: u32,
    seed: u32,
    samples: &[u32],
    hist: &[f32],
) -> Result<(), String> {
    for (si, &k) in samples.iter().enumerate() {
        for i in 0..n {
            let want: f64 = (0..world).map(|r| f64::from(fill_ref(seed, r, k, i))).sum();
            let got = hist[si * n as usize + i as usize];
            if (f64::from(got) - want).abs() > 1e-5 {
                return Err(format!("call {k}, element {i}: {got} vs {want}"));
            }
        }
    }
    Ok(())
}

/// Copies `src[..n]` to `dst[offset..]`.
#[symm_kernel]
pub fn keep(src: &[f32], dst: &mut [f32], offset: u32, n: u32) {
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        dst[offset + i] = src[i];
        i += grid_dim_x() * block_dim_x();
    }
}
