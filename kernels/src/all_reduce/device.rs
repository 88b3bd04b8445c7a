//! The all-reduce kernels, in the DSL. Every kernel begins with
//! [`enter_call`] (it is launched with programmatic dependent launch), sums
//! in f32 in rank order 0, 1, … (so every rank gets the same bits), and is
//! made safe to run back to back by the pieces of [`symm::dsl::sync`]: a
//! per-block call counter on channel `ch` of one of its buffers' signal
//! pads ([`call_begin`], [`call_end`]), barriers on the same channel that
//! need no reset ([`enter_barrier`], [`exit_barrier`]), staging halves
//! alternating by call parity ([`stage_at`]), and sentinel messages
//! ([`sentinel_send`], [`sentinel_take`]). So nothing needs resetting
//! between calls and CUDA graphs can replay them. `ch` is the channel that
//! [`super::all_reduce`] reserves from the group (under
//! [`CHANNEL_OWNER`]); every kernel takes it as an argument.

use symm::dsl::*;
use symm::symm_kernel;

use crate::shared::device::{add_ranks_past_8, enter_call, spread_first};

/// This call's identity digest `sig` as one 16-byte vector of `T`: 7 bits
/// of it in each element's low bits (bits `7 (k % 4)..` in element `k`),
/// so no element has a sentinel stage's empty bits (all ones).
#[symm_kernel(device)]
pub(crate) fn sig_vec<T: Scalar, const V: usize>(sig: u32) -> [T; V] {
    let mut v: [T; V] = [T::from_f32(0.0f32); V];
    for k in 0..V {
        v[k] = T::from_bits32((sig >> ((k as u32 % 4u32) * 7u32)) & 0x7Fu32);
    }
    v
}

/// Whether two vectors hold the same bits.
#[symm_kernel(device)]
pub(crate) fn same_bits<T: Scalar, const V: usize>(a: [T; V], b: [T; V]) -> bool {
    let mut same = true;
    for k in 0..V {
        if a[k].to_bits64() != b[k].to_bits64() {
            same = false;
        }
    }
    same
}

/// Fails the call unless `same`: a peer's identity (what
/// [`sig_vec`] or [`enter_barrier_sending`] carried) differs from this rank's.
#[symm_kernel(device)]
pub(crate) fn assert_same_call(same: bool) {
    kernel_assert!(
        same,
        "all_reduce: the ranks made different calls (buffer, offset, size, element type or kernel differ); every rank must make the same collective calls in the same order"
    );
}

/// Whether every rank whose bit is set in `from` sent this call's identity
/// `sig` ([`sig_vec`]): entry `r` of `got` is rank `r`'s vector, as a
/// sentinel take returns it.
#[symm_kernel(device)]
pub(crate) fn sent_call<T: Scalar, const V: usize>(got: [[T; V]; 8], from: u32, sig: u32) -> bool {
    let want = sig_vec::<T, V>(sig);
    let mut same = true;
    for r in 0..8u32 {
        if ((from >> r) & 1u32) == 1u32 && !same_bits::<T, V>(got[r], want) {
            same = false;
        }
    }
    same
}

/// Channels the all-reduce reserves from the group: the first holds the
/// call counters and both barriers of every kernel, the second the call
/// identities the barrier kernels send ([`enter_barrier_sending`]).
pub const CHANNELS: usize = 2;
/// The name the all-reduce reserves its channels under.
pub const CHANNEL_OWNER: &str = "symm_kernels::all_reduce";

/// Elements `i..i + V` summed in f32 in rank order 0, 1, …, where rank
/// `rank`'s part is `own[i..]` and every other rank r's is
/// `stage[at + r * region + j..]`: all loads issued before any arithmetic.
/// (A separate `j` lets a caller stage at other offsets than it reads.)
#[symm_kernel(device)]
pub(crate) fn sum_staged<T: Scalar, const V: usize>(
    own: Remote<T>,
    i: u32,
    stage: Remote<T>,
    at: u32,
    region: u32,
    j: u32,
    rank: u32,
    world: u32,
) -> [T; V] {
    let zero: [T; V] = [T::from_f32(0.0f32); V];
    let mut vals: [[T; V]; 8] = [zero; 8];
    // Loops to the constant 8, guarded: unrolled, they index `vals` with
    // constants, which keeps it in registers (with a run-time world, or a
    // body too large to unroll, as fp8's 16 elements made it, a run-time
    // index would move it to local memory, several times slower).
    for r in 0..8u32 {
        if r < world {
            vals[r] = if r == rank {
                own.load_vec::<V>(i)
            } else {
                stage.load_vec::<V>(at + r * region + j)
            };
        }
    }
    sum_in_rank_order::<T, V>(vals, world)
}

