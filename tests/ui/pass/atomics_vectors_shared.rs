//! Atomics, vector loads and stores, shared memory, shuffles and ballots.
use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
pub fn histogram_and_reverse(
    x: &[f32],
    out: &mut [f32],
    bins: &mut [u32],
    total: &mut [f32],
    votes: &mut [u32],
) {
    let t = thread_idx_x();
    let g = block_idx_x() * block_dim_x() + t;
    let tile = shared_array::<f32, 1024>();

    // 16-byte vector load of four values, kept in shared memory.
    let v = x.load_vec::<4>(g * 4);
    for k in 0..4u32 {
        tile[t * 4 + k] = v[k];
    }
    sync_threads();

    // Reversed within the block, stored back as a vector.
    let last = block_dim_x() * 4 - 1;
    let r: [f32; 4] = [
        tile[last - t * 4],
        tile[last - t * 4 - 1],
        tile[last - t * 4 - 2],
        tile[last - t * 4 - 3],
    ];
    out.store_vec::<4>(g * 4, r);

    // Atomics: a histogram of the first value, a float sum, a CAS-max.
    let bin = min((abs(v[0]) as u32) % 16, 15u32);
    bins.atomic_add(bin, 1, RmwOrder::Relaxed, Scope::Gpu);
    total.atomic_add(0, v[0] + v[1] + v[2] + v[3], RmwOrder::Relaxed, Scope::Gpu);
    let mut cur = bins.load(16, LoadOrder::Relaxed, Scope::Gpu);
    while cur < g {
        let seen = bins.atomic_cas(16, cur, g, RmwOrder::AcqRel, Scope::Gpu);
        if seen == cur {
            break;
        }
        cur = seen;
    }

    // Warp vote and butterfly sum.
    let mut s = g;
    let mut m: u32 = 16;
    while m > 0 {
        s = s.wrapping_add(shfl_xor(s, m));
        m /= 2;
    }
    let b = ballot(v[0] > 0.0f32);
    if lane_id() == 0 {
        votes[g / 32] = b ^ s;
    }
}

pub fn main() {
    assert!(histogram_and_reverse::CUDA_BODY.contains("__shared__"));
}
