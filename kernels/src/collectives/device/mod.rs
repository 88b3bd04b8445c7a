//! The kernels of the collective set, in the DSL, on two paths.
//!
//! **Pull** (`*_pull`): every rank passes an entry barrier (every input is
//! ready), loads what it needs from its peers' symmetric inputs, and passes
//! an exit barrier (no peer still reads its input) before it ends. The
//! counter, both barriers and the calls' digests live on channels `ch` and
//! `ch + 1` of the input's signal pad ([`symm::dsl::sync`]).
//!
//! **LL** ([`copy_ll`], [`reduce_ll`]): every rank pushes what each peer
//! needs into that peer's stage as LL packets (8 data bytes and a tag of
//! the epoch and the call's digest in one 16-byte store, [`ll_tag`]), so a
//! peer in another call fails the wait at once; where some rank sends no
//! data to some peer (the broadcast), every block also trades a header with
//! the same block of every peer ([`ll_headers`]). The counter lives on
//! channel `ch` of the stage's pad. No barrier, and no peer ever reads this
//! rank's input.
//!
//! Either way the caller may overwrite the input as soon as the call is
//! over, and calls may run back to back with no host synchronisation.
//! Copies move elements bit for bit (16-byte vectors where a span's
//! offsets allow, or 8-byte packets), so any element type works.
//! Reductions combine every rank's elements in rank order 0, 1, … (every
//! rank gets the same bits): the float types of 32 bits or less in f32,
//! rounding once to the element type, and the types that reduce natively
//! (`NATIVE`: integers and f64) in the element type itself.

use symm::dsl::*;
use symm::symm_kernel;

use crate::shared::device::{enter_call, enter_sending, exit_checked, spread_first};

mod ll;
pub use ll::*;

/// The elements of a span of `len` from element `off` of a buffer whose
/// first element lies `lag` elements past a 16-byte boundary
/// ([`vector_lag`]) that come before the span's first 16-byte vector: the
/// head a kernel moves element by element, before its vectors.
#[symm_kernel(device)]
pub(crate) fn vector_head<const V: usize>(off: u32, lag: u32, len: u32) -> u32 {
    let v = V as u32;
    let head = (v - (off + lag) % v) % v;
    if head < len {
        head
    } else {
        len
    }
}

/// Copies elements `src[src_off..src_off + len]` to `dst[dst_off..]`, this
/// thread's share of a grid-stride loop starting at `first` with step
/// `stride`: in 16-byte vectors where both sides reach a 16-byte boundary
/// together (after the source's head), element by element elsewhere, so
/// any element offset of either side works.
#[symm_kernel(device)]
pub(crate) fn copy_span<T: Scalar, const V: usize>(
    src: Remote<T>,
    src_off: u32,
    dst: SliceMut<T>,
    dst_off: u32,
    len: u32,
    first: u32,
    stride: u32,
) {
    let v = V as u32;
    let head = vector_head::<V>(src_off, vector_lag(src), len);
    let mut vecs: u32 = 0;
    if (dst_off + head + vector_lag(dst)) % v == 0u32 {
        vecs = (len - head) / v;
    }
    // Four vectors in flight a thread (their loads issued before any
    // store), so that the grid keeps enough of a peer's reads over NVLink
    // outstanding to fill its bandwidth-delay product; then the rest one
    // at a time.
    let mut i = first;
    while i + 3u32 * stride < vecs {
        let x0: [T; V] = src.load_vec::<V>(src_off + head + i * v);
        let x1: [T; V] = src.load_vec::<V>(src_off + head + (i + stride) * v);
        let x2: [T; V] = src.load_vec::<V>(src_off + head + (i + 2u32 * stride) * v);
        let x3: [T; V] = src.load_vec::<V>(src_off + head + (i + 3u32 * stride) * v);
        dst.store_vec::<V>(dst_off + head + i * v, x0);
        dst.store_vec::<V>(dst_off + head + (i + stride) * v, x1);
        dst.store_vec::<V>(dst_off + head + (i + 2u32 * stride) * v, x2);
        dst.store_vec::<V>(dst_off + head + (i + 3u32 * stride) * v, x3);
        i += 4u32 * stride;
    }
    while i < vecs {
        let x: [T; V] = src.load_vec::<V>(src_off + head + i * v);
        dst.store_vec::<V>(dst_off + head + i * v, x);
        i += stride;
    }
    let mut j = first;
    while j < head {
        dst[dst_off + j] = src[src_off + j];
        j += stride;
    }
    let mut k = head + vecs * v + first;
    while k < len {
        dst[dst_off + k] = src[src_off + k];
        k += stride;
    }
}

