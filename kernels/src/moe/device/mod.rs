//! The MoE kernels: the routing's layout (three kernels), the rows packed
//! for their destinations, the received rows' expert-major layout, and the
//! copies and weighted sums around the two all-to-alls; the pull form's
//! own kernels in [`pull`].

use symm::dsl::*;
use symm::symm_kernel;

use crate::fused::block_reduce;

mod pull;
pub use pull::*;

/// The routing's layout, first of three kernels ([`layout`](super::layout)
/// launches them): each block of whole warps (warps × `experts` at most
/// 8192; `layout` picks the size) ranks the (token, slot) pairs of `idx`
/// in its span of `per_block` pairs (block `b`'s from `b × per_block`; `pairs`
/// in all) within their experts: `pos[p]` gets a pair's rank among its
/// block's pairs of its expert, in pair order, and `scratch[b × experts +
/// e]` the block's pairs of expert `e`. A pair whose index is `-1` gets
/// `u32::MAX`; one out of range gets it too and sets the block's flag
/// `scratch[grid × experts + b]` (which makes every split `u32::MAX`, so
/// the all-to-all fails on every rank; [`moe_pack`] reports the token).
///
/// The block takes its pairs a thread each, a chunk at a time: a pair's
/// rank is its expert's pairs in earlier chunks, plus those of earlier
/// warps of this chunk (a count per warp and expert), plus those of
/// earlier lanes of its warp (the lanes that vote alike on every bit of
/// the expert): stable, and no atomics, whose order would vary.
///
/// Where `direct` (one block) it also writes each expert's pairs to
/// `counts`, and its ranks are the layout's (each pair's rank within its
/// expert), with no kernel after it.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_layout(
    idx: &[i32],
    pairs: u32,
    experts: u32,
    per_block: u32,
    pos: &mut [u32],
    scratch: &mut [u32],
    direct: bool,
    counts: &mut [u32],
) {
    let tid = thread_idx_x();
    let lane = tid % 32u32;
    let warp = tid / 32u32;
    let threads = block_dim_x();
    let warps = threads / 32u32;
    let blk = block_idx_x();
    // A chunk's pairs per warp and expert; each expert's pairs so far.
    let wc = shared_array::<u32, 8192>();
    let cnt = shared_array::<u32, 1024>();
    let bad = shared_array::<u32, 1>();
    kernel_assert!(
        threads % 32u32 == 0u32
            && experts <= 1024u32
            && warps * experts <= 8192u32
            && per_block % threads == 0u32,
        "moe_layout: blocks of whole warps, at most 1024 experts, warps × experts at most 8192, spans of whole blocks"
    );
    let mut i = tid;
    while i < warps * experts {
        wc[i] = 0u32;
        i += threads;
    }
    let mut e = tid;
    while e < experts {
        cnt[e] = 0u32;
        e += threads;
    }
    if tid == 0u32 {
        bad[0] = 0u32;
    }
    // Bits that tell every expert and the stand-in `experts` (no expert)
    // apart.
    let mut bits = 1u32;
    while (1u32 << bits) <= experts {
        bits += 1u32;
    }
    sync_threads();
    let first = blk * per_block;
    let mut end = pairs;
    if first + per_block < pairs {
        end = first + per_block;
    }
    // The next chunk's index, loaded while this chunk is ranked.
    let mut next = -1i32;
    if first + tid < end {
        next = idx[first + tid];
    }
    let mut start = first;
    while start < end {
        let p = start + tid;
        let x = next;
        if p + threads < end {
            next = idx[p + threads];
        }
        let mut v = experts;
        if p < end {
            if x >= 0i32 && x < experts as i32 {
                v = x as u32;
            } else if x != -1i32 {
                bad[0] = 1u32;
            }
        }
        // The lanes of this warp whose pair has the same expert.
        let mut same = 0xFFFF_FFFFu32;
        for b in 0..bits {
            let one = (v >> b) & 1u32;
            let vote = ballot(one == 1u32);
            if one == 1u32 {
                same &= vote;
            } else {
                same &= vote ^ 0xFFFF_FFFFu32;
            }
        }
        let r = moe_popc(same & ((1u32 << lane) - 1u32));
        let last = (same >> lane) == 1u32;
        if v < experts && last {
            wc[warp * experts + v] = r + 1u32;
        }
        sync_threads();
        let mut before = 0u32;
        let mut total = 0u32;
        if v < experts {
            for w in 0..warps {
                let c = wc[w * experts + v];
                if w < warp {
                    before += c;
                }
                total += c;
            }
            pos[p] = cnt[v] + before + r;
        } else if p < end {
            pos[p] = 0xFFFF_FFFFu32;
        }
        sync_threads();
        if v < experts {
            if last {
                wc[warp * experts + v] = 0u32;
            }
            if before + r + 1u32 == total {
                cnt[v] += total;
            }
        }
        sync_threads();
        start += threads;
    }
    let mut e = tid;
    while e < experts {
        scratch[blk * experts + e] = cnt[e];
        if direct {
            counts[e] = cnt[e];
        }
        e += threads;
    }
    if tid == 0u32 {
        scratch[grid_dim_x() * experts + blk] = bad[0];
    }
}

