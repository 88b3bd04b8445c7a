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
/// and receiver threads share a block only so: `spread_first`), at least
/// `world` threads (thread `t` sends the header to rank `t`), at least one
/// packet (`n` elements; an empty call would hear from no peer), and
/// regions of `cap` packets that hold the call's `packets` and the
/// headers' slots (`32 × blocks`).
#[symm_kernel(device)]
pub(crate) fn ll_launch_check(world: u32, n: u32, packets: u32, cap: u32) {
    kernel_assert!(
        block_dim_x() % 32u32 == 0u32
            && block_dim_x() >= world
            && n > 0u32
            && cap >= packets
            && cap >= 32u32 * grid_dim_x(),
        "LL collectives: launch whole warps per block, at least world_size threads, at least one element, and a stage of at least the call's packets and 32 × blocks a region"
    );
}

/// The tag of every packet of an LL call: the block's `epoch` (low 31
/// bits) with 23 bits of a mix of the call's whole digest `sig` folded into
/// bits 8..31 (so digests that differ only in their low byte or top bit
/// differ there too), and the top bit set, so no tag is zero (a
/// never-written or cleared slot). A packet
/// arrives when its tag is whole; one that agrees with it in the top bit
/// and the epoch's low 8 bits (`0x8000_00FF`) but not whole is a peer's
/// packet of this round from another call, and the wait
/// (`gather_tagged2_checked`) fails the call at once, naming the peer.
#[symm_kernel(device)]
pub(crate) fn ll_tag(epoch: u32, sig: u32) -> u32 {
    let mix = (sig ^ (sig >> 16u32)).wrapping_mul(0x9E37_79B1u32);
    ((epoch ^ (mix & 0x7FFF_FF00u32)) & 0x7FFF_FFFFu32) | 0x8000_0000u32
}

/// The 8 data bytes of a packet pair that `store_tagged64` sent.
#[symm_kernel(device)]
pub(crate) fn ll_data(pair: [u64; 2]) -> u64 {
    (pair[0] & 0xFFFF_FFFFu64) | (pair[1] << 32u64)
}

/// The header trade of an LL call in which some rank sends no data to
/// some peer (the broadcast; a reduce-scatter with an empty chunk): thread
/// `t` sends this block's header, the call's digest `sig` tagged `tag`,
/// into rank `t`'s stage if bit `t` of `to` is set, then every thread
/// waits for the headers of the ranks in `from` and checks them. A header
/// goes where the sender's data would (slot `32 × block` of its region of
/// parity `par`, regions `cap` packets apart: the packet that thread 0 of
/// the block sends and waits for), to a rank that gets no data from it,
/// so that with the data every rank hears from every rank in every call
/// (block 0 at least), which is what makes the parity staging safe (see
/// [`copy_ll`]). A call with headers and one without that meet
/// find each other's packet or header in that slot, with another call's
/// tag, and fail at once on both ranks, not at the timeout.
#[symm_kernel(device)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn ll_headers(
    stage: SymmBuf<u64>,
    par: u32,
    cap: u32,
    tag: u32,
    sig: u32,
    to: u32,
    from: u32,
) {
    let rank = stage.rank();
    let world = stage.world_size();
    let t = thread_idx_x();
    let slot = 32u32 * block_idx_x();
    if t < world && ((to >> t) & 1u32) == 1u32 {
        stage
            .peer(t)
            .store_tagged64(((par * world + rank) * cap + slot) * 2u32, sig as u64, tag);
    }
    if from != 0u32 {
        let got = stage.local().gather_tagged2_checked(
            (par * world * cap + slot) * 2u32,
            cap * 2u32,
            from,
            tag,
            0x8000_00FFu32,
        );
        let mut same = true;
        // To the constant 8, guarded, so `got` stays in registers.
        for p in 0..8u32 {
            if p < world && ((from >> p) & 1u32) == 1u32 && got[p][0] as u32 != sig {
                same = false;
            }
        }
        kernel_assert!(
            same,
            "the ranks made different calls (kind, buffer, element type, sizes, op, root or ranges differ); every rank must make the same collective calls in the same order"
        );
    }
}