/// Copies `parts` equal parts of `len` elements, part k from peer `(rank +
/// first_peer + k) % world` at `src_base + p * src_step` of its `input`
/// (p that peer) to `out[p * len..]`, with every part in flight at once:
/// consecutive warps of the grid take consecutive parts, so the local part
/// (HBM) and every peer's (NVLink) move together instead of one after
/// another. Returns 0 without copying anything where some part cannot move
/// in whole 16-byte vectors from its first element, or a part gives a grid
/// thread fewer than four vectors; the caller then copies part by part
/// ([`copy_span`]).
#[symm_kernel(device)]
pub(crate) fn copy_parts<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    src_base: u32,
    src_step: u32,
    out: SliceMut<T>,
    len: u32,
    first_peer: u32,
    parts: u32,
) -> u32 {
    let v = V as u32;
    let rank = input.rank();
    let world = input.world_size();
    let mut whole = len % v == 0u32 && src_step % v == 0u32 && vector_lag(out) % v == 0u32;
    for k in 0..parts {
        let p = (rank + first_peer + k) % world;
        if (src_base + vector_lag(input.peer(p))) % v != 0u32 {
            whole = false;
        }
    }
    let vecs = len / v;
    let stride = grid_threads();
    // With one vector a thread a part, interleaving cost the 1 MiB
    // all-gather 0.55 µs on 2 H200s (its remote warps wait two round trips
    // to a peer where part by part a thread waits one local and one remote:
    // NOTES v46); from four (a whole step of four in flight) it gained.
    // Two and three were not measured.
    if !whole || vecs < 4u32 * stride {
        return 0u32;
    }
    // Whole warps' worth of vectors a part, interleaved part by part (a
    // warp reads 32 consecutive vectors of one peer); the rest after.
    let full = vecs / 32u32 * 32u32;
    let spread = full * parts;
    let first = grid_thread();
    let base = rank + first_peer;
    let mut g = first;
    while g + 3u32 * stride < spread {
        let p0 = (base + spread_part(g, parts)) % world;
        let p1 = (base + spread_part(g + stride, parts)) % world;
        let p2 = (base + spread_part(g + 2u32 * stride, parts)) % world;
        let p3 = (base + spread_part(g + 3u32 * stride, parts)) % world;
        let i0 = spread_vector(g, parts) * v;
        let i1 = spread_vector(g + stride, parts) * v;
        let i2 = spread_vector(g + 2u32 * stride, parts) * v;
        let i3 = spread_vector(g + 3u32 * stride, parts) * v;
        let x0: [T; V] = input.peer(p0).load_vec::<V>(src_base + p0 * src_step + i0);
        let x1: [T; V] = input.peer(p1).load_vec::<V>(src_base + p1 * src_step + i1);
        let x2: [T; V] = input.peer(p2).load_vec::<V>(src_base + p2 * src_step + i2);
        let x3: [T; V] = input.peer(p3).load_vec::<V>(src_base + p3 * src_step + i3);
        out.store_vec::<V>(p0 * len + i0, x0);
        out.store_vec::<V>(p1 * len + i1, x1);
        out.store_vec::<V>(p2 * len + i2, x2);
        out.store_vec::<V>(p3 * len + i3, x3);
        g += 4u32 * stride;
    }
    while g < spread {
        let p = (base + spread_part(g, parts)) % world;
        let i = spread_vector(g, parts) * v;
        let x: [T; V] = input.peer(p).load_vec::<V>(src_base + p * src_step + i);
        out.store_vec::<V>(p * len + i, x);
        g += stride;
    }
    let rest = vecs - full;
    let mut r = first;
    while r < rest * parts {
        let p = (base + r / rest) % world;
        let i = (full + r % rest) * v;
        let x: [T; V] = input.peer(p).load_vec::<V>(src_base + p * src_step + i);
        out.store_vec::<V>(p * len + i, x);
        r += stride;
    }
    1u32
}

/// Which part (0..`parts`) vector `g` of [`copy_parts`]'s interleaved span
/// belongs to: runs of 32 vectors (a warp's), part after part.
#[symm_kernel(device)]
fn spread_part(g: u32, parts: u32) -> u32 {
    g / 32u32 % parts
}

/// Which vector of its part vector `g` of [`copy_parts`]'s interleaved
/// span is ([`spread_part`]).
#[symm_kernel(device)]
fn spread_vector(g: u32, parts: u32) -> u32 {
    g / 32u32 / parts * 32u32 + g % 32u32
}

/// All-gather: rank p's `n` elements land at `out[p * n..]` on every rank.
/// They are read from `input[0..n]` of rank p, or from `input[p * n..]`
/// where `in_place` is 1 (then `out` is this rank's `input` itself, and its
/// own chunk is already in place).
#[symm_kernel]
pub fn all_gather_pull<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    in_place: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let call = enter_sending(input, ch, sig);
    pull_parts::<T, V>(input, out, n, in_place);
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// The copy-engine path's two handshakes, one block each, around the
/// copies the host enqueues between them (`copies.rs`): `exit` 0 is the
/// entry barrier (every rank's input is ready) with the call's identity
/// `sig` sent to every peer, as a pull kernel's entry; `exit` 1 the exit
/// barrier (no peer still reads this rank's input) that checks the
/// peers' identities and ends the call. The call's number is read in
/// both and stored only by the exit, so both halves are one call on
/// channel `ch` (`ch + 1` for the identities) of block 0's counter.
///
/// The entry counts the peers it met (slot `(ch + 1, 2, rank)` of this
/// rank's pad, which the identities, in blocks 0 and 1 of that channel,
/// never use). Where a wait gave up (recorded, naming its peer), the exit
/// raises this rank's flags without waiting: the call fails after one
/// timeout, not two, and its peers are not left waiting for this rank.
#[symm_kernel]
pub fn ce_sync<T: Scalar>(input: SymmBuf<T>, ch: u32, sig: u32, exit: u32) {
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    let met = signal_slot(ch + 1u32, 2u32, rank);
    let call = call_begin(input, ch);
    let t = thread_idx_x();
    if exit == 0u32 {
        enter_barrier_sending(input, ch, call, ch + 1u32, sig);
        // (A thread whose wait gave up has exited: those here met theirs.)
        if t < world && t != rank {
            input
                .pad(rank)
                .atomic_add(met, 1u32, RmwOrder::Relaxed, Scope::Gpu);
        }
    } else {
        let all = input.pad(rank).load(met, LoadOrder::Relaxed, Scope::Gpu) == world - 1u32;
        if all {
            exit_checked(input, ch, call, sig);
        } else if t < world && t != rank {
            input.signal_flag(t, ch, call.wrapping_mul(2u32).wrapping_add(1u32));
        }
        sync_threads();
        if t == 0u32 {
            input
                .pad(rank)
                .store(met, 0u32, StoreOrder::Relaxed, Scope::Gpu);
        }
        call_end(input, ch, call);
    }
}

/// Every rank p's `n` elements into `out[p * n..]`, from `input[0..n]` of
/// rank p, or from `input[p * n..]` where `in_place` is 1 (this rank's own
/// part then already in place): the body of [`all_gather_pull`] and of
/// [`gather_pull`]'s root.
#[symm_kernel(device)]
pub(crate) fn pull_parts<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    out: SliceMut<T>,
    n: u32,
    in_place: u32,
) {
    let rank = input.rank();
    let world = input.world_size();
    // In place, this rank's own part is already there: the parts start at
    // the next peer.
    let step = if in_place == 1u32 { n } else { 0u32 };
    if copy_parts::<T, V>(input, 0u32, step, out, n, in_place, world - in_place) == 1u32 {
        return;
    }
    for k in 0..world {
        // Every rank starts with a different peer, so the peers' links
        // share the load.
        let p = (rank + k) % world;
        if in_place == 0u32 || p != rank {
            let src_off = if in_place == 1u32 { p * n } else { 0u32 };
            copy_span::<T, V>(
                input.peer(p),
                src_off,
                out,
                p * n,
                n,
                grid_thread(),
                grid_threads(),
            );
        }
    }
}