/// The routing's layout, second kernel, in one block of whole warps, a
/// thread an expert (at least `experts` threads, at most 1024): from
/// [`moe_layout`]'s `blocks` blocks' counts in `scratch`, each expert's
/// pairs (`counts[e]`) and first row in the send buffer (experts in
/// order), and in place of each block's count of an expert, the first row
/// of that block's pairs of it. `splits[d]` gets the elements (`hidden` a
/// row) sent to rank `d` (`local` experts a rank), `scale_splits[d]` its
/// rows' fp8 scales (`scales` a row; 0 outside fp8); a block's flag, or
/// `poison` 1, makes every split `u32::MAX` instead, which the
/// all-to-all's check fails on every rank. Where `within` is 1 each
/// block's first row of an expert counts from the expert's first row
/// (so [`moe_layout_place`] gives each pair its rank among its expert's
/// pairs, what the pull form's receivers add to their own first rows).
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_layout_scan(
    scratch: &mut [u32],
    blocks: u32,
    experts: u32,
    local: u32,
    hidden: u32,
    scales: u32,
    poison: u32,
    within: u32,
    splits: &mut [u64],
    scale_splits: &mut [u64],
    counts: &mut [u32],
) {
    let tid = thread_idx_x();
    let threads = block_dim_x();
    // Each expert's first row; every expert's rows; whether any block saw
    // a bad index.
    let base = shared_array::<u32, 1024>();
    let run = shared_array::<u32, 1>();
    let bad = shared_array::<u32, 1>();
    kernel_assert!(
        threads % 32u32 == 0u32 && experts <= threads && local > 0u32,
        "moe_layout_scan: a block of whole warps, a thread an expert"
    );
    if tid == 0u32 {
        bad[0] = poison;
    }
    sync_threads();
    let mut b = tid;
    while b < blocks {
        if scratch[blocks * experts + b] != 0u32 {
            bad[0] = 1u32;
        }
        b += threads;
    }
    // Expert `tid`'s pairs over the blocks, 8 blocks' loads in flight,
    // then its first row (a block scan).
    let e = tid;
    let mut c = 0u32;
    if e < experts {
        let mut b0 = 0u32;
        while b0 < blocks {
            let part = moe_counts8(scratch, b0, blocks, experts, e);
            for u in 0..8u32 {
                c += part[u];
            }
            b0 += 8u32;
        }
        counts[e] = c;
    }
    let end = moe_scan(c);
    if e < experts {
        base[e] = end - c;
    }
    if tid == threads - 1u32 {
        run[0] = end;
    }
    sync_threads();
    // Every expert's rows.
    let total = run[0];
    // Each block's first row of each expert: the expert's, plus its pairs
    // in earlier blocks.
    if e < experts {
        let mut at = base[e];
        if within == 1u32 {
            at = 0u32;
        }
        let mut b0 = 0u32;
        while b0 < blocks {
            let part = moe_counts8(scratch, b0, blocks, experts, e);
            for u in 0..8u32 {
                if b0 + u < blocks {
                    scratch[(b0 + u) * experts + e] = at;
                    at += part[u];
                }
            }
            b0 += 8u32;
        }
    }
    // Each destination's rows: its experts' first rows apart.
    let ranks = experts / local;
    let mut d = tid;
    while d < ranks {
        let first = base[d * local];
        let mut end = total;
        if d + 1u32 < ranks {
            end = base[(d + 1u32) * local];
        }
        splits[d] = ((end - first) as u64) * (hidden as u64);
        scale_splits[d] = ((end - first) as u64) * (scales as u64);
        // A bad index (which `moe_pack` reports on this rank) makes every
        // split one that no input holds, so the all-to-all's check fails
        // the step on every rank, not on this one alone.
        if bad[0] == 1u32 {
            splits[d] = 0xFFFF_FFFFu64;
            scale_splits[d] = 0xFFFF_FFFFu64;
        }
        d += threads;
    }
}

