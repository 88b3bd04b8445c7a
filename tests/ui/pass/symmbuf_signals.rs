//! Symmetric buffers: peer stores and loads with orderings, signals, fences
//! and signal pads.
use symm::dsl::*;
use symm::symm_kernel;

/// Every rank pushes `n` elements to the next rank, signals it, and waits
/// for the previous rank's data; thread 0 then records a checksum.
#[symm_kernel]
pub fn ring_push(buf: SymmBuf<f32>, sums: SymmBuf<u64>, n: u32, channel: u32) {
    let rank = buf.rank();
    let world = buf.world_size();
    let next = (rank + 1) % world;
    let prev = (rank + world - 1) % world;
    let src = buf.local();
    let dst = buf.peer(next);
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        dst.store(n + i, src[i], StoreOrder::Relaxed, Scope::System);
        i += grid_dim_x() * block_dim_x();
    }
    fence(Scope::System);
    sync_threads();
    if thread_idx_x() == 0 {
        buf.put_signal(next, channel);
        buf.wait_signal(prev, channel);
        let mut acc: u64 = 0;
        for k in 0..n {
            let v = src.load(n + k, LoadOrder::Acquire, Scope::System);
            acc = acc.wrapping_add(v.to_bits() as u64);
        }
        sums.local()
            .atomic_add(0, acc, RmwOrder::Relaxed, Scope::System);
        // The raw signal-pad slot this block's signal from `prev` used.
        let pad = buf.pad(rank);
        let slot = signal_slot(channel, block_idx_x(), prev);
        sums.local().store(
            1,
            pad.load(slot, LoadOrder::Volatile, Scope::System) as u64,
            StoreOrder::Release,
            Scope::System,
        );
    }
}

pub fn main() {
    assert!(ring_push::CUDA_BODY.contains("/*put_signal*/(__ctx, v_buf,"));
}