/// Broadcast: rank `root`'s `input[0..n]` lands in `out[0..n]` on every
/// rank, except where `skip` is 1 (the root's `out` is its input).
#[symm_kernel]
pub fn broadcast_pull<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    root: u32,
    skip: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let call = enter_sending(input, ch, sig);
    if skip == 0u32 {
        copy_span::<T, V>(
            input.peer(root),
            0u32,
            out,
            0u32,
            n,
            grid_thread(),
            grid_threads(),
        );
    }
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// Broadcast by scatter and all-gather, for large messages on 3 or more
/// ranks, so that the root sends each element once instead of once a
/// peer. The non-roots split the message in `world - 1` parts of whole
/// `V`-element vectors (the last ends at the last whole vector); after the
/// entry barrier each reads its part of the root's `input` once and stores
/// it to its own `out` and to every other non-root's `scratch` (where
/// `direct`, the broadcast in place, straight into their `input`, which is
/// their `out`); the `n % V` elements past the last vector each non-root
/// reads itself. After the exit barrier every part has landed, and each
/// non-root copies the others' parts from its `scratch` to `out` (none
/// where `direct`). The root copies its input to `out` unless `skip`.
///
/// The host's promise: the inputs start on a 16-byte boundary, `scratch`
/// holds `n` elements (unless `direct`), and every rank runs the same
/// grid, so that what block `b` copies from `scratch` after the exit
/// barrier block `b` of its sender stored before it (both phases walk a
/// part's vectors with the same grid stride).
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn broadcast_sag<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    scratch: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    root: u32,
    skip: u32,
    direct: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let call = enter_sending(input, ch, sig);
    let rank = input.rank();
    let world = input.world_size();
    let first = grid_thread();
    let stride = grid_threads();
    let v = V as u32;
    let vecs = n / v;
    let parts = world - 1u32;
    let chunk = (vecs + parts - 1u32) / parts;
    // Whether `out` takes whole vectors (else element by element).
    let whole = vector_lag(out) == 0u32;
    let src = input.peer(root);
    if rank == root {
        if skip == 0u32 {
            copy_span::<T, V>(src, 0u32, out, 0u32, n, first, stride);
        }
    } else {
        let q = (rank + world - root - 1u32) % world;
        let lo = q * chunk;
        let mut lim = 0u32;
        if lo < vecs {
            lim = min(chunk, vecs - lo);
        }
        // Four of the root's vectors in flight a thread (their loads
        // issued before any store), as `copy_span` keeps, then the rest
        // one at a time.
        let mut j = first;
        while j + 3u32 * stride < lim {
            let i0 = (lo + j) * v;
            let i1 = (lo + j + stride) * v;
            let i2 = (lo + j + 2u32 * stride) * v;
            let i3 = (lo + j + 3u32 * stride) * v;
            let x0: [T; V] = src.load_vec::<V>(i0);
            let x1: [T; V] = src.load_vec::<V>(i1);
            let x2: [T; V] = src.load_vec::<V>(i2);
            let x3: [T; V] = src.load_vec::<V>(i3);
            sag_push::<T, V>(input, scratch, out, i0, x0, root, direct, whole);
            sag_push::<T, V>(input, scratch, out, i1, x1, root, direct, whole);
            sag_push::<T, V>(input, scratch, out, i2, x2, root, direct, whole);
            sag_push::<T, V>(input, scratch, out, i3, x3, root, direct, whole);
            j += 4u32 * stride;
        }
        while j < lim {
            let i = (lo + j) * v;
            sag_push::<T, V>(
                input,
                scratch,
                out,
                i,
                src.load_vec::<V>(i),
                root,
                direct,
                whole,
            );
            j += stride;
        }
        let e = vecs * v + first;
        if e < n {
            out[e] = src[e];
        }
    }
    exit_checked(input, ch, call, sig);
    if rank != root && direct == 0u32 {
        let mine = scratch.local();
        for q in 0..parts {
            let p = (root + 1u32 + q) % world;
            if p != rank {
                let lo = q * chunk;
                let mut j = first;
                while j < chunk && lo + j < vecs {
                    // (The same walk as the first phase's: block `b` reads
                    // what block `b` of the part's sender stored.)
                    let i = (lo + j) * v;
                    sag_store::<T, V>(out, i, mine.load_vec::<V>(i), whole);
                    j += stride;
                }
            }
        }
    }
    call_end(input, ch, call);
}

/// A non-root's vector `x`, elements `i..i + V` of the root's message, to
/// every other non-root's `scratch` (where `direct`, their `input`) and to
/// its own `out` ([`broadcast_sag`]'s first phase).
#[symm_kernel(device)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sag_push<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    scratch: SymmBuf<T>,
    out: SliceMut<T>,
    i: u32,
    x: [T; V],
    root: u32,
    direct: u32,
    whole: bool,
) {
    let rank = input.rank();
    let world = input.world_size();
    for k in 1..world {
        let p = (rank + k) % world;
        if p != root {
            if direct == 1u32 {
                input.peer(p).store_vec::<V>(i, x);
            } else {
                scratch.peer(p).store_vec::<V>(i, x);
            }
        }
    }
    sag_store::<T, V>(out, i, x, whole);
}

/// `x` to elements `i..i + V` of `out`: one 16-byte store where `whole`
/// (`out` starts on a 16-byte boundary), else element by element.
#[symm_kernel(device)]
pub(crate) fn sag_store<T: Scalar, const V: usize>(
    out: SliceMut<T>,
    i: u32,
    x: [T; V],
    whole: bool,
) {
    if whole {
        out.store_vec::<V>(i, x);
    } else {
        for k in 0..V {
            out[i + k as u32] = x[k];
        }
    }
}

