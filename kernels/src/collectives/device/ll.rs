//! The LL kernels ([`copy_ll`], [`reduce_ll`]) and their packets: no
//! barrier, no peer reads this rank's input.

use symm::dsl::*;
use symm::symm_kernel;

use super::*;

/// Packet `q` of `src[off..off + len]`: elements `off + q × E ..` (`E`
/// of them, 8 bytes in all; zeros past `len`) as their bits, element `j`
/// in bits `j × 64 / E ..`.
#[symm_kernel(device)]
pub(crate) fn ll_pack<T: Scalar, const E: usize>(
    src: Remote<T>,
    off: u32,
    len: u32,
    q: u32,
) -> u64 {
    let e = E as u32;
    let width = 64u32 / e;
    let at = q * e;
    let mut data: u64 = 0;
    for j in 0..E {
        let k = at + j as u32;
        if k < len {
            data |= src[off + k].to_bits64() << (j as u32 * width);
        }
    }
    data
}

/// Stores packet `q`'s elements (as [`ll_pack`] packed them) at
/// `dst[off + q × E ..]`, those below `len`.
#[symm_kernel(device)]
pub(crate) fn ll_unpack<T: Scalar, const E: usize>(
    dst: SliceMut<T>,
    off: u32,
    len: u32,
    q: u32,
    data: u64,
) {
    let e = E as u32;
    let width = 64u32 / e;
    let at = q * e;
    for j in 0..E {
        let k = at + j as u32;
        if k < len {
            dst[off + k] = T::from_bits64(data >> (j as u32 * width));
        }
    }
}

/// The LL kernels' launch rule: whole warps per block (a packet's sender
/// and receiver threads share a block only so: `spread_first`), and at
/// least `world` threads (thread `t` trades the header with rank `t`).
#[symm_kernel(device)]
pub(crate) fn ll_launch_check(world: u32) {
    kernel_assert!(
        block_dim_x() % 32u32 == 0u32 && block_dim_x() >= world,
        "LL collectives: launch whole warps per block, and at least world_size threads"
    );
}

/// The start of every LL collective, after `enter_call` and
/// [`call_begin`]: thread `t` sends this block's header, this call's digest
/// `sig`, into rank `t`'s stage (packet `block` of this rank's region of
/// parity `epoch & 1`, regions `cap` packets apart), then every thread
/// waits for every peer's header and checks it, so ranks that made
/// different calls fail alike before anyone waits for data that a peer
/// will never send. A header also proves, for the next call, that the
/// peer finished this block's previous call: every rank hears from every
/// rank in every call, which is what makes the parity staging safe (see
/// [`symm::dsl::sync`]) even where only one rank sends data (broadcast).
#[symm_kernel(device)]
pub(crate) fn ll_headers(stage: SymmBuf<u64>, epoch: u32, cap: u32, sig: u32) {
    let rank = stage.rank();
    let world = stage.world_size();
    let t = thread_idx_x();
    let par = epoch & 1u32;
    if t < world && t != rank {
        stage.peer(t).store_tagged64(
            ((par * world + rank) * cap + block_idx_x()) * 2u32,
            sig as u64,
            epoch,
        );
    }
    let peers = all_ranks(stage) & !(1u32 << rank);
    let got = stage.local().gather_tagged64(
        (par * world * cap + block_idx_x()) * 2u32,
        cap * 2u32,
        peers,
        epoch,
    );
    let mut same = true;
    // To the constant 8, guarded, so `got` stays in registers.
    for p in 0..8u32 {
        if p < world && p != rank && got[p] as u32 != sig {
            same = false;
        }
    }
    kernel_assert!(
        same,
        "the ranks made different calls (kind, buffer, element type, sizes, op, root or ranges differ); every rank must make the same collective calls in the same order"
    );
}

