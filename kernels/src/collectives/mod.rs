//! The collective set beyond the all-reduce: [`all_gather`],
//! [`reduce_scatter`] (with [`ReduceOp`]s sum, avg, min, max and product),
//! [`all_to_all`] with equal splits, [`all_to_all_single`] with split sizes
//! given on the host, [`all_to_all_v`] with split sizes in device memory
//! (no host synchronisation, for MoE dispatch and combine), and
//! [`broadcast`] from any root, plus in-place forms.
//!
//! Every call is a collective on a [`Comm`]: every rank makes it, with the
//! same sizes, op and root, in the same order. It is enqueued on the
//! rank's stream, may run back to back with others with no host
//! synchronisation, and can be captured in a CUDA graph once the same
//! call has run eagerly (its first call of a shape checks the arguments
//! across ranks through the store, which capture cannot do). Copies take
//! any element type and move it bit for bit; reductions take f32, bf16,
//! f16, f8e4m3 and f8e5m2, combine in f32 in rank order 0, 1, … and round
//! once, so every rank gets the same bits.
//!
//! Every call is also checked to be the same call on every rank (a
//! digest of kind, element type, sizes, op, root, ranges, path and
//! input), so a mismatch that the store check cannot see (shapes each
//! agreed on before, CUDA graph replays) fails every rank: on the host
//! before the launch, between the ranks of each host
//! ([`Comm::check_call`](symm::Comm::check_call)), and in every kernel
//! (block 0 of the pull kernels at their exit barrier, every block of the
//! LL kernels by its header) with
//! [`symm::Error::KernelAssert`]. A rank's calls share their
//! counters, scratch, stage and tables: run them in order on one stream
//! (concurrent streams need separate groups).
//!
//! Each call runs one kernel on one of two [`Path`]s, by the bytes each
//! rank sends to each peer ([`Path::choose`]): LL packets pushed into
//! every receiver's stage, with no barrier (`copy_ll`, `reduce_ll`; up to
//! [`LL_MAX_BYTES`]), or a pull from the peers' symmetric inputs between
//! an entry and an exit barrier. Either way an input may be rewritten as
//! soon as the call is over in stream order. Inputs are rendezvoused
//! symmetric memory ([`SymmetricMemory`]); outputs are this rank's device
//! memory: symm memory or the user's cudarc memory ([`DeviceSlice`]),
//! 16-byte aligned.

mod agree;
mod device;
pub use device::*;

use symm::{BoundSlice, Comm, DeviceSlice, LaunchConfig, Result, SymmBuffer, SymmetricMemory};

use agree::agree;
pub(crate) use agree::agree as agree_call;

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

/// The largest message per peer that [`Path::choose`] sends by LL:
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

/// The kernel a collective runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Path {
    /// LL packets pushed into each receiver's stage: 8 bytes of data and
    /// the call's epoch in each 16-byte store, so data crosses NVLink once
    /// and no barrier is needed ([`copy_ll`], [`reduce_ll`]). For small
    /// messages: it moves twice the bytes.
    Ll,
    /// Barrier, pull from every peer's symmetric input, barrier
    /// (`*_pull`, and the two-shot [`all_reduce_op_two_shot`]).
    Pull,
}

impl Path {
    /// Both paths, for tests and benchmarks.
    pub const ALL: [Path; 2] = [Path::Ll, Path::Pull];

    /// The path for a call that sends `bytes` to each peer: LL up to
    /// [`LL_MAX_BYTES`], then pull (the same crossover on 2, 3 and 4 ranks).
    pub fn choose(bytes: usize) -> Path {
        if bytes <= LL_MAX_BYTES {
            Path::Ll
        } else {
            Path::Pull
        }
    }

    fn code(self) -> u64 {
        match self {
            Path::Ll => 1,
            Path::Pull => 2,
        }
    }

    fn name(code: u64) -> &'static str {
        match code {
            1 => "LL",
            2 => "pull",
            _ => "?",
        }
    }
}

/// Forces every later collective of this rank that has an LL form
/// ([`all_gather`], [`broadcast`], [`all_to_all`], [`reduce_scatter`],
/// [`all_reduce_op`] but for sum) onto `path` (`None`: [`Path::choose`]),
/// for tests and benchmarks; LL still stops at [`LL_LIMIT_BYTES`] (such a
/// call pulls). Every
/// rank must force the same: a call's path is part of what the ranks
/// agree on, so a mismatch fails the call on every rank. The environment
/// variable `SYMM_COLLECTIVES_PATH` (`ll` or `pull`) sets the default.
pub fn force_path(comm: &Comm, path: Option<Path>) -> Result<()> {
    *forced(comm)?.0.lock().unwrap_or_else(|p| p.into_inner()) = Ok(path);
    Ok(())
}

/// The forced path, or the problem with `SYMM_COLLECTIVES_PATH`.
struct Forced(std::sync::Mutex<std::result::Result<Option<Path>, String>>);

fn forced(comm: &Comm) -> Result<std::sync::Arc<Forced>> {
    comm.extension(
        |_: &Forced| true,
        |_| {
            let env = std::env::var("SYMM_COLLECTIVES_PATH").ok();
            let path = match env.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("") | Some("auto") => Ok(None),
                Some("ll") => Ok(Some(Path::Ll)),
                Some("pull") => Ok(Some(Path::Pull)),
                Some(other) => Err(format!(
                    "SYMM_COLLECTIVES_PATH={other}: expected ll, pull or auto"
                )),
            };
            Ok(Forced(std::sync::Mutex::new(path)))
        },
    )
}

/// The path of a call that sends `elems` elements of `T` to each peer,
/// and a problem to agree on where `SYMM_COLLECTIVES_PATH` is invalid.
fn path_for<T>(comm: &Comm, elems: usize) -> Result<(Path, Option<String>)> {
    let bytes = elems.saturating_mul(std::mem::size_of::<T>());
    let forced = forced(comm)?
        .0
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(match forced {
        Err(problem) => (Path::Pull, Some(problem)),
        Ok(Some(Path::Ll)) if bytes > LL_LIMIT_BYTES => (Path::Pull, None),
        Ok(Some(p)) => (p, None),
        Ok(None) => (Path::choose(bytes), None),
    })
}

/// The LL stage: `2 × world` regions (parity, sender) of at least
/// `packets` data packets after `blocks` headers, zeroed (no stale bits
/// read as a packet of epoch 1); grown as [`grow`](crate::all_reduce::grow)
/// does. One for every LL call of the rank, whatever its kind, type and
/// op, so that ranks making different calls meet at the same headers and
/// fail alike. Returns the area and its packets per region.
fn ll_stage(
    comm: &Comm,
    blocks: u32,
    packets: usize,
) -> Result<(std::sync::Arc<SymmetricMemory>, u32)> {
    struct LlStage;
    let words = 2 * (blocks as usize + packets);
    let (smem, per_region) =
        crate::all_reduce::grow::<u64, LlStage>(comm, words, 2 * comm.world_size(), 0)?;
    Ok((smem, (per_region / 2) as u32))
}

/// The LL grid for `packets` packets per peer: [`LL_BLOCKS`] blocks
/// (fewer on the emulator), the same for every LL call of a group (the
/// stage's per-block epochs stay in step), of one thread per packet, from
/// 64 to [`threads`] (the threads per block may change from call to call:
/// fewer make a small call's blocks cheaper to start and end). Where ranks
/// share a GPU, at most one block per multiprocessor for each rank
/// ([`Comm::co_resident_blocks`] of 1), which any kernel that launches at
/// all fits, so every rank's blocks are resident at once without asking
/// the driver about each kernel.
fn ll_grid<T: CopyElem>(comm: &Comm, packets: usize) -> Result<LaunchConfig> {
    let blocks = crate::all_reduce::fixed_grid(comm, LL_BLOCKS);
    let mut cfg = fitted::<T>(comm, blocks, || Ok(comm.co_resident_blocks(1)))?;
    let per_block = packets.div_ceil(cfg.grid.0 as usize).next_multiple_of(32);
    cfg.block.0 = (per_block as u32).clamp(64, threads::<T>());
    Ok(cfg)
}