/// Blocks `b0..b0 + 8`'s counts of expert `e` in a layout's `scratch`
/// (0 past `blocks`), their 8 loads issued together.
#[symm_kernel(device)]
pub(crate) fn moe_counts8(
    scratch: SliceMut<u32>,
    b0: u32,
    blocks: u32,
    experts: u32,
    e: u32,
) -> [u32; 8] {
    let mut part: [u32; 8] = [0u32; 8];
    for u in 0..8u32 {
        if b0 + u < blocks {
            part[u] = scratch[(b0 + u) * experts + e];
        }
    }
    part
}

/// The routing's layout, third kernel: each pair of `idx` routed to an
/// expert (`pairs` of them, `per_block` a [`moe_layout`] block) gets its
/// row, its rank in its block plus its block's first row of its expert
/// ([`moe_layout_scan`]'s `scratch`); a grid-stride loop.
#[symm_kernel]
pub fn moe_layout_place(
    idx: &[i32],
    pairs: u32,
    experts: u32,
    per_block: u32,
    scratch: &[u32],
    pos: &mut [u32],
) {
    let mut p = block_idx_x() * block_dim_x() + thread_idx_x();
    while p < pairs {
        let x = idx[p];
        if x >= 0i32 && x < experts as i32 {
            pos[p] += scratch[(p / per_block) * experts + x as u32];
        }
        p += grid_dim_x() * block_dim_x();
    }
}

/// The bits set in `v`.
#[symm_kernel(device)]
pub(crate) fn moe_popc(v: u32) -> u32 {
    let a = v - ((v >> 1u32) & 0x5555_5555u32);
    let b = (a & 0x3333_3333u32) + ((a >> 2u32) & 0x3333_3333u32);
    let c = (b + (b >> 4u32)) & 0x0F0F_0F0Fu32;
    let d = c + (c >> 8u32);
    (d + (d >> 16u32)) & 0x3Fu32
}

/// The inclusive sum of `v` over the warp's lanes up to this one (every
/// lane calling it).
#[symm_kernel(device)]
pub(crate) fn warp_scan(v: u32) -> u32 {
    let lane = lane_id();
    let mut x = v;
    let mut d = 1u32;
    while d < 32u32 {
        let y = shfl_up(x, d);
        if lane >= d {
            x += y;
        }
        d *= 2u32;
    }
    x
}

/// The inclusive sum of `v` over the block's threads up to this one, in
/// whole warps (at most 1024 threads), every thread calling it: a scan in
/// each warp, then over the warps' totals.
#[symm_kernel(device)]
pub(crate) fn moe_scan(v: u32) -> u32 {
    let sums = shared_array::<u32, 32>();
    let lane = lane_id();
    let warp = thread_idx_x() / 32u32;
    let warps = block_dim_x() / 32u32;
    let mut x = warp_scan(v);
    if lane == 31u32 {
        sums[warp] = x;
    }
    sync_threads();
    if warp == 0u32 {
        let mut s = 0u32;
        if lane < warps {
            s = sums[lane];
        }
        s = warp_scan(s);
        if lane < warps {
            sums[lane] = s;
        }
    }
    sync_threads();
    if warp > 0u32 {
        x += sums[warp - 1u32];
    }
    // Every thread has read `sums` before a later call rewrites it.
    sync_threads();
    x
}

/// Copies token `block_idx_x`'s row of `x` (`row_bytes` bytes: rows of
/// any element type, as bytes) to row `pos[token × top_k + block_idx_y]`
/// of `send`, which the layout (`super::layout`) gave its slot (`moe_copy_row`): a grid
/// of tokens × `top_k` blocks. The slot-0 block's thread 0 first checks
/// the token's `top_k` indices: each is `-1` (no expert) or below
/// `experts`.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_pack(
    x: &[u8],
    idx: &[i32],
    pos: &[u32],
    send: &mut [u8],
    top_k: u32,
    experts: u32,
    row_bytes: u32,
    vec: bool,
) {
    let t = block_idx_x();
    let k = block_idx_y();
    if k == 0u32 {
        moe_check_token(idx, t, top_k, experts);
    }
    let row = pos[t * top_k + k];
    if row != 0xFFFF_FFFFu32 {
        moe_copy_row(x, t, send, row, row_bytes, vec);
    }
}