/// The low-latency copies (all-gather, broadcast, all-to-all with equal
/// splits) by LL packets (`E` elements make 8 bytes): each rank pushes 8 bytes of data with their
/// call's epoch as one 16-byte store ([`Remote::store_tagged64`]) into its
/// region of every receiver's `stage`, and each receiver polls its own
/// stage, so data crosses NVLink once, with no barrier. `kind` 0 is the
/// all-gather (`flag` 1: in place, rank r's chunk at `input[r × n..]`), 1
/// the broadcast from `root` (`flag` 1: the root's `out` is its input), 2
/// the all-to-all (`n` per peer). Every peer sends `n` elements or none,
/// so a receiver takes packet `q` of every sender at once. Stage regions
/// (parity, sender) are `cap` packets: the grid's headers
/// (`ll_headers`), then data. Launch every call on one `stage` with the
/// same number of blocks (the per-block epochs stay in step; the threads
/// per block may change, since every block hears from every peer's same
/// block in every call). Peers never read `input`, so the caller may
/// rewrite it as soon as the call is over.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn copy_ll<T: Scalar, const E: usize>(
    input: SymmBuf<T>,
    stage: SymmBuf<u64>,
    out: &mut [T],
    kind: u32,
    n: u32,
    root: u32,
    flag: u32,
    cap: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    ll_launch_check(world);
    let src = input.local();
    let first = spread_first();
    let stride = grid_threads();
    let packets = (n + E as u32 - 1) / E as u32;
    // Only the broadcast's root sends among the broadcast's ranks.
    let sends = kind != 1u32 || rank == root;
    // This thread's first packets are read before the epoch, so the loads
    // are in flight together (each is a memory round trip on the path of
    // every small call).
    let mut data = ll_packets::<T, E>(src, kind, n, flag, rank, world, first, packets, sends);
    let epoch = call_begin(stage, ch);
    let par = epoch & 1u32;
    let to = (par * world + rank) * cap + grid_dim_x();
    let mut q = first;
    while q < packets && sends {
        for k in 1..8u32 {
            if k < world {
                let r = (rank + k) % world;
                stage
                    .peer(r)
                    .store_tagged64((to + q) * 2u32, data[k], epoch);
            }
        }
        // This rank's own part, from the packet already in registers
        // (none where it is in place: the in-place all-gather's chunk and
        // the root's own broadcast).
        if flag == 0u32 || kind == 2u32 {
            let mut at = rank * n;
            if kind == 1u32 {
                at = 0u32;
            }
            ll_unpack::<T, E>(out, at, n, q, data[0]);
        }
        q += stride;
        data = ll_packets::<T, E>(src, kind, n, flag, rank, world, q, packets, sends);
    }
    ll_headers(stage, epoch, cap, sig);
    let mut from = all_ranks(stage) & !(1u32 << rank);
    if kind == 1u32 {
        from = 0u32;
        if rank != root {
            from = 1u32 << root;
        }
    }
    let mine = stage.local();
    let mut q = first;
    // (The broadcast's root hears nothing.)
    while q < packets && from != 0u32 {
        let got = mine.gather_tagged64(
            (par * world * cap + grid_dim_x() + q) * 2u32,
            cap * 2u32,
            from,
            epoch,
        );
        for p in 0..8u32 {
            if p < world && ((from >> p) & 1u32) == 1u32 {
                let mut at = p * n;
                if kind == 1u32 {
                    at = 0u32;
                }
                ll_unpack::<T, E>(out, at, n, q, got[p]);
            }
        }
        q += stride;
    }
    call_end(stage, ch, epoch);
}

/// Packet `q` (if below `packets` and this rank `sends`) of what
/// [`copy_ll`] sends to each rank, by distance: `[k]` for rank
/// `rank + k` (mod `world`), `[0]` this rank's own. Every load issued
/// before any is used.
#[symm_kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn ll_packets<T: Scalar, const E: usize>(
    src: Remote<T>,
    kind: u32,
    n: u32,
    flag: u32,
    rank: u32,
    world: u32,
    q: u32,
    packets: u32,
    sends: bool,
) -> [u64; 8] {
    let mut data: [u64; 8] = [0u64; 8];
    if q < packets && sends {
        if kind == 2u32 {
            // Loops to the constant 8, guarded, so `data` is indexed by
            // constants and stays in registers.
            for k in 0..8u32 {
                if k < world {
                    data[k] = ll_pack::<T, E>(src, ((rank + k) % world) * n, n, q);
                }
            }
        } else {
            let mut off = 0u32;
            if kind == 0u32 && flag == 1u32 {
                off = rank * n;
            }
            let own = ll_pack::<T, E>(src, off, n, q);
            for k in 0..8u32 {
                data[k] = own;
            }
        }
    }
    data
}