/// Runs an LL kernel, `launch` ([`CopyElem::__copy_ll`] or
/// [`ReduceElem::__reduce_ll`]), on the LL grid and stage for `per_peer`
/// elements sent to each peer, with `call`'s other arguments as
/// [`LlCall`] describes.
///
/// # Safety
///
/// As `launch`'s: the caller checked `n` against every rank's input and
/// this rank's part against `out`, as for the pull kernel of the same
/// call; the stage is sized here for the headers and `per_peer`.
#[allow(clippy::too_many_arguments)]
unsafe fn run_ll<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut BoundSlice<'_, T>,
    n: usize,
    per_peer: usize,
    (op, kind, root, flag): (ReduceOp, u32, u32, u32),
    ch: Ch,
    launch: unsafe fn(&Comm, LaunchConfig, LlCall<'_, '_, T>) -> Result<()>,
) -> Result<()> {
    let packets = per_peer.div_ceil(8 / std::mem::size_of::<T>());
    let cfg = ll_grid::<T>(comm, packets)?;
    let (stage, cap) = ll_stage(comm, cfg.grid.0, packets)?;
    let call = LlCall {
        input,
        stage: &stage,
        out,
        op,
        kind,
        n: n as u32,
        root,
        flag,
        cap,
        ch,
    };
    // SAFETY: the caller's promise, and the stage holds `cap` packets per
    // region: the grid's headers and `per_peer`'s packets. Every rank's
    // stage has the same size (each grows it in the same call, the first
    // of a larger agreed shape), so the pushes into peers' stages, which
    // happen before the headers are checked, stay in bounds too.
    unsafe { launch(comm, cfg, call) }
}

/// [`agree`] on a call, then the call's channel with its digest: every
/// host call's first step after its local checks.
fn agreed(
    comm: &Comm,
    ch: u32,
    what: &str,
    shape: &[u64],
    input: &SymmetricMemory,
    problem: Option<String>,
    describe: impl Fn(&[u64]) -> String,
) -> Result<Ch> {
    agree(comm, what, shape, problem, &describe)?;
    // The input's identity joins the kernels' digest, not the store's key:
    // ranks that pass different symmetric buffers (or tensors at different
    // offsets) would read each other's wrong memory, and fail instead,
    // with no exchange per new buffer.
    let ident = [input.alloc_id(), input.buffer_offset()];
    let ch = Ch::of(ch, shape.iter().chain(&ident));
    comm.check_call(ch.index, ch.sig, || {
        format!(
            "{what} of {}, from allocation #{} at byte {}",
            describe(shape),
            ident[0],
            ident[1]
        )
    })?;
    Ok(ch)
}

/// A call's channel and its digest (see `enter_sending` in `device.rs`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Ch {
    index: u32,
    sig: u32,
}

impl Ch {
    /// The collectives' first channel with the digest of `words`.
    fn of<'a>(index: u32, words: impl IntoIterator<Item = &'a u64>) -> Ch {
        Ch {
            index,
            sig: digest(words),
        }
    }
}

/// A call's digest, which kernels compare across ranks: FNV-1a over
/// `words`, the same on every rank and build.
pub(crate) fn digest<'a>(words: impl IntoIterator<Item = &'a u64>) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for w in words {
        for b in w.to_le_bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// How [`reduce_scatter`] combines the ranks' elements. All combine in f32
/// in rank order 0, 1, … and round once to the element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The sum divided by the world size (once, at the end).
    Avg,
    /// The least, by IEEE 754-2019 `minimum`: a NaN from any rank gives a
    /// NaN (the first in rank order), and −0 counts below +0.
    Min,
    /// The greatest, by IEEE 754-2019 `maximum`: NaN as for `Min`, and +0
    /// counts above −0.
    Max,
    /// The product.
    Prod,
}

impl ReduceOp {
    /// Every op, for tests and benchmarks.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Avg,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Prod,
    ];

    /// The kernels' code for the op (their `OP` parameter).
    pub(crate) fn code(self) -> u64 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Avg => 1,
            ReduceOp::Min => 2,
            ReduceOp::Max => 3,
            ReduceOp::Prod => 4,
        }
    }

    fn from_code(c: u64) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|o| o.code() == c)
    }

    /// The op applied to `a` and `b` as the kernels do, in f32: a
    /// reference for tests.
    pub fn combine(self, a: f32, b: f32) -> f32 {
        match self {
            ReduceOp::Sum | ReduceOp::Avg => a + b,
            ReduceOp::Prod => a * b,
            ReduceOp::Min | ReduceOp::Max if a.is_nan() => a,
            ReduceOp::Min | ReduceOp::Max if b.is_nan() => b,
            ReduceOp::Min if a == b => f32::from_bits(a.to_bits() | b.to_bits()),
            ReduceOp::Max if a == b => f32::from_bits(a.to_bits() & b.to_bits()),
            ReduceOp::Min => a.min(b),
            ReduceOp::Max => a.max(b),
        }
    }
}

/// Element types of the copies ([`all_gather`], [`all_to_all`] and its
/// split forms, [`broadcast`]): every element type, moved bit for bit.
pub trait CopyElem: symm::dsl::Scalar {
    #[doc(hidden)]
    fn __grid(kernel: Kernel, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Launches a copy kernel on checked arguments.
    ///
    /// # Safety
    ///
    /// The arguments are as this module's calls make them: every index the
    /// kernel computes from them is in bounds of the buffers.
    #[doc(hidden)]
    unsafe fn __copy(comm: &Comm, cfg: LaunchConfig, call: CopyCall<'_, '_, Self>) -> Result<()>;

    /// Launches [`copy_ll`] on checked arguments.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy`]; `stage` holds `2 × world` regions of `cap`
    /// packets, each at least the grid's headers and the call's packets.
    #[doc(hidden)]
    unsafe fn __copy_ll(comm: &Comm, cfg: LaunchConfig, call: LlCall<'_, '_, Self>) -> Result<()>;
}

/// One LL kernel's arguments: [`copy_ll`]'s (`op` unused) or
/// [`reduce_ll`]'s (`kind` unused; `root` is its `chunk`, `flag` its
/// `scatter`).
#[doc(hidden)]
pub struct LlCall<'a, 'b, T: symm::dsl::Scalar> {
    input: &'a SymmetricMemory,
    stage: &'a SymmetricMemory,
    out: &'a mut BoundSlice<'b, T>,
    op: ReduceOp,
    kind: u32,
    n: u32,
    root: u32,
    flag: u32,
    cap: u32,
    ch: Ch,
}

/// Element types of the reductions ([`reduce_scatter`], [`all_reduce_op`]):
/// f32, bf16, f16, and the fp8 types f8e4m3 and f8e5m2 (accumulating in
/// f32, as NCCL does).
pub trait ReduceElem: CopyElem {
    #[doc(hidden)]
    fn __rs_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    #[doc(hidden)]
    fn __ar_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Launches the two-shot all-reduce kernel of `op`.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy`]; `scratch` holds `n` elements.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __all_reduce(
        comm: &Comm,
        cfg: LaunchConfig,
        op: ReduceOp,
        input: &SymmetricMemory,
        scratch: &SymmetricMemory,
        out: &mut BoundSlice<'_, Self>,
        n: u32,
        ch: Ch,
    ) -> Result<()>;

    #[doc(hidden)]
    fn __arc_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Launches the coalesced all-reduce kernel of `op`.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy`]; `table` holds `count` entries that fit
    /// `buf` and `scratch`.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __all_reduce_coalesced(
        comm: &Comm,
        cfg: LaunchConfig,
        op: ReduceOp,
        buf: &SymmetricMemory,
        scratch: &mut BoundSlice<'_, Self>,
        table: &BoundSlice<'_, u32>,
        count: u32,
        ch: Ch,
    ) -> Result<()>;

    /// Launches [`reduce_ll`] of `call.op` on checked arguments.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy_ll`].
    #[doc(hidden)]
    unsafe fn __reduce_ll(comm: &Comm, cfg: LaunchConfig, call: LlCall<'_, '_, Self>)
        -> Result<()>;

    /// Launches the reduce-scatter kernel of `op`.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy`].
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __reduce_scatter(
        comm: &Comm,
        cfg: LaunchConfig,
        op: ReduceOp,
        input: &SymmetricMemory,
        out: &mut BoundSlice<'_, Self>,
        n: u32,
        chunk: u32,
        ch: Ch,
    ) -> Result<()>;
}

