//! The MoE kernels: the routing's layout (one block), the rows packed for
//! their destinations, the received rows' expert-major layout (one block),
//! and the copies and weighted sums around the two all-to-alls.

use symm::dsl::*;
use symm::symm_kernel;

/// The routing's layout on the sending rank, in one block of at least
/// `experts` threads (at most 1024): thread `e` counts the (token, slot)
/// pairs of `idx` (`pairs` of them, `top_k` a token) routed to expert `e`,
/// then gives each its row of the send buffer, `pos[p]`: the rows are
/// sorted by expert (so by destination rank, then its local expert) and,
/// within an expert, by pair, a stable order that does not depend on any
/// timing. Pairs whose index is not an expert (`-1`, or out of range,
/// which [`moe_pack`] reports, and which makes every split `u32::MAX` so
/// the all-to-all fails on every rank, as `poison` 1 does) get no row
/// (`u32::MAX`). `splits[d]` gets
/// the elements (`hidden` a row) sent to rank `d`, `scale_splits[d]` its
/// rows' fp8 scales (`scales` a row; 0 outside fp8), and `counts[d ×
/// local + l]` the rows for rank `d`'s local expert `l`.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_layout(
    idx: &[i32],
    pairs: u32,
    experts: u32,
    local: u32,
    hidden: u32,
    scales: u32,
    poison: u32,
    pos: &mut [u32],
    splits: &mut [u64],
    scale_splits: &mut [u64],
    counts: &mut [u32],
) {
    let e = thread_idx_x();
    let chunk = shared_array::<i32, 1024>();
    let base = shared_array::<u32, 1024>();
    let bad = shared_array::<u32, 1>();
    let threads = block_dim_x();
    if e == 0u32 {
        bad[0] = poison;
    }
    sync_threads();
    // Pass 1: every expert's pairs, a chunk of `idx` at a time in shared
    // memory (each thread then reads every entry of the chunk).
    let mut mine = 0u32;
    let mut start = 0u32;
    while start < pairs {
        let mut i = e;
        while i < 1024u32 && start + i < pairs {
            let v = idx[start + i];
            chunk[i] = v;
            if v < -1i32 || v >= experts as i32 {
                bad[0] = 1u32;
            }
            i += threads;
        }
        sync_threads();
        let mut j = 0u32;
        while j < 1024u32 && start + j < pairs {
            if e < experts && chunk[j] == e as i32 {
                mine += 1u32;
            }
            j += 1u32;
        }
        sync_threads();
        start += 1024u32;
    }
    if e < experts {
        base[e] = mine;
    }
    sync_threads();
    if e == 0u32 {
        // Exclusive prefix over the experts, and each destination's rows.
        let mut run = 0u32;
        let mut x = 0u32;
        while x < experts {
            let c = base[x];
            base[x] = run;
            counts[x] = c;
            run += c;
            if (x + 1u32) % local == 0u32 {
                let d = x / local;
                let first = base[d * local];
                splits[d] = ((run - first) as u64) * (hidden as u64);
                scale_splits[d] = ((run - first) as u64) * (scales as u64);
                // A bad index (which `moe_pack` reports on this rank) makes
                // every split one that no input holds, so the all-to-all's
                // check fails the step on every rank, not on this one alone.
                if bad[0] == 1u32 {
                    splits[d] = 0xFFFF_FFFFu64;
                    scale_splits[d] = 0xFFFF_FFFFu64;
                }
            }
            x += 1u32;
        }
    }
    sync_threads();
    // Pass 2: each pair's row, in pair order within its expert.
    let mut next = 0u32;
    if e < experts {
        next = base[e];
    }
    let mut start = 0u32;
    while start < pairs {
        let mut i = e;
        while i < 1024u32 && start + i < pairs {
            let v = idx[start + i];
            chunk[i] = v;
            if v < 0i32 || v >= experts as i32 {
                pos[start + i] = 0xFFFF_FFFFu32;
            }
            i += threads;
        }
        sync_threads();
        let mut j = 0u32;
        while j < 1024u32 && start + j < pairs {
            if e < experts && chunk[j] == e as i32 {
                pos[start + j] = next;
                next += 1u32;
            }
            j += 1u32;
        }
        sync_threads();
        start += 1024u32;
    }
}

