//! The collective set beyond the all-reduce: [`all_gather`],
//! [`reduce_scatter`] (with [`ReduceOp`]s sum, avg, min, max and product),
//! [`all_to_all`] with equal splits, [`all_to_all_single`] with split sizes
//! given on the host, [`all_to_all_v`] with split sizes in device memory
//! (no host synchronisation, for MoE dispatch and combine), and
//! [`broadcast`] from any root, [`reduce`], [`gather`] and [`scatter`] to
//! and from a root, plus in-place forms.
//!
//! Every call is a collective on a [`Comm`](symm::Comm): every rank makes it, with the
//! same sizes, op and root, in the same order. It is enqueued on the
//! rank's stream, may run back to back with others with no host
//! synchronisation, and can be captured in a CUDA graph once the same
//! call has run eagerly (its first call of a shape checks the arguments
//! across ranks through the store, which capture cannot do); only
//! [`all_to_all_single`] past 8 ranks waits for its stream and cannot be
//! captured. Copies take
//! any element type and move it bit for bit; reductions take f32, bf16,
//! f16, f8e4m3 and f8e5m2, which they combine in f32 and round once, and
//! f64, i32, i64, u32 and u64, which they combine in their own type
//! (integers wrap); in rank order 0, 1, …, so every rank gets the same
//! bits ([`ReduceOp`]).
//!
//! Every call is also checked to be the same call on every rank (a
//! digest of kind, element type, sizes, op, root, ranges, path and
//! input), so a mismatch that the store check cannot see (shapes each
//! agreed on before, CUDA graph replays) fails every rank: on the host
//! before the launch, between the ranks of each host
//! ([`Comm::check_call`](symm::Comm::check_call)), and in every kernel
//! (block 0 of the pull kernels at their exit barrier, with
//! [`symm::Error::KernelAssert`]; the LL kernels' waits, by the digest in
//! every packet's tag, with [`symm::Error::CallMismatch`]). A rank's calls share their
//! counters, scratch, stage and tables: run them in order on one stream
//! (concurrent streams need separate groups).
//!
//! Each call runs one kernel on one of two [`CollectivePath`]s by the bytes each
//! rank sends to each peer ([`CollectivePath::choose`]): LL packets pushed into
//! every receiver's stage, with no barrier (`copy_ll`, `reduce_ll`; up to
//! [`LL_MAX_BYTES`]), or a pull from the peers' symmetric inputs between
//! an entry and an exit barrier. The all-gather and all-to-all also have
//! a third, asked for by name ([`all_gather_with`], [`all_to_all_with`])
//! and never by size: the pull's barriers as one-block kernels around
//! copies by the copy engines, which leave the SMs to overlapping compute
//! ([`CollectivePath::CopyEngine`]). On every path an input may be rewritten as
//! soon as the call is over in stream order. Inputs are rendezvoused
//! symmetric memory ([`SymmetricMemory`](symm::SymmetricMemory)), whole
//! allocations or views at any element offset
//! ([`SymmView::symmetric`](symm::SymmView::symmetric)); outputs are this
//! rank's device memory at any element offset: symm memory or the user's
//! cudarc memory ([`DeviceSlice`](symm::DeviceSlice)). The kernels move
//! 16-byte vectors where input and output reach a boundary together, and
//! single elements elsewhere.

mod call;
mod coalesced;
mod copies;
mod device;
mod elem;
mod ll;
mod path;
mod reductions;
mod splits;

pub use coalesced::{all_gather_coalesced, all_reduce_coalesced};
pub use copies::{
    all_gather, all_gather_in_place, all_gather_with, all_to_all, all_to_all_with, broadcast,
    broadcast_in_place, gather, scatter, BROADCAST_SAG_MIN_BYTES,
};
pub use device::*;
pub(crate) use elem::{combines_natively, dtype_op_problem};
pub use elem::{Ch, CopyCall, CopyElem, Kernel, LlCall, ReduceElem, ReduceOp};
pub use path::{force_path, CollectivePath};
pub use reductions::{all_reduce_op, fold, reduce, reduce_scatter, reduce_scatter_chunk, sum};
pub use splits::{all_to_all_single, all_to_all_v};

/// Threads per block of the pull kernels, and the most an LL launch takes
/// (256 for one-byte types, as the all-reduce's).
pub const THREADS: u32 = 512;
/// Largest grid (the signal pad has slots for 128 blocks).
pub const MAX_BLOCKS: u32 = 128;
/// The name the collectives reserve their channel under.
pub const CHANNEL_OWNER: &str = "symm_kernels::collectives";

/// Blocks of every LL launch on a GPU (a fixed block count keeps the
/// per-block epochs of the stage in step): at most 8192 threads (4096 for
/// one-byte types), one packet of 8 bytes each per peer at 64 KiB.
pub const LL_BLOCKS: u32 = 16;

/// The largest message per peer that [`CollectivePath::choose`] sends by LL:
/// measured on 2, 3 and 4 H100s (`bench/NOTES.md`, v20), where LL is
/// faster than pull for every collective up to 128 KiB per peer, and
/// either is at most ~10 % ahead at 256 KiB.
pub const LL_MAX_BYTES: usize = 128 << 10;

/// The largest message per peer that LL takes even when forced (larger
/// forced calls pull): the stage holds `2 × world` regions of twice the
/// message, rounded up to a power of two, and keeps every smaller stage it
/// replaced alive for captured CUDA graphs, so at this limit the stages
/// take up to 64 MiB of symmetric memory per rank on 8 ranks.
pub const LL_LIMIT_BYTES: usize = 1 << 20;