/// The collectives' kernels, to ask for a co-resident grid.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    AllGather,
    Broadcast,
    AllToAll,
    AllToAllV,
    AllGatherCoalesced,
}

/// One copy kernel's arguments.
#[doc(hidden)]
pub enum CopyCall<'a, 'b, T: symm::dsl::Scalar> {
    AllGather {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        n: u32,
        in_place: u32,
        ch: Ch,
    },
    Broadcast {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        n: u32,
        root: u32,
        skip: u32,
        ch: Ch,
    },
    AllToAll {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        m: u32,
        ch: Ch,
    },
    AllGatherCoalesced {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        table: &'a BoundSlice<'b, u32>,
        count: u32,
        ch: Ch,
    },
    AllToAllV {
        input: &'a SymmetricMemory,
        meta: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        out_cap: u32,
        splits: &'a BoundSlice<'b, u64>,
        dev: u32,
        report: &'a mut BoundSlice<'b, u64>,
        packed: [u64; 8],
        ch: Ch,
    },
}

macro_rules! copy_elem {
    ($($t:ty => $v:literal),* $(,)?) => {$(
        impl CopyElem for $t {
            fn __grid(kernel: Kernel, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                match kernel {
                    Kernel::AllGather => all_gather_pull::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0),
                    Kernel::Broadcast => broadcast_pull::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0),
                    Kernel::AllToAll => all_to_all_pull::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0),
                    Kernel::AllToAllV => all_to_all_v_pull::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0),
                    Kernel::AllGatherCoalesced => all_gather_coalesced_pull::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0),
                }
            }

            unsafe fn __copy(comm: &Comm, cfg: LaunchConfig, call: CopyCall<'_, '_, Self>) -> Result<()> {
                // SAFETY: the caller's arguments are this module's, with
                // which every index of these kernels is in bounds (the
                // split sizes of `AllToAllV` are checked by the kernel
                // itself against every rank's input and output before any
                // copy): the emulator checks each index in
                // tests/collectives.rs at worlds 1-8, odd sizes and uneven
                // and zero splits.
                unsafe {
                    match call {
                        CopyCall::AllGather { input, out, n, in_place, ch } =>
                            all_gather_pull::launch_unchecked::<$t, $v>(comm, cfg, input, out, n, in_place, ch.index, ch.sig),
                        CopyCall::Broadcast { input, out, n, root, skip, ch } =>
                            broadcast_pull::launch_unchecked::<$t, $v>(comm, cfg, input, out, n, root, skip, ch.index, ch.sig),
                        CopyCall::AllGatherCoalesced { input, out, table, count, ch } =>
                            all_gather_coalesced_pull::launch_unchecked::<$t, $v>(comm, cfg, input, out, table, count, ch.index, ch.sig),
                        CopyCall::AllToAll { input, out, m, ch } =>
                            all_to_all_pull::launch_unchecked::<$t, $v>(comm, cfg, input, out, m, ch.index, ch.sig),
                        CopyCall::AllToAllV { input, meta, out, out_cap, splits, dev, report, packed: p, ch } =>
                            all_to_all_v_pull::launch_unchecked::<$t, $v>(
                                comm, cfg, input, meta, out, out_cap, splits, dev, report,
                                p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], ch.index, ch.sig,
                            ),
                    }
                }
            }

            unsafe fn __copy_ll(comm: &Comm, cfg: LaunchConfig, c: LlCall<'_, '_, Self>) -> Result<()> {
                // SAFETY: as `__copy`, with the stage sized by `run_ll`.
                unsafe {
                    copy_ll::launch_unchecked::<$t, { $v / 2 }>(
                        comm, cfg, c.input, c.stage, c.out, c.kind, c.n, c.root, c.flag, c.cap,
                        c.ch.index, c.ch.sig,
                    )
                }
            }
        }
    )*};
}
copy_elem!(
    f32 => 4, f64 => 2, symm::dsl::bf16 => 8, symm::dsl::f16 => 8,
    u8 => 16, u32 => 4, u64 => 2, i32 => 4, i64 => 2,
    symm::dsl::f8e4m3 => 16, symm::dsl::f8e5m2 => 16,
);

/// Calls `kernel::f::<T, V, OP>` with `OP` the kernels' code of `op`
/// (its `OP` parameter is a constant, so each op is its own instantiation).
macro_rules! by_op {
    ($op:expr, $k:ident::$f:ident::<$t:ty, $($v:tt),+>($($arg:expr),*)) => {
        match $op {
            ReduceOp::Sum => $k::$f::<$t, $($v),+, 0>($($arg),*),
            ReduceOp::Avg => $k::$f::<$t, $($v),+, 1>($($arg),*),
            ReduceOp::Min => $k::$f::<$t, $($v),+, 2>($($arg),*),
            ReduceOp::Max => $k::$f::<$t, $($v),+, 3>($($arg),*),
            ReduceOp::Prod => $k::$f::<$t, $($v),+, 4>($($arg),*),
        }
    };
}

macro_rules! reduce_elem {
    ($($t:ty => $v:literal),* $(,)?) => {$(
        impl ReduceElem for $t {
            fn __rs_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                by_op!(op, reduce_scatter_pull::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0))
            }

            unsafe fn __reduce_ll(comm: &Comm, cfg: LaunchConfig, c: LlCall<'_, '_, Self>) -> Result<()> {
                // SAFETY: as `__copy`, with the stage sized by `run_ll`.
                unsafe {
                    by_op!(c.op, reduce_ll::launch_unchecked::<$t, { $v / 2 }>(
                        comm, cfg, c.input, c.stage, c.out, c.n, c.root, c.flag, c.cap,
                        c.ch.index, c.ch.sig
                    ))
                }
            }

            fn __ar_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                by_op!(op, all_reduce_op_two_shot::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0))
            }

            unsafe fn __all_reduce(
                comm: &Comm,
                cfg: LaunchConfig,
                op: ReduceOp,
                input: &SymmetricMemory,
                scratch: &SymmetricMemory,
                out: &mut BoundSlice<'_, Self>,
                n: u32,
                ch: Ch,
            ) -> Result<()> {
                // SAFETY: as `__copy`: `all_reduce_op` checked `n` against
                // the input and `out`, and `scratch` holds `n` elements.
                unsafe {
                    by_op!(op, all_reduce_op_two_shot::launch_unchecked::<$t, $v>(comm, cfg, input, scratch, out, n, ch.index, ch.sig))
                }
            }

            fn __arc_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                by_op!(op, all_reduce_coalesced_pull::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0))
            }

            unsafe fn __all_reduce_coalesced(
                comm: &Comm,
                cfg: LaunchConfig,
                op: ReduceOp,
                buf: &SymmetricMemory,
                scratch: &mut BoundSlice<'_, Self>,
                table: &BoundSlice<'_, u32>,
                count: u32,
                ch: Ch,
            ) -> Result<()> {
                // SAFETY: as `__copy`: `all_reduce_coalesced` checked every
                // range against the buffer and sized the scratch for them.
                unsafe {
                    by_op!(op, all_reduce_coalesced_pull::launch_unchecked::<$t, $v>(comm, cfg, buf, scratch, table, count, ch.index, ch.sig))
                }
            }

            unsafe fn __reduce_scatter(
                comm: &Comm,
                cfg: LaunchConfig,
                op: ReduceOp,
                input: &SymmetricMemory,
                out: &mut BoundSlice<'_, Self>,
                n: u32,
                chunk: u32,
                ch: Ch,
            ) -> Result<()> {
                // SAFETY: as `__copy`: `reduce_scatter` checked `n`
                // against the input and this rank's chunk against `out`.
                unsafe {
                    by_op!(op, reduce_scatter_pull::launch_unchecked::<$t, $v>(comm, cfg, input, out, n, chunk, ch.index, ch.sig))
                }
            }
        }
    )*};
}
reduce_elem!(
    f32 => 4, symm::dsl::bf16 => 8, symm::dsl::f16 => 8,
    symm::dsl::f8e4m3 => 16, symm::dsl::f8e5m2 => 16,
);

