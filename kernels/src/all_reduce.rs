//! One-shot all-reduce (sum) over symmetric memory.
//!
//! Every rank reads every peer's input directly over NVLink and sums it
//! locally, so one kernel and one round trip finish the job: the fastest
//! shape for small and medium messages.
//!
//! Per block, per call:
//! 1. an epoch barrier (channel [`START`]): each of the first `world`
//!    threads stores the call's epoch into one peer's flag with a
//!    system-scope release and spins with acquire on the peer's flag back
//!    (no CAS round trips); the epoch is a per-block counter kept in the
//!    block's own pad slot, so nothing needs resetting and CUDA graphs can
//!    replay the kernel;
//! 2. 16-byte loads from every peer, all issued before any arithmetic, then
//!    a sum in f32 in rank order 0, 1, …, so every rank gets the same bits;
//! 3. a second epoch barrier (channel [`END`]), so no rank returns (and
//!    overwrites its input in the next call) while a peer still reads it.

use symm::dsl::*;
use symm::symm_kernel;

/// Signal-pad channel of the entry barrier.
pub const START: u32 = 5;
/// Signal-pad channel of the exit barrier.
pub const END: u32 = 6;
/// Signal-pad channel whose slots hold each block's call counter.
pub const EPOCH: u32 = 7;

// The kernels spell these channels as literals (the DSL has no module
// constants); keep them in step, and inside the range users may not touch.
const _: () =
    assert!(START == 5 && END == 6 && EPOCH == 7 && START as usize == symm::layout::USER_CHANNELS);

/// This block's epoch for the call: its counter (channel 7 of `buf`'s own
/// pad) plus one. Every rank runs the same launches, so the counters agree.
#[symm_kernel(device)]
pub fn next_epoch<T: Scalar>(buf: SymmBuf<T>) -> u32 {
    let rank = buf.rank();
    buf.pad(rank)
        .load(
            signal_slot(7, block_idx_x(), rank),
            LoadOrder::Relaxed,
            Scope::Gpu,
        )
        .wrapping_add(1)
}

/// Stores this block's new epoch, once every thread has read the old one.
#[symm_kernel(device)]
pub fn commit_epoch<T: Scalar>(buf: SymmBuf<T>, epoch: u32) {
    sync_threads();
    if thread_idx_x() == 0 {
        let rank = buf.rank();
        buf.pad(rank).store(
            signal_slot(7, block_idx_x(), rank),
            epoch,
            StoreOrder::Relaxed,
            Scope::Gpu,
        );
    }
}

/// Block-wide epoch barrier with every rank on `channel`.
#[symm_kernel(device)]
pub fn epoch_barrier<T: Scalar>(buf: SymmBuf<T>, channel: u32, epoch: u32) {
    let t = thread_idx_x();
    if t < buf.world_size() && t != buf.rank() {
        buf.signal_flag(t, channel, epoch);
        buf.wait_flag(t, channel, epoch);
    }
    sync_threads();
}

/// Loads elements `i..i + V` (one 16-byte vector) from every rank's `buf`,
/// all loads issued before any arithmetic, and sums them in f32 in rank
/// order 0, 1, …: the same bits on every rank.
#[symm_kernel(device)]
pub fn sum_peers<T: Scalar, const V: usize>(buf: SymmBuf<T>, i: u32, world: u32) -> [T; V] {
    let zero: [T; V] = [T::from_f32(0.0f32); V];
    let mut vals: [[T; V]; 8] = [zero; 8];
    for r in 0..world {
        vals[r] = buf.peer(r).load_vec::<V>(i);
    }
    let mut acc: [f32; V] = [0.0f32; V];
    for r in 0..world {
        let v = vals[r];
        for k in 0..V {
            acc[k] += v[k].to_f32();
        }
    }
    let mut res: [T; V] = zero;
    for k in 0..V {
        res[k] = T::from_f32(acc[k]);
    }
    res
}