/// The element-wise sum of `vals[0..world]`, in f32, in rank order 0, 1, …
/// (the same bits on every rank), rounded once to `T`. Every sum of the
/// all-reduce starts from −0, the identity of IEEE addition (+0 is not:
/// +0 + −0 = +0), so a sum of negative zeros is −0.
#[symm_kernel(device)]
pub(crate) fn sum_in_rank_order<T: Scalar, const V: usize>(
    vals: [[T; V]; 8],
    world: u32,
) -> [T; V] {
    sum_with_own::<T, V>(vals, vals[0], 8, world)
}

/// [`sum_in_rank_order`] with `own` in place of `vals[rank]` (a `rank` of 8
/// or more replaces nothing). A select per rank, not a store into `vals`:
/// with a run-time `rank`, a store would index the array at run time and
/// move it to local memory.
#[symm_kernel(device)]
pub(crate) fn sum_with_own<T: Scalar, const V: usize>(
    vals: [[T; V]; 8],
    own: [T; V],
    rank: u32,
    world: u32,
) -> [T; V] {
    round_sums::<T, V>(sums_with_own::<T, V>(vals, own, rank, world))
}

/// [`sum_with_own`]'s f32 sums of ranks `0..min(world, 8)`, not yet
/// rounded.
#[symm_kernel(device)]
pub(crate) fn sums_with_own<T: Scalar, const V: usize>(
    vals: [[T; V]; 8],
    own: [T; V],
    rank: u32,
    world: u32,
) -> [f32; V] {
    let mut acc: [f32; V] = [-0.0f32; V];
    // Guarded constant loops, as in [`sum_staged`].
    for r in 0..8u32 {
        if r < world {
            let v = if r == rank { own } else { vals[r] };
            for k in 0..V {
                acc[k] += v[k].to_f32();
            }
        }
    }
    acc
}

/// `acc` rounded once to `T`.
#[symm_kernel(device)]
pub(crate) fn round_sums<T: Scalar, const V: usize>(acc: [f32; V]) -> [T; V] {
    let mut res: [T; V] = [T::from_f32(0.0f32); V];
    for k in 0..V {
        res[k] = T::from_f32(acc[k]);
    }
    res
}

/// Loads elements `i..i + V` (one 16-byte vector) from every rank's `buf`,
/// all loads of 8 ranks issued before their arithmetic, and sums them in
/// f32 in rank order 0, 1, …: the same bits on every rank.
#[symm_kernel(device)]
pub(crate) fn sum_peers<T: Scalar, const V: usize>(buf: SymmBuf<T>, i: u32, world: u32) -> [T; V] {
    let zero: [T; V] = [T::from_f32(0.0f32); V];
    let mut vals: [[T; V]; 8] = [zero; 8];
    for r in 0..8u32 {
        if r < world {
            vals[r] = buf.peer(r).load_vec::<V>(i);
        }
    }
    let first = sums_with_own::<T, V>(vals, vals[0], 8, world);
    round_sums::<T, V>(add_ranks_past_8::<T, V>(buf, i, world, first))
}