/// The elements of a [`reduce_scatter`] of `n` that rank `rank` of `world`
/// gets: chunks of `ceil(n / world)` in rank order, so the last ranks get
/// less (the rest of `n`), or none.
pub fn reduce_scatter_chunk(n: usize, world: usize, rank: usize) -> std::ops::Range<usize> {
    let chunk = n.div_ceil(world.max(1));
    let start = (rank * chunk).min(n);
    start..(start + chunk).min(n)
}

/// Every rank's `n` elements of `input` (a rendezvoused symmetric buffer),
/// in rank order, into this rank's `out[0..world × n]`. `out` must not
/// overlap the input (for that, [`all_gather_in_place`]).
pub fn all_gather<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    let ch = channel(comm)?;
    let (path, path_problem) = path_for::<T>(comm, n)?;
    let bound_out = comm.bind_mut("out", out);
    let world = comm.world_size();
    let problem = bound_out
        .as_ref()
        .map_err(|e| e.to_string())
        .and_then(|out| {
            usable(comm)
                .and_then(|()| fits::<T>(input, n, "the input"))
                .and_then(|()| out_fits(out, n.checked_mul(world), "world × n"))
                .and_then(|()| disjoint(input, out))
        })
        .err()
        .or(path_problem);
    let shape = [1, dtype::<T>(), n as u64, path.code()];
    let ch = agreed(comm, ch, "all_gather", &shape, input, problem, |s| {
        format!(
            "all_gather of {} elements of {} ({})",
            arg(s, 2),
            type_name(s),
            path_name(s, 3)
        )
    })?;
    let mut out = bound_out?;
    if n == 0 {
        return Ok(());
    }
    if path == Path::Ll {
        // SAFETY: `n` fits every rank's input and `world × n` this rank's
        // `out` (checked and agreed above).
        return unsafe {
            run_ll(
                comm,
                input,
                &mut out,
                n,
                n,
                (ReduceOp::Sum, 0, 0, 0),
                ch,
                T::__copy_ll,
            )
        };
    }
    let cfg = grid::<T>(comm, (n * world) as u64, || {
        T::__grid(Kernel::AllGather, comm, threads::<T>())
    })?;
    // SAFETY: `n` fits the input on every rank (checked on each, agreed
    // by all) and `world × n` fits `out`.
    unsafe {
        T::__copy(
            comm,
            cfg,
            CopyCall::AllGather {
                input,
                out: &mut out,
                n: n as u32,
                in_place: 0,
                ch,
            },
        )
    }
}

/// All-gather in place: rank r's `n` elements at `buf[r × n..]` reach the
/// same place in every rank's `buf`.
pub fn all_gather_in_place<T: CopyElem>(comm: &Comm, buf: &SymmBuffer<T>, n: usize) -> Result<()> {
    let ch = channel(comm)?;
    let (path, path_problem) = path_for::<T>(comm, n)?;
    let smem = buf.rendezvous()?;
    let world = comm.world_size();
    let problem = usable(comm)
        .and_then(|()| match n.checked_mul(world) {
            Some(t) if t <= buf.len() && t <= u32::MAX as usize => Ok(()),
            _ => Err(format!(
                "an in-place all_gather of {n} elements per rank needs {world} × {n}, and \
                 the buffer holds {}",
                buf.len()
            )),
        })
        .err()
        .or(path_problem);
    let shape = [2, dtype::<T>(), n as u64, path.code()];
    let ch = agreed(
        comm,
        ch,
        "all_gather_in_place",
        &shape,
        &smem,
        problem,
        |s| {
            format!(
                "all_gather_in_place of {} elements of {} ({})",
                arg(s, 2),
                type_name(s),
                path_name(s, 3)
            )
        },
    )?;
    if n == 0 {
        return Ok(());
    }
    let mut out = buf.slice(..)?;
    let mut out = comm.bind_mut("buf", &mut out)?;
    if path == Path::Ll {
        // SAFETY: `world × n` fits the buffer on every rank.
        return unsafe {
            run_ll(
                comm,
                &smem,
                &mut out,
                n,
                n,
                (ReduceOp::Sum, 0, 0, 1),
                ch,
                T::__copy_ll,
            )
        };
    }
    let cfg = grid::<T>(comm, (n * world) as u64, || {
        T::__grid(Kernel::AllGather, comm, threads::<T>())
    })?;
    // SAFETY: `world × n` fits the buffer on every rank.
    unsafe {
        T::__copy(
            comm,
            cfg,
            CopyCall::AllGather {
                input: &smem,
                out: &mut out,
                n: n as u32,
                in_place: 1,
                ch,
            },
        )
    }
}

/// Rank `root`'s first `n` elements of `input` into every rank's `out`
/// (the root's too, unless `out` is its input itself).
pub fn broadcast<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    root: usize,
) -> Result<()> {
    let ch = channel(comm)?;
    let (path, path_problem) = path_for::<T>(comm, n)?;
    let bound_out = comm.bind_mut("out", out);
    let world = comm.world_size();
    let own = input.buffer_ptrs()[input.rank()];
    let problem = bound_out
        .as_ref()
        .map_err(|e| e.to_string())
        .and_then(|out| {
            usable(comm)
                .and_then(|()| {
                    if root < world {
                        Ok(())
                    } else {
                        Err(format!("root {root} is not a rank of {world}"))
                    }
                })
                .and_then(|()| fits::<T>(input, n, "the input"))
                .and_then(|()| out_fits(out, Some(n), "n"))
                // Exactly the input is fine: another rank writes only its
                // own buffer, which no peer reads, and the root skips the copy.
                .and_then(|()| same_or_disjoint(input, out))
        })
        .err()
        .or(path_problem);
    let shape = [3, dtype::<T>(), n as u64, root as u64, path.code()];
    let ch = agreed(comm, ch, "broadcast", &shape, input, problem, |s| {
        format!(
            "broadcast of {} elements of {} from root {} ({})",
            arg(s, 2),
            type_name(s),
            arg(s, 3),
            path_name(s, 4)
        )
    })?;
    let mut out = bound_out?;
    let skip = out.device_ptr() == own && comm.rank() == root;
    if n == 0 {
        return Ok(());
    }
    if path == Path::Ll {
        let what = (ReduceOp::Sum, 1, root as u32, u32::from(skip));
        // SAFETY: `n` fits every rank's input and this rank's `out`.
        return unsafe { run_ll(comm, input, &mut out, n, n, what, ch, T::__copy_ll) };
    }
    let cfg = grid::<T>(comm, n as u64, || {
        T::__grid(Kernel::Broadcast, comm, threads::<T>())
    })?;
    // SAFETY: `n` fits every rank's input and this rank's `out`.
    unsafe {
        T::__copy(
            comm,
            cfg,
            CopyCall::Broadcast {
                input,
                out: &mut out,
                n: n as u32,
                root: root as u32,
                skip: u32::from(skip),
                ch,
            },
        )
    }
}

