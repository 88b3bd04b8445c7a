//! The pull form's kernels ([`MoeMode::Pull`](crate::moe::MoeMode)): each
//! rank stages its tokens once ([`moe_stage`]); each receiver reads every
//! token routed to its experts once from its sender's stage and writes it
//! to each of its rows ([`moe_pull`]); each expert rank sends each token
//! it holds slots of back once ([`moe_push`]): the expert's row itself
//! where it holds one slot, else the weighted sum of its slots in f32; the
//! token's rank adds the ranks' parts in rank order ([`moe_sum_ranks`]).
//!
//! The copy-engine form ([`MoeMode::CopyEngine`](crate::moe::MoeMode))
//! runs the same kernels with `ce` set, around copies the host enqueues:
//! [`moe_dests`] and [`moe_spread`] pack each rank's rows by destination,
//! [`moe_counts`] (a third barrier kernel) hands each rank its senders'
//! counts, the copy engines bring the rows, [`moe_pull`] lays them out
//! from local memory, and [`moe_push`] leaves each token's f32 part here
//! for its rank's copy engines to take back to [`moe_sum_ranks`].
//!
//! [`moe_pull`] and [`moe_push`] are barrier kernels on channel `ch` of
//! the plan's symmetric `counts` (with [`enter_sending`] and
//! [`exit_checked`], as the collectives' pull kernels): each publishes its
//! rank's word (its token count and whether its step failed) before the
//! entry barrier and reads every rank's after it, so a step that failed on
//! one rank fails on every rank at once, alike.

use symm::dsl::*;
use symm::symm_kernel;

use super::{moe_check_token, moe_copy_row, moe_load_sum, moe_popc, moe_scan, moe_store_sum};
use crate::shared::device::{enter_call, enter_sending, exit_checked};

/// A token's staging for the pull form, a block a token: checks its
/// `top_k` indices (as [`moe_pack`](super::moe_pack) does), copies them
/// to `idx_out` (symmetric: the receivers read them) and, where `rows`,
/// copies its row of `x` (`row_bytes` bytes) to row `t` of
/// `stage` (in fp8, [`moe_pack_fp8`](super::moe_pack_fp8) stages the
/// rows instead).
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_stage(
    x: &[u8],
    idx: &[i32],
    stage: &mut [u8],
    idx_out: &mut [i32],
    top_k: u32,
    experts: u32,
    row_bytes: u32,
    rows: bool,
    vec: bool,
) {
    let t = block_idx_x();
    moe_check_token(idx, t, top_k, experts);
    let mut k = thread_idx_x();
    while k < top_k {
        let p = t * top_k + k;
        idx_out[p] = idx[p];
        k += block_dim_x();
    }
    if rows {
        moe_copy_row(x, t, stage, t, row_bytes, vec);
    }
}

/// The copy-engine form's packing plan on the sending rank, a block a
/// destination rank `d` (blocks of whole warps): token `t` (of `tokens`,
/// `top_k` indices each in `idx`) that names any of `d`'s `local`
/// experts gets its place among such tokens, in token order, at
/// `dpos[t × world + d]` (symmetric: the receivers read it), else
/// `u32::MAX`; `sent[d]` gets how many there are (the rows `d` copies
/// from here). An index out of range names no rank ([`moe_stage`] reports
/// it).
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_dests(
    idx: &[i32],
    dpos: &mut [u32],
    sent: &mut [u32],
    tokens: u32,
    top_k: u32,
    local: u32,
    world: u32,
) {
    let d = block_idx_x();
    let tid = thread_idx_x();
    let threads = block_dim_x();
    let last = shared_array::<u32, 1>();
    kernel_assert!(
        threads % 32u32 == 0u32 && local > 0u32,
        "moe_dests: blocks of whole warps"
    );
    let mut run = 0u32;
    let mut base = 0u32;
    while base < tokens {
        let t = base + tid;
        let mut named = 0u32;
        if t < tokens {
            for k in 0..top_k {
                let v = idx[t * top_k + k];
                if v >= 0i32 && (v as u32) / local == d {
                    named = 1u32;
                }
            }
        }
        let incl = moe_scan(named);
        if t < tokens {
            let mut at = 0xFFFF_FFFFu32;
            if named != 0u32 {
                at = run + incl - 1u32;
            }
            dpos[t * world + d] = at;
        }
        if tid + 1u32 == threads {
            last[0] = incl;
        }
        sync_threads();
        run += last[0];
        // Every thread has read `last` before the next chunk rewrites it.
        sync_threads();
        base += threads;
    }
    if tid == 0u32 {
        sent[d] = run;
    }
}