/// One-shot all-reduce of the first `n` elements of `buf` into `out`.
/// `V` elements make 16 bytes; `W` is the world size when it is 2, 4 or 8
/// (unrolled), or 0 to read it at run time. Launch with at least
/// `identity_checkers(world_size) + world_size` threads per block (the
/// identity barriers' handshakes and checks) and at most 128 blocks; every
/// rank must
/// launch the same grid on the same buffer. The call counter, both
/// barriers and the identity check (`sig`, see [`exit_barrier_checking`]) are on
/// channel `ch` of `ctl`'s pad, one small allocation that every barrier
/// call of the group uses, whatever its buffer or type: ranks that call
/// on different buffers meet there and fail at once (on each buffer's own
/// pad they would wait for each other until the timeout).
#[symm_kernel]
pub fn one_shot_all_reduce<T: Scalar, const V: usize, const W: usize>(
    buf: SymmBuf<T>,
    ctl: SymmBuf<u32>,
    out: &mut [T],
    n: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = buf.rank();
    let world = if W > 0 { W as u32 } else { buf.world_size() };
    // Every peer's identity is sent at the entry barrier, after its flag,
    // and checked once the exit barrier made it visible: a peer in another
    // call would have this one sum its other buffer, which then fails.
    // (Reading a peer's memory before the check stays in bounds: every
    // allocation has the same size on every rank, and the host agreed on
    // this call's shape.)
    let call = call_begin(ctl, ch);
    enter_barrier_sending(ctl, ch, call, ch + 1u32, sig);

    let stride = grid_dim_x() * block_dim_x();
    let first = block_idx_x() * block_dim_x() + thread_idx_x();
    let vecs = n / V as u32;
    let mut i = first;
    while i < vecs {
        let res = sum_peers::<T, V>(buf, i * V as u32, world);
        out.store_vec::<V>(i * V as u32, res);
        i += stride;
    }
    // The tail that does not fill a vector.
    let mut j = vecs * V as u32 + first;
    while j < n {
        let mut acc: f32 = -0.0;
        for r in 0..world {
            acc += buf.peer(r)[j].to_f32();
        }
        out[j] = T::from_f32(acc);
        j += stride;
    }
    assert_same_call(exit_barrier_checking(ctl, ch, call, ch + 1u32, sig));
    call_end(ctl, ch, call);
}

/// The data words of LL packet pair `g`: elements `(2g + h) * P ..` packed
/// `P` to a 32-bit word, low element first; elements at or past `n` (and
/// whole pairs past the end) read as zero bits.
#[symm_kernel(device)]
pub(crate) fn ll_words<T: Scalar, const P: usize>(src: Remote<T>, g: u32, n: u32) -> [u32; 2] {
    let per = P as u32;
    let width = 32 / per;
    let mut words: [u32; 2] = [0u32; 2];
    for h in 0..2u32 {
        for k in 0..per {
            let e = (g * 2 + h) * per + k;
            if e < n {
                words[h] |= src[e].to_bits32() << (k * width);
            }
        }
    }
    words
}