/// Broadcast in place: rank `root`'s first `n` elements of `buf` replace
/// every other rank's.
pub fn broadcast_in_place<T: CopyElem>(
    comm: &Comm,
    buf: &SymmBuffer<T>,
    n: usize,
    root: usize,
) -> Result<()> {
    let smem = buf.rendezvous()?;
    broadcast(comm, &smem, &mut buf.slice(..)?, n, root)
}

/// Reduce-scatter: rank r gets, in `out`, the reduction by `op` of its
/// chunk ([`reduce_scatter_chunk`]) of every rank's first `n` elements of
/// `input`. `n` need not divide by the world size.
pub fn reduce_scatter<T: ReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    op: ReduceOp,
) -> Result<()> {
    let ch = channel(comm)?;
    let world = comm.world_size();
    let (path, path_problem) = path_for::<T>(comm, n.div_ceil(world))?;
    let bound_out = comm.bind_mut("out", out);
    let mine = reduce_scatter_chunk(n, world, comm.rank());
    let problem = bound_out
        .as_ref()
        .map_err(|e| e.to_string())
        .and_then(|out| {
            usable(comm)
                .and_then(|()| fits::<T>(input, n, "the input"))
                .and_then(|()| out_fits(out, Some(mine.len()), "this rank's chunk"))
                .and_then(|()| disjoint(input, out))
        })
        .err()
        .or(path_problem);
    let shape = [4, dtype::<T>(), n as u64, op.code(), path.code()];
    let ch = agreed(comm, ch, "reduce_scatter", &shape, input, problem, |s| {
        format!(
            "reduce_scatter of {} elements of {} by {} ({})",
            arg(s, 2),
            type_name(s),
            op_name(s, 3),
            path_name(s, 4)
        )
    })?;
    let mut out = bound_out?;
    if n == 0 {
        return Ok(());
    }
    let chunk = n.div_ceil(world);
    if path == Path::Ll {
        let what = (op, 0, chunk as u32, 1);
        // SAFETY: `n` fits every rank's input, and this rank's chunk `out`.
        return unsafe { run_ll(comm, input, &mut out, n, chunk, what, ch, T::__reduce_ll) };
    }
    let cfg = grid::<T>(comm, chunk as u64, || {
        T::__rs_grid(op, comm, threads::<T>())
    })?;
    // SAFETY: `n` fits every rank's input, and this rank's chunk `out`.
    unsafe { T::__reduce_scatter(comm, cfg, op, input, &mut out, n as u32, chunk as u32, ch) }
}

/// All-reduce by `op`: every rank's `out[0..n]` gets the reduction of
/// every rank's first `n` elements of `input`. [`ReduceOp::Sum`] runs the
/// built-in [`all_reduce`](crate::all_reduce::all_reduce) (its kernels
/// and measured dispatch); the other ops run a two-shot kernel
/// ([`all_reduce_op_two_shot`]) through a scratch buffer that the first
/// call (or a larger one) allocates and later growth keeps alive, as the
/// all-reduce's staging. `out` may be exactly this rank's `input` (in
/// place) but may not overlap it otherwise.
pub fn all_reduce_op<T: ReduceElem + crate::all_reduce::AllReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    op: ReduceOp,
) -> Result<()> {
    let ch = channel(comm)?;
    let (path, path_problem) = path_for::<T>(comm, n)?;
    let binding = comm.bind_mut("out", out);
    let problem = binding
        .as_ref()
        .map_err(|e| e.to_string())
        .and_then(|bound| {
            usable(comm)
                .and_then(|()| fits::<T>(input, n, "the input"))
                .and_then(|()| out_fits(bound, Some(n), "n"))
                .and_then(|()| same_or_disjoint(input, bound))
        })
        .err()
        .or(path_problem.filter(|_| op != ReduceOp::Sum));
    // Sum runs the built-in all-reduce, which chooses its own kernel.
    let path_code = if op == ReduceOp::Sum { 0 } else { path.code() };
    let shape = [8, dtype::<T>(), n as u64, op.code(), path_code];
    let ch = agreed(comm, ch, "all_reduce_op", &shape, input, problem, |s| {
        format!(
            "all_reduce of {} elements of {} by {} ({})",
            arg(s, 2),
            type_name(s),
            op_name(s, 3),
            path_name(s, 4)
        )
    })?;
    let mut bound = binding?;
    if n == 0 {
        return Ok(());
    }
    if op == ReduceOp::Sum {
        // Agreed like every op (a rank calling Sum where another calls Max
        // would otherwise run another kernel, and allocate staging its
        // peers do not); then the built-in's own kernels and dispatch.
        drop(bound);
        return crate::all_reduce::all_reduce(comm, input, out, n);
    }
    if path == Path::Ll {
        // SAFETY: `n` fits every rank's input and this rank's `out`.
        return unsafe {
            run_ll(
                comm,
                input,
                &mut bound,
                n,
                n,
                (op, 0, 0, 0),
                ch,
                T::__reduce_ll,
            )
        };
    }
    let scratch = scratch::<T>(comm, n)?;
    let world = comm.world_size();
    let cfg = grid::<T>(comm, n.div_ceil(world) as u64, || {
        T::__ar_grid(op, comm, threads::<T>())
    })?;
    // SAFETY: `n` fits every rank's input and this rank's `out`, and the
    // scratch holds at least `n` elements.
    unsafe { T::__all_reduce(comm, cfg, op, input, &scratch, &mut bound, n as u32, ch) }
}

/// A rank's scratch of at least `n` elements of `T` for
/// [`all_reduce_op`]: the all-reduce's growing staging
/// ([`grow`](crate::all_reduce::grow)), which keeps older areas alive for
/// captured CUDA graphs, as a family of its own (no other kernel's calls
/// are ordered with these by a shared barrier, so none may share it).
fn scratch<T: ReduceElem>(comm: &Comm, n: usize) -> Result<std::sync::Arc<SymmetricMemory>> {
    struct OpScratch;
    let (smem, _) = crate::all_reduce::grow::<T, OpScratch>(comm, n, 1, 0)?;
    Ok(smem)
}

/// Coalesced all-gather: one launch for several tensors, each a range of
/// the symmetric `input` (the same ranges on every rank). Tensor t's
/// gathered result, every rank's range in rank order, lands in `out` after
/// those of the tensors before it: at `world × (sum of the earlier
/// lengths)`. The first call with a set of ranges uploads their table
/// (kept for later calls with the same set), so capture a CUDA graph after
/// an eager call with the same ranges.
pub fn all_gather_coalesced<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    ranges: &[std::ops::Range<usize>],
    out: &mut (impl DeviceSlice<T> + ?Sized),
) -> Result<()> {
    let ch = channel(comm)?;
    // Declared before `out`, whose binding borrows for as long as it.
    let table_buf;
    let binding = comm.bind_mut("out", out);
    let world = comm.world_size();
    let cap = input.buffer_size() / std::mem::size_of::<T>();
    let mut rows = Vec::with_capacity(ranges.len());
    let mut at = 0usize;
    let mut problem = binding.as_ref().err().map(|e| e.to_string());
    if problem.is_none() {
        problem = usable(comm).err();
    }
    for r in ranges {
        if r.start > r.end || r.end > cap || r.end > u32::MAX as usize {
            problem.get_or_insert(format!(
                "the range {r:?} is not within the input's {cap} elements"
            ));
        }
        rows.push([r.start, r.len(), at]);
        at = at.saturating_add(r.len().saturating_mul(world));
    }
    if let (None, Ok(out)) = (&problem, &binding) {
        problem = out_fits(out, Some(at), "world × the ranges' lengths")
            .and_then(|()| disjoint(input, out))
            .err();
    }
    let shape = coalesced_shape(10, dtype::<T>(), 0, ranges);
    let ch = agreed(
        comm,
        ch,
        "all_gather_coalesced",
        &shape,
        input,
        problem,
        |s| {
            format!(
                "all_gather_coalesced of {} tensors of {} (ranges digest {})",
                arg(s, 3),
                type_name(s),
                arg(s, 4)
            )
        },
    )?;
    let mut out = binding?;
    if at == 0 {
        return Ok(());
    }
    table_buf = table(comm, &rows)?;
    let table = comm.bind("table", &*table_buf)?;
    let cfg = grid::<T>(comm, at as u64, || {
        T::__grid(Kernel::AllGatherCoalesced, comm, threads::<T>())
    })?;
    // SAFETY: every range fits every rank's input (the same ranges on
    // every rank, agreed), and `out` holds world × their lengths.
    unsafe {
        T::__copy(
            comm,
            cfg,
            CopyCall::AllGatherCoalesced {
                input,
                out: &mut out,
                table: &table,
                count: rows.len() as u32,
                ch,
            },
        )
    }
}

