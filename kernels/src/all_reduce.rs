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
    let me = buf.pad(rank);
    let counter = signal_slot(7, block_idx_x(), rank);
    let epoch = me
        .load(counter, LoadOrder::Relaxed, Scope::Gpu)
        .wrapping_add(1);
    epoch_barrier(buf, 5, epoch); // START

    let stride = grid_dim_x() * block_dim_x();
    let first = block_idx_x() * block_dim_x() + thread_idx_x();
    let vecs = n / V as u32;
    let mut i = first;
    while i < vecs {
        let zero: [T; V] = [T::from_f32(0.0f32); V];
        let mut vals: [[T; V]; 8] = [zero; 8];
        for r in 0..world {
            vals[r] = buf.peer(r).load_vec::<V>(i * V as u32);
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
    if thread_idx_x() == 0 {
        me.store(counter, epoch, StoreOrder::Relaxed, Scope::Gpu);
    }
}

/// Element types the one-shot all-reduce supports, with their vector width.
pub trait AllReduceElem: Scalar {
    #[doc(hidden)]
    fn __launch(
        comm: &symm::Comm,
        cfg: symm::LaunchConfig,
        input: &symm::SymmetricMemory,
        out: &mut (impl symm::DeviceSlice<Self> + ?Sized),
        n: u32,
    ) -> symm::Result<()>;
}

macro_rules! elem {
    ($($t:ty => $v:literal),*) => {$(
        impl AllReduceElem for $t {
            fn __launch(
                comm: &symm::Comm,
                cfg: symm::LaunchConfig,
                input: &symm::SymmetricMemory,
                out: &mut (impl symm::DeviceSlice<Self> + ?Sized),
                n: u32,
            ) -> symm::Result<()> {
                match comm.world_size() {
                    2 => one_shot_all_reduce::launch::<$t, $v, 2>(comm, cfg, input, out, n),
                    4 => one_shot_all_reduce::launch::<$t, $v, 4>(comm, cfg, input, out, n),
                    8 => one_shot_all_reduce::launch::<$t, $v, 8>(comm, cfg, input, out, n),
                    _ => one_shot_all_reduce::launch::<$t, $v, 0>(comm, cfg, input, out, n),
                }
            }
        }
    )*};
}
elem!(f32 => 4, bf16 => 8, f16 => 8);

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
    T::__launch(comm, config::<T>(n), input, out, n as u32)
}