/// One-shot all-reduce with LL packets: each rank pushes `(epoch, bits)` as
/// single 8-byte volatile stores into every rank's `stage`, then polls its
/// own stage for every rank's packets of this epoch and sums them in f32 in
/// rank order. No barrier: the stage is double-buffered by epoch parity, and
/// a rank reaches epoch e only after every peer's e − 1 packets arrived,
/// which they sent after finishing e − 2, the last reader of that parity.
/// `P` elements share a packet (1 for 4-byte, 2 for 2-byte types). `out`
/// may be this rank's own `input` (peers never read it). Launch with the
/// same grid every call on one `stage` (its per-block epochs must stay in
/// step): the built-in uses [`super::LL_BLOCKS`] × [`super::THREADS`], and
/// a smaller grid with its own stage for the smallest messages. `sig` is
/// the call's identity digest (the same on every rank of one call, top bit
/// set): a peer in a different call fails the call (at once when its
/// packets reach this stage in this call's epoch), and no rank returns a
/// value.
// ANCHOR: ll
// Over 100 lines on purpose: one kernel whose phases share the call's
// counters and registers; split into device functions, its generated
// CUDA C (and the PTX the measurements cover) would change.
#[symm_kernel]
pub fn one_shot_ll<T: Scalar, const P: usize, const W: usize>(
    input: SymmBuf<T>,
    stage: SymmBuf<u64>,
    out: &mut [T],
    n: u32,
    cap: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = if W > 0 { W as u32 } else { input.world_size() };
    let src = input.local();
    let mine = stage.local();
    let stride = grid_dim_x() * block_dim_x();
    let first = spread_first();
    // This thread's first packets are read before the epoch, so the two
    // loads are in flight together (each is a memory round trip on the
    // path of every small call).
    let mut words = ll_words::<T, P>(src, first, n);
    let epoch = call_begin(stage, ch);
    let per = P as u32;
    let width = 32 / per;
    // The low `width` bits (all 32 for one element per word).
    let mask: u32 = if per == 1 {
        0xFFFF_FFFFu32
    } else {
        (1u32 << width) - 1u32
    };
    let packets = (n + per - 1) / per;
    // Packets travel in pairs: one 16-byte volatile store of two 8-byte
    // (epoch, bits) elements, each single-copy atomic, so each half still
    // proves its own arrival.
    let pairs = (packets + 1) / 2;
    // Slots are laid out by the stage's pair capacity `cap`, not by this
    // call's `pairs`: with a size-dependent stride, a call's region could
    // overlap the other parity's region that a slow peer is still reading.
    let parity = epoch & 1;
    // The tag: the epoch's low 31 bits with bits 8..31 of the call's
    // identity `sig` folded in (one XOR), and the top bit set, so that no
    // tag is ever zero (never-written staging, or a slot cleared below).
    // A packet arrives when its tag is `want` whole. One that agrees with
    // it in the top bit and the epoch's low 8 bits (the parity among them)
    // but not whole is a peer's packet of this round from another call
    // (another buffer or size on this stage, or a peer a multiple of 256
    // calls away): the wait fails the call at once, naming the peer
    // (`gather_tagged2_checked`), up to a 2^-23 chance that two identities
    // agree in those bits. A peer in another epoch sends packets this call
    // never takes, and the wait reports it at the kernel timeout (as do
    // pairs a peer of another size never sends).
    let want = ((epoch ^ (sig & 0x7FFF_FF00u32)) & 0x7FFF_FFFFu32) | 0x8000_0000u32;
    let tag = (want as u64) << 32;
    let mut g = first;
    while g < pairs {
        let pkt: [u64; 2] = [tag | (words[0] as u64), tag | (words[1] as u64)];
        for r in 0..world {
            stage
                .peer(r)
                .store_vec_volatile::<2>(((parity * world + rank) * cap + g) * 2, pkt);
        }
        g += stride;
        words = ll_words::<T, P>(src, g, n);
    }
    // Slot r of pair q holds rank r's packets: every rank's are polled
    // together (one memory round trip after the last one lands); the wait
    // checks for another call's packets only while it waits, so a call
    // whose packets are all there pays nothing for the check.
    let ranks = (1u32 << world) - 1;
    let mut q = first;
    while q < pairs {
        let at = (parity * world * cap + q) * 2;
        let got: [[u64; 2]; 8] =
            mine.gather_tagged2_checked(at, cap * 2, ranks, want, 0x8000_00FFu32);
        let mut lo: [f32; P] = [-0.0f32; P];
        let mut hi: [f32; P] = [-0.0f32; P];
        for r in 0..8u32 {
            if r < world {
                let v = got[r];
                let b0 = v[0] as u32;
                let b1 = v[1] as u32;
                for k in 0..P {
                    let s = k as u32 * width;
                    lo[k] += T::from_bits32((b0 >> s) & mask).to_f32();
                    hi[k] += T::from_bits32((b1 >> s) & mask).to_f32();
                }
            }
        }
        for k in 0..P {
            let e0 = q * 2 * per + k as u32;
            if e0 < n {
                out[e0] = T::from_f32(lo[k]);
            }
            let e1 = e0 + per;
            if e1 < n {
                out[e1] = T::from_f32(hi[k]);
            }
        }
        q += stride;
    }
    // A packet left in a slot since epoch e (by a larger call than those
    // since) would agree with one of epoch e + 256 in the bits the wait
    // checks, and fail that healthy call. So once every 256 epochs of each
    // parity (the epoch's low 8 bits 0 or 1) each thread clears all of this
    // parity's slots it reads at any size, `first..cap` by the stride,
    // after its own reads (a peer writes them again only in the call after
    // next, which starts after this kernel ended). Between any two epochs
    // 256 apart of one parity lies such a call, after the older packet
    // landed. One call in 128 pays it, not every slot read of every call.
    if (epoch & 0xFEu32) == 0u32 {
        let mut q = first;
        while q < cap {
            for r in 0..world {
                mine.store_vec_volatile::<2>(((parity * world + r) * cap + q) * 2, [0u64, 0u64]);
            }
            q += stride;
        }
    }
    call_end(stage, ch, epoch);
}
// ANCHOR_END: ll