/// Row `a` of `from` to row `b` of `to`, rows of `row_bytes` bytes, by the
/// block's threads: 16-byte vectors where `vec` (the caller's promise that
/// `row_bytes` and both buffers' addresses are multiples of 16), else
/// byte by byte. Offsets in 64 bits: a plan's rows may pass 2^32 bytes.
#[symm_kernel(device)]
pub(crate) fn moe_copy_row(
    from: Slice<u8>,
    a: u32,
    to: SliceMut<u8>,
    b: u32,
    row_bytes: u32,
    vec: bool,
) {
    let fa = (a as u64) * (row_bytes as u64);
    let tb = (b as u64) * (row_bytes as u64);
    let n = row_bytes as u64;
    if vec {
        let mut i = (thread_idx_x() as u64) * 16u64;
        let step = (block_dim_x() as u64) * 16u64;
        while i < n {
            to.store_vec::<16>(tb + i, from.load_vec::<16>(fa + i));
            i += step;
        }
    } else {
        let mut i = thread_idx_x() as u64;
        while i < n {
            to[tb + i] = from[fa + i];
            i += block_dim_x() as u64;
        }
    }
}

/// Thread 0 checks token `t`'s `top_k` indices (each `-1`, no expert, or
/// below `experts`). No barrier follows: a thread that fails stops, and
/// the others need nothing from it.
#[symm_kernel(device)]
pub(crate) fn moe_check_token(idx: Slice<i32>, t: u32, top_k: u32, experts: u32) {
    if thread_idx_x() == 0u32 {
        let mut ok = true;
        for k in 0..top_k {
            let v = idx[t * top_k + k];
            if v < -1i32 || v >= experts as i32 {
                ok = false;
            }
        }
        kernel_assert!(
            ok,
            "moe dispatch: a top-k index is neither -1 nor below num_experts; the token is this report's block"
        );
    }
}