/// Gather: rank p's `input[0..n]` lands at `out[p * n..]` of rank `root`
/// only; the other ranks pass the barriers and copy nothing (their `out`
/// may be empty).
#[symm_kernel]
pub fn gather_pull<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    root: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let call = enter_sending(input, ch, sig);
    if input.rank() == root {
        pull_parts::<T, V>(input, out, n, 0u32);
    }
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// Scatter: rank r's `out[0..n]` gets elements `r * n..(r + 1) * n` of
/// rank `root`'s `input`.
#[symm_kernel]
pub fn scatter_pull<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    root: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let call = enter_sending(input, ch, sig);
    copy_span::<T, V>(
        input.peer(root),
        rank * n,
        out,
        0u32,
        n,
        grid_thread(),
        grid_threads(),
    );
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// All-to-all with equal splits: rank p's `input[r * m..(r + 1) * m]`
/// lands at `out[p * m..]` of rank r.
#[symm_kernel]
pub fn all_to_all_pull<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    out: &mut [T],
    m: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    let call = enter_sending(input, ch, sig);
    if copy_parts::<T, V>(input, rank * m, 0u32, out, m, 0u32, world) == 0u32 {
        for k in 0..world {
            let p = (rank + k) % world;
            copy_span::<T, V>(
                input.peer(p),
                rank * m,
                out,
                p * m,
                m,
                grid_thread(),
                grid_threads(),
            );
        }
    }
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// Entries per block in a rank's `meta` for [`all_to_all_v_wide`]: its
/// send splits (`0..72`), the splits it expects back or all ones
/// (`72..144`), its output's capacity (`144`) and its input's length
/// (`145`), rounded up to 160.
#[symm_kernel(device)]
pub(crate) fn wide_meta_entries() -> u32 {
    160u32
}

