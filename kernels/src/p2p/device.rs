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

use symm::dsl::*;
use symm::symm_kernel;

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

/// Sends `len` bytes of `src` to rank `dst`: waits first, where `wait_ack`
/// is 1, for `dst` to acknowledge this block's previous message (it has
/// copied it out of the region); then writes this block's header (`sig`,
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
    wait_ack: u32,
    sig: u32,
) {
    let t = thread_idx_x();
    if wait_ack != 0u32 {
        if t == 0u32 {
            stage.wait_signal(dst, 1u32);
        }
        sync_threads();
    }
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