/// The copy-engine form's exchange of counts, a barrier kernel on channel
/// `ch` of the plan's `counts` (one block of whole warps, at least the
/// identity barriers' threads): after the entry barrier, `got[d]` gets
/// the tokens rank `d` sends this rank (its `sent[rank]`, as
/// [`moe_dests`] wrote it) and `got[world + d]` those this rank sends
/// `d`; the exit barrier follows, so no rank rewrites its `sent` while a
/// peer reads it. The host reads `got` to size the copies.
#[symm_kernel]
pub fn moe_counts(counts: SymmBuf<u32>, sent: SymmBuf<u32>, got: &mut [u32], ch: u32, sig: u32) {
    enter_call();
    let call = enter_sending(counts, ch, sig);
    let world = counts.world_size();
    let rank = counts.rank();
    let t = thread_idx_x();
    if t < world {
        got[t] = sent.peer(t)[rank];
        got[world + t] = sent.local()[t];
    }
    exit_checked(counts, ch, call, sig);
    call_end(counts, ch, call);
}

/// The copy-engine form's packing, a block a token `t`: its row of `from`
/// (`row_bytes` bytes: rows of any element type, or scales) to row `d ×
/// max_tokens + dpos[t × world + d]` of `to` for each rank `d` it names
/// ([`moe_dests`]), so that each destination's rows lie together, in token
/// order; in 16-byte vectors where `vec`.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_spread(
    from: &[u8],
    dpos: &[u32],
    to: &mut [u8],
    world: u32,
    max_tokens: u32,
    row_bytes: u32,
    vec: bool,
) {
    let t = block_idx_x();
    for d in 0..world {
        let at = dpos[t * world + d];
        if at != 0xFFFF_FFFFu32 {
            moe_copy_row(from, t, to, d * max_tokens + at, row_bytes, vec);
        }
    }
}