/// Coalesced all-reduce by `op`, in place: one launch reduces several
/// tensors, each a range of the symmetric `buf` (the same ranges on every
/// rank). A one-shot kernel: each rank reads every tensor from every peer
/// (suited to many small tensors), reduces into a scratch of its own and
/// writes the results back once no peer reads its buffer. Tables and
/// scratch are made on first use, as for [`all_gather_coalesced`].
pub fn all_reduce_coalesced<T: ReduceElem>(
    comm: &Comm,
    buf: &SymmBuffer<T>,
    ranges: &[std::ops::Range<usize>],
    op: ReduceOp,
) -> Result<()> {
    let ch = channel(comm)?;
    let smem = buf.rendezvous()?;
    let mut rows = Vec::with_capacity(ranges.len());
    let mut at = 0usize;
    let mut problem = usable(comm).err();
    let per_vec = (16 / std::mem::size_of::<T>()).max(1);
    for r in ranges {
        if r.start > r.end || r.end > buf.len() || r.end > u32::MAX as usize {
            problem.get_or_insert(format!(
                "the range {r:?} is not within the buffer's {} elements",
                buf.len()
            ));
        }
        // Each tensor's scratch starts where the buffer's range does
        // modulo a vector, so an aligned tensor moves in vectors.
        at = at.next_multiple_of(per_vec) + r.start % per_vec;
        rows.push([r.start, r.len(), at]);
        at = at.saturating_add(r.len());
    }
    let mut sorted: Vec<_> = ranges.iter().filter(|r| !r.is_empty()).collect();
    sorted.sort_by_key(|r| r.start);
    if sorted.windows(2).any(|w| w[1].start < w[0].end) {
        problem.get_or_insert("the ranges overlap".into());
    }
    if at > u32::MAX as usize {
        problem.get_or_insert("the ranges hold 2^32 elements or more".into());
    }
    let shape = coalesced_shape(11, dtype::<T>(), op.code(), ranges);
    let ch = agreed(
        comm,
        ch,
        "all_reduce_coalesced",
        &shape,
        &smem,
        problem,
        |s| {
            format!(
                "all_reduce_coalesced of {} tensors of {} by {} (ranges digest {})",
                arg(s, 3),
                type_name(s),
                op_name(s, 2),
                arg(s, 4)
            )
        },
    )?;
    if at == 0 {
        return Ok(());
    }
    let table = table(comm, &rows)?;
    let table = comm.bind("table", &*table)?;
    let scratch = local_scratch::<T>(comm, at)?;
    let mut scratch = scratch.buf.lock().unwrap_or_else(|p| p.into_inner());
    let mut scratch = comm.bind_mut("scratch", &mut *scratch)?;
    let cfg = grid::<T>(comm, at as u64, || T::__arc_grid(op, comm, threads::<T>()))?;
    // SAFETY: every range fits every rank's buffer (the same ranges on
    // every rank, agreed), and the scratch holds `at` elements, past every
    // entry's offset plus its length.
    unsafe {
        T::__all_reduce_coalesced(
            comm,
            cfg,
            op,
            &smem,
            &mut scratch,
            &table,
            rows.len() as u32,
            ch,
        )
    }
}

/// A coalesced call's shape: its kind, element type, op, the number of
/// tensors and a digest of their ranges (equal ranges give equal digests
/// on every rank; a mismatch shows as different digests).
fn coalesced_shape(kind: u64, dtype: u64, op: u64, ranges: &[std::ops::Range<usize>]) -> [u64; 5] {
    use std::hash::{Hash, Hasher};
    // A fixed hasher (the same on every rank and process), not a random one.
    let mut h = std::hash::DefaultHasher::new();
    for r in ranges {
        (r.start, r.end).hash(&mut h);
    }
    [kind, dtype, op, ranges.len() as u64, h.finish()]
}

/// The device table of `rows` (three u32 each), uploaded on first use and
/// kept for later calls with the same rows.
fn table(comm: &Comm, rows: &[[usize; 3]]) -> Result<std::sync::Arc<symm::DeviceBuffer<u32>>> {
    type Tables = Vec<(Vec<u32>, std::sync::Arc<symm::DeviceBuffer<u32>>)>;
    struct Cache(std::sync::Mutex<Tables>);
    let flat: Vec<u32> = rows.iter().flatten().map(|&x| x as u32).collect();
    let cache = comm.extension(|_: &Cache| true, |_| Ok(Cache(Default::default())))?;
    let mut tables = cache.0.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, t)) = tables.iter().find(|(k, _)| *k == flat) {
        return Ok(t.clone());
    }
    // Kept for the rank's life (a few bytes each): a CUDA graph captured
    // with a table reads it at every replay.
    let t = std::sync::Arc::new(comm.device_buffer_from(&flat)?);
    tables.push((flat, t.clone()));
    Ok(t)
}

/// This rank's scratch of at least `len` elements of `T` (not symmetric:
/// only the rank itself touches it), kept in its extensions; a larger
/// call makes a new one and keeps the older alive (CUDA graphs captured
/// with it still use it).
struct LocalScratch<T: symm::Element> {
    buf: std::sync::Mutex<symm::DeviceBuffer<T>>,
    len: usize,
    _older: Option<std::sync::Arc<LocalScratch<T>>>,
}

fn local_scratch<T: ReduceElem>(
    comm: &Comm,
    len: usize,
) -> Result<std::sync::Arc<LocalScratch<T>>> {
    comm.extension(
        |s: &LocalScratch<T>| s.len >= len,
        |older| {
            let len = len.next_power_of_two().max(4096);
            Ok(LocalScratch {
                buf: std::sync::Mutex::new(comm.device_buffer::<T>(len)?),
                len,
                _older: older,
            })
        },
    )
}