/// [`all_to_all_v_pull`] for a domain of more than 8 ranks (up to 72),
/// whose world² splits do not fit shared memory: every rank publishes its
/// row (sends and expected receives, from `splits`: device splits where
/// `dev` is 1, and where it is 2 the host's, each the split sent in its
/// low 32 bits and the split expected back in its high 32), then
/// thread p of each block checks rank p's row and column against every
/// rank's (so every rank finds the same faults) and finds what p sends
/// this rank and from where; then every rank's parts are copied in rank
/// order. Launch with at least `world_size` threads per block.
// Over 100 lines on purpose, as all_to_all_v_pull: one kernel whose
// phases share the call's counters.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn all_to_all_v_wide<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    meta: SymmBuf<u64>,
    out: &mut [T],
    out_cap: u32,
    splits: &[u64],
    dev: u32,
    report: &mut [u64],
    ch: u32,
    sig: u32,
) {
    // Per rank p: what p sends this rank, where in p's input, and p's
    // faults (1: splits disagree, 2: past an input, 4: past an output).
    let sizes = shared_array::<u64, 128>();
    let offs = shared_array::<u64, 128>();
    let faults = shared_array::<u32, 128>();
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    kernel_assert!(
        world <= 72u32 && block_dim_x() >= world,
        "all_to_all_v_wide: at most 72 ranks (MAX_DOMAIN_SIZE), and a thread per rank in every block"
    );
    let m = wide_meta_entries();
    let base = block_idx_x() * m;
    let mine = meta.local();
    let t = thread_idx_x();
    if t < world {
        let mut send: u64 = splits[t];
        let mut expect: u64 = 0xFFFF_FFFFu64;
        if dev != 1u32 {
            send = splits[t] & 0xFFFF_FFFFu64;
            expect = splits[t] >> 32u32;
        }
        mine.store(base + t, send, StoreOrder::Relaxed, Scope::System);
        mine.store(base + 72u32 + t, expect, StoreOrder::Relaxed, Scope::System);
    }
    if t == 0u32 {
        mine.store(
            base + 144u32,
            out_cap as u64,
            StoreOrder::Relaxed,
            Scope::System,
        );
        let mut in_len: u64 = input.len() as u64;
        if in_len > 0xFFFF_FFFFu64 {
            in_len = 0xFFFF_FFFFu64;
        }
        mine.store(base + 145u32, in_len, StoreOrder::Relaxed, Scope::System);
    }
    // As in all_to_all_v_pull: the barrier's release publishes the rows,
    // and every read below stays within this rank's own lengths whatever
    // a peer in another call published.
    let call = enter_sending(input, ch, sig);
    let own_len: u64 = input.len() as u64;
    if t < world {
        let p = t;
        let row = meta.peer(p);
        let mut sent: u64 = 0;
        let mut received: u64 = 0;
        let mut off: u64 = 0;
        let mut bad: u32 = 0;
        let mut to_me: u64 = 0;
        for q in 0..world {
            let mut s = row.load(base + q, LoadOrder::Relaxed, Scope::System);
            if s >= 0xFFFF_FFFFu64 {
                // A fault; clamped, so that no sum wraps (72 × 2^32 fits).
                bad |= 2u32;
                s = 0xFFFF_FFFFu64;
            }
            sent += s;
            if q < rank {
                off += s;
            }
            if q == rank {
                to_me = s;
            }
            // q to p, and what p expects from q.
            let r = meta
                .peer(q)
                .load(base + p, LoadOrder::Relaxed, Scope::System);
            let want = row.load(base + 72u32 + q, LoadOrder::Relaxed, Scope::System);
            if want != 0xFFFF_FFFFu64 && want != r {
                bad |= 1u32;
            }
            // (Past 2^32 - 1 it is q's own fault, which q's thread finds.)
            if r < 0xFFFF_FFFFu64 {
                received += r;
            } else {
                received += 0xFFFF_FFFFu64;
            }
        }
        let len_p = row.load(base + 145u32, LoadOrder::Relaxed, Scope::System);
        let cap_p = row.load(base + 144u32, LoadOrder::Relaxed, Scope::System);
        if sent > len_p || sent > own_len {
            bad |= 2u32;
        }
        if received > cap_p {
            bad |= 4u32;
        }
        faults[p] = bad;
        sizes[p] = to_me;
        offs[p] = off;
    }
    sync_threads();
    let mut agree = true;
    let mut fits_input = true;
    let mut fits_output = true;
    for p in 0..world {
        let f = faults[p];
        if (f & 1u32) != 0u32 {
            agree = false;
        }
        if (f & 2u32) != 0u32 {
            fits_input = false;
        }
        if (f & 4u32) != 0u32 {
            fits_output = false;
        }
    }
    kernel_assert!(
        agree,
        "all_to_all: the ranks made different calls: their split sizes disagree (a rank sends a size that its receiver does not expect); every rank must make the same collective calls in the same order"
    );
    kernel_assert!(
        fits_input,
        "all_to_all: a rank sends more than its input holds (its send splits total past its input's length)"
    );
    kernel_assert!(
        fits_output,
        "all_to_all: a rank's output is too small for what it receives (the splits sent to it total past its output's length)"
    );
    let mut at: u32 = 0;
    for p in 0..world {
        let len = sizes[p] as u32;
        copy_span::<T, V>(
            input.peer(p),
            offs[p] as u32,
            out,
            at,
            len,
            grid_thread(),
            grid_threads(),
        );
        if dev == 1u32 && grid_thread() == 0u32 {
            report[p] = len as u64;
            report[world + p] = at as u64;
        }
        at += len;
    }
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// Entries per block in a rank's all-to-all `meta` buffer: the rank's send
/// splits (`0..8`), the splits it expects to receive or all ones where the
/// kernel reports them instead (`8..16`), its output's capacity (`16`) and
/// its input's length (`17`).
/// Each block publishes and reads its own copy, because each block's
/// barriers order only that block: a block's next call may rewrite its
/// copy only after the same block of every rank passed this call's exit.
#[symm_kernel(device)]
pub(crate) fn meta_entries() -> u32 {
    32u32
}

/// All-to-all with split sizes: rank p sends `input[off..off + s]` to rank
/// r, where `s` is p's split r and `off` the sum of p's splits before r; it
/// lands after everything from lower ranks in r's `out`. Each rank's splits
/// come from `splits[0..world]` (device memory, where `dev` is 1) or from
/// the packed parameters `s0..s7` (split in the low 32 bits, the split
/// expected back in the high 32); every rank publishes them in its `meta`
/// before the entry barrier, so each reads every rank's (the same data on
/// every rank) and checks the whole exchange: a split that another rank
/// does not expect, or a rank whose output is too small, fails the kernel
/// on every rank alike. `report[0..world]` gets the sizes received and
/// `report[world..2 × world]` their offsets in `out`.
// Over 100 lines on purpose: one kernel whose phases share the call's
// counters and registers; split into device functions, its generated
// CUDA C (and the PTX the measurements cover) would change.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn all_to_all_v_pull<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    meta: SymmBuf<u64>,
    out: &mut [T],
    out_cap: u32,
    splits: &[u64],
    dev: u32,
    report: &mut [u64],
    s0: u64,
    s1: u64,
    s2: u64,
    s3: u64,
    s4: u64,
    s5: u64,
    s6: u64,
    s7: u64,
    ch: u32,
    sig: u32,
) {
    let sends = shared_array::<u64, 64>();
    let expects = shared_array::<u64, 64>();
    let caps = shared_array::<u64, 8>();
    let lens = shared_array::<u64, 8>();
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    // Up to world² threads load the splits into shared memory.
    kernel_assert!(
        block_dim_x() >= 64u32,
        "all_to_all_v_pull: launch at least 64 threads per block"
    );
    let m = meta_entries();
    let base = block_idx_x() * m;
    let mine = meta.local();
    if thread_idx_x() == 0u32 {
        let packed: [u64; 8] = [s0, s1, s2, s3, s4, s5, s6, s7];
        for q in 0..8u32 {
            let mut send: u64 = 0;
            let mut expect: u64 = 0xFFFF_FFFFu64;
            if q < world {
                if dev == 1u32 {
                    send = splits[q];
                } else {
                    send = packed[q] & 0xFFFF_FFFFu64;
                    expect = packed[q] >> 32u32;
                }
            }
            mine.store(base + q, send, StoreOrder::Relaxed, Scope::System);
            mine.store(base + 8u32 + q, expect, StoreOrder::Relaxed, Scope::System);
        }
        mine.store(
            base + 16u32,
            out_cap as u64,
            StoreOrder::Relaxed,
            Scope::System,
        );
        // At most 2^32 - 1: offsets are u32, and a longer input cannot
        // send more than that anyway (the host keeps splits below it).
        let mut in_len: u64 = input.len() as u64;
        if in_len > 0xFFFF_FFFFu64 {
            in_len = 0xFFFF_FFFFu64;
        }
        mine.store(base + 17u32, in_len, StoreOrder::Relaxed, Scope::System);
    }
    // The barrier's release (after a block-wide sync) publishes the meta
    // that thread 0 wrote. A peer in another call (whose digest check
    // comes at the exit barrier) publishes none, so this call may read an
    // earlier call's meta: the checks below keep every read within this
    // rank's own input length on each peer and every write within its
    // output, whatever the splits say.
    let call = enter_sending(input, ch, sig);
    // Every rank's send splits (entry p × 8 + q: p to q), read once per
    // block from each rank's own meta (so the same values on every rank)
    // into shared memory, with each rank's capacity and input length.
    let t = thread_idx_x();
    if t < world * world {
        let p = t / world;
        let q = t % world;
        sends[p * 8u32 + q] = meta
            .peer(p)
            .load(base + q, LoadOrder::Relaxed, Scope::System);
        expects[p * 8u32 + q] =
            meta.peer(p)
                .load(base + 8u32 + q, LoadOrder::Relaxed, Scope::System);
    }
    if t < world {
        caps[t] = meta
            .peer(t)
            .load(base + 16u32, LoadOrder::Relaxed, Scope::System);
        lens[t] = meta
            .peer(t)
            .load(base + 17u32, LoadOrder::Relaxed, Scope::System);
    }
    sync_threads();
    // The whole exchange, checked identically on every rank: what each
    // rank sends fits its input, what each receives fits its output, and
    // each receives what it expects (`expects[q × 8 + p]`: q from p).
    // Each rank's input has this rank's length (symmetric memory), so a
    // published length past it (a peer in another call, on another tensor
    // of the same pool segment) bounds nothing: reads stay within this
    // length on every peer.
    let own_len: u64 = input.len() as u64;
    // Each fault its own flag, and its own assertion below, so the error
    // says which it is (the first that holds).
    let mut agree = true;
    let mut fits_input = true;
    let mut fits_output = true;
    for p in 0..world {
        let mut sent: u64 = 0;
        let mut received: u64 = 0;
        for q in 0..world {
            let s = sends[p * 8u32 + q];
            if s >= 0xFFFF_FFFFu64 {
                fits_input = false;
            }
            sent += s;
            received += sends[q * 8u32 + p];
            let want = expects[p * 8u32 + q];
            if want != 0xFFFF_FFFFu64 && want != sends[q * 8u32 + p] {
                agree = false;
            }
        }
        if sent > lens[p] || sent > own_len {
            fits_input = false;
        }
        if received > caps[p] {
            fits_output = false;
        }
    }
    kernel_assert!(
        agree,
        "all_to_all: the ranks made different calls: their split sizes disagree (a rank sends a size that its receiver does not expect); every rank must make the same collective calls in the same order"
    );
    kernel_assert!(
        fits_input,
        "all_to_all: a rank sends more than its input holds (its send splits total past its input's length)"
    );
    kernel_assert!(
        fits_output,
        "all_to_all: a rank's output is too small for what it receives (the splits sent to it total past its output's length)"
    );
    let mut at: u32 = 0;
    for p in 0..world {
        let mut off: u32 = 0;
        for q in 0..rank {
            off += sends[p * 8u32 + q] as u32;
        }
        let len = sends[p * 8u32 + rank] as u32;
        copy_span::<T, V>(
            input.peer(p),
            off,
            out,
            at,
            len,
            grid_thread(),
            grid_threads(),
        );
        if dev == 1u32 && grid_thread() == 0u32 {
            report[p] = len as u64;
            report[world + p] = at as u64;
        }
        at += len;
    }
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// `a` combined with `b` by reduce op `OP` (0 sum and 1 avg, which adds
/// and divides at the end, 2 min, 3 max, 4 product), in f32. Min and max
/// follow IEEE 754-2019 `minimum`/`maximum`: a NaN operand gives that NaN
/// (the first in rank order; `finish`'s rounding to a narrower type may
/// change its payload), and −0 is below +0.
#[symm_kernel(device)]
pub(crate) fn combine<const OP: usize>(a: f32, b: f32) -> f32 {
    combine_native::<f32, OP>(a, b)
}

/// `a` combined with `b` by reduce op `OP` in `T` itself (the native
/// types, integers and f64, and f32 for [`combine`]): sums and products
/// wrap for integers (as NCCL's do) and round once for floats; min and max
/// as [`combine`] says. An integer's sum and product are written as `fma`,
/// the one generic operation that wraps in every build (a debug emulator
/// reports a `+` that overflows, as Rust does).
#[symm_kernel(device)]
pub(crate) fn combine_native<T: Num, const OP: usize>(a: T, b: T) -> T {
    // Constant for each instantiation: 0.5 truncates to 0 only in an integer.
    let int = T::from_f32(0.5f32) == T::zero();
    let mut r = if int { a.fma(T::one(), b) } else { a + b };
    if OP == 4 {
        r = if int { a.fma(b, T::zero()) } else { a * b };
    } else if OP == 2 || OP == 3 {
        if a != a {
            r = a;
        } else if b != b {
            r = b;
        } else if a == b {
            // Equal: only a float's zeros differ in bits (their signs); OR
            // keeps a minus sign for min, AND drops it for max.
            let x = a.to_bits64();
            let y = b.to_bits64();
            r = T::from_bits64(if OP == 2 { x | y } else { x & y });
        } else if OP == 2 {
            r = if b < a { b } else { a };
        } else {
            r = if b > a { b } else { a };
        }
    }
    r
}

/// The native reduction `acc` of `world` ranks' elements: divided by
/// `world` for avg (f64 only; the calls refuse avg of integers).
#[symm_kernel(device)]
pub(crate) fn finish_native<T: Num, const OP: usize>(acc: T, world: u32) -> T {
    let mut r = acc;
    if OP == 1 {
        r = acc / T::from_f32(world as f32);
    }
    r
}

/// `out[0..len]` gets the reduction by `OP` of elements `start..start +
/// len` of every rank's `input`, this thread's share of a grid-stride
/// loop: in 16-byte vectors where the input (whose every rank's buffer
/// lies alike past a 16-byte boundary) and `out` reach a boundary together,
/// element by element elsewhere.
#[symm_kernel(device)]
pub(crate) fn reduce_span<T: Num, const V: usize, const OP: usize, const NATIVE: bool>(
    input: SymmBuf<T>,
    start: u32,
    out: SliceMut<T>,
    len: u32,
    world: u32,
) {
    let v = V as u32;
    let head = vector_head::<V>(start, vector_lag(input.local()), len);
    let mut vecs: u32 = 0;
    if (head + vector_lag(out)) % v == 0u32 {
        vecs = (len - head) / v;
    }
    let mut i = grid_thread();
    while i < vecs {
        let res = reduce_vec::<T, V, OP, NATIVE>(input, start + head + i * v, world);
        out.store_vec::<V>(head + i * v, res);
        i += grid_threads();
    }
    let mut j = grid_thread();
    while j < head {
        out[j] = reduce_one::<T, OP, NATIVE>(input, start + j, world);
        j += grid_threads();
    }
    let mut k = head + vecs * v + grid_thread();
    while k < len {
        out[k] = reduce_one::<T, OP, NATIVE>(input, start + k, world);
        k += grid_threads();
    }
}

/// Reduce-scatter: rank r gets, in `out[0..len]`, the reduction by `OP`
/// of elements `r * chunk..r * chunk + len` of every rank's `input`, where
/// `len` is `chunk` but for the last ranks (the rest of `n`, maybe none).
#[symm_kernel]
pub fn reduce_scatter_pull<T: Num, const V: usize, const OP: usize, const NATIVE: bool>(
    input: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    chunk: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    let call = enter_sending(input, ch, sig);
    let start = rank * chunk;
    let mut len: u32 = 0;
    if start < n {
        len = n - start;
        if len > chunk {
            len = chunk;
        }
    }
    reduce_span::<T, V, OP, NATIVE>(input, start, out, len, world);
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// The reduction `acc` of `world` ranks' elements, rounded once to `T`:
/// divided by `world` first for avg.
#[symm_kernel(device)]
pub(crate) fn finish<T: Scalar, const OP: usize>(acc: f32, world: u32) -> T {
    let mut r = acc;
    if OP == 1 {
        r = acc / world as f32;
    }
    T::from_f32(r)
}

/// Elements `i..i + V` (one 16-byte vector) of every rank's `input`,
/// reduced by `OP` in rank order, in f32 and rounded once (in `T` where
/// `NATIVE`): all loads issued before any arithmetic.
#[symm_kernel(device)]
pub(crate) fn reduce_vec<T: Num, const V: usize, const OP: usize, const NATIVE: bool>(
    input: SymmBuf<T>,
    i: u32,
    world: u32,
) -> [T; V] {
    // Loops to the constant 8, guarded: unrolled, they index `vals` with
    // constants, which keeps it in registers (a run-time index would move
    // it to local memory, several times slower).
    let zero: [T; V] = [T::from_f32(0.0f32); V];
    let mut vals: [[T; V]; 8] = [zero; 8];
    for p in 0..8u32 {
        if p < world {
            vals[p] = input.peer(p).load_vec::<V>(i);
        }
    }
    if NATIVE {
        let mut nat: [T; V] = vals[0];
        for p in 1..8u32 {
            if p < world {
                for k in 0..V {
                    nat[k] = combine_native::<T, OP>(nat[k], vals[p][k]);
                }
            }
        }
        nat = fold_native_past_8::<T, V, OP>(input, i, world, nat);
        for k in 0..V {
            nat[k] = finish_native::<T, OP>(nat[k], world);
        }
        return nat;
    }
    let mut acc: [f32; V] = [0.0f32; V];
    for k in 0..V {
        acc[k] = vals[0][k].to_f32();
    }
    for p in 1..8u32 {
        if p < world {
            for k in 0..V {
                acc[k] = combine::<OP>(acc[k], vals[p][k].to_f32());
            }
        }
    }
    acc = fold_past_8::<T, V, OP>(input, i, world, acc);
    let mut res: [T; V] = zero;
    for k in 0..V {
        res[k] = finish::<T, OP>(acc[k], world);
    }
    res
}

/// The 8 ranks' elements `i..i + V` of `input` from rank `base` (those
/// below `world`), 8 loads issued before any arithmetic.
#[symm_kernel(device)]
fn load_8_ranks<T: Num, const V: usize>(
    input: SymmBuf<T>,
    i: u32,
    base: u32,
    world: u32,
) -> [[T; V]; 8] {
    let zero: [T; V] = [T::from_f32(0.0f32); V];
    let mut vals: [[T; V]; 8] = [zero; 8];
    for p in 0..8u32 {
        if base + p < world {
            vals[p] = input.peer(base + p).load_vec::<V>(i);
        }
    }
    vals
}

/// [`reduce_vec`]'s f32 fold `acc` carried on past rank 8: combined with
/// ranks 8, 9, …, `world - 1`'s elements, in rank order, 8 ranks' loads at
/// a time (a domain of more than 8 ranks). Nothing up to 8 ranks.
#[symm_kernel(device)]
fn fold_past_8<T: Num, const V: usize, const OP: usize>(
    input: SymmBuf<T>,
    i: u32,
    world: u32,
    acc: [f32; V],
) -> [f32; V] {
    let mut out = acc;
    let mut base = 8u32;
    while base < world {
        let vals = load_8_ranks::<T, V>(input, i, base, world);
        for p in 0..8u32 {
            if base + p < world {
                for k in 0..V {
                    out[k] = combine::<OP>(out[k], vals[p][k].to_f32());
                }
            }
        }
        base += 8u32;
    }
    out
}

/// [`fold_past_8`] in `T` itself (`NATIVE`).
#[symm_kernel(device)]
fn fold_native_past_8<T: Num, const V: usize, const OP: usize>(
    input: SymmBuf<T>,
    i: u32,
    world: u32,
    acc: [T; V],
) -> [T; V] {
    let mut out = acc;
    let mut base = 8u32;
    while base < world {
        let vals = load_8_ranks::<T, V>(input, i, base, world);
        for p in 0..8u32 {
            if base + p < world {
                for k in 0..V {
                    out[k] = combine_native::<T, OP>(out[k], vals[p][k]);
                }
            }
        }
        base += 8u32;
    }
    out
}

/// Element `i` of every rank's `input`, reduced as [`reduce_vec`] does.
#[symm_kernel(device)]
pub(crate) fn reduce_one<T: Num, const OP: usize, const NATIVE: bool>(
    input: SymmBuf<T>,
    i: u32,
    world: u32,
) -> T {
    if NATIVE {
        let mut nat = input.peer(0)[i];
        for p in 1..world {
            nat = combine_native::<T, OP>(nat, input.peer(p)[i]);
        }
        return finish_native::<T, OP>(nat, world);
    }
    let mut acc = input.peer(0)[i].to_f32();
    for p in 1..world {
        acc = combine::<OP>(acc, input.peer(p)[i].to_f32());
    }
    finish::<T, OP>(acc, world)
}

/// `out[0..chunk]` gets the reduction by `OP` of the `rows` rows of
/// `src` (row r, at `r * chunk`, from rank r), combined element by element
/// exactly as every reduction combines the ranks' elements (rank order,
/// f32 rounded once, or `T` itself where `NATIVE`): the same bits from
/// rows that reached one rank by a copy (a reduction across NVLink
/// domains gathers them by an all-to-all) as from the ranks' own memory.
/// Local: it neither signals nor reads peers.
#[symm_kernel]
pub fn fold_rows<T: Num, const OP: usize, const NATIVE: bool>(
    src: &[T],
    out: &mut [T],
    rows: u32,
    chunk: u32,
) {
    kernel_assert!(
        rows >= 1u32
            && (rows as usize) * (chunk as usize) <= src.len()
            && chunk as usize <= out.len(),
        "fold_rows: rows x chunk elements pass `src`, or chunk passes `out`"
    );
    let mut i = grid_thread();
    while i < chunk {
        if NATIVE {
            let mut nat = src[i];
            for r in 1..rows {
                nat = combine_native::<T, OP>(nat, src[r * chunk + i]);
            }
            out[i] = finish_native::<T, OP>(nat, rows);
        } else {
            let mut acc = src[i].to_f32();
            for r in 1..rows {
                acc = combine::<OP>(acc, src[r * chunk + i].to_f32());
            }
            out[i] = finish::<T, OP>(acc, rows);
        }
        i += grid_threads();
    }
}

/// Reduce: rank `root`'s `out[0..n]` gets the reduction by `OP` of every
/// rank's `input[0..n]`, combined as every reduction is (in rank order,
/// as [`ReduceOp`](super::ReduceOp) says); the other ranks pass the
/// barriers and compute nothing (their `out` may be empty).
#[symm_kernel]
pub fn reduce_pull<T: Num, const V: usize, const OP: usize, const NATIVE: bool>(
    input: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    root: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    let call = enter_sending(input, ch, sig);
    if rank == root {
        reduce_span::<T, V, OP, NATIVE>(input, 0u32, out, n, world);
    }
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// All-reduce by `OP`, two-shot: rank r reduces chunk r of the 16-byte
/// vectors of every rank's `input` and pushes the result into every
/// rank's `scratch` at the same place; after the exit barrier each rank
/// copies the whole result to `out`. Every phase walks chunk-local indices
/// with the same (block, thread) stride, so what block b copies out was
/// pushed by block b of each rank, which block b's barriers order (a
/// rank's next call pushes there only after this block of every rank
/// entered it, so finished copying). `out` may be this rank's `input`: it
/// is written only after every rank finished reading.
#[symm_kernel]
pub fn all_reduce_op_two_shot<T: Num, const V: usize, const OP: usize, const NATIVE: bool>(
    input: SymmBuf<T>,
    scratch: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    let call = enter_sending(input, ch, sig);
    let v = V as u32;
    // The vectors start after the input's head (none where it starts
    // 16-byte aligned); the scratch holds them from its own start.
    let head = vector_head::<V>(0u32, vector_lag(input.local()), n);
    let vecs = (n - head) / v;
    let chunk = (vecs + world - 1) / world;
    let mut j = grid_thread();
    while j < chunk && rank * chunk + j < vecs {
        let i = (rank * chunk + j) * v;
        let res = reduce_vec::<T, V, OP, NATIVE>(input, head + i, world);
        for r in 0..world {
            scratch.peer(r).store_vec::<V>(i, res);
        }
        j += grid_threads();
    }
    // The head and the tail that do not fill a vector (fewer than V
    // elements each, so at most one of each per thread): every rank
    // reduces them itself, in rank order, before the exit barrier (`out`
    // may be the input).
    let t = grid_thread();
    let mut first = T::from_f32(0.0f32);
    if t < head {
        first = reduce_one::<T, OP, NATIVE>(input, t, world);
    }
    let e = head + vecs * v + t;
    let mut tail = T::from_f32(0.0f32);
    if e < n {
        tail = reduce_one::<T, OP, NATIVE>(input, e, world);
    }
    exit_checked(input, ch, call, sig);
    let mine = scratch.local();
    // `out` takes vectors where it reaches a boundary with the input's.
    let whole = (head + vector_lag(out)) % v == 0u32;
    for c in 0..world {
        let mut k = grid_thread();
        while k < chunk && c * chunk + k < vecs {
            let i = (c * chunk + k) * v;
            let x: [T; V] = mine.load_vec::<V>(i);
            if whole {
                out.store_vec::<V>(head + i, x);
            } else {
                for q in 0..V {
                    out[head + i + q as u32] = x[q];
                }
            }
            k += grid_threads();
        }
    }
    if t < head {
        out[t] = first;
    }
    if e < n {
        out[e] = tail;
    }
    call_end(input, ch, call);
}

/// Coalesced all-gather: for each of `count` tensors t, whose entries in
/// `table` are (start, length, out offset) `table[3t..3t + 3]`, rank p's
/// `input[start..start + length]` lands at `out[offset + p × length..]`
/// on every rank. One launch for all of them.
#[symm_kernel]
pub fn all_gather_coalesced_pull<T: Scalar, const V: usize>(
    input: SymmBuf<T>,
    out: &mut [T],
    table: &[u32],
    count: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    let call = enter_sending(input, ch, sig);
    for t in 0..count {
        let start = table[3 * t];
        let len = table[3 * t + 1];
        let at = table[3 * t + 2];
        for k in 0..world {
            let p = (rank + k) % world;
            copy_span::<T, V>(
                input.peer(p),
                start,
                out,
                at + p * len,
                len,
                grid_thread(),
                grid_threads(),
            );
        }
    }
    exit_checked(input, ch, call, sig);
    call_end(input, ch, call);
}

/// Coalesced all-reduce by `OP`, in place: for each of `count` tensors t,
/// whose entries in `table` are (start, length, scratch offset)
/// `table[3t..3t + 3]`, every rank's `buf[start..start + length]` is
/// replaced by the reduction over ranks. One shot: each rank reduces
/// every tensor from every peer into its own `scratch`, and copies the
/// results into `buf` after the exit barrier (when no peer reads its
/// `buf` any more). `scratch` is this rank's alone, and a call writes it
/// only after the previous call on the stream ended, so it needs no
/// parity.
#[symm_kernel]
pub fn all_reduce_coalesced_pull<T: Num, const V: usize, const OP: usize, const NATIVE: bool>(
    buf: SymmBuf<T>,
    scratch: &mut [T],
    table: &[u32],
    count: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let world = buf.world_size();
    let call = enter_sending(buf, ch, sig);
    let v = V as u32;
    for t in 0..count {
        let start = table[3 * t];
        let len = table[3 * t + 1];
        let at = table[3 * t + 2];
        let mut done: u32 = 0;
        if start % v == 0u32 && at % v == 0u32 {
            let vecs = len / v;
            let mut i = grid_thread();
            while i < vecs {
                let res = reduce_vec::<T, V, OP, NATIVE>(buf, start + i * v, world);
                scratch.store_vec::<V>(at + i * v, res);
                i += grid_threads();
            }
            done = vecs * v;
        }
        let mut j = done + grid_thread();
        while j < len {
            scratch[at + j] = reduce_one::<T, OP, NATIVE>(buf, start + j, world);
            j += grid_threads();
        }
    }
    exit_checked(buf, ch, call, sig);
    let mine = buf.local();
    for t in 0..count {
        let start = table[3 * t];
        let len = table[3 * t + 1];
        let at = table[3 * t + 2];
        let mut done: u32 = 0;
        if start % v == 0u32 && at % v == 0u32 {
            let vecs = len / v;
            let mut i = grid_thread();
            while i < vecs {
                mine.store_vec::<V>(start + i * v, scratch.load_vec::<V>(at + i * v));
                i += grid_threads();
            }
            done = vecs * v;
        }
        let mut j = done + grid_thread();
        while j < len {
            mine[start + j] = scratch[at + j];
            j += grid_threads();
        }
    }
    call_end(buf, ch, call);
}