/// Copies token `block`'s row of `x` (`row_bytes` bytes: rows of any
/// element type, as bytes) to each row `pos[block × top_k + k]` of `send`
/// that [`moe_layout`] gave it (`moe_copy_row`). Thread 0 first checks
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
    moe_check_token(idx, t, top_k, experts);
    for k in 0..top_k {
        let row = pos[t * top_k + k];
        if row != 0xFFFF_FFFFu32 {
            moe_copy_row(x, t, send, row, row_bytes, vec);
        }
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
    if vec {
        let mut i = (thread_idx_x() as u64) * 16u64;
        let step = (block_dim_x() as u64) * 16u64;
        while i < row_bytes as u64 {
            to.store_vec::<16>(tb + i, from.load_vec::<16>(fa + i));
            i += step;
        }
    } else {
        let mut i = thread_idx_x() as u64;
        while i < row_bytes as u64 {
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
/// (`hidden / group` of them, f32) in `send_scales`. A warp a group for
/// the scales (a group's largest magnitude is the same whatever the order
/// it is found in).
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_pack_fp8<T: Scalar>(
    x: &[T],
    idx: &[i32],
    pos: &[u32],
    send: &mut [f8e4m3],
    send_scales: &mut [f32],
    top_k: u32,
    experts: u32,
    hidden: u32,
    group: u32,
) {
    let t = block_idx_x();
    let sc = shared_array::<f32, 1024>();
    let groups = hidden / group;
    let warps = block_dim_x() / 32u32;
    let lane = thread_idx_x() % 32u32;
    let mut g = thread_idx_x() / 32u32;
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
            let mut scale = 1.0f32;
            if m > 0.0f32 {
                // At least f32's smallest normal: a subnormal quotient
                // would put `x / scale` past e4m3's range.
                scale = max(m / 448.0f32, 1.17549435e-38f32);
            }
            sc[g] = scale;
        }
        g += warps;
    }
    sync_threads();
    // After the shuffles: a thread that fails the check stops, and a warp
    // shuffle after an exited lane is undefined.
    moe_check_token(idx, t, top_k, experts);
    for k in 0..top_k {
        let row = pos[t * top_k + k];
        if row != 0xFFFF_FFFFu32 {
            let mut i = thread_idx_x();
            while i < hidden {
                send[row * hidden + i] =
                    f8e4m3::from_f32(x[t * hidden + i].to_f32() / sc[i / group]);
                i += block_dim_x();
            }
            let mut j = thread_idx_x();
            while j < groups {
                send_scales[row * groups + j] = sc[j];
                j += block_dim_x();
            }
        }
    }
}

/// The received rows' expert-major layout, in one block: rank `s` sent
/// `recv[s × local + l]` rows for local expert `l`, which lie in the
/// received buffer in rank order, each rank's rows by expert. Writes `layout[l]`
/// (expert `l`'s rows), `layout[local + l]` (its first row in the
/// expert-major output: experts in order, each starting at a multiple of
/// `align`), `layout[2 × local]` (the rows received in all) and
/// `layout[2 × local + 1]` (the output's rows in use, padding included);
/// and `row_dst[r]`, received row `r`'s row in the output: ranks in
/// order within an expert, each rank's rows in the order it sent them.
/// Fails the call if the aligned layout passes `out_rows`.
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
    let l = thread_idx_x();
    let dst = shared_array::<u32, 1024>();
    let from = shared_array::<u32, 1024>();
    let over = shared_array::<u32, 1>();
    if l < local {
        let mut c = 0u32;
        for s in 0..world {
            c += recv[s * local + l];
        }
        layout[l] = c;
        dst[l] = c;
    }
    sync_threads();
    if l == 0u32 {
        let mut at = 0u32;
        let mut total = 0u32;
        for x in 0..local {
            let c = dst[x];
            layout[local + x] = at;
            dst[x] = at;
            total += c;
            at += (c + align - 1u32) / align * align;
        }
        layout[2u32 * local] = total;
        layout[2u32 * local + 1u32] = at;
        // Where each rank's rows start in the received buffer.
        let mut run = 0u32;
        for s in 0..world {
            from[s] = run;
            for x in 0..local {
                run += recv[s * local + x];
            }
        }
        over[0] = 0u32;
        if at > out_rows || total > row_dst.len() as u32 {
            over[0] = 1u32;
        }
    }
    sync_threads();
    // Past the plan (only after a failed all-to-all, whose own check
    // reports it): nothing placed, and the call fails here too.
    if over[0] == 1u32 {
        if l == 0u32 {
            // No layout past the plan for an expert kernel to read.
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
    // Thread l places expert l's rows: rank s's start after every row of
    // ranks before s and of s's experts before l, and land after the
    // expert's rows from ranks before s.
    if l < local {
        let mut to = dst[l];
        for s in 0..world {
            let mut src = from[s];
            for x in 0..l {
                src += recv[s * local + x];
            }
            let c = recv[s * local + l];
            for j in 0..c {
                row_dst[src + j] = to + j;
            }
            to += c;
        }
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

/// Token `block`'s combined row: the sum over its slots `k` in order of
/// `weights[p] × back[pos[p]]` (`p = block × top_k + k`, slots with no row
/// skipped) in f32, rounded once to `T`, so the bits depend on the
/// routing and the inputs alone, never on arrival order.
#[symm_kernel]
pub fn moe_sum<T: Scalar>(
    back: &[T],
    pos: &[u32],
    weights: &[f32],
    out: &mut [T],
    top_k: u32,
    hidden: u32,
) {
    let t = block_idx_x();
    let mut i = thread_idx_x();
    while i < hidden {
        let mut acc = 0.0f32;
        for k in 0..top_k {
            let p = t * top_k + k;
            let row = pos[p];
            if row != 0xFFFF_FFFFu32 {
                acc += weights[p] * back[row * hidden + i].to_f32();
            }
        }
        out[t * hidden + i] = T::from_f32(acc);
        i += block_dim_x();
    }
}
