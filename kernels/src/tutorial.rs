//! The book's all-reduce tutorial, step by step (`book/src/tutorial-all-reduce.md`):
//! a naive barrier-then-pull kernel, then the same with 16-byte vectors.
//! The fast design is [`crate::all_reduce`]. Both steps are real kernels:
//! CI compiles them with NVRTC and runs them on the emulator, and the
//! benchmark times them on GPUs.

use symm::dsl::*;
use symm::symm_kernel;

// ANCHOR: barrier
/// Every block meets its counterpart on every rank: thread p signals rank p
/// on `channel` and waits for rank p's signal back. The signal is a
/// system-scope release and the wait an acquire, so what any rank's block
/// did before the barrier is visible to every rank's block after it.
#[symm_kernel(device)]
pub fn block_barrier<T: Scalar>(buf: SymmBuf<T>, channel: u32) {
    sync_threads();
    let p = thread_idx_x();
    if p < buf.world_size() && p != buf.rank() {
        buf.put_signal(p, channel);
        buf.wait_signal(p, channel);
    }
    sync_threads();
}
// ANCHOR_END: barrier

// ANCHOR: naive
/// Step 1: barrier, pull element by element from every rank, barrier.
/// Each thread sums element `i` over ranks 0, 1, … in f32 (the same order
/// everywhere, so every rank gets the same bits). The second barrier keeps
/// a rank from returning (and overwriting its input) while peers read it.
/// `entry` and `exit` are the barriers' channels, requested from the group.
#[symm_kernel]
pub fn naive_all_reduce<T: Scalar>(buf: SymmBuf<T>, out: &mut [T], n: u32, entry: u32, exit: u32) {
    block_barrier(buf, entry); // every input is ready
    let stride = grid_dim_x() * block_dim_x();
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        let mut acc: f32 = 0.0;
        for r in 0..buf.world_size() {
            acc += buf.peer(r)[i].to_f32();
        }
        out[i] = T::from_f32(acc);
        i += stride;
    }
    block_barrier(buf, exit); // every peer is done reading this rank
}
// ANCHOR_END: naive

// ANCHOR: vectorized
/// Step 2: the same, but each thread moves 16 bytes (`V` elements) per load
/// and issues the loads from every rank before adding, so the NVLink round
/// trips overlap instead of queueing (at most 8 ranks: `parts` holds one
/// vector per rank). Elements past the last whole vector are summed one by
/// one.
#[symm_kernel]
pub fn vectorized_all_reduce<T: Scalar, const V: usize>(
    buf: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    entry: u32,
    exit: u32,
) {
    block_barrier(buf, entry);
    let world = buf.world_size();
    // Its `parts` hold 8 ranks' vectors (a domain of more needs them in
    // groups of 8, as the built-in reductions read them).
    kernel_assert!(world <= 8u32, "vectorized_all_reduce sums at most 8 ranks");
    let stride = grid_dim_x() * block_dim_x();
    let first = block_idx_x() * block_dim_x() + thread_idx_x();
    let vecs = n / V as u32;
    let mut v = first;
    while v < vecs {
        let zero: [T; V] = [T::from_f32(0.0f32); V];
        let mut parts: [[T; V]; 8] = [zero; 8];
        for r in 0..world {
            parts[r] = buf.peer(r).load_vec::<V>(v * V as u32);
        }
        let mut acc: [f32; V] = [0.0f32; V];
        for r in 0..world {
            let p = parts[r];
            for k in 0..V {
                acc[k] += p[k].to_f32();
            }
        }
        let mut res: [T; V] = zero;
        for k in 0..V {
            res[k] = T::from_f32(acc[k]);
        }
        out.store_vec::<V>(v * V as u32, res);
        v += stride;
    }
    let mut i = vecs * V as u32 + first;
    while i < n {
        let mut acc: f32 = 0.0;
        for r in 0..world {
            acc += buf.peer(r)[i].to_f32();
        }
        out[i] = T::from_f32(acc);
        i += stride;
    }
    block_barrier(buf, exit);
}
// ANCHOR_END: vectorized