/// Reduce-scatter (`scatter` 1: rank r gets its chunk, `chunk` elements
/// from `r × chunk`, fewer at the end, in `out[0..]`) or all-reduce
/// (`scatter` 0: all `n` elements) by `OP`, by LL packets as
/// [`copy_ll`]: each rank pushes what each peer reduces into the peer's
/// stage, and each reduces what arrives with its own part in rank order in
/// f32, rounding once (in `T` where `NATIVE`), so every rank gets the same
/// bits. One NVLink trip,
/// no barrier. `out` may be this rank's `input` for the all-reduce (a
/// thread reads its own elements before it writes them, and peers never
/// read `input`). Launch as [`copy_ll`].
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn reduce_ll<T: Num, const E: usize, const OP: usize, const NATIVE: bool>(
    input: SymmBuf<T>,
    stage: SymmBuf<u64>,
    out: &mut [T],
    n: u32,
    chunk: u32,
    scatter: u32,
    cap: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = input.world_size();
    ll_launch_check(world);
    let src = input.local();
    let epoch = call_begin(stage, ch);
    let par = epoch & 1u32;
    let hdrs = grid_dim_x();
    let first = spread_first();
    let stride = grid_threads();
    let to = (par * world + rank) * cap + hdrs;
    // Every peer's packet q loaded before any is sent, so the loads are in
    // flight together.
    let most = (reduce_span(n, chunk, scatter, 0u32)[1] + E as u32 - 1) / E as u32;
    let mut q = first;
    while q < most {
        let mut data: [u64; 8] = [0u64; 8];
        for k in 1..8u32 {
            if k < world {
                let span = reduce_span(n, chunk, scatter, (rank + k) % world);
                data[k] = ll_pack::<T, E>(src, span[0], span[1], q);
            }
        }
        for k in 1..8u32 {
            if k < world {
                let r = (rank + k) % world;
                let span = reduce_span(n, chunk, scatter, r);
                if q * (E as u32) < span[1] {
                    stage
                        .peer(r)
                        .store_tagged64((to + q) * 2u32, data[k], epoch);
                }
            }
        }
        q += stride;
    }
    ll_headers(stage, epoch, cap, sig);
    let span = reduce_span(n, chunk, scatter, rank);
    let packets = (span[1] + E as u32 - 1) / E as u32;
    let width = 64u32 / E as u32;
    let peers = all_ranks(stage) & !(1u32 << rank);
    let mine = stage.local();
    let mut q = first;
    while q < packets {
        let own = ll_pack::<T, E>(src, span[0], span[1], q);
        let got = mine.gather_tagged64(
            (par * world * cap + hdrs + q) * 2u32,
            cap * 2u32,
            peers,
            epoch,
        );
        let mut res: u64 = 0;
        for j in 0..E {
            let s = j as u32 * width;
            if NATIVE {
                let mut nat = T::zero();
                for p in 0..8u32 {
                    if p < world {
                        let d = if p == rank { own } else { got[p] };
                        let x = T::from_bits64(d >> s);
                        nat = if p == 0u32 {
                            x
                        } else {
                            combine_native::<T, OP>(nat, x)
                        };
                    }
                }
                res |= finish_native::<T, OP>(nat, world).to_bits64() << s;
                continue;
            }
            let mut acc: f32 = 0.0;
            // Loops to the constant 8, guarded, so `got` is indexed by
            // constants and stays in registers.
            for p in 0..8u32 {
                if p < world {
                    let d = if p == rank { own } else { got[p] };
                    let x = T::from_bits64(d >> s).to_f32();
                    acc = if p == 0u32 { x } else { combine::<OP>(acc, x) };
                }
            }
            res |= finish::<T, OP>(acc, world).to_bits64() << s;
        }
        ll_unpack::<T, E>(out, 0u32, span[1], q, res);
        q += stride;
    }
    call_end(stage, ch, epoch);
}

/// (start, length) of rank `r`'s part of a [`reduce_ll`]: its chunk of
/// `n` for a reduce-scatter (`chunk` from `r × chunk`, fewer at the end,
/// maybe none), or all `n` for an all-reduce.
#[symm_kernel(device)]
pub(crate) fn reduce_span(n: u32, chunk: u32, scatter: u32, r: u32) -> [u32; 2] {
    let mut span: [u32; 2] = [0u32, n];
    if scatter == 1u32 {
        span[0] = r * chunk;
        span[1] = 0u32;
        if span[0] < n {
            span[1] = n - span[0];
            if span[1] > chunk {
                span[1] = chunk;
            }
        }
    }
    span
}