/// The pull form's dispatch on the receiving rank, the same grid on every
/// rank (blocks of whole warps, at least `experts` threads, at most 1024;
/// at most 64 ranks and 32 slots a token).
///
/// Before the entry barrier each block publishes this rank's `tokens` and
/// its verdict (`poison`, or a bad index its layout's `lblocks` blocks
/// flagged in `scratch`) in `counts[experts..experts + 2]`. After it,
/// every block reads every rank's, and every rank's expert `counts`
/// ([`layout`](crate::moe::layout) with `within`, so that each sender's
/// `pos` ranks its pairs within their experts), and checks the whole step
/// alike on every rank: no rank failed, and none receives more than
/// `capacity` rows or, each expert's aligned to `align`, `out_rows`.
///
/// Expert `e`'s rows here are by sender, then in the sender's pair order:
/// pair `p` of sender `d` lands at the expert's first row plus the rows of
/// lower senders plus its `pos`. Each block takes tokens `(t, d)` in a
/// grid-stride loop, a batch of `threads / 32` at a time: a thread a
/// (token, slot) loads the slot's `idx` and `pos` from `d` (two round
/// trips for the batch), then, a
/// token at a time, the block reads the token's row from `d`'s `rows` once
/// (`row_len` elements of `R`, in `V`-element 16-byte vectors where `vec`)
/// and stores it to each of its rows here (and its `groups` fp8 scales
/// from `scales`, in fp8). Each token's slots' rows here go to
/// `item_rows[(d × max_tokens + t) × top_k + k]` (`u32::MAX` for a slot
/// held elsewhere) and each rank's tokens to `ntoks[d]`: [`moe_push`]'s
/// map. Block 0 writes `layout` as [`moe_rows`](super::moe_rows) does.
///
/// Where `ce` (the copy-engine form) the rows are this rank's own `rows`
/// (and `scales`): the copy engines brought sender `d`'s rows for this
/// rank there from row `d × max_tokens`, in `d`'s packing order, so that
/// token `t` of `d` is row `d × max_tokens + dpos[t × world + rank]`
/// (`dpos` read from `d`, as [`moe_dests`] wrote it).
#[symm_kernel(max_threads = 1024)]
#[allow(clippy::too_many_arguments)]
// Over 100 lines on purpose: the layout's scans and the pulls share the
// block's shared tables, which a device function would have to take apart.
pub fn moe_pull<R: Scalar, const V: usize>(
    rows: SymmBuf<R>,
    scales: SymmBuf<f32>,
    counts: SymmBuf<u32>,
    idx: SymmBuf<i32>,
    pos: SymmBuf<u32>,
    dpos: SymmBuf<u32>,
    out: &mut [R],
    out_scales: &mut [f32],
    layout: &mut [u32],
    item_rows: &mut [u32],
    ntoks: &mut [u32],
    scratch: &[u32],
    lblocks: u32,
    tokens: u32,
    max_tokens: u32,
    poison: u32,
    experts: u32,
    local: u32,
    top_k: u32,
    align: u32,
    out_rows: u32,
    capacity: u32,
    row_len: u32,
    groups: u32,
    vec: bool,
    ce: bool,
    ch: u32,
    sig: u32,
) {
    let tid = thread_idx_x();
    let threads = block_dim_x();
    // Per (sender d, local expert l), at d × local + l: its pairs' first
    // row within the expert. Per expert: the first row of the aligned
    // rows and of the packed rows (each rank's experts in order), the
    // totals at `experts`. Per token of a batch, 32 slots' rows here.
    let seg = shared_array::<u32, 1024>();
    let ex = shared_array::<u32, 1025>();
    let exr = shared_array::<u32, 1025>();
    let ntok = shared_array::<u32, 64>();
    let dsts = shared_array::<u32, 1024>();
    let held = shared_array::<u32, 32>();
    let drow = shared_array::<u32, 32>();
    let flags = shared_array::<u32, 3>();
    enter_call();
    let rank = counts.rank();
    let world = counts.world_size();
    kernel_assert!(
        threads % 32u32 == 0u32
            && experts <= threads
            && experts <= 1024u32
            && world <= 64u32
            && top_k <= 32u32
            && lblocks <= threads
            && local * world == experts
            && align > 0u32,
        "moe_pull: blocks of whole warps and a thread an expert and a layout block (at most 1024), at most 64 ranks and 32 slots"
    );
    if tid == 0u32 {
        flags[0] = 0u32;
        flags[1] = 0u32;
        flags[2] = poison;
    }
    sync_threads();
    if tid < lblocks && scratch[lblocks * experts + tid] != 0u32 {
        flags[2] = 1u32;
    }
    sync_threads();
    if tid == 0u32 {
        let mine = counts.local();
        mine.store(experts, tokens, StoreOrder::Relaxed, Scope::System);
        mine.store(experts + 1u32, flags[2], StoreOrder::Relaxed, Scope::System);
    }
    let call = enter_sending(counts, ch, sig);
    if tid < world {
        let peer = counts.peer(tid);
        ntok[tid] = min(
            peer.load(experts, LoadOrder::Relaxed, Scope::System),
            max_tokens,
        );
        if peer.load(experts + 1u32, LoadOrder::Relaxed, Scope::System) != 0u32 {
            flags[0] = 1u32;
        }
    }
    sync_threads();
    moe_no_layout(layout, ntoks, local, world, flags[0]);
    kernel_assert!(
        flags[0] == 0u32,
        "moe dispatch: a rank's step failed (a top-k index neither -1 nor below num_experts, reported on its rank, or arguments its rank refused), so no rank takes its rows"
    );
    // Expert `tid`'s pairs from every sender; where it is this rank's,
    // each sender's first row within it.
    let lo = rank * local;
    let e = tid;
    let mut tot = 0u32;
    if e < experts {
        for d in 0..world {
            if e >= lo && e < lo + local {
                seg[d * local + e - lo] = tot;
            }
            tot += counts.peer(d)[e];
        }
    }
    let padded = (tot + align - 1u32) / align * align;
    let incl = moe_scan(padded);
    let incl_raw = moe_scan(tot);
    if e < experts {
        ex[e] = incl - padded;
        exr[e] = incl_raw - tot;
        if e + 1u32 == experts {
            ex[experts] = incl;
            exr[experts] = incl_raw;
        }
    }
    sync_threads();
    if tid < world {
        let used = ex[(tid + 1u32) * local] - ex[tid * local];
        let raw = exr[(tid + 1u32) * local] - exr[tid * local];
        if used > out_rows || raw > capacity {
            flags[1] = 1u32;
        }
    }
    sync_threads();
    moe_no_layout(layout, ntoks, local, world, flags[1]);
    kernel_assert!(
        flags[1] == 0u32,
        "moe dispatch: the routing sends a rank more rows than the plan's receive capacity (or, each expert's aligned, than its received rows hold)"
    );
    let first = ex[lo];
    let first_raw = exr[lo];
    if block_idx_x() == 0u32 {
        if e >= lo && e < lo + local {
            layout[e - lo] = tot;
            layout[local + e - lo] = ex[e] - first;
        }
        if tid == 0u32 {
            layout[2u32 * local] = exr[lo + local] - first_raw;
            layout[2u32 * local + 1u32] = ex[lo + local] - first;
        }
        if tid < world {
            ntoks[tid] = ntok[tid];
        }
    }
    let items = world * max_tokens;
    let grid = grid_dim_x();
    // This block's items are `block + j × grid`; a batch is a warp's
    // worth of threads each (a thread a slot).
    let batch = threads / 32u32;
    let mut b0 = block_idx_x();
    while b0 < items {
        // A thread a (item, slot) of the batch: its row here, or none.
        let i = tid / 32u32;
        let k = tid % 32u32;
        let q = b0 + i * grid;
        let mut dst = 0xFFFF_FFFFu32;
        if k < top_k && q < items {
            let t = q / world;
            // Consecutive blocks take one token of each rank, peers first.
            let d = (q % world + rank + 1u32) % world;
            if t < ntok[d] {
                let p = t * top_k + k;
                let v = idx.peer(d)[p];
                if v >= 0i32 && (v as u32) >= lo && (v as u32) < lo + local {
                    let ve = v as u32;
                    let within = seg[d * local + ve - lo] + pos.peer(d)[p];
                    dst = ex[ve] - first + within;
                    if dst >= out_rows {
                        dst = 0xFFFF_FFFFu32;
                    }
                }
                item_rows[(d * max_tokens + t) * top_k + k] = dst;
                if ce && k == 0u32 {
                    drow[i] = dpos.peer(d)[t * world + rank];
                }
            }
        }
        dsts[tid] = dst;
        // Whether any of the token's slots is here (its warp's 32 threads
        // are its slots): a token with none is not read at all.
        let mask = ballot(dst != 0xFFFF_FFFFu32);
        if k == 0u32 {
            held[i] = mask;
        }
        sync_threads();
        // The batch's tokens, two at a time: both rows' loads issued
        // before their stores.
        let mut j = 0u32;
        while j < batch {
            let mut ts: [u32; 2] = [0u32; 2];
            let mut ds: [u32; 2] = [0u32; 2];
            let mut js: [u32; 2] = [0u32; 2];
            let mut n = 0u32;
            while j < batch && n < 2u32 {
                let q = b0 + j * grid;
                if q < items {
                    let t = q / world;
                    let d = (q % world + rank + 1u32) % world;
                    if t < ntok[d] && held[j] != 0u32 {
                        ts[n] = t;
                        ds[n] = d;
                        if ce {
                            // The copy engines brought `d`'s rows for
                            // this rank here, in `d`'s packing order.
                            kernel_assert!(
                                drow[j] < max_tokens,
                                "moe_pull: a token routed here has no packed row at its sender"
                            );
                            ts[n] = d * max_tokens + drow[j];
                            ds[n] = rank;
                        }
                        js[n] = j * 32u32;
                        n += 1u32;
                    }
                }
                j += 1u32;
            }
            if n > 0u32 {
                moe_fan_out::<R, V>(
                    rows, scales, out, out_scales, dsts, ts, ds, js, n, top_k, row_len, groups, vec,
                );
            }
        }
        // Every thread is done with `dsts` before the next batch's.
        sync_threads();
        b0 += batch * grid;
    }
    exit_checked(counts, ch, call, sig);
    call_end(counts, ch, call);
}

