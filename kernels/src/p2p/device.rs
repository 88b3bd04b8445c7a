//! The point-to-point kernels: a sender copies its message into its own
//! stage, in the region of its receiver, and signals; the receiver waits,
//! checks the message's digest, copies it out of the sender's stage and
//! acknowledges, which frees the region for the sender's next message.
//!
//! Every block of a grid owns the same bytes on both sides (a block's
//! range depends only on the message's length and the grid) and the same
//! `slot` bytes of the stage in every chunk (block `b`'s at `b × slot` of
//! the region's data), so per-block signals are all the ordering needed:
//! block `b` of the sender signals block `b` of the receiver on channel 0
//! of the stage's pad, and the receiver's block `b` answers on channel 1,
//! which frees block `b`'s slot. The stage is the family's own allocation,
//! so no other kernel uses its pad.
//!
//! Every kernel is launched with programmatic dependent launch, and waits
//! for the kernel before it first ([`enter_call`]).

use symm::dsl::*;
use symm::symm_kernel;

use crate::shared::device::enter_call;

/// The first and last byte (exclusive) of a `len`-byte message that this
/// block owns: ranges of equal 16-byte multiples, in block order.
#[symm_kernel(device)]
pub(crate) fn block_range(len: u32) -> [u32; 2] {
    let g = grid_dim_x();
    let per = ((len + g - 1u32) / g + 15u32) / 16u32 * 16u32;
    let lo = min(block_idx_x() * per, len);
    let hi = min(lo + per, len);
    [lo, hi]
}

/// Sends `len` bytes of `src` to rank `dst`: waits first for `dst` to
/// acknowledge this block's previous chunk (it has copied it out of the
/// slot; the stage starts with one acknowledgement per block, from
/// [`p2p_prime`]); then writes this block's header (`sig`,
/// the call's digest, as 4 bytes at `at + 4 × block`) and its range of
/// the message (at `at + 256 + block × slot`; a block's range is at most
/// `slot` bytes) into this rank's stage, and signals `dst`. `vec` 1: `src`
/// starts 16-byte aligned, so whole vectors move.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn p2p_send(
    stage: SymmBuf<u8>,
    src: &[u8],
    dst: u32,
    at: u32,
    slot: u32,
    len: u32,
    vec: u32,
    sig: u32,
) {
    enter_call();
    let t = thread_idx_x();
    if t == 0u32 {
        stage.wait_signal(dst, 1u32);
    }
    sync_threads();
    let r = block_range(len);
    let local = stage.local();
    if t < 4u32 {
        local[at + block_idx_x() * 4u32 + t] = ((sig >> (t * 8u32)) & 255u32) as u8;
    }
    // Byte `j` of this block's range at `mine + j - r[0]`.
    let mine = at + 256u32 + block_idx_x() * slot;
    let mut done = r[0];
    if vec != 0u32 {
        let vecs = (r[1] - r[0]) / 16u32;
        let mut i = t;
        while i < vecs {
            let x: [u8; 16] = src.load_vec::<16>(r[0] + i * 16u32);
            local.store_vec::<16>(mine + i * 16u32, x);
            i += block_dim_x();
        }
        done = r[0] + vecs * 16u32;
    }
    let mut j = done + t;
    while j < r[1] {
        local[mine + j - r[0]] = src[j];
        j += block_dim_x();
    }
    sync_threads();
    if t == 0u32 {
        stage.put_signal(dst, 0u32);
    }
}

/// Receives `len` bytes from rank `src` into `out`: waits for `src`'s
/// signal to this block, checks the block's header against `sig` (the
/// digest of the call this rank makes), copies the block's range out of
/// `src`'s stage (its region for this rank, at `at`, the block's slot as
/// [`p2p_send`] placed it), and acknowledges. `vec` 1: `out` starts
/// 16-byte aligned.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn p2p_recv(
    stage: SymmBuf<u8>,
    out: &mut [u8],
    src: u32,
    at: u32,
    slot: u32,
    len: u32,
    vec: u32,
    sig: u32,
) {
    enter_call();
    let t = thread_idx_x();
    if t == 0u32 {
        stage.wait_signal(src, 0u32);
    }
    sync_threads();
    let peer = stage.peer(src);
    let h = at + block_idx_x() * 4u32;
    let got = (peer[h] as u32)
        | ((peer[h + 1u32] as u32) << 8u32)
        | ((peer[h + 2u32] as u32) << 16u32)
        | ((peer[h + 3u32] as u32) << 24u32);
    kernel_assert!(
        got == sig,
        "p2p: the ranks made different calls (a send and its receive differ in size or element type, or one rank sent or received what its peer did not); every rank must make the same collective calls in the same order"
    );
    let r = block_range(len);
    let theirs = at + 256u32 + block_idx_x() * slot;
    let mut done = r[0];
    if vec != 0u32 {
        let vecs = (r[1] - r[0]) / 16u32;
        let mut i = t;
        while i < vecs {
            let x: [u8; 16] = peer.load_vec::<16>(theirs + i * 16u32);
            out.store_vec::<16>(r[0] + i * 16u32, x);
            i += block_dim_x();
        }
        done = r[0] + vecs * 16u32;
    }
    let mut j = done + t;
    while j < r[1] {
        out[j] = peer[theirs + j - r[0]];
        j += block_dim_x();
    }
    sync_threads();
    if t == 0u32 {
        stage.put_signal(src, 1u32);
    }
}

/// Word `i` of a `len`-byte message (its bytes `4i..4i + 4`, zeros past
/// the end), little-endian.
#[symm_kernel(device)]
pub(crate) fn word_of(src: Slice<u8>, len: u32, i: u32) -> u32 {
    let mut w: u32 = 0;
    for k in 0..4u32 {
        let j = i * 4u32 + k;
        if j < len {
            w |= (src[j] as u32) << (k * 8u32);
        }
    }
    w
}