/// All-to-all with equal splits: rank p's `input[r × m..(r + 1) × m]`
/// lands at `out[p × m..]` of rank r, for every pair (p, r).
pub fn all_to_all<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    m: usize,
) -> Result<()> {
    let ch = channel(comm)?;
    let (path, path_problem) = path_for::<T>(comm, m)?;
    let bound_out = comm.bind_mut("out", out);
    let world = comm.world_size();
    let total = m.checked_mul(world);
    let problem = bound_out
        .as_ref()
        .map_err(|e| e.to_string())
        .and_then(|out| {
            usable(comm)
                .and_then(|()| match total {
                    Some(t) => fits::<T>(input, t, "the input"),
                    None => Err(format!("{world} × {m} elements overflow")),
                })
                .and_then(|()| out_fits(out, total, "world × m"))
                .and_then(|()| disjoint(input, out))
        })
        .err()
        .or(path_problem);
    let shape = [5, dtype::<T>(), m as u64, path.code()];
    let ch = agreed(comm, ch, "all_to_all", &shape, input, problem, |s| {
        format!(
            "all_to_all of {} elements per peer of {} ({})",
            arg(s, 2),
            type_name(s),
            path_name(s, 3)
        )
    })?;
    let mut out = bound_out?;
    if m == 0 {
        return Ok(());
    }
    if path == Path::Ll {
        // SAFETY: `world × m` fits every rank's input and this rank's `out`.
        return unsafe {
            run_ll(
                comm,
                input,
                &mut out,
                m,
                m,
                (ReduceOp::Sum, 2, 0, 0),
                ch,
                T::__copy_ll,
            )
        };
    }
    let cfg = grid::<T>(comm, (m * world) as u64, || {
        T::__grid(Kernel::AllToAll, comm, threads::<T>())
    })?;
    // SAFETY: `world × m` fits every rank's input and this rank's `out`.
    unsafe {
        T::__copy(
            comm,
            cfg,
            CopyCall::AllToAll {
                input,
                out: &mut out,
                m: m as u32,
                ch,
            },
        )
    }
}

/// All-to-all with split sizes given on the host, as PyTorch's
/// `all_to_all_single`: this rank sends `input[off..off + in_splits[r]]`
/// to rank r (`off` the sum of the splits before r), and receives
/// `out_splits[p]` elements from rank p, placed in rank order in `out`.
/// Every rank's `out_splits[p]` must be rank p's `in_splits` entry for it:
/// the kernel checks the whole exchange, and a mismatch fails it on every
/// rank alike ([`symm::Error::KernelAssert`]; the group then refuses
/// further collectives, as after any failed kernel).
pub fn all_to_all_single<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    in_splits: &[usize],
    out_splits: &[usize],
) -> Result<()> {
    let world = comm.world_size();
    let mut packed = [0u64; 8];
    let mut problem = None;
    if in_splits.len() != world || out_splits.len() != world {
        problem = Some(format!(
            "all_to_all_single takes one split per rank ({world}), and got {} send and {} \
             receive splits",
            in_splits.len(),
            out_splits.len()
        ));
    } else if let Some(bad) = in_splits
        .iter()
        .chain(out_splits)
        .find(|&&s| s >= u32::MAX as usize)
    {
        problem = Some(format!("a split of {bad} elements is 2^32 - 1 or more"));
    } else {
        for r in 0..world {
            packed[r] = in_splits[r] as u64 | ((out_splits[r] as u64) << 32);
        }
    }
    // Saturating: a huge split is this rank's problem to report, not a
    // panic on this rank alone.
    let sent = in_splits.iter().fold(0usize, |a, &b| a.saturating_add(b));
    let received = out_splits.iter().fold(0usize, |a, &b| a.saturating_add(b));
    split_call(
        comm,
        input,
        out,
        Splits::Host {
            packed,
            problem,
            sent,
            received,
        },
    )
}

/// All-to-all with split sizes in device memory, read by the kernel, so
/// that MoE dispatch and combine need no host synchronisation (PyTorch's
/// `all_to_all_vdev`): this rank sends `in_splits[r]` elements (u64) to
/// rank r, from consecutive spans of `input`; what it receives lands in
/// rank order in `out`, and `out_splits_offsets[r]` and
/// `out_splits_offsets[world + r]` get the size received from rank r and
/// its offset in `out`. The kernel checks every rank's splits against
/// every rank's input and output sizes before it copies; a split that does
/// not fit fails it on every rank alike ([`symm::Error::KernelAssert`]).
pub fn all_to_all_v<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    in_splits: &(impl DeviceSlice<u64> + ?Sized),
    out_splits_offsets: &mut (impl DeviceSlice<u64> + ?Sized),
) -> Result<()> {
    split_call(
        comm,
        input,
        out,
        Splits::Device {
            in_splits: comm.bind("in_splits", in_splits)?,
            report: comm.bind_mut("out_splits_offsets", out_splits_offsets)?,
        },
    )
}

/// Where an all-to-all's split sizes come from.
enum Splits<'a> {
    Host {
        packed: [u64; 8],
        problem: Option<String>,
        sent: usize,
        received: usize,
    },
    Device {
        in_splits: BoundSlice<'a, u64>,
        report: BoundSlice<'a, u64>,
    },
}

/// [`all_to_all_single`] and [`all_to_all_v`]: one kernel, which takes the
/// splits from its parameters or from device memory.
fn split_call<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    splits: Splits<'_>,
) -> Result<()> {
    let ch = channel(comm)?;
    let holders = placeholders(comm)?;
    let mut holders = holders.0.lock().unwrap_or_else(|p| p.into_inner());
    let (empty, report_host) = &mut *holders;
    let binding = comm.bind_mut("out", out);
    let world = comm.world_size();
    let dev = matches!(splits, Splits::Device { .. });
    let mut problem = match &binding {
        Err(e) => Some(e.to_string()),
        Ok(out) => usable(comm).and_then(|()| disjoint(input, out)).err(),
    };
    if let (None, Ok(out)) = (&problem, &binding) {
        problem = match &splits {
            Splits::Host {
                problem: Some(p), ..
            } => Some(p.clone()),
            Splits::Host { sent, received, .. } => fits::<T>(input, *sent, "the input")
                .and_then(|()| out_fits(out, Some(*received), "the received splits"))
                .err(),
            Splits::Device { in_splits, report } => {
                if let Err(p) = out_fits(out, Some(0), "nothing") {
                    Some(p)
                } else if in_splits.len() < world || report.len() < 2 * world {
                    Some(format!(
                        "all_to_all_v needs {world} send splits and room for {} sizes and \
                         offsets, and got {} and {}",
                        2 * world,
                        in_splits.len(),
                        report.len()
                    ))
                } else {
                    None
                }
            }
        };
        if problem.is_none() && out.len() > u32::MAX as usize {
            problem = Some("the output holds 2^32 elements or more".into());
        }
    }
    let what = if dev {
        "all_to_all_v"
    } else {
        "all_to_all_single"
    };
    let shape = [6 + u64::from(dev), dtype::<T>()];
    let ch = agreed(comm, ch, what, &shape, input, problem, |s| {
        format!("{what} of {}", type_name(s))
    })?;
    let mut out = binding?;
    let meta = meta(comm)?;
    // The grid must be the same on every rank (each block waits for the
    // same block of every peer), and the splits are not known before the
    // kernel reads them (device splits): so it follows the input's length,
    // the same on every rank (rendezvous checks it), which bounds what any
    // rank sends to one peer.
    let cap = out.len().min(u32::MAX as usize);
    let in_len = input.buffer_size() / std::mem::size_of::<T>();
    let cfg = grid::<T>(comm, (in_len as u64).max(1), || {
        T::__grid(Kernel::AllToAllV, comm, threads::<T>())
    })?;
    let (in_splits, report, packed) = match splits {
        Splits::Host { packed, .. } => (
            comm.bind("in_splits", &*empty)?,
            comm.bind_mut("report", &mut *report_host)?,
            packed,
        ),
        Splits::Device { in_splits, report } => (in_splits, report, [0u64; 8]),
    };
    let mut report = report;
    // SAFETY: the kernel checks every rank's splits against every rank's
    // input length and output capacity (`out_cap`) before it copies, on
    // every rank alike, and reads `in_splits` only where `dev` is 1 (then
    // it holds `world` entries), and writes `report` only there too.
    unsafe {
        T::__copy(
            comm,
            cfg,
            CopyCall::AllToAllV {
                input,
                meta: &meta,
                out: &mut out,
                out_cap: cap as u32,
                splits: &in_splits,
                dev: u32::from(dev),
                report: &mut report,
                packed,
                ch,
            },
        )
    }
}

