//! The fused kernel, in the DSL.

use symm::dsl::*;
use symm::symm_kernel;

use crate::shared::device::{add_ranks_past_8, enter_call, enter_sending, exit_checked};

/// Loads elements `i..i + V` from every rank's `buf` and sums them in f32
/// in rank order 0, 1, …, from −0 as the all-reduce's sums (no rounding:
/// the residual is added first); past 8 ranks, 8 ranks' loads at a time.
#[symm_kernel(device)]
pub(crate) fn sum_peers_f32<T: Scalar, const V: usize>(
    buf: SymmBuf<T>,
    i: u32,
    world: u32,
) -> [f32; V] {
    let zero: [T; V] = [T::from_f32(0.0f32); V];
    let mut vals: [[T; V]; 8] = [zero; 8];
    for r in 0..8u32 {
        if r < world {
            vals[r] = buf.peer(r).load_vec::<V>(i);
        }
    }
    let mut acc: [f32; V] = [-0.0f32; V];
    for r in 0..8u32 {
        if r < world {
            for k in 0..V {
                acc[k] += vals[r][k].to_f32();
            }
        }
    }
    add_ranks_past_8::<T, V>(buf, i, world, acc)
}

/// `a + b`, or the larger where `MAX` is 1: [`block_reduce`]'s combine.
#[symm_kernel(device)]
pub(crate) fn combine<const MAX: usize>(a: f32, b: f32) -> f32 {
    if MAX == 1 {
        max(a, b)
    } else {
        a + b
    }
}

/// The sum (`MAX` 0) or the largest (`MAX` 1) of `v` over the warp, the
/// same on every lane: a butterfly, in a fixed order. Every lane of the
/// warp calls it.
#[symm_kernel(device)]
pub fn warp_reduce<const MAX: usize>(v: f32) -> f32 {
    let mut s = v;
    let mut m = 16u32;
    while m > 0 {
        s = combine::<MAX>(s, shfl_xor(s, m));
        m /= 2;
    }
    s
}

/// The sum (`MAX` 0) or the largest (`MAX` 1) of `v` over the block, the
/// same on every thread: [`warp_reduce`] within each warp, then warp 0 over
/// the warps' results (through `partial`, one slot per warp), in a fixed
/// order. Every thread of the block calls it, and the block is whole warps
/// (a multiple of 32 threads, at most 1024).
#[symm_kernel(device)]
pub fn block_reduce<const MAX: usize>(v: f32, partial: Shared<f32, 32>) -> f32 {
    let s = warp_reduce::<MAX>(v);
    let warp = thread_idx_x() / 32;
    let warps = (block_dim_x() + 31) / 32;
    if lane_id() == 0 {
        partial[warp] = s;
    }
    sync_threads();
    if warp == 0 {
        // Lanes past the last warp hold the combine's identity: 0 for the
        // sum, warp 0's own result for the maximum.
        let t = if lane_id() < warps {
            partial[lane_id()]
        } else if MAX == 1 {
            partial[0]
        } else {
            0.0f32
        };
        let t = warp_reduce::<MAX>(t);
        if lane_id() == 0 {
            partial[0] = t;
        }
    }
    sync_threads();
    let total = partial[0];
    // Every thread has read it before a later call overwrites `partial`.
    sync_threads();
    total
}

/// [`block_reduce`]'s sum.
#[symm_kernel(device)]
pub fn block_sum(v: f32, partial: Shared<f32, 32>) -> f32 {
    block_reduce::<0>(v, partial)
}

/// For each of `rows` rows of `hidden` elements: `residual` becomes
/// `T(Σ_ranks input + residual)` (f32, rank order, one rounding) and `out`
/// that row times `weight` over its root mean square,
/// `T(r · (1 / sqrt(mean(r²) + eps)) · w)` in f32. `hidden` is a multiple of
/// `V` (16 bytes); launch with whole warps, at least
/// `identity_checkers(world_size) + world_size` threads per block (the
/// identity barriers' handshakes and checks), at most
/// [`super::MAX_BLOCKS`] blocks, the same grid on every rank.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn all_reduce_rms_norm<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    residual: &mut [T],
    weight: &[T],
    out: &mut [T],
    rows: u32,
    hidden: u32,
    eps: f32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let world = input.world_size();
    // Every peer is in this call (its digest `sig`, on channel `ch + 1`).
    let call = enter_sending(input, ch, sig);
    let partial = shared_array::<f32, 32>();
    let step = block_dim_x() * V as u32;
    let mut row = block_idx_x();
    while row < rows {
        let base = row * hidden;
        let mut ss: f32 = 0.0;
        let mut i = thread_idx_x() * V as u32;
        while i < hidden {
            let s = sum_peers_f32::<T, V>(input, base + i, world);
            let r = residual.load_vec::<V>(base + i);
            let mut nr: [T; V] = r;
            for k in 0..V {
                nr[k] = T::from_f32(s[k] + r[k].to_f32());
                let f = nr[k].to_f32();
                ss += f * f;
            }
            residual.store_vec::<V>(base + i, nr);
            i += step;
        }
        let total = block_sum(ss, partial);
        let inv = 1.0f32 / (total / hidden as f32 + eps).sqrt();
        let mut j = thread_idx_x() * V as u32;
        while j < hidden {
            // This thread's own stores of the new residual.
            let nr = residual.load_vec::<V>(base + j);
            let w = weight.load_vec::<V>(j);
            let mut o: [T; V] = nr;
            for k in 0..V {
                o[k] = T::from_f32(nr[k].to_f32() * inv * w[k].to_f32());
            }
            out.store_vec::<V>(base + j, o);
            j += step;
        }
        row += grid_dim_x();
    }
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}