/// Where `failed` is not 0 (the same in every block), block 0 empties the
/// received layout (`layout`, `2 × local + 2` words) and the tokens a rank
/// (`ntoks`), so that the experts and the combine of a failed step find no
/// rows, not the last step's: [`moe_pull`]'s before its verdicts.
#[symm_kernel(device)]
pub(crate) fn moe_no_layout(
    layout: SliceMut<u32>,
    ntoks: SliceMut<u32>,
    local: u32,
    world: u32,
    failed: u32,
) {
    if failed != 0u32 && block_idx_x() == 0u32 {
        let mut x = thread_idx_x();
        while x < 2u32 * local + 2u32 {
            layout[x] = 0u32;
            x += block_dim_x();
        }
        if thread_idx_x() < world {
            ntoks[thread_idx_x()] = 0u32;
        }
    }
}

/// The block's copy of `n` (1 or 2) tokens' rows: token `u`'s `row_len`
/// elements of `R` from row `ts[u]` of rank `ds[u]`'s `rows` (and its
/// `groups` fp8 scales from its `scales`) to row `dsts[js[u] + k]` of
/// `out` (and `out_scales`) for each of the `top_k` slots `k` that has one
/// (not `u32::MAX`): each element read once, both tokens' loads issued
/// before their stores, in `V`-element 16-byte vectors where `vec` (the
/// caller's promise that `row_len` is a multiple of `V` and both buffers
/// start 16-byte aligned). (Four tokens in flight, in an array of
/// vectors, took longer: NOTES v45.)
#[symm_kernel(device)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn moe_fan_out<R: Scalar, const V: usize>(
    rows: SymmBuf<R>,
    scales: SymmBuf<f32>,
    out: SliceMut<R>,
    out_scales: SliceMut<f32>,
    dsts: Shared<u32, 1024>,
    ts: [u32; 2],
    ds: [u32; 2],
    js: [u32; 2],
    n: u32,
    top_k: u32,
    row_len: u32,
    groups: u32,
    vec: bool,
) {
    let tid = thread_idx_x();
    let threads = block_dim_x();
    let v = V as u32;
    let two = n > 1u32;
    let r0 = rows.peer(ds[0]);
    let r1 = rows.peer(ds[1]);
    // The first scales' loads go out with the rows'.
    let mut s0 = 0.0f32;
    let mut s1 = 0.0f32;
    if tid < groups {
        s0 = scales.peer(ds[0])[ts[0] * groups + tid];
        if two {
            s1 = scales.peer(ds[1])[ts[1] * groups + tid];
        }
    }
    if vec {
        let zero: [R; V] = [R::from_f32(0.0f32); V];
        let mut i = tid;
        while i < row_len / v {
            let a: [R; V] = r0.load_vec::<V>(ts[0] * row_len + i * v);
            let mut b: [R; V] = zero;
            if two {
                b = r1.load_vec::<V>(ts[1] * row_len + i * v);
            }
            for k in 0..top_k {
                let o = dsts[js[0] + k];
                if o != 0xFFFF_FFFFu32 {
                    out.store_vec::<V>(o * row_len + i * v, a);
                }
                if two {
                    let o = dsts[js[1] + k];
                    if o != 0xFFFF_FFFFu32 {
                        out.store_vec::<V>(o * row_len + i * v, b);
                    }
                }
            }
            i += threads;
        }
    } else {
        let mut i = tid;
        while i < row_len {
            let a = r0[ts[0] * row_len + i];
            let mut b = a;
            if two {
                b = r1[ts[1] * row_len + i];
            }
            for k in 0..top_k {
                let o = dsts[js[0] + k];
                if o != 0xFFFF_FFFFu32 {
                    out[o * row_len + i] = a;
                }
                if two {
                    let o = dsts[js[1] + k];
                    if o != 0xFFFF_FFFFu32 {
                        out[o * row_len + i] = b;
                    }
                }
            }
            i += threads;
        }
    }
    let mut g = tid;
    while g < groups {
        if g >= threads {
            s0 = scales.peer(ds[0])[ts[0] * groups + g];
            if two {
                s1 = scales.peer(ds[1])[ts[1] * groups + g];
            }
        }
        for k in 0..top_k {
            let o = dsts[js[0] + k];
            if o != 0xFFFF_FFFFu32 {
                out_scales[o * groups + g] = s0;
            }
            if two {
                let o = dsts[js[1] + k];
                if o != 0xFFFF_FFFFu32 {
                    out_scales[o * groups + g] = s1;
                }
            }
        }
        g += threads;
    }
}