/// Two-shot all-reduce for large messages: rank r sums only chunk r of the
/// 16-byte vectors (reading it from every rank) and pushes the sums into
/// every rank's `scratch`; after an epoch barrier each rank copies the whole
/// result to `out`. Each rank reads and writes n elements instead of reading
/// `world × n`. Every phase walks chunk-local indices with the same (block,
/// thread) stride, so what block b copies out was written by block b of
/// each rank, which block b's barrier orders. `out` may be this rank's
/// `input` (it is written only after every rank has finished reading it).
/// Counter, barriers and identity check on `ctl`, as in
/// [`one_shot_all_reduce`].
#[symm_kernel]
pub fn two_shot_all_reduce<T: Scalar, const V: usize, const W: usize>(
    input: SymmBuf<T>,
    scratch: SymmBuf<T>,
    ctl: SymmBuf<u32>,
    out: &mut [T],
    n: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = if W > 0 { W as u32 } else { input.world_size() };
    // Every input is ready; every peer's identity is sent here and checked
    // after the exit barrier, as in the one-shot.
    let call = call_begin(ctl, ch);
    enter_barrier_sending(ctl, ch, call, ch + 1u32, sig);
    let stride = grid_dim_x() * block_dim_x();
    let first = block_idx_x() * block_dim_x() + thread_idx_x();
    let vecs = n / V as u32;
    let chunk = (vecs + world - 1) / world;
    let base = rank * chunk;
    let mut j = first;
    while j < chunk && base + j < vecs {
        let i = (base + j) * V as u32;
        let res = sum_peers::<T, V>(input, i, world);
        for r in 0..world {
            scratch.peer(r).store_vec::<V>(i, res);
        }
        j += stride;
    }
    // The tail that does not fill a vector (fewer than V elements, so at
    // most one per thread): every rank sums it itself, in rank order, so all
    // ranks agree bit for bit. Read before the exit barrier, written after,
    // so `out` may alias `input`.
    let e = vecs * V as u32 + first;
    let mut tail: f32 = -0.0;
    if e < n {
        for r in 0..world {
            tail += input.peer(r)[e].to_f32();
        }
    }
    // Every push landed, every input read; every peer was in this call.
    assert_same_call(exit_barrier_checking(ctl, ch, call, ch + 1u32, sig));
    let mine = scratch.local();
    for c in 0..world {
        let mut j = first;
        while j < chunk && c * chunk + j < vecs {
            let i = (c * chunk + j) * V as u32;
            out.store_vec::<V>(i, mine.load_vec::<V>(i));
            j += stride;
        }
    }
    if e < n {
        out[e] = T::from_f32(tail);
    }
    call_end(ctl, ch, call);
}

