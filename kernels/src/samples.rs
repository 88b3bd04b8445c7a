//! Small sample collectives over symmetric memory: the kernels the book's
//! custom-collectives chapter reads. The host-level collectives are in
//! [`crate::collectives`].

use symm::dsl::*;
use symm::symm_kernel;

/// Put/signal ping-pong between rank pairs (0↔1, 2↔3, ...): in each of
/// `rounds` rounds one side reads its slot 0, adds one, stores it into the
/// partner's slot 0 and signals on `channel` (one requested from the group,
/// [`symm::signal::Channel`]); the other side waits. Even ranks send in
/// even rounds. After the last round the last receiver holds `start +
/// rounds` in slot 0 (both slots must start at `start`). Launch one block of
/// one or more threads; only thread 0 plays.
#[symm_kernel]
pub fn ping_pong(buf: SymmBuf<u32>, rounds: u32, channel: u32) {
    if thread_idx_x() != 0 || block_idx_x() != 0 {
        return;
    }
    let me = buf.rank();
    let partner = me ^ 1;
    if partner >= buf.world_size() {
        return;
    }
    for round in 0..rounds {
        if (me & 1) == (round & 1) {
            let v = buf.local().load(0, LoadOrder::Relaxed, Scope::System) + 1;
            buf.peer(partner)
                .store(0, v, StoreOrder::Relaxed, Scope::System);
            // A system-scope release: the store above is visible first.
            buf.put_signal(partner, channel);
        } else {
            // A system-scope acquire: the partner's store is visible after.
            buf.wait_signal(partner, channel);
        }
    }
}

// ANCHOR: ring_all_gather
/// Ring all-gather in place: rank r's chunk `r` (elements `r * chunk ..
/// (r + 1) * chunk` of its buffer) reaches the same place in every rank's
/// buffer after `world - 1` steps. Each step forwards the chunk received in
/// the previous one to the next rank and signals it; block b of every rank
/// handles the same elements, so per-block signals (on `channel`) are all
/// the ordering needed. Any grid up to 128 blocks. It does not synchronise
/// on entry: a rank writes into its neighbour as soon as it starts, so
/// before reusing the buffer, make sure every rank is done with it (a host
/// `barrier`).
#[symm_kernel]
pub fn ring_all_gather<T: Scalar>(buf: SymmBuf<T>, chunk: u32, channel: u32) {
    let rank = buf.rank();
    let world = buf.world_size();
    let next = (rank + 1) % world;
    let prev = (rank + world - 1) % world;
    let stride = grid_dim_x() * block_dim_x();
    let src = buf.local();
    let dst = buf.peer(next);
    for step in 0..world - 1 {
        let base = ((rank + world - step) % world) * chunk;
        let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
        while i < chunk {
            dst[base + i] = src[base + i];
            i += stride;
        }
        sync_threads();
        if thread_idx_x() == 0 {
            buf.put_signal(next, channel);
            buf.wait_signal(prev, channel);
        }
        sync_threads();
    }
}
// ANCHOR_END: ring_all_gather

// ANCHOR: broadcast
/// Broadcast of `n` elements from rank `root` to every rank's buffer: the
/// root signals readiness (on channel `ready`), every other rank pulls the
/// data, then reports back (on channel `done`) so the root knows its buffer
/// may be reused when the kernel ends. Any grid up to 128 blocks.
#[symm_kernel]
pub fn broadcast<T: Scalar>(buf: SymmBuf<T>, root: u32, n: u32, ready: u32, done: u32) {
    let rank = buf.rank();
    let world = buf.world_size();
    if thread_idx_x() == 0 {
        if rank == root {
            for p in 0..world {
                if p != root {
                    buf.put_signal(p, ready);
                }
            }
        } else {
            buf.wait_signal(root, ready);
        }
    }
    sync_threads();
    if rank != root {
        let src = buf.peer(root);
        let dst = buf.local();
        let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
        while i < n {
            dst[i] = src[i];
            i += grid_dim_x() * block_dim_x();
        }
    }
    sync_threads();
    if thread_idx_x() == 0 {
        if rank == root {
            for p in 0..world {
                if p != root {
                    buf.wait_signal(p, done);
                }
            }
        } else {
            buf.put_signal(root, done);
        }
    }
}
// ANCHOR_END: broadcast