/// The pull form's combine on the expert's rank, the same grid on every
/// rank (blocks of whole warps, at least the identity barriers' threads).
/// After the entry barrier (every rank's verdict in `counts[experts + 2]`,
/// `poison` here, checked alike on every rank), each token `t` of each
/// rank `d` that this rank holds slots of ([`moe_pull`]'s `item_rows` and
/// `ntoks`) goes back once: where it holds one slot, that slot's row of
/// the experts' outputs `y` into row `t × world + rank` of `d`'s `single`
/// (`T`); where more, the sum over them in slot order, from −0, of the
/// slot's weight (read from `d`'s `wts`) times its row, in f32, into the
/// same row of `d`'s `part`. Tokens are taken in batches of `threads /
/// 32`, a thread a (token, slot), as the pull does; `hidden` elements in
/// `V`-element 16-byte vectors where `vec` (the caller's promise that
/// `hidden` is a multiple of `V` and `y`, `single` and `part` start
/// 16-byte aligned). After the exit barrier every part sent to this rank
/// has landed, and [`moe_sum_ranks`] adds them.
///
/// Where `ce` (the copy-engine form) every token goes as its f32 sum (of
/// one slot too: the same product the token's rank would form) into this
/// rank's own `part`, at row `d × max_tokens + dpos[t × world + rank]`
/// (`dpos` read from `d`, as [`moe_dests`] wrote it), from which `d`'s
/// copy engines take its tokens' rows after the exit barrier.
#[symm_kernel(max_threads = 1024)]
#[allow(clippy::too_many_arguments)]
// Over 100 lines on purpose: the batch's tables are the block's shared
// memory, which a device function would have to take apart.
pub fn moe_push<T: Scalar, const V: usize>(
    y: &[T],
    single: SymmBuf<T>,
    part: SymmBuf<f32>,
    wts: SymmBuf<f32>,
    counts: SymmBuf<u32>,
    dpos: SymmBuf<u32>,
    item_rows: &[u32],
    ntoks: &[u32],
    poison: u32,
    experts: u32,
    max_tokens: u32,
    top_k: u32,
    hidden: u32,
    vec: bool,
    ce: bool,
    ch: u32,
    sig: u32,
) {
    let tid = thread_idx_x();
    let threads = block_dim_x();
    let flags = shared_array::<u32, 1>();
    // Per (token of the batch, slot): its row of `y` here and its weight;
    // per token, its slots here.
    let rows = shared_array::<u32, 1024>();
    let ws = shared_array::<f32, 1024>();
    let held = shared_array::<u32, 32>();
    let jrow = shared_array::<u32, 32>();
    enter_call();
    let world = counts.world_size();
    let me = counts.rank();
    kernel_assert!(
        threads % 32u32 == 0u32 && top_k <= 32u32 && world <= 64u32,
        "moe_push: blocks of whole warps (at most 1024), at most 32 slots and 64 ranks"
    );
    if tid == 0u32 {
        counts
            .local()
            .store(experts + 2u32, poison, StoreOrder::Relaxed, Scope::System);
        flags[0] = 0u32;
    }
    let call = enter_sending(counts, ch, sig);
    if tid < world
        && counts
            .peer(tid)
            .load(experts + 2u32, LoadOrder::Relaxed, Scope::System)
            != 0u32
    {
        flags[0] = 1u32;
    }
    sync_threads();
    kernel_assert!(
        flags[0] == 0u32,
        "moe combine: a rank's combine was refused (its arguments, or no dispatch before it), so no rank sums"
    );
    let items = world * max_tokens;
    let grid = grid_dim_x();
    let batch = threads / 32u32;
    let v = V as u32;
    let mut b0 = block_idx_x();
    while b0 < items {
        let i = tid / 32u32;
        let k = tid % 32u32;
        let q = b0 + i * grid;
        let mut r = 0xFFFF_FFFFu32;
        let mut w = 0.0f32;
        if k < top_k && q < items {
            let t = q / world;
            let d = (q % world + me + 1u32) % world;
            if t < ntoks[d] {
                r = item_rows[(d * max_tokens + t) * top_k + k];
                if r != 0xFFFF_FFFFu32 {
                    w = wts.peer(d)[t * top_k + k];
                }
                if ce && k == 0u32 {
                    jrow[i] = dpos.peer(d)[t * world + me];
                }
            }
        }
        rows[tid] = r;
        ws[tid] = w;
        let mask = ballot(r != 0xFFFF_FFFFu32);
        if k == 0u32 {
            held[i] = moe_popc(mask);
        }
        sync_threads();
        for j in 0..batch {
            let q = b0 + j * grid;
            let n = held[j];
            if q < items && n > 0u32 {
                let t = q / world;
                let d = (q % world + me + 1u32) % world;
                let mut at = (t * world + me) * hidden;
                let mut to = d;
                if ce {
                    // Here, in `d`'s packing order (which `d`'s copy
                    // engines read), always the f32 sum.
                    kernel_assert!(
                        jrow[j] < max_tokens,
                        "moe_push: a token held here has no packed row at its rank"
                    );
                    at = (d * max_tokens + jrow[j]) * hidden;
                    to = me;
                }
                if n == 1u32 && !ce {
                    // The one slot's row, as it is.
                    let mut one = 0u32;
                    for k in 0..top_k {
                        if rows[j * 32u32 + k] != 0xFFFF_FFFFu32 {
                            one = rows[j * 32u32 + k];
                        }
                    }
                    let to = single.peer(d);
                    if vec {
                        let mut e = tid * v;
                        while e < hidden {
                            to.store_vec::<V>(at + e, y.load_vec::<V>(one * hidden + e));
                            e += threads * v;
                        }
                    } else {
                        let mut e = tid;
                        while e < hidden {
                            to[at + e] = y[one * hidden + e];
                            e += threads;
                        }
                    }
                } else {
                    moe_push_part::<T, V>(
                        y,
                        part.peer(to),
                        at,
                        rows,
                        ws,
                        j * 32u32,
                        top_k,
                        hidden,
                        vec,
                    );
                }
            }
        }
        // Every thread is done with the batch's tables before the next.
        sync_threads();
        b0 += batch * grid;
    }
    exit_checked(counts, ch, call, sig);
    call_end(counts, ch, call);
}