/// This block's epoch for its next message to or from `peer`: its
/// counter (`counters` words of this rank's LL stage: per block, a word
/// per peer) read by every thread and, once all have, advanced by thread 0.
/// Kept on the device, so a CUDA graph's replays number their messages on.
#[symm_kernel(device)]
pub(crate) fn next_epoch(ll: SymmBuf<u64>, counters: u32, peer: u32) -> u32 {
    let at = counters + block_idx_x() * ll.world_size() + peer;
    let local = ll.local();
    let epoch = (local[at] as u32).wrapping_add(1u32);
    sync_threads();
    if thread_idx_x() == 0u32 {
        local[at] = epoch as u64;
    }
    epoch
}

/// The tag of an LL packet of `epoch`: its low 31 bits with the top bit
/// set, so that a cleared slot (0) never matches.
#[symm_kernel(device)]
pub(crate) fn ll_tag(epoch: u32) -> u32 {
    epoch | 2147483648u32
}

/// The low-latency send of a message of at most a region's bytes: every
/// 4-byte word as an 8-byte packet (the word, and the block's epoch's tag
/// (`ll_tag`) in the high half: one single-copy-atomic store) straight into
/// rank `dst`'s LL stage, at its region for this rank and the epoch's
/// parity (`regions` packets apart, the first at `at`): block `b`'s
/// header packet (`sig`, the call's digest) at `b`, then the words,
/// grid-stride. No signal: the receiver polls for the epoch. It first
/// waits until `dst`'s same block has consumed this block's message two
/// before (the region's last, whose epoch its flag on channel 0 holds;
/// wrapping, so the first two messages wait for nothing).
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn p2p_send_ll(
    ll: SymmBuf<u64>,
    src: &[u8],
    dst: u32,
    at: u32,
    region: u32,
    counters: u32,
    len: u32,
    sig: u32,
) {
    enter_call();
    let t = thread_idx_x();
    let epoch = next_epoch(ll, counters, dst);
    if t == 0u32 {
        ll.wait_flag(dst, 0u32, epoch.wrapping_sub(2u32));
    }
    sync_threads();
    let base = at + (epoch & 1u32) * region;
    let peer = ll.peer(dst);
    let g = grid_dim_x();
    let tag = (ll_tag(epoch) as u64) << 32u32;
    if t == 0u32 {
        peer.store(
            base + block_idx_x(),
            tag | (sig as u64),
            StoreOrder::Volatile,
            Scope::System,
        );
    }
    let words = (len + 3u32) / 4u32;
    let data = base + g;
    let mut i = block_idx_x() * block_dim_x() + t;
    while i < words {
        peer.store(
            data + i,
            tag | (word_of(src, len, i) as u64),
            StoreOrder::Volatile,
            Scope::System,
        );
        i += g * block_dim_x();
    }
}

/// The low-latency receive of [`p2p_send_ll`]'s message from rank `src`:
/// polls this rank's LL stage at `src`'s region of the block's epoch for
/// the epoch's packets (each thread the words its peer thread sent),
/// checks the block's header against `sig`, writes the bytes into `out`,
/// clears every packet it read (so a slot holds only 0 or the packet of
/// the message being sent into it: a tag that comes round again after
/// 2^31 messages matches nothing old), and, once the whole block is done,
/// sets its flag for `src` on channel 0 to the epoch, after which `src`
/// may write the region again.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn p2p_recv_ll(
    ll: SymmBuf<u64>,
    out: &mut [u8],
    src: u32,
    at: u32,
    region: u32,
    counters: u32,
    len: u32,
    sig: u32,
) {
    enter_call();
    let t = thread_idx_x();
    let epoch = next_epoch(ll, counters, src);
    let base = at + (epoch & 1u32) * region;
    let local = ll.local();
    let g = grid_dim_x();
    let tag = ll_tag(epoch);
    let h = local.load_tagged(base + block_idx_x(), tag, src);
    kernel_assert!(
        (h & 4294967295u64) as u32 == sig,
        "p2p: the ranks made different calls (a send and its receive differ in size or element type, or one rank sent or received what its peer did not); every rank must make the same collective calls in the same order"
    );
    let words = (len + 3u32) / 4u32;
    let data = base + g;
    let mut i = block_idx_x() * block_dim_x() + t;
    while i < words {
        let w = local.load_tagged(data + i, tag, src) as u32;
        local.store(data + i, 0u64, StoreOrder::Relaxed, Scope::Gpu);
        for k in 0..4u32 {
            let j = i * 4u32 + k;
            if j < len {
                out[j] = ((w >> (k * 8u32)) & 255u32) as u8;
            }
        }
        i += g * block_dim_x();
    }
    sync_threads();
    if t == 0u32 {
        // Every thread has read the header: cleared last, before the flag
        // (a release after the block's stores) frees the region.
        local.store(base + block_idx_x(), 0u64, StoreOrder::Relaxed, Scope::Gpu);
        ll.signal_flag(src, 0u32, epoch);
    }
}

/// The stage's first acknowledgements: block `b` of this rank tells every
/// peer, on channel 1, that its slot `b` for that peer is free, so every
/// chunk's send waits for an acknowledgement, the first one's too (what a
/// CUDA graph's replays need: no send is built not to wait). Launched once,
/// when the stage is made, with the grid of the chunked kernels and at
/// least `world` threads.
#[symm_kernel]
pub fn p2p_prime(stage: SymmBuf<u8>) {
    let t = thread_idx_x();
    if t < stage.world_size() && t != stage.rank() {
        stage.put_signal(t, 1u32);
    }
}