/// The end of every LL call, before `call_end`: once every 256 epochs of
/// each parity (the epoch's low 8 bits 0 or 1), this rank's slots of that
/// parity are cleared, so a packet left in a slot since epoch e (by a
/// larger call than those since) never agrees with one of epoch e + 256 in
/// the bits the wait checks, which would fail that healthy call. Each
/// thread clears its own slots (`first..cap` by the grid's `stride`; a
/// header's slot, `32 × block`, is thread 0's first, read by every thread
/// of the block, so the block's barrier comes first). A peer writes a slot
/// of this parity again only in the call after next, which starts after
/// this kernel ended. One call in 128 pays it: `cap × (world − 1)` 16-byte
/// stores, whatever the call's size.
#[symm_kernel(device)]
pub(crate) fn ll_clear(stage: SymmBuf<u64>, epoch: u32, cap: u32, first: u32, stride: u32) {
    if (epoch & 0xFEu32) == 0u32 {
        sync_threads();
        let rank = stage.rank();
        let world = stage.world_size();
        let par = epoch & 1u32;
        let mine = stage.local();
        let mut q = first;
        while q < cap {
            for r in 0..world {
                if r != rank {
                    mine.store_vec_volatile::<2>(
                        ((par * world + r) * cap + q) * 2u32,
                        [0u64, 0u64],
                    );
                }
            }
            q += stride;
        }
    }
}