/// The block's weighted sum of the `top_k` rows `rows[from + k]` of `y`
/// (those not `u32::MAX`), in slot order from −0, each times `ws[from +
/// k]`, in f32, stored at element `at` of `to` (`hidden` elements; in
/// 16-byte vectors of 4 where `vec`): [`moe_push`]'s part of a token.
#[symm_kernel(device)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn moe_push_part<T: Scalar, const V: usize>(
    y: Slice<T>,
    to: Remote<f32>,
    at: u32,
    rows: Shared<u32, 1024>,
    ws: Shared<f32, 1024>,
    from: u32,
    top_k: u32,
    hidden: u32,
    vec: bool,
) {
    let tid = thread_idx_x();
    let threads = block_dim_x();
    let v = V as u32;
    if vec {
        let mut e = tid * v;
        while e < hidden {
            let mut acc: [f32; V] = [-0.0f32; V];
            for k in 0..top_k {
                let r = rows[from + k];
                if r != 0xFFFF_FFFFu32 {
                    let x: [T; V] = y.load_vec::<V>(r * hidden + e);
                    let w = ws[from + k];
                    for u in 0..V {
                        acc[u] += w * x[u].to_f32();
                    }
                }
            }
            let quads = v / 4u32;
            for h in 0..quads {
                let mut o: [f32; 4] = [0.0f32; 4];
                for u in 0..4u32 {
                    o[u] = acc[h * 4u32 + u];
                }
                to.store_vec::<4>(at + e + h * 4u32, o);
            }
            e += threads * v;
        }
    } else {
        let mut e = tid;
        while e < hidden {
            let mut acc = -0.0f32;
            for k in 0..top_k {
                let r = rows[from + k];
                if r != 0xFFFF_FFFFu32 {
                    acc += ws[from + k] * y[r * hidden + e].to_f32();
                }
            }
            to[at + e] = acc;
            e += threads;
        }
    }
}