/// [`moe_pack`] in fp8 (e4m3): token `block`'s row in groups of `group`
/// elements (the row, or 128), each group's scale its largest magnitude
/// over 448 (e4m3's largest; 1 for a group of zeros), and each element
/// sent as `f8e4m3::from_f32(x / scale)`, with the row's scales
/// (`hidden / group` of them, f32) in `send_scales`. Where `once` (the
/// pull form's staging), the row goes to row `t` alone, whatever its
/// slots; else to each slot's row (`pos`).
///
/// Where `vec` (the caller's promise that `hidden` is a multiple of 16,
/// `group` 128 or `hidden`, that `x` starts 16-byte aligned and `send`
/// too, and that the block is whole warps), each thread takes 16 elements at a
/// time, loaded as `V`-element 16-byte vectors: their largest magnitude
/// goes to the group's by shuffles among the group's 8 threads (groups of
/// 128) or by a block reduction (a scale a row), and they are quantized
/// from registers and stored to each row as one vector. Else a warp a
/// group for the scales, then element by element. A group's largest
/// magnitude is the same whatever the order it is found in.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
// Over 100 lines on purpose: the two paths share the block's scales.
pub fn moe_pack_fp8<T: Scalar, const V: usize>(
    x: &[T],
    idx: &[i32],
    pos: &[u32],
    send: &mut [f8e4m3],
    send_scales: &mut [f32],
    top_k: u32,
    experts: u32,
    hidden: u32,
    group: u32,
    once: bool,
    vec: bool,
) {
    let t = block_idx_x();
    let tid = thread_idx_x();
    let threads = block_dim_x();
    let sc = shared_array::<f32, 1024>();
    let red = shared_array::<f32, 32>();
    let groups = hidden / group;
    // The rows this token's row goes to: one a slot, or row `t` alone.
    let mut slots = top_k;
    if once {
        slots = 1u32;
    }
    if vec {
        let step = threads * 16u32;
        // A scale a row: the block's largest magnitude first.
        let mut whole = 1.0f32;
        if group != 128u32 {
            let mut m = 0.0f32;
            let mut base = 0u32;
            while base < hidden {
                let c = base + tid * 16u32;
                if c < hidden {
                    let f = moe_load16::<T, V>(x, t * hidden + c);
                    for e in 0..16u32 {
                        m = max(m, f[e].abs());
                    }
                }
                base += step;
            }
            whole = moe_scale(block_reduce::<1>(m, red));
        }
        let mut base = 0u32;
        while base < hidden {
            let c = base + tid * 16u32;
            let mut f: [f32; 16] = [0.0f32; 16];
            let mut m = 0.0f32;
            if c < hidden {
                f = moe_load16::<T, V>(x, t * hidden + c);
                for e in 0..16u32 {
                    m = max(m, f[e].abs());
                }
            }
            // Groups of 128: 8 consecutive threads (every lane of the warp
            // takes part; a group is whole, as `hidden` is a multiple of
            // 128).
            for b in 0..3u32 {
                m = max(m, shfl_xor(m, 1u32 << b));
            }
            let mut scale = whole;
            if group == 128u32 {
                scale = moe_scale(m);
            }
            if c < hidden {
                let mut q: [f8e4m3; 16] = [f8e4m3::from_f32(0.0f32); 16];
                for e in 0..16u32 {
                    q[e] = f8e4m3::from_f32(f[e] / scale);
                }
                for k in 0..slots {
                    let row = moe_slot_row(pos, t, top_k, k, once);
                    if row != 0xFFFF_FFFFu32 {
                        send.store_vec::<16>(row * hidden + c, q);
                        if c % group == 0u32 {
                            send_scales[row * groups + c / group] = scale;
                        }
                    }
                }
            }
            base += step;
        }
    } else {
        let warps = threads / 32u32;
        let lane = tid % 32u32;
        let mut g = tid / 32u32;
        while g < groups {
            let mut m = 0.0f32;
            let mut i = lane;
            while i < group {
                m = max(m, x[t * hidden + g * group + i].to_f32().abs());
                i += 32u32;
            }
            for b in 0..5u32 {
                m = max(m, shfl_xor(m, 1u32 << b));
            }
            if lane == 0u32 {
                sc[g] = moe_scale(m);
            }
            g += warps;
        }
        sync_threads();
        for k in 0..slots {
            let row = moe_slot_row(pos, t, top_k, k, once);
            if row != 0xFFFF_FFFFu32 {
                let mut i = tid;
                while i < hidden {
                    send[row * hidden + i] =
                        f8e4m3::from_f32(x[t * hidden + i].to_f32() / sc[i / group]);
                    i += threads;
                }
                let mut j = tid;
                while j < groups {
                    send_scales[row * groups + j] = sc[j];
                    j += threads;
                }
            }
        }
    }
    // After the shuffles: a thread that fails the check stops, and a warp
    // shuffle after an exited lane is undefined.
    moe_check_token(idx, t, top_k, experts);
}

/// Elements `at..at + 16` of `x` in f32, loaded as `V`-element 16-byte
/// vectors (`at` a multiple of 16, `x` 16-byte aligned).
#[symm_kernel(device)]
pub(crate) fn moe_load16<T: Scalar, const V: usize>(x: Slice<T>, at: u32) -> [f32; 16] {
    let mut f: [f32; 16] = [0.0f32; 16];
    let v = V as u32;
    for h in 0..16u32 / v {
        let w: [T; V] = x.load_vec::<V>(at + h * v);
        for u in 0..V {
            f[h * v + u as u32] = w[u].to_f32();
        }
    }
    f
}

/// The fp8 scale of a group whose largest magnitude is `m`: `m / 448`
/// (e4m3's largest finite value), at least f32's smallest normal (a
/// subnormal quotient would put `x / scale` past e4m3's range), or 1 for
/// a group of zeros.
#[symm_kernel(device)]
pub(crate) fn moe_scale(m: f32) -> f32 {
    if m > 0.0f32 {
        max(m / 448.0f32, 1.17549435e-38f32)
    } else {
        1.0f32
    }
}

/// The send row of token `t`'s slot `k` (`pos`, `u32::MAX` for none), or
/// row `t` itself where `once`.
#[symm_kernel(device)]
pub(crate) fn moe_slot_row(pos: Slice<u32>, t: u32, top_k: u32, k: u32, once: bool) -> u32 {
    if once {
        t
    } else {
        pos[t * top_k + k]
    }
}