/// The low-latency copies (all-gather, broadcast, all-to-all with equal
/// splits) by LL packets (`E` elements make 8 bytes): each rank pushes 8
/// bytes of data with their call's tag (`ll_tag`: the epoch and the
/// call's digest `sig`) as one 16-byte store ([`Remote::store_tagged64`])
/// into its region of every receiver's `stage`, and each receiver polls its
/// own stage, so data crosses NVLink once, with no barrier. `kind` 0 is the
/// all-gather (`flag` 1: in place, rank r's chunk at `input[r × n..]`), 1
/// the broadcast from `root` (`flag` 1: the root's `out` is its input), 2
/// the all-to-all (`n` per peer). Every peer sends `n` elements or none, so
/// a receiver takes packet `q` of every sender at once.
///
/// The parity staging (see [`symm::dsl::sync`]) is safe at the kernel's
/// level: in every call, thread 0 of block 0 of every rank waits for slot
/// 0 from every peer (its data, or the header `ll_headers` sends where a
/// peer gets no data: the broadcast's non-roots send one to every peer),
/// and a peer sends in call c + 1 only after `enter_call`'s
/// `grid_dependency_wait`, once its whole kernel of call c has ended. So
/// no rank writes a region of parity p while a peer still reads it from
/// two calls before. That needs `n` of at least 1 (the host launches no
/// empty call) and a stage of `cap` packets a region (parity, sender),
/// at least the call's packets and `32 × blocks`, both asserted. Launch
/// every call on one `stage` with the same number of blocks (the
/// per-block epochs stay in step; the threads per block may change).
/// Peers never read `input`, so the caller may rewrite it as soon as the
/// call is over.
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
    let packets = (n + E as u32 - 1) / E as u32;
    ll_launch_check(world, n, packets, cap);
    let src = input.local();
    let first = spread_first();
    let stride = grid_threads();
    // Only the broadcast's root sends among the broadcast's ranks.
    let sends = kind != 1u32 || rank == root;
    // This thread's first packets are read before the epoch, so the loads
    // are in flight together (each is a memory round trip on the path of
    // every small call).
    let mut data = ll_packets::<T, E>(src, kind, n, flag, rank, world, first, packets, sends);
    let epoch = call_begin(stage, ch);
    let par = epoch & 1u32;
    let tag = ll_tag(epoch, sig);
    let to = (par * world + rank) * cap;
    let mut q = first;
    while q < packets && sends {
        for k in 1..8u32 {
            if k < world {
                let r = (rank + k) % world;
                stage.peer(r).store_tagged64((to + q) * 2u32, data[k], tag);
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
    let peers = all_ranks(stage) & !(1u32 << rank);
    let mut from = peers;
    if kind == 1u32 {
        // The root's data proves its arrival to the non-roots; the
        // non-roots' headers prove theirs to the root and to each other.
        from = 0u32;
        let mut to = 0u32;
        if rank != root {
            from = 1u32 << root;
            to = peers;
        }
        ll_headers(stage, par, cap, tag, sig, to, peers & !(1u32 << root));
    }
    let mine = stage.local();
    let mut q = first;
    // (The broadcast's root gets no data, only the non-roots' headers.)
    while q < packets && from != 0u32 {
        let got = mine.gather_tagged2_checked(
            (par * world * cap + q) * 2u32,
            cap * 2u32,
            from,
            tag,
            0x8000_00FFu32,
        );
        for p in 0..8u32 {
            if p < world && ((from >> p) & 1u32) == 1u32 {
                let mut at = p * n;
                if kind == 1u32 {
                    at = 0u32;
                }
                ll_unpack::<T, E>(out, at, n, q, ll_data(got[p]));
            }
        }
        q += stride;
    }
    ll_clear(stage, epoch, cap, first, stride);
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
/// no barrier. Where some rank's chunk is empty (a reduce-scatter of at
/// most `(world - 1) × chunk` elements) no peer sends it data, so every
/// peer sends it a header instead (`ll_headers`), as the broadcast's
/// non-roots do. `out`
/// may be this rank's `input` for the all-reduce (a thread reads its own
/// elements before it writes them, and peers never read `input`). Launch
/// as [`copy_ll`].
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
    // The largest span's packets: all `n` for the all-reduce, a chunk for
    // the reduce-scatter.
    let most = (reduce_span(n, chunk, scatter, 0u32)[1] + E as u32 - 1) / E as u32;
    ll_launch_check(world, n, most, cap);
    let src = input.local();
    let epoch = call_begin(stage, ch);
    let par = epoch & 1u32;
    let tag = ll_tag(epoch, sig);
    let first = spread_first();
    let stride = grid_threads();
    let to = (par * world + rank) * cap;
    // Every peer's packet q loaded before any is sent, so the loads are in
    // flight together.
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
                    stage.peer(r).store_tagged64((to + q) * 2u32, data[k], tag);
                }
            }
        }
        q += stride;
    }
    let peers = all_ranks(stage) & !(1u32 << rank);
    let span = reduce_span(n, chunk, scatter, rank);
    // The last rank's chunk is the first to be empty; ranks with empty
    // chunks get no data, so every peer sends them a header instead.
    if scatter == 1u32 && (world - 1u32) * chunk >= n {
        let mut to = 0u32;
        for r in 0..8u32 {
            if r < world && r != rank && r * chunk >= n {
                to |= 1u32 << r;
            }
        }
        let mut from = 0u32;
        if span[1] == 0u32 {
            from = peers;
        }
        ll_headers(stage, par, cap, tag, sig, to, from);
    }
    let packets = (span[1] + E as u32 - 1) / E as u32;
    let width = 64u32 / E as u32;
    let mine = stage.local();
    let mut q = first;
    while q < packets {
        let own = ll_pack::<T, E>(src, span[0], span[1], q);
        let pairs = mine.gather_tagged2_checked(
            (par * world * cap + q) * 2u32,
            cap * 2u32,
            peers,
            tag,
            0x8000_00FFu32,
        );
        let mut got: [u64; 8] = [0u64; 8];
        for p in 0..8u32 {
            got[p] = ll_data(pairs[p]);
        }
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
    ll_clear(stage, epoch, cap, first, stride);
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