/// The pull form's combined rows on the token's rank, after [`moe_push`]:
/// token `block_idx_x`'s row is, for each rank `d` in order that holds
/// any of its slots (by `idx`, `local` experts a rank), that rank's part
/// (row `t × world + d` of `part`, where it holds several, or `weights[p]`
/// times the row of `single`, from −0, where one), added from 0 in f32
/// and rounded once to `T`: [`moe_sum`](super::moe_sum)'s bits. A grid of
/// tokens × spans, `V` elements a thread, in 16-byte vectors where `vec`
/// (the caller's promise that `hidden` is a multiple of `V` and `single`,
/// `part` and `out` start 16-byte aligned). Where `ce` (the copy-engine
/// form) every rank's part is an f32 sum, in `part` at row `d ×
/// max_tokens + dpos[t × world + d]`, where the copy engines brought it.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn moe_sum_ranks<T: Scalar, const V: usize>(
    single: &[T],
    part: &[f32],
    idx: &[i32],
    weights: &[f32],
    dpos: &[u32],
    out: &mut [T],
    top_k: u32,
    hidden: u32,
    local: u32,
    world: u32,
    max_tokens: u32,
    vec: bool,
    ce: bool,
) {
    let t = block_idx_x();
    let span = block_dim_x() * V as u32;
    let v = V as u32;
    let mut i = block_idx_y() * span + thread_idx_x() * v;
    while i < hidden {
        let mut acc: [f32; V] = [0.0f32; V];
        for d in 0..world {
            // This rank's slots on `d`: how many, and the last one's pair.
            let mut n = 0u32;
            let mut p1 = 0u32;
            for k in 0..top_k {
                let p = t * top_k + k;
                let e = idx[p];
                if e >= 0i32 && (e as u32) / local == d {
                    n += 1u32;
                    p1 = p;
                }
            }
            let mut at = (t * world + d) * hidden + i;
            if ce && n > 0u32 {
                let r = dpos[t * world + d];
                kernel_assert!(
                    r < max_tokens,
                    "moe_sum_ranks: a token's rank holds slots but it has no packed row"
                );
                at = (d * max_tokens + r) * hidden + i;
            }
            let mut got: [f32; V] = [-0.0f32; V];
            if n == 1u32 && !ce {
                let x = moe_load_sum::<T, V>(single, at, hidden - i, vec);
                let w = weights[p1];
                for u in 0..V {
                    got[u] += w * x[u].to_f32();
                }
            } else if n > 1u32 || (ce && n > 0u32) {
                if vec {
                    for h in 0..v / 4u32 {
                        let four: [f32; 4] = part.load_vec::<4>(at + h * 4u32);
                        for u in 0..4u32 {
                            got[h * 4u32 + u] = four[u];
                        }
                    }
                } else {
                    for u in 0..V {
                        if i + (u as u32) < hidden {
                            got[u] = part[at + u as u32];
                        }
                    }
                }
            }
            if n > 0u32 {
                for u in 0..V {
                    acc[u] += got[u];
                }
            }
        }
        moe_store_sum::<T, V>(out, t * hidden + i, hidden - i, acc, vec);
        i += grid_dim_y() * span;
    }
}