/// One-shot all-reduce by pushing raw data: each rank stores its input
/// into its region of every peer's `stage` (16-byte stores, one NVLink
/// one-way trip, no tags), then each block exchanges a release/acquire flag
/// with its peers' blocks and sums the staged copies locally in rank order.
/// Peers never read `input`, so `out` may alias it. Stage regions are
/// double-buffered by epoch parity, like the LL kernel's: a rank pushes into
/// parity p only after its previous call saw every peer's flag of the call
/// in between, which those peers raised after finishing the last call of
/// parity p ([`stage_at`]). Launch with one fixed grid every call
/// (`PUSH_BLOCKS` × `THREADS` on a GPU), which keeps every block's call
/// count, and so its parity, in step.
#[symm_kernel]
pub fn one_shot_push<T: Scalar, const V: usize, const W: usize>(
    input: SymmBuf<T>,
    stage: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = if W > 0 { W as u32 } else { input.world_size() };
    let call = call_begin(stage, ch);
    let base = stage_at(stage, call, 0);
    let cap = stage_cap(stage);
    let src = input.local();
    let mine = stage.local();
    let stride = grid_dim_x() * block_dim_x();
    let first = spread_first();
    let vecs = n / V as u32;
    let tail = n - vecs * V as u32;
    let to = stage_at(stage, call, rank);
    let mut i = first;
    while i < vecs {
        let v = src.load_vec::<V>(i * V as u32);
        for r in 0..world {
            if r != rank {
                stage.peer(r).store_vec::<V>(to + i * V as u32, v);
            }
        }
        i += stride;
    }
    // The tail that does not fill a vector (fewer than V elements).
    let e = vecs * V as u32 + first;
    if first < tail {
        for r in 0..world {
            if r != rank {
                stage.peer(r)[to + e] = src[e];
            }
        }
    }
    // The call's identity travels as one more vector of the message, past
    // the data and its tail (index `idv`), sent by the thread whose loop
    // ended there (`idv` is `vecs` or `vecs + 1`, and the loops' ends cover
    // `vecs..vecs + stride`: `spread_first` numbers every thread once) and
    // released by the barrier with the data. Mixed with the call's number
    // (`call_word`), so what an earlier call left in that slot never passes
    // for it. A peer in another call (another
    // buffer, size or kernel on this stage) would have this rank sum its
    // data; the check after the sum fails the call instead. Sent before the
    // flag like the data, it adds no round trip (a word traded in the
    // barrier's handshake cost 0.3 µs on 2 H200s, bench/NOTES.md v30).
    let idv = (n + V as u32 - 1) / V as u32;
    let ids = i == idv;
    if ids {
        let want = sig_vec::<T, V>(call_word(sig, call));
        for r in 0..world {
            if r != rank {
                stage.peer(r).store_vec::<V>(to + idv * V as u32, want);
            }
        }
    }
    enter_barrier(stage, ch, call);
    let mut i = first;
    while i < vecs {
        let at = i * V as u32;
        let res = sum_staged::<T, V>(src, at, mine, base, cap, at, rank, world);
        out.store_vec::<V>(at, res);
        i += stride;
    }
    if first < tail {
        let mut acc: f32 = -0.0;
        for r in 0..world {
            let v = if r == rank {
                src[e]
            } else {
                mine[base + r * cap + e]
            };
            acc += v.to_f32();
        }
        out[e] = T::from_f32(acc);
    }
    if ids {
        let want = sig_vec::<T, V>(call_word(sig, call));
        let mut same = true;
        for r in 0..world {
            if r != rank
                && !same_bits::<T, V>(mine.load_vec::<V>(base + r * cap + idv * V as u32), want)
            {
                same = false;
            }
        }
        assert_same_call(same);
    }
    call_end(stage, ch, call);
}

/// Elements `at..at + V` of `src` (zeros past `n`), with any element that
/// has the Lamport stage's empty bits (all ones, a NaN) replaced by that
/// NaN with its sign bit cleared: still a NaN, so the sum is unchanged in
/// kind, but it can no longer read as "not arrived".
#[symm_kernel(device)]
pub(crate) fn lamport_load<T: DslFloat, const V: usize>(src: Remote<T>, at: u32, n: u32) -> [T; V] {
    let mut v: [T; V] = [T::from_f32(0.0f32); V];
    if at + V as u32 <= n {
        v = src.load_vec::<V>(at);
    } else {
        for k in 0..V {
            let e = at + k as u32;
            if e < n {
                v[k] = src[e];
            }
        }
    }
    sentinel_scrub::<T, V>(v)
}

/// `own` (this rank's part, as [`lamport_load`] reads it) summed in f32 in
/// rank order with every other rank r's part, which arrives at
/// `stage[base + r * cap + j..]` (see [`sentinel_take_at`]).
#[symm_kernel(device)]
pub(crate) fn lamport_sum<T: DslFloat, const V: usize>(
    own: [T; V],
    stage: Remote<T>,
    base: u32,
    cap: u32,
    j: u32,
    rank: u32,
    world: u32,
) -> [T; V] {
    let peers = ((1u32 << world) - 1) & !(1u32 << rank);
    let vals = sentinel_take_at::<T, V>(stage, base + j, cap, peers, world);
    sum_with_own::<T, V>(vals, own, rank, world)
}