/// One-shot all-reduce of the first `n` elements of `buf` into `out`.
/// `V` elements make 16 bytes; `W` is the world size when it is 2, 4 or 8
/// (unrolled), or 0 to read it at run time. Launch with at least
/// `world_size` threads per block and at most 128 blocks; every rank must
/// launch the same grid on the same buffer.
#[symm_kernel]
pub fn one_shot_all_reduce<T: Scalar, const V: usize, const W: usize>(
    buf: SymmBuf<T>,
    out: &mut [T],
    n: u32,
) {
    let rank = buf.rank();
    let world = if W > 0 { W as u32 } else { buf.world_size() };
    let epoch = next_epoch(buf);
    epoch_barrier(buf, 5, epoch); // START

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
        let mut acc: f32 = 0.0;
        for r in 0..world {
            acc += buf.peer(r)[j].to_f32();
        }
        out[j] = T::from_f32(acc);
        j += stride;
    }

    sync_threads();
    epoch_barrier(buf, 6, epoch); // END
    commit_epoch(buf, epoch);
}

/// One-shot all-reduce with LL packets: each rank pushes `(epoch, bits)` as
/// single 8-byte volatile stores into every rank's `stage`, then polls its
/// own stage for every rank's packets of this epoch and sums them in f32 in
/// rank order. No barrier: the stage is double-buffered by epoch parity, and
/// a rank reaches epoch e only after every peer's e − 1 packets arrived,
/// which they sent after finishing e − 2, the last reader of that parity.
/// `P` elements share a packet (1 for 4-byte, 2 for 2-byte types). `out`
/// may be this rank's own `input` (peers never read it). Launch with the
/// same grid every call ([`LL_BLOCKS`] × [`THREADS`]).
#[symm_kernel]
pub fn one_shot_ll<T: Scalar, const P: usize, const W: usize>(
    input: SymmBuf<T>,
    stage: SymmBuf<u64>,
    out: &mut [T],
    n: u32,
    cap: u32,
) {
    let rank = input.rank();
    let world = if W > 0 { W as u32 } else { input.world_size() };
    let epoch = next_epoch(stage);
    let per = P as u32;
    let width = 32 / per;
    let mask: u32 = if per == 1 { 0xFFFF_FFFFu32 } else { 0xFFFFu32 };
    let packets = (n + per - 1) / per;
    // Packets travel in pairs: one 16-byte volatile store of two 8-byte
    // (epoch, bits) elements, each single-copy atomic, so each half still
    // proves its own arrival.
    let pairs = (packets + 1) / 2;
    // Slots are laid out by the stage's pair capacity `cap`, not by this
    // call's `pairs`: with a size-dependent stride, a call's region could
    // overlap the other parity's region that a slow peer is still reading.
    let parity = epoch & 1;
    let tag = (epoch as u64) << 32;
    let src = input.local();
    let mine = stage.local();
    let stride = grid_dim_x() * block_dim_x();
    let first = block_idx_x() * block_dim_x() + thread_idx_x();
    let mut g = first;
    while g < pairs {
        let mut words: [u32; 2] = [0u32; 2];
        for h in 0..2u32 {
            for k in 0..per {
                let e = (g * 2 + h) * per + k;
                if e < n {
                    words[h] |= src[e].to_bits32() << (k * width);
                }
            }
        }
        let pkt: [u64; 2] = [tag | (words[0] as u64), tag | (words[1] as u64)];
        for r in 0..world {
            stage
                .peer(r)
                .store_vec_volatile::<2>(((parity * world + rank) * cap + g) * 2, pkt);
        }
        g += stride;
    }
    let mut q = first;
    while q < pairs {
        let mut lo: [f32; P] = [0.0f32; P];
        let mut hi: [f32; P] = [0.0f32; P];
        for r in 0..world {
            let v = mine.load_tagged2(((parity * world + r) * cap + q) * 2, epoch, r);
            let b0 = v[0] as u32;
            let b1 = v[1] as u32;
            for k in 0..P {
                let s = k as u32 * width;
                lo[k] += T::from_bits32((b0 >> s) & mask).to_f32();
                hi[k] += T::from_bits32((b1 >> s) & mask).to_f32();
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
    commit_epoch(stage, epoch);
}

/// Two-shot all-reduce for large messages: rank r sums only chunk r of the
/// 16-byte vectors (reading it from every rank) and pushes the sums into
/// every rank's `scratch`; after an epoch barrier each rank copies the whole
/// result to `out`. Each rank reads and writes n elements instead of reading
/// `world × n`. Every phase walks chunk-local indices with the same (block,
/// thread) stride, so what block b copies out was written by block b of
/// each rank, which block b's barrier orders. `out` may be this rank's
/// `input` (it is written only after every rank has finished reading it).
#[symm_kernel]
pub fn two_shot_all_reduce<T: Scalar, const V: usize, const W: usize>(
    input: SymmBuf<T>,
    scratch: SymmBuf<T>,
    out: &mut [T],
    n: u32,
) {
    let rank = input.rank();
    let world = if W > 0 { W as u32 } else { input.world_size() };
    let epoch = next_epoch(input);
    epoch_barrier(input, 5, epoch); // START: every input is ready
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
    let mut tail: f32 = 0.0;
    if e < n {
        for r in 0..world {
            tail += input.peer(r)[e].to_f32();
        }
    }
    sync_threads();
    epoch_barrier(input, 6, epoch); // END: every push landed, every input read
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
    commit_epoch(input, epoch);
}

/// Element types the one-shot all-reduce supports, with their vector width.
pub trait AllReduceElem: Scalar {
    #[doc(hidden)]
    fn __launch_ll(
        comm: &symm::Comm,
        cfg: symm::LaunchConfig,
        input: &symm::SymmetricMemory,
        stage: &symm::SymmetricMemory,
        out: &mut (impl symm::DeviceSlice<Self> + ?Sized),
        n: u32,
        cap: u32,
    ) -> symm::Result<()>;
    #[doc(hidden)]
    fn __launch_two_shot(
        comm: &symm::Comm,
        cfg: symm::LaunchConfig,
        input: &symm::SymmetricMemory,
        scratch: &symm::SymmetricMemory,
        out: &mut (impl symm::DeviceSlice<Self> + ?Sized),
        n: u32,
    ) -> symm::Result<()>;
    #[doc(hidden)]
    fn __launch(
        comm: &symm::Comm,
        cfg: symm::LaunchConfig,
        input: &symm::SymmetricMemory,
        out: &mut (impl symm::DeviceSlice<Self> + ?Sized),
        n: u32,
    ) -> symm::Result<()>;
}

/// Launches `kernel::<T, C, W>` with `W` the unrolled world size (2, 4 or
/// 8), or 0 (read at run time) for any other.
macro_rules! by_world {
    ($comm:expr, $k:ident::<$t:ty, $c:tt>($($arg:expr),*)) => {
        match $comm.world_size() {
            2 => $k::launch::<$t, $c, 2>($($arg),*),
            4 => $k::launch::<$t, $c, 4>($($arg),*),
            8 => $k::launch::<$t, $c, 8>($($arg),*),
            _ => $k::launch::<$t, $c, 0>($($arg),*),
        }
    };
}

macro_rules! elem {
    ($($t:ty => $v:literal, $p:literal),*) => {$(
        impl AllReduceElem for $t {
            fn __launch_two_shot(
                comm: &symm::Comm,
                cfg: symm::LaunchConfig,
                input: &symm::SymmetricMemory,
                scratch: &symm::SymmetricMemory,
                out: &mut (impl symm::DeviceSlice<Self> + ?Sized),
                n: u32,
            ) -> symm::Result<()> {
                by_world!(comm, two_shot_all_reduce::<$t, $v>(comm, cfg, input, scratch, out, n))
            }
            fn __launch_ll(
                comm: &symm::Comm,
                cfg: symm::LaunchConfig,
                input: &symm::SymmetricMemory,
                stage: &symm::SymmetricMemory,
                out: &mut (impl symm::DeviceSlice<Self> + ?Sized),
                n: u32,
                cap: u32,
            ) -> symm::Result<()> {
                by_world!(comm, one_shot_ll::<$t, $p>(comm, cfg, input, stage, out, n, cap))
            }
            fn __launch(
                comm: &symm::Comm,
                cfg: symm::LaunchConfig,
                input: &symm::SymmetricMemory,
                out: &mut (impl symm::DeviceSlice<Self> + ?Sized),
                n: u32,
            ) -> symm::Result<()> {
                by_world!(comm, one_shot_all_reduce::<$t, $v>(comm, cfg, input, out, n))
            }
        }
    )*};
}
elem!(f32 => 4, 1, bf16 => 8, 2, f16 => 8, 2);

/// Threads per block.
pub const THREADS: u32 = 512;
/// Largest grid (the signal pad has slots for 128 blocks).
pub const MAX_BLOCKS: u32 = 128;

/// The launch configuration [`all_reduce`] uses for `n` elements of `T`:
/// enough blocks for about four 16-byte vectors per thread, at least one,
/// at most [`MAX_BLOCKS`]. The same `n` gives the same grid on every rank.
pub fn config<T: AllReduceElem>(n: usize) -> symm::LaunchConfig {
    let vecs = n.div_ceil(16 / std::mem::size_of::<T>()) as u64;
    let blocks = vecs
        .div_ceil(u64::from(THREADS) * 4)
        .clamp(1, u64::from(MAX_BLOCKS)) as u32;
    symm::LaunchConfig::linear(blocks, THREADS)
}

/// Sums the first `n` elements of every rank's `input` (a rendezvoused
/// symmetric buffer) into this rank's `out`, on `comm`'s stream. Collective:
/// every rank calls it with the same `n`. Back-to-back calls need no host
/// synchronisation, and the call can be captured in a CUDA graph.
///
/// Errors (never a hang or a wrong result) for: `n` larger than the buffer
/// or than `out`, an element type other than the buffer's, `out` not
/// 16-byte aligned, and a world size above 8.
pub fn all_reduce<T: AllReduceElem>(
    comm: &symm::Comm,
    input: &symm::SymmetricMemory,
    out: &mut (impl symm::DeviceSlice<T> + ?Sized),
    n: usize,
) -> symm::Result<()> {
    check(comm, input, &*out, n)?;
    if n == 0 {
        return Ok(());
    }
    match Path::choose(comm.world_size(), n * std::mem::size_of::<T>()) {
        Path::Ll => launch_ll(comm, input, out, n),
        // Pull's output would race peers' reads of an aliased input;
        // two-shot writes only after every rank has read it.
        Path::Pull if aliases(input, &*out) => launch_two_shot(comm, input, out, n),
        Path::Pull => launch_pull(comm, input, out, n),
        Path::TwoShot => launch_two_shot(comm, input, out, n),
    }
}

/// The kernel [`all_reduce`] picks; crossovers measured on H200s
/// (`bench/NOTES.md`, v5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// LL packets: one NVLink one-way trip, twice the bytes.
    Ll,
    /// Barrier, pull from every peer, barrier: reads `world × n`.
    Pull,
    /// Reduce-scatter then all-gather: reads and writes `n`.
    TwoShot,
}

impl Path {
    /// Two ranks: LL up to 256 KiB, then pull (a 2-rank pull reads only 2n,
    /// and beat two-shot at every size measured). More ranks: LL up to
    /// 128 KiB (it cost 5.1 µs at 64 KiB against two-shot's 7.8, and 9.0
    /// at 256 KiB against 8.1), then two-shot.
    pub fn choose(world: usize, bytes: usize) -> Path {
        let ll_max = if world <= 2 { 256 << 10 } else { 128 << 10 };
        match (bytes <= ll_max, world <= 2) {
            (true, _) => Path::Ll,
            (false, true) => Path::Pull,
            (false, false) => Path::TwoShot,
        }
    }
}

/// [`all_reduce`] forced onto the LL-packet kernel (any size; for tuning).
pub fn all_reduce_ll<T: AllReduceElem>(
    comm: &symm::Comm,
    input: &symm::SymmetricMemory,
    out: &mut (impl symm::DeviceSlice<T> + ?Sized),
    n: usize,
) -> symm::Result<()> {
    check(comm, input, &*out, n)?;
    if n == 0 {
        return Ok(());
    }
    launch_ll(comm, input, out, n)
}

/// The LL kernel on checked arguments, `n > 0`.
fn launch_ll<T: AllReduceElem>(
    comm: &symm::Comm,
    input: &symm::SymmetricMemory,
    out: &mut (impl symm::DeviceSlice<T> + ?Sized),
    n: usize,
) -> symm::Result<()> {
    let packets = n.div_ceil(4 / std::mem::size_of::<T>());
    if packets > MAX_LL_PACKETS {
        return Err(symm::Error::InvalidArgument {
            rank: comm.rank(),
            message: format!(
                "all_reduce_ll of {n} elements needs {packets} LL packets, more than {MAX_LL_PACKETS}; use all_reduce"
            ),
        });
    }
    let stage = stage_for(comm, packets)?;
    T::__launch_ll(
        comm,
        symm::LaunchConfig::linear(LL_BLOCKS, THREADS),
        input,
        &stage.smem,
        out,
        n as u32,
        stage.pair_capacity(),
    )
}

/// [`all_reduce`] forced onto the two-shot kernel (any size; for tuning).
pub fn all_reduce_two_shot<T: AllReduceElem>(
    comm: &symm::Comm,
    input: &symm::SymmetricMemory,
    out: &mut (impl symm::DeviceSlice<T> + ?Sized),
    n: usize,
) -> symm::Result<()> {
    check(comm, input, &*out, n)?;
    if n == 0 {
        return Ok(());
    }
    launch_two_shot(comm, input, out, n)
}

/// The two-shot kernel on checked arguments, `n > 0`.
fn launch_two_shot<T: AllReduceElem>(
    comm: &symm::Comm,
    input: &symm::SymmetricMemory,
    out: &mut (impl symm::DeviceSlice<T> + ?Sized),
    n: usize,
) -> symm::Result<()> {
    let scratch = scratch_for::<T>(comm, n)?;
    T::__launch_two_shot(comm, config::<T>(n), input, &scratch.smem, out, n as u32)
}

/// A rank's two-shot scratch for element type `T` (rendezvoused memory
/// only, kept in the rank's [`symm::Comm::extension`]).
struct Scratch<T> {
    smem: std::sync::Arc<symm::SymmetricMemory>,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

fn scratch_for<T: AllReduceElem>(
    comm: &symm::Comm,
    n: usize,
) -> symm::Result<std::sync::Arc<Scratch<T>>> {
    comm.extension(
        |s: &Scratch<T>| s.len >= n,
        || {
            let len = n.next_power_of_two();
            let buf = comm.alloc::<T>(len)?;
            Ok(Scratch {
                smem: buf.rendezvous()?,
                len,
                _t: std::marker::PhantomData,
            })
        },
    )
}

/// [`all_reduce`] forced onto the barrier-pull kernel (any size; for tuning).
pub fn all_reduce_pull<T: AllReduceElem>(
    comm: &symm::Comm,
    input: &symm::SymmetricMemory,
    out: &mut (impl symm::DeviceSlice<T> + ?Sized),
    n: usize,
) -> symm::Result<()> {
    check(comm, input, &*out, n)?;
    if aliases(input, &*out) {
        return Err(symm::Error::InvalidArgument {
            rank: comm.rank(),
            message: "all_reduce_pull's output overlaps its own symmetric input, which peers \
                      are still reading; use all_reduce or all_reduce_in_place"
                .into(),
        });
    }
    if n == 0 {
        return Ok(());
    }
    launch_pull(comm, input, out, n)
}

/// The barrier-pull kernel on checked, unaliased arguments, `n > 0`.
fn launch_pull<T: AllReduceElem>(
    comm: &symm::Comm,
    input: &symm::SymmetricMemory,
    out: &mut (impl symm::DeviceSlice<T> + ?Sized),
    n: usize,
) -> symm::Result<()> {
    T::__launch(comm, config::<T>(n), input, out, n as u32)
}

/// Whether `out` overlaps this rank's buffer of `input`.
fn aliases<T: AllReduceElem>(
    input: &symm::SymmetricMemory,
    out: &(impl symm::DeviceSlice<T> + ?Sized),
) -> bool {
    let base = input.buffer_ptrs()[input.rank()];
    let end = base + input.buffer_size() as u64;
    let o = out.device_ptr();
    let o_end = o + (out.len() * std::mem::size_of::<T>()) as u64;
    o < end && base < o_end && o_end > o
}

fn check<T: AllReduceElem>(
    comm: &symm::Comm,
    input: &symm::SymmetricMemory,
    out: &(impl symm::DeviceSlice<T> + ?Sized),
    n: usize,
) -> symm::Result<()> {
    let invalid = |message: String| symm::Error::InvalidArgument {
        rank: comm.rank(),
        message,
    };
    let cap = input.buffer_size() / std::mem::size_of::<T>();
    if n > cap || n > out.len() {
        return Err(invalid(format!(
            "all_reduce of {n} elements, but the input holds {cap} and the output {}",
            out.len()
        )));
    }
    if n > u32::MAX as usize {
        return Err(invalid(format!(
            "all_reduce of {n} elements is more than 2^32 - 1"
        )));
    }
    if out.device_ptr() % 16 != 0 {
        return Err(invalid(format!(
            "all_reduce's output at {:#x} is not 16-byte aligned",
            out.device_ptr()
        )));
    }
    Ok(())
}

/// Blocks of every LL launch (a fixed grid keeps the per-block epochs in step).
pub const LL_BLOCKS: u32 = 64;

/// Most packets one LL call may stage (keeps every slot index in `u32`).
const MAX_LL_PACKETS: usize = 1 << 26;

/// A rank's LL staging area: `2 × world × packets` 8-byte slots. Only the
/// rendezvoused memory is kept (it holds no `Comm`), in the rank's
/// [`symm::Comm::extension`], so it is freed with the rank.
struct Stage {
    smem: std::sync::Arc<symm::SymmetricMemory>,
    packets: usize,
}

impl Stage {
    /// Packet pairs per (parity, rank) region: the kernel's slot stride.
    fn pair_capacity(&self) -> u32 {
        (self.packets / 2) as u32
    }
}

/// The staging area of `comm`'s rank with room for `packets`, grown (a
/// collective allocation and rendezvous, reached by every rank in the same
/// call, since every rank passes the same `n`) when a larger message first
/// needs it.
fn stage_for(comm: &symm::Comm, packets: usize) -> symm::Result<std::sync::Arc<Stage>> {
    comm.extension(
        |s: &Stage| s.packets >= packets,
        || {
            let cap = packets.next_power_of_two().max(1024);
            let buf = comm.alloc::<u64>(2 * comm.world_size() * cap)?;
            buf.copy_from_host(&vec![0u64; buf.len()])?;
            Ok(Stage {
                smem: buf.rendezvous()?,
                packets: cap,
            })
        },
    )
}

/// In-place all-reduce: the sum of every rank's first `n` elements of
/// `buf` replaces them on every rank. Small messages reduce straight into
/// the buffer (peers read only the LL staging area); larger ones use the
/// two-shot kernel, which writes only after every rank has read its input.
/// Graph-safe, like [`all_reduce`].
pub fn all_reduce_in_place<T: AllReduceElem>(
    comm: &symm::Comm,
    buf: &symm::SymmBuffer<T>,
    n: usize,
) -> symm::Result<()> {
    let smem = buf.rendezvous()?;
    let invalid = |message: String| symm::Error::InvalidArgument {
        rank: comm.rank(),
        message,
    };
    if n > buf.len() {
        return Err(invalid(format!(
            "all_reduce_in_place of {n} elements, but the buffer holds {}",
            buf.len()
        )));
    }
    if n > u32::MAX as usize {
        return Err(invalid(format!(
            "all_reduce_in_place of {n} elements is more than 2^32 - 1"
        )));
    }
    if n == 0 {
        return Ok(());
    }
    let mut view = buf.slice(..)?;
    // In place, the pull path is out (its output would race peers' reads),
    // so what is not LL is two-shot. The LL alias is safe: the kernel reads
    // its input only locally and writes element e after reading it, from
    // the same thread; two-shot writes only after every rank has read its
    // input.
    if Path::choose(comm.world_size(), n * std::mem::size_of::<T>()) == Path::Ll {
        launch_ll(comm, &smem, &mut view, n)
    } else {
        launch_two_shot(comm, &smem, &mut view, n)
    }
}

#[cfg(test)]
mod tests {
    use super::Path;

    #[test]
    fn dispatch_follows_the_measured_crossovers() {
        assert_eq!(Path::choose(2, 1024), Path::Ll);
        assert_eq!(Path::choose(2, 256 << 10), Path::Ll);
        assert_eq!(Path::choose(2, (256 << 10) + 1), Path::Pull);
        assert_eq!(Path::choose(2, 64 << 20), Path::Pull);
        assert_eq!(Path::choose(4, 128 << 10), Path::Ll);
        assert_eq!(Path::choose(4, (128 << 10) + 1), Path::TwoShot);
        assert_eq!(Path::choose(8, 1 << 20), Path::TwoShot);
        assert_eq!(Path::choose(3, 1 << 20), Path::TwoShot);
    }
}