/// The all-to-all's meta area ([`meta_entries`] u64 per block, for every
/// block), rendezvoused once per rank and kept in its extensions.
fn meta(comm: &Comm) -> Result<std::sync::Arc<SymmetricMemory>> {
    struct Meta(std::sync::Arc<SymmetricMemory>);
    let m = comm.extension(
        |_: &Meta| true,
        |_| {
            let buf = comm.alloc::<u64>(32 * MAX_BLOCKS as usize)?;
            Ok(Meta(buf.rendezvous()?))
        },
    )?;
    Ok(m.0.clone())
}

/// Stand-ins for the device splits and report of a call with host splits
/// (the kernel never touches them there; one element each, since a slice
/// needs memory), made once per rank: an allocation per call would cost
/// time and could not be captured in a CUDA graph.
struct Placeholders(std::sync::Mutex<(symm::DeviceBuffer<u64>, symm::DeviceBuffer<u64>)>);

fn placeholders(comm: &Comm) -> Result<std::sync::Arc<Placeholders>> {
    comm.extension(
        |_: &Placeholders| true,
        |_| {
            Ok(Placeholders(std::sync::Mutex::new((
                comm.device_buffer::<u64>(1)?,
                comm.device_buffer::<u64>(1)?,
            ))))
        },
    )
}

/// The collectives' two adjacent channels (counters and barriers on the
/// first, the calls' digests on the second), reserved on the first call (before any check
/// that could fail on one rank alone, so every rank reserves at the same
/// point of its sequence of requests) and remembered in the rank's
/// extensions.
fn channel(comm: &Comm) -> Result<u32> {
    // Two: the call's own, and the one after it for the digests.
    struct Collectives;
    crate::reserved_channels::<Collectives, 2>(comm, CHANNEL_OWNER)
}

/// An error unless the rank may still run collectives.
pub(crate) fn usable(comm: &Comm) -> std::result::Result<(), String> {
    if comm.kernel_failed() {
        Err(
            "a kernel on this rank failed earlier (see the error it reported); its call \
             counters may be out of step with its peers', so collectives no longer run on \
             this group; make a new group"
                .into(),
        )
    } else {
        Ok(())
    }
}

fn fits<T: CopyElem>(
    input: &SymmetricMemory,
    n: usize,
    what: &str,
) -> std::result::Result<(), String> {
    let cap = input.buffer_size() / std::mem::size_of::<T>();
    if n > cap || n > u32::MAX as usize {
        Err(format!(
            "{n} elements, and {what} holds {cap} (and at most 2^32 - 1 can move)"
        ))
    } else {
        Ok(())
    }
}

fn out_fits<T: CopyElem>(
    out: &BoundSlice<'_, T>,
    need: Option<usize>,
    what: &str,
) -> std::result::Result<(), String> {
    if !out.device_ptr().is_multiple_of(16) {
        return Err(format!(
            "the output at {:#x} is not 16-byte aligned",
            out.device_ptr()
        ));
    }
    match need {
        Some(k) if k <= out.len() && k <= u32::MAX as usize => Ok(()),
        _ => Err(format!(
            "the output holds {} elements, fewer than {what} ({})",
            out.len(),
            need.map_or("more than 2^64".into(), |k| k.to_string())
        )),
    }
}

/// [`disjoint`], but `out` may also be exactly this rank's buffer of
/// `input` (in place, where the call's kernels allow it).
fn same_or_disjoint<T: CopyElem>(
    input: &SymmetricMemory,
    out: &BoundSlice<'_, T>,
) -> std::result::Result<(), String> {
    if out.device_ptr() == input.buffer_ptrs()[input.rank()] {
        Ok(())
    } else {
        disjoint(input, out)
    }
}

/// An error if `out` overlaps this rank's buffer of `input`: peers read the
/// input while this rank writes its output.
fn disjoint<T: CopyElem>(
    input: &SymmetricMemory,
    out: &BoundSlice<'_, T>,
) -> std::result::Result<(), String> {
    if crate::overlaps_input(input, out) {
        Err(
            "the output overlaps the symmetric input, which peers read while this rank \
             writes (use the in-place form)"
                .into(),
        )
    } else {
        Ok(())
    }
}

/// A grid for a kernel moving `elems` elements of `T` per rank: one
/// 16-byte vector per thread, 1 to [`MAX_BLOCKS`] blocks of [`THREADS`],
/// fewer where ranks share a GPU (all must be resident at once, since
/// blocks wait for their peers: `limit` asks the driver), with
/// programmatic dependent launch unless the comm turned it off. The same
/// on every rank for one call.
fn grid<T: CopyElem>(
    comm: &Comm,
    elems: u64,
    limit: impl FnOnce() -> Result<Option<u32>>,
) -> Result<LaunchConfig> {
    let per_vec = (16 / std::mem::size_of::<T>()).max(1) as u64;
    let blocks = elems
        .div_ceil(per_vec)
        .div_ceil(u64::from(threads::<T>()))
        .clamp(1, u64::from(MAX_BLOCKS)) as u32;
    fitted::<T>(comm, blocks, limit)
}

/// `blocks` blocks of [`threads`], or fewer where ranks share a GPU (all
/// must be resident at once, since blocks wait for their peers: `limit`
/// asks the driver), with programmatic dependent launch unless the comm
/// turned it off.
fn fitted<T: CopyElem>(
    comm: &Comm,
    mut blocks: u32,
    limit: impl FnOnce() -> Result<Option<u32>>,
) -> Result<LaunchConfig> {
    if comm.max_ranks_on_device() > 1 {
        if let Some(l) = limit()? {
            blocks = blocks.min(l);
        }
        if blocks == 0 {
            return Err(symm::Error::InvalidArgument {
                rank: comm.rank(),
                message: format!(
                    "no block of a collective kernel fits beside the others on a GPU that {} \
                     ranks share (run fewer ranks per GPU)",
                    comm.max_ranks_on_device()
                ),
            });
        }
    }
    Ok(crate::with_pdl(
        comm,
        LaunchConfig::linear(blocks, threads::<T>()),
    ))
}

/// Threads per block for elements of `T`: [`THREADS`], limited for
/// one-byte types as the all-reduce's are
/// ([`threads_for`](crate::all_reduce::threads_for)).
fn threads<T>() -> u32 {
    crate::all_reduce::threads_for::<T>(THREADS)
}

/// The element type in a shape: its name's bytes (at most 8).
fn dtype<T: symm::Element>() -> u64 {
    dtype_word(T::DTYPE)
}

/// `d`'s name as a shape word (its first 8 bytes), which [`type_name`]
/// reads back.
pub(crate) fn dtype_word(d: symm::DType) -> u64 {
    let mut b = [0u8; 8];
    let name = d.name().as_bytes();
    let k = name.len().min(8);
    b[..k].copy_from_slice(&name[..k]);
    u64::from_le_bytes(b)
}

/// The op of a shape's entry `i`, by name.
fn op_name(s: &[u64], i: usize) -> String {
    s.get(i)
        .and_then(|&c| ReduceOp::from_code(c))
        .map_or("?".into(), |o| format!("{o:?}"))
}

/// The path of a shape's entry `i`, by name.
fn path_name(s: &[u64], i: usize) -> &'static str {
    match s.get(i) {
        Some(0) => "its own dispatch",
        Some(&c) => Path::name(c),
        None => "?",
    }
}

pub(crate) fn arg(s: &[u64], i: usize) -> String {
    s.get(i).map_or("?".into(), |v| v.to_string())
}

pub(crate) fn type_name(s: &[u64]) -> String {
    s.get(1).map_or("?".into(), |v| {
        String::from_utf8_lossy(&v.to_le_bytes())
            .trim_end_matches('\0')
            .to_string()
    })
}