/// One-shot all-reduce by pushing data that marks its own arrival (after
/// Lamport): every slot of `stage` holds all-ones bits (a NaN no input can
/// send, see `lamport_load`) until a peer's 16-byte store of real data
/// lands, so receivers poll the data itself. One NVLink one-way trip like
/// the LL kernel, at half its bytes (no tags), and no flags like the push
/// kernel needs. Each receiver writes the empty bits back once every
/// peer's slot of a vector has arrived (before the call ends). Regions are
/// double-buffered by epoch parity: a peer stores into parity p again two
/// calls later, after it saw this rank's data of the call in between, which
/// this rank sent after its previous kernel (and its resets) completed.
/// `out` may alias `input`: peers never read it, and each thread reads its
/// own elements before writing them. Launch with one fixed grid every call,
/// on a stage that starts all ones.
// ANCHOR: lamport
#[symm_kernel]
pub fn one_shot_lamport<T: DslFloat, const V: usize, const W: usize>(
    input: SymmBuf<T>,
    stage: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = if W > 0 { W as u32 } else { input.world_size() };
    let src = input.local();
    let stride = grid_dim_x() * block_dim_x();
    let first = spread_first();
    let vecs = (n + V as u32 - 1) / V as u32;
    // The call counter's load is issued first: the input's is followed at
    // once by its unpacking (a branch join, and for 2-byte types a `PRMT`
    // per element), which waits for it, so in the other order the two
    // loads ran one after the other.
    let call = call_begin(stage, ch);
    // The call's identity travels as one more vector of the message, at
    // index `vecs` (past the data), sent and taken by the thread that index
    // falls to, after its data (a thread with no data of its own at small
    // sizes): no round trip of its own, and the data loops as they were.
    // A peer in another call of this kernel with as many elements (another
    // buffer or offset) fails both, not a wrong sum; one with more sends
    // data where this rank's identity is expected and fails this rank. (A
    // peer with fewer never sends all this rank waits for: the wait ends
    // when the peer fails, or at the timeout.)
    let mut v = lamport_load::<T, V>(src, first * V as u32, n);
    // This thread's first vector stays in registers for its own part of the
    // sum (the common case at small sizes is one vector per thread).
    let mut own = v;
    let mut i = first;
    while i < vecs {
        for r in 0..world {
            if r != rank {
                sentinel_send::<T, V>(stage, call, r, i * V as u32, v);
            }
        }
        i += stride;
        v = lamport_load::<T, V>(src, i * V as u32, n);
    }
    // The loop ends at `vecs` in the thread whose index that is.
    let ids = i == vecs;
    if ids {
        for r in 0..world {
            if r != rank {
                sentinel_send::<T, V>(stage, call, r, vecs * V as u32, sig_vec::<T, V>(sig));
            }
        }
    }
    let peers = all_ranks(stage) & !(1u32 << rank);
    let mut i = first;
    while i < vecs {
        let at = i * V as u32;
        let got = sentinel_take::<T, V>(stage, call, peers, at);
        let res = sum_with_own::<T, V>(got, own, rank, world);
        store_padded::<T, V>(out, at, n, res);
        i += stride;
        if i < vecs {
            own = lamport_load::<T, V>(src, i * V as u32, n);
        }
    }
    if ids {
        let got = sentinel_take::<T, V>(stage, call, peers, vecs * V as u32);
        assert_same_call(sent_call::<T, V>(got, peers, sig));
    }
    call_end(stage, ch, call);
}
// ANCHOR_END: lamport