/// The received rows' expert-major layout, in blocks of whole warps, at
/// least `world × local` threads (at most 1024): rank `s` sent
/// `recv[s × local + l]` rows for local expert `l`, which lie in the
/// received buffer in rank order, each rank's rows by expert. Writes
/// `layout[l]` (expert `l`'s rows), `layout[local + l]` (its first row in
/// the expert-major output: experts in order, each starting at a multiple
/// of `align`), `layout[2 × local]` (the rows received in all) and
/// `layout[2 × local + 1]` (the output's rows in use, padding included);
/// and `row_dst[r]`, received row `r`'s row in the output: ranks in order
/// within an expert, each rank's rows in the order it sent them. Fails the
/// call if the aligned layout passes `out_rows`.
///
/// Each block finds each (rank, expert) segment's first received and
/// output row (two block scans of at most 1024 segments), then places its
/// share of the received rows, each by a binary search for its segment;
/// block 0 writes `layout`.
#[symm_kernel]
pub fn moe_rows(
    recv: &[u32],
    world: u32,
    local: u32,
    align: u32,
    out_rows: u32,
    layout: &mut [u32],
    row_dst: &mut [u32],
) {
    let tid = thread_idx_x();
    let n = world * local;
    // Per segment (rank s, expert l, at s × local + l): its rows, its first
    // received row, its first output row.
    let cnt = shared_array::<u32, 1024>();
    let src = shared_array::<u32, 1024>();
    let dst = shared_array::<u32, 1024>();
    // The rows received, and the output's rows in use.
    let tot = shared_array::<u32, 2>();
    kernel_assert!(
        block_dim_x() % 32u32 == 0u32 && n <= block_dim_x() && n <= 1024u32,
        "moe_rows: a block of whole warps, at least world × local threads, at most 1024"
    );
    let mut a = 0u32;
    if tid < n {
        a = recv[tid];
        cnt[tid] = a;
    }
    let end = moe_scan(a);
    if tid < n {
        src[tid] = end - a;
    }
    // Expert `tid`'s rows from every rank, aligned.
    let mut c = 0u32;
    if tid < local {
        for s in 0..world {
            c += cnt[s * local + tid];
        }
    }
    let padded = (c + align - 1u32) / align * align;
    let at = moe_scan(padded);
    let first = at - padded;
    if tid < local {
        let mut to = first;
        for s in 0..world {
            dst[s * local + tid] = to;
            to += cnt[s * local + tid];
        }
    }
    if tid == block_dim_x() - 1u32 {
        tot[0] = end;
        tot[1] = at;
    }
    sync_threads();
    let total = tot[0];
    let used = tot[1];
    // Past the plan (only after a failed all-to-all, whose own check
    // reports it): no layout for an expert kernel to read, nothing
    // placed, and the call fails here too.
    if used > out_rows || total > row_dst.len() as u32 {
        if tid == 0u32 && block_idx_x() == 0u32 {
            for x in 0..2u32 * local + 2u32 {
                layout[x] = 0u32;
            }
            kernel_assert!(
                false,
                "moe dispatch: the received rows, each expert's aligned, pass the planned capacity"
            );
        }
        return;
    }
    if block_idx_x() == 0u32 {
        if tid < local {
            layout[tid] = c;
            layout[local + tid] = first;
        }
        if tid == 0u32 {
            layout[2u32 * local] = total;
            layout[2u32 * local + 1u32] = used;
        }
    }
    let mut r = block_idx_x() * block_dim_x() + tid;
    while r < total {
        // The last segment that starts at or before `r` holds it (an empty
        // one starts where the next does).
        let mut lo = 0u32;
        let mut hi = n;
        while hi - lo > 1u32 {
            let mid = (lo + hi) / 2u32;
            if src[mid] <= r {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        row_dst[r] = dst[lo] + (r - src[lo]);
        r += grid_dim_x() * block_dim_x();
    }
}

/// Copies row `r` of `from` to row `row_dst[r]` of `to` (`forward`), or
/// row `row_dst[r]` of `from` to row `r` of `to`, for every received row
/// `r` below `layout[2 × local]`; rows of `row_bytes` bytes (any element
/// type, as bytes), a block a row at a time (`moe_copy_row`).
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_move(
    from: &[u8],
    to: &mut [u8],
    row_dst: &[u32],
    layout: &[u32],
    local: u32,
    row_bytes: u32,
    forward: bool,
    vec: bool,
) {
    // At most the plan's rows, whatever a failed call left in `layout`.
    let rows = min(layout[2u32 * local], row_dst.len() as u32);
    let mut r = block_idx_x();
    while r < rows {
        let mut a = r;
        let mut b = row_dst[r];
        if !forward {
            a = row_dst[r];
            b = r;
        }
        moe_copy_row(from, a, to, b, row_bytes, vec);
        r += grid_dim_x();
    }
}

/// Token `block_idx_x`'s combined row: for each rank `d` in order (experts
/// `d × local ..` are rank `d`'s), the sum of its slots `k` in slot order
/// of `weights[p] × back[pos[p]]` (`p = token × top_k + k`; slots with no
/// row, or naming no expert, skipped), from −0, then the ranks' sums added
/// from 0, in f32, rounded once to `T`: the bits depend on the routing,
/// the inputs and the experts' placement alone, never on arrival order,
/// and are the pull form's ([`moe_sum_ranks`]), whose experts' ranks add
/// their slots before sending. A block's threads take `V` elements (16
/// bytes) each of the row's span `block_idx_y` (a grid of tokens × spans
/// of `block_dim_x × V`): as 16-byte vectors where `vec` (the caller's
/// promise that `hidden` is a multiple of `V` and that `back` and `out`
/// start 16-byte aligned), else element by element.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_sum<T: Scalar, const V: usize>(
    back: &[T],
    pos: &[u32],
    idx: &[i32],
    weights: &[f32],
    out: &mut [T],
    top_k: u32,
    hidden: u32,
    local: u32,
    world: u32,
    vec: bool,
) {
    let t = block_idx_x();
    let span = block_dim_x() * V as u32;
    let mut i = block_idx_y() * span + thread_idx_x() * V as u32;
    while i < hidden {
        let mut acc: [f32; V] = [0.0f32; V];
        for d in 0..world {
            let mut part: [f32; V] = [-0.0f32; V];
            let mut any = false;
            for k in 0..top_k {
                let p = t * top_k + k;
                let row = pos[p];
                let e = idx[p];
                if row != 0xFFFF_FFFFu32 && e >= 0i32 && (e as u32) / local == d {
                    let vals = moe_load_sum::<T, V>(back, row * hidden + i, hidden - i, vec);
                    let w = weights[p];
                    for u in 0..V {
                        part[u] += w * vals[u].to_f32();
                    }
                    any = true;
                }
            }
            if any {
                for u in 0..V {
                    acc[u] += part[u];
                }
            }
        }
        moe_store_sum::<T, V>(out, t * hidden + i, hidden - i, acc, vec);
        i += grid_dim_y() * span;
    }
}

/// `src[at..at + V]` (only the first `left` where fewer remain, the rest
/// zero), one 16-byte vector where `vec`: a summed row's elements, the
/// load beside [`moe_store_sum`]'s store.
#[symm_kernel(device)]
pub(crate) fn moe_load_sum<T: Scalar, const V: usize>(
    src: Slice<T>,
    at: u32,
    left: u32,
    vec: bool,
) -> [T; V] {
    let mut x: [T; V] = [T::from_f32(0.0f32); V];
    if vec {
        x = src.load_vec::<V>(at);
    } else {
        for u in 0..V {
            if (u as u32) < left {
                x[u] = src[at + u as u32];
            }
        }
    }
    x
}

/// `acc` rounded to `T` at `out[at..at + V]` (only the first `left` where
/// fewer remain), one 16-byte vector where `vec`.
#[symm_kernel(device)]
pub(crate) fn moe_store_sum<T: Scalar, const V: usize>(
    out: SliceMut<T>,
    at: u32,
    left: u32,
    acc: [f32; V],
    vec: bool,
) {
    let mut o: [T; V] = [T::from_f32(0.0f32); V];
    for u in 0..V {
        o[u] = T::from_f32(acc[u]);
    }
    if vec {
        out.store_vec::<V>(at, o);
    } else {
        for u in 0..V {
            if (u as u32) < left {
                out[at + u as u32] = o[u];
            }
        }
    }
}