/// Two-shot all-reduce without barriers: both halves push data that marks
/// its own arrival, like [`one_shot_lamport`]. Rank c owns chunk c of the
/// 16-byte vectors. Each rank pushes every other chunk of its input to
/// that chunk's owner (reduce-scatter), sums its own chunk in rank order
/// when the peers' parts arrive, and pushes the sum to every rank
/// (all-gather), which copies it out. Each rank pushes `2 (world − 1) /
/// world` of the message instead of `world − 1` copies, at two one-way
/// trips. Stage regions: `((parity * 2 + half) * world + r) * cap`, half 0
/// for the parts rank r sent, half 1 for the sum rank r sent;
/// double-buffered by epoch parity and reset after reading, as in the
/// one-shot. Every phase walks chunk-local indices with the same (block,
/// thread) stride, so each wait is on the same block of a peer (never on
/// another block of this rank), and one thread reads and writes every
/// element at its index in each chunk, so `out` may alias `input`. Launch
/// with the same number of blocks every call (it keeps the per-block epochs
/// in step); the threads per block may change from call to call, as long
/// as every rank launches the same grid.
#[symm_kernel]
pub fn two_shot_lamport<T: DslFloat, const V: usize, const W: usize>(
    input: SymmBuf<T>,
    stage: SymmBuf<T>,
    out: &mut [T],
    n: u32,
    cap: u32,
    ch: u32,
    sig: u32,
) {
    enter_call();
    let rank = input.rank();
    let world = if W > 0 { W as u32 } else { input.world_size() };
    let src = input.local();
    let mine = stage.local();
    let stride = grid_dim_x() * block_dim_x();
    let first = spread_first();
    let vecs = (n + V as u32 - 1) / V as u32;
    let chunk = (vecs + world - 1) / world;
    let call = call_begin(stage, ch);
    let parts = (call & 1) * 2 * world * cap;
    let sums = parts + world * cap;
    // Reduce-scatter: element j of every other chunk goes to its owner's
    // half-0 region for this rank. At j == chunk, past every chunk, the
    // call's identity goes to every owner, as in the one-shot.
    let mut j = first;
    while j < chunk {
        for c in 0..world {
            if c != rank && c * chunk + j < vecs {
                let v = lamport_load::<T, V>(src, (c * chunk + j) * V as u32, n);
                stage
                    .peer(c)
                    .store_vec_volatile::<V>(parts + rank * cap + j * V as u32, v);
            }
        }
        j += stride;
    }
    // The loop ends at `chunk` in the thread whose index that is.
    let ids = j == chunk;
    if ids {
        for c in 0..world {
            if c != rank {
                stage.peer(c).store_vec_volatile::<V>(
                    parts + rank * cap + chunk * V as u32,
                    sig_vec::<T, V>(sig),
                );
            }
        }
    }
    // Sum this rank's chunk and push the sum to every rank.
    let mut j = first;
    while j < chunk && rank * chunk + j < vecs {
        let at = (rank * chunk + j) * V as u32;
        let own = lamport_load::<T, V>(src, at, n);
        let sum = lamport_sum::<T, V>(own, mine, parts, cap, j * V as u32, rank, world);
        // Sent as it is stored here, so every rank gets the same bits, and
        // never with the empty bits.
        let res = sentinel_scrub::<T, V>(sum);
        for r in 0..world {
            if r != rank {
                stage
                    .peer(r)
                    .store_vec_volatile::<V>(sums + rank * cap + j * V as u32, res);
            }
        }
        store_padded::<T, V>(out, at, n, res);
        j += stride;
    }
    // All-gather: copy out every other chunk's sum as it arrives (every
    // owner's slot polled together).
    let mut j = first;
    while j < chunk {
        let mut owners = 0u32;
        for c in 0..world {
            if c != rank && c * chunk + j < vecs {
                owners |= 1u32 << c;
            }
        }
        let got = sentinel_take_at::<T, V>(mine, sums + j * V as u32, cap, owners, world);
        for c in 0..8u32 {
            if c < world && ((owners >> c) & 1u32) == 1u32 {
                store_padded::<T, V>(out, (c * chunk + j) * V as u32, n, got[c]);
            }
        }
        j += stride;
    }
    if ids {
        let peers = all_ranks(stage) & !(1u32 << rank);
        let got = sentinel_take_at::<T, V>(mine, parts + chunk * V as u32, cap, peers, world);
        assert_same_call(sent_call::<T, V>(got, peers, sig));
    }
    call_end(stage, ch, call);
}
