//! All-reduce (sum) over symmetric memory, for f32, bf16, f16 and the fp8
//! types f8e4m3 and f8e5m2, with f32 accumulation. [`all_reduce`] picks one of six kernels by world size and
//! message size ([`Path::choose`], from crossovers measured on H200s and
//! H100s and recorded in `bench/NOTES.md`):
//!
//! - [`Path::Ll`]: LL packets, each 4 bytes of data tagged with the call's
//!   epoch and pushed into every peer's staging area; one NVLink one-way
//!   trip and no barrier, at twice the bytes. The small-message path (up
//!   to [`LL_SMALL_BYTES`] on a grid of 128 threads with its own staging).
//! - [`Path::Lamport`]: raw 16-byte pushes into staging that reads as empty
//!   (a reserved NaN) until data lands; one one-way trip at half LL's
//!   bytes. Medium messages.
//! - [`Path::Push`]: raw 16-byte pushes into every peer's staging area,
//!   then one release/acquire flag per block (for comparison: Lamport is
//!   faster up to 4 MiB, and above that neither is picked).
//! - [`Path::LamportTwoShot`]: a two-shot whose reduce-scatter and
//!   all-gather both push like Lamport: no barrier, two one-way trips, and
//!   each rank pushes about 2n instead of (world − 1) × n. Large messages
//!   (to 16 MiB on two ranks, 64 MiB on more).
//! - [`Path::Pull`]: barrier, loads from every peer, barrier; larger
//!   messages on two ranks.
//! - [`Path::TwoShot`]: barrier, each rank loads one chunk from every peer
//!   and pushes its sum to all, barrier; larger messages on more ranks.
//!
//! Every path gives every rank the same bits (a fixed rank order), may be
//! called back-to-back without host synchronisation, and can be captured
//! in a CUDA graph (see [`all_reduce`] for when). The kernels live in
//! `device.rs` (re-exported here).

mod device;
pub use device::*;

use crate::invalid;
use std::marker::PhantomData;
use std::sync::Arc;

use symm::dsl::{bf16, f16, f8e4m3, f8e5m2};
use symm::{BoundSlice, Comm, DeviceSlice, LaunchConfig, Result, SymmBuffer, SymmetricMemory};

/// Threads per block of every all-reduce kernel.
pub const THREADS: u32 = 512;
/// Largest grid (the signal pad has slots for 128 blocks).
pub const MAX_BLOCKS: u32 = 128;
/// Blocks of every LL launch above [`LL_SMALL_BYTES`] (a fixed grid keeps
/// the per-block epochs in step).
pub const LL_BLOCKS: u32 = 64;

/// Messages up to this size take the LL kernel on a grid of 2 blocks of 64
/// threads, with staging (and per-block epochs) of their own, since the
/// grid differs.
pub const LL_SMALL_BYTES: usize = 1 << 10;

/// Grid (blocks, threads) of LL launches up to [`LL_SMALL_BYTES`]: one
/// thread per packet pair at 1 KiB. Measured (`bench/NOTES.md` v12): 16 B
/// to 1 KiB take 0.2–0.4 µs less on 2 GPUs and ~0.1 less on 4 than on
/// 64 × 512, where every idle block still reads and commits its epoch;
/// from 2 KiB the large grid is faster.
const LL_SMALL_GRID: (u32, u32) = (2, 64);
/// Blocks of every push and Lamport two-shot launch, and of the Lamport
/// one-shot on 2 ranks (fixed, like [`LL_BLOCKS`]).
pub const PUSH_BLOCKS: u32 = 128;

/// Threads per block of the Lamport two-shot up to 4 MiB on 3+ ranks.
const LTS_SMALL_THREADS: u32 = 128;

/// Grid (blocks, threads) of every Lamport one-shot launch on 3+ ranks,
/// where it runs up to 128 KiB. Measured (`bench/NOTES.md` v11): 4096
/// threads, one per 16-byte vector at 64 KiB, beat 128 × 512 by 0.2–0.5 µs
/// at 16–128 KiB on 4 GPUs; on 2 GPUs, where it runs to 1 MiB, 128 × 512
/// is as fast to 64 KiB and faster above. Fixed per world size, so every
/// call of a group keeps the per-block epochs in step.
const LAMPORT_MANY_GRID: (u32, u32) = (16, 256);

/// Most elements one staged call may move (keeps every slot index in `u32`).
const MAX_STAGED: usize = 1 << 26;

/// The kernel [`all_reduce`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// LL packets: one NVLink one-way trip, twice the bytes.
    Ll,
    /// Raw pushes into peers' staging, then a flag per block.
    Push,
    /// Raw pushes into staging that reads as empty until data lands: one
    /// one-way trip like LL at half its bytes, and no flags.
    Lamport,
    /// Barrier, pull from every peer, barrier: reads `world × n`.
    Pull,
    /// Barrier, pull one chunk and push its sum, barrier.
    TwoShot,
    /// Two-shot without barriers: the reduce-scatter and the all-gather
    /// both push data that marks its own arrival, as [`Path::Lamport`].
    LamportTwoShot,
}

impl Path {
    /// Every path, for tests and benchmarks that try them all.
    pub const ALL: [Path; 6] = [
        Path::Ll,
        Path::Lamport,
        Path::Push,
        Path::Pull,
        Path::TwoShot,
        Path::LamportTwoShot,
    ];

    /// The fastest path measured for `bytes` on `world` ranks
    /// (`bench/NOTES.md`: H200, v11; 4 H100s, v23). Two ranks: LL to
    /// 64 KiB, Lamport to 1 MiB, Lamport two-shot to 16 MiB, then pull (a
    /// 2-rank pull reads only 2n). Three and four: LL to 16 KiB (on 4 H100s
    /// LL beat Lamport there by 0.1–0.45 µs, where v11 had Lamport ahead on
    /// H200s: Lamport's times rose since, and whether the machine or the
    /// code did that is not yet known; 3 ranks follow 4, unmeasured), then
    /// as more. More: LL to 2 KiB, Lamport to 128 KiB, Lamport two-shot to
    /// 64 MiB (the largest size measured; its staging takes 4n to 8n bytes,
    /// as regions round up to a power of two), then two-shot.
    pub fn choose(world: usize, bytes: usize) -> Path {
        let (ll, lamport, two_shot, large) = match world {
            0..=2 => (64 << 10, 1 << 20, 16 << 20, Path::Pull),
            3 | 4 => (16 << 10, 128 << 10, 64 << 20, Path::TwoShot),
            _ => (2 << 10, 128 << 10, 64 << 20, Path::TwoShot),
        };
        if bytes <= ll {
            Path::Ll
        } else if bytes <= lamport {
            Path::Lamport
        } else if bytes <= two_shot {
            Path::LamportTwoShot
        } else {
            large
        }
    }

    /// Whether `out` may be exactly this rank's part of the input (in
    /// place): true unless peers may still read this rank's input after this
    /// rank writes its output (the pull kernel). Partial overlaps are never
    /// allowed.
    pub fn allows_alias(self) -> bool {
        self != Path::Pull
    }

    /// Its name in explanations and tables.
    pub const fn name(self) -> &'static str {
        match self {
            Path::Ll => "LL",
            Path::Push => "push",
            Path::Lamport => "Lamport",
            Path::Pull => "pull",
            Path::TwoShot => "two-shot",
            Path::LamportTwoShot => "Lamport two-shot",
        }
    }

    /// [`Path::choose`] for a call whose output is (`in_place`) or is not
    /// exactly its input: the pull path becomes two-shot in place.
    pub fn choose_for(world: usize, bytes: usize, in_place: bool) -> Path {
        match Path::choose(world, bytes) {
            Path::Pull if in_place => Path::TwoShot,
            p => p,
        }
    }
}

/// Element types the all-reduce supports.
pub trait AllReduceElem: symm::dsl::Scalar {
    /// The element type's code in a call's identity (see `ELEM_NAMES`).
    #[doc(hidden)]
    const __CODE: u64;

    /// The largest grid of `path`'s kernel with `threads` per block that
    /// `comm` may launch ([`symm::Comm::co_resident_blocks`]); `None` for any.
    #[doc(hidden)]
    fn __co_resident_grid(path: Path, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Launches `path`'s kernel (with `aux` its staging or scratch buffer,
    /// for [`Path::Pull`] its control allocation, and `ch` its channel) on checked
    /// arguments, without bounds checks on the GPU.
    ///
    /// # Safety
    ///
    /// The arguments are as this module's `launch` makes them: `n` elements
    /// fit `input` and `out` (`check`), `aux` is the staging (or scratch)
    /// that `staging` sized for `n` on `path`, with `cap` elements per
    /// region (the push and Lamport one-shots derive it from `aux`'s
    /// length instead, which `staging` makes exactly `2 × world` regions),
    /// and `cfg` is the path's grid. `sig` is the call's identity digest,
    /// which every kernel checks against its peers' (LL folds it into its
    /// tags, the barrier kernels send it after the entry barrier's flag and
    /// compare it at the exit barrier, push and the Lamport kernels send it
    /// as one more vector past the data).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __launch(
        path: Path,
        comm: &Comm,
        cfg: LaunchConfig,
        input: &SymmetricMemory,
        aux: &SymmetricMemory,
        out: &mut (impl DeviceSlice<Self> + ?Sized),
        n: u32,
        cap: u32,
        ch: u32,
        sig: u32,
    ) -> Result<()>;
}

/// Calls `kernel::f::<T, C, W>` with `W` the unrolled world size (2, 4 or
/// 8), or 0 (read at run time) for any other.
macro_rules! by_world {
    ($comm:expr, $k:ident::$f:ident::<$t:ty, $c:tt>($($arg:expr),*)) => {
        match $comm.world_size() {
            2 => $k::$f::<$t, $c, 2>($($arg),*),
            4 => $k::$f::<$t, $c, 4>($($arg),*),
            8 => $k::$f::<$t, $c, 8>($($arg),*),
            _ => $k::$f::<$t, $c, 0>($($arg),*),
        }
    };
}

macro_rules! elem {
    ($($t:ty => $v:literal, $p:literal, $code:literal),*) => {$(
        impl AllReduceElem for $t {
            const __CODE: u64 = $code;

            fn __co_resident_grid(path: Path, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                match path {
                    Path::Ll => by_world!(comm, one_shot_ll::co_resident_grid_unchecked::<$t, $p>(comm, threads, 0)),
                    Path::Push => by_world!(comm, one_shot_push::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0)),
                    Path::Lamport => by_world!(comm, one_shot_lamport::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0)),
                    Path::Pull => by_world!(comm, one_shot_all_reduce::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0)),
                    Path::TwoShot => by_world!(comm, two_shot_all_reduce::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0)),
                    Path::LamportTwoShot => by_world!(comm, two_shot_lamport::co_resident_grid_unchecked::<$t, $v>(comm, threads, 0)),
                }
            }

            unsafe fn __launch(
                path: Path,
                comm: &Comm,
                cfg: LaunchConfig,
                input: &SymmetricMemory,
                aux: &SymmetricMemory,
                out: &mut (impl DeviceSlice<Self> + ?Sized),
                n: u32,
                cap: u32,
                ch: u32,
                sig: u32,
            ) -> Result<()> {
                // SAFETY: the caller's arguments are `launch`'s, and with
                // those every index of these kernels is in bounds: the
                // emulator checks each one in tests/all_reduce.rs
                // (`matches_float64_and_is_bitwise_identical_across_ranks`,
                // `every_path_is_exact_at_odd_sizes`,
                // `in_place_matches_float64_on_every_path`,
                // `back_to_back_calls_with_changing_data_and_no_host_sync`:
                // every path, element type and unrolled world, worlds 1-8,
                // odd sizes), and `SYMM_CHECK_ALL=1` checks them on a GPU.
                unsafe {
                    match path {
                        Path::Ll => by_world!(comm, one_shot_ll::launch_unchecked::<$t, $p>(comm, cfg, input, aux, out, n, cap, ch, sig)),
                        Path::Push => by_world!(comm, one_shot_push::launch_unchecked::<$t, $v>(comm, cfg, input, aux, out, n, ch, sig)),
                        Path::Lamport => by_world!(comm, one_shot_lamport::launch_unchecked::<$t, $v>(comm, cfg, input, aux, out, n, ch, sig)),
                        Path::Pull => by_world!(comm, one_shot_all_reduce::launch_unchecked::<$t, $v>(comm, cfg, input, aux, out, n, ch, sig)),
                        Path::TwoShot => {
                            let ctl = control(comm)?;
                            by_world!(comm, two_shot_all_reduce::launch_unchecked::<$t, $v>(comm, cfg, input, aux, &ctl, out, n, ch, sig))
                        }
                        Path::LamportTwoShot => by_world!(comm, two_shot_lamport::launch_unchecked::<$t, $v>(comm, cfg, input, aux, out, n, cap, ch, sig)),
                    }
                }
            }
        }
    )*};
}
elem!(f32 => 4, 1, 1, bf16 => 8, 2, 2, f16 => 8, 2, 3, f8e4m3 => 16, 4, 4, f8e5m2 => 16, 4, 5);

/// The grid the barrier kernels use for `n` elements of `T`: one 16-byte
/// vector per thread (measured faster than four: more SMs issue loads),
/// at least one block, at most [`MAX_BLOCKS`]. The same `n` gives the same
/// grid on every rank.
pub fn config<T: AllReduceElem>(n: usize) -> LaunchConfig {
    let vecs = n.div_ceil(16 / std::mem::size_of::<T>()) as u64;
    let blocks = vecs
        .div_ceil(u64::from(threads_for::<T>(THREADS)))
        .clamp(1, u64::from(MAX_BLOCKS)) as u32;
    LaunchConfig::linear(blocks, threads_for::<T>(THREADS))
}

/// `threads` per block for elements of `T`: at most 256 for one-byte
/// types, whose 16-element vectors (one per rank in flight) need more
/// registers than a 512-thread block may have on sm_90 (the push kernel
/// failed to launch with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES on an H100).
/// The block count, which the per-block epochs depend on, is unchanged.
/// The collectives' reductions follow the same rule (141 to 167 registers
/// per thread for one-byte types on sm_80 and sm_90).
pub(crate) fn threads_for<T>(threads: u32) -> u32 {
    if std::mem::size_of::<T>() == 1 {
        threads.min(256)
    } else {
        threads
    }
}

/// Sums the first `n` elements of every rank's `input` (a rendezvoused
/// symmetric buffer) into this rank's `out`, on `comm`'s stream. Collective:
/// every rank calls it with the same `n`. Back-to-back calls need no host
/// synchronisation. `out` may be exactly this rank's part of `input` (in
/// place). It may be symm memory of this rank or the user's cudarc memory
/// on this rank's GPU (a `CudaSlice` or `CudaViewMut`, used in cudarc's
/// stream order: see [`DeviceSlice`]).
///
/// CUDA graphs: run the captured sequence once eagerly first. Each kernel
/// family (LL up to 1 KiB, LL above, Lamport, push, Lamport two-shot,
/// two-shot) and element type has its own staging, which its first call
/// (or a larger one) allocates, and allocation cannot happen during
/// capture. Later growth keeps older
/// staging alive, so captured graphs stay valid. A rank's calls share its
/// staging and call counters, so they must be ordered on one stream (a
/// `Comm` from `with_cuda_stream` shares them too; concurrent streams need
/// separate groups).
///
/// Signal channels: the first call reserves [`CHANNELS`] adjacent ones of
/// the group ([`Channel::reserve`](symm::signal::Channel::reserve), from the top of the pad), which every
/// later call reuses on whatever buffers it is given; the application's
/// [`Channel::request`](symm::signal::Channel::request)s never get them.
///
/// Errors (never a hang or a wrong result) for: `n` larger than the buffer
/// or than `out`, `out` of another rank, device or CUDA context (or cudarc
/// memory on an emulated rank), an element type other than the buffer's, `out` not
/// 16-byte aligned or overlapping `input` other than exactly, a world
/// size above 8, no free channels left to reserve, and a rank where a
/// kernel already failed ([`Comm::kernel_failed`]).
pub fn all_reduce<T: AllReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    reduce(None, comm, input, out, n)
}

/// [`all_reduce`] on a chosen kernel, for tuning and comparison. Errors if
/// `out` is the input on a path that does not allow it
/// ([`Path::allows_alias`]), or overlaps it only in part.
pub fn all_reduce_with<T: AllReduceElem>(
    path: Path,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    reduce(Some(path), comm, input, out, n)
}

/// Checks the arguments once, picks the path unless the caller did, and
/// launches.
fn reduce<T: AllReduceElem>(
    path: Option<Path>,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    // First, before any check that could fail on one rank alone, so every
    // rank reserves at the same point of its sequence of requests.
    let state = state(comm)?;
    let ch = state.ch;
    if comm.kernel_failed() {
        return Err(invalid(
            comm,
            "a kernel on this rank failed earlier (see the error it reported); the \
             all-reduce's staging may hold data that arrived after a wait gave up, and its \
             call counters may be out of step with the peers', so it no longer runs on this \
             group; make a new group"
                .into(),
        ));
    }
    // Bound to the rank's stream once, here (cudarc memory waits there for
    // its earlier uses, and records this call's as `out` drops, after the
    // launch); the launch takes the bound slice as it is.
    let mut out = comm.bind_mut("out", out)?;
    let overlap = overlap_of(input, &out);
    let chosen = path.unwrap_or_else(|| {
        let bytes = n * std::mem::size_of::<T>();
        Path::choose_for(comm.world_size(), bytes, overlap == Overlap::Exact)
    });
    let local = check(comm, input, &out, n).and_then(|()| match overlap {
        Overlap::Partial => Err(invalid(
            comm,
            "all_reduce's output overlaps its symmetric input without starting where \
             it starts; pass either the input itself (in place) or separate memory"
                .into(),
        )),
        Overlap::Exact if !chosen.allows_alias() => Err(invalid(
            comm,
            format!(
                "the {chosen:?} kernel cannot reduce in place (peers still read this rank's \
                 input after it writes); use all_reduce or all_reduce_in_place"
            ),
        )),
        _ => Ok(()),
    });
    // The call's identity (which buffer, where, how many elements, which
    // kernel): ranks that are in different calls fail here, all alike,
    // instead of summing each other's wrong data.
    let identity = Identity {
        elem: T::__CODE,
        n: n as u64,
        path: chosen as u64,
        alloc: input.alloc_id(),
        offset: input.buffer_offset(),
        in_place: u64::from(overlap == Overlap::Exact),
    };
    state.agree(comm, identity, local.as_ref().err())?;
    local?;
    // Every call, empty ones too (a rank with nothing to sum where its
    // peers launch would leave them waiting).
    comm.check_call(ch, identity.sig(), || {
        format!("all_reduce of {}", Identity::describe(&identity.words()))
    })?;
    if n == 0 {
        return Ok(());
    }
    launch(chosen, comm, input, &mut out, n, ch, identity.sig())
}

/// What identifies one all-reduce call across ranks: every rank of a call
/// passes the same. Ranks that pass different identities are in different
/// calls (one skipped a call, or made them in another order).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Identity {
    elem: u64,
    n: u64,
    path: u64,
    alloc: u64,
    offset: u64,
    in_place: u64,
}

impl Identity {
    fn words(&self) -> [u64; 6] {
        [
            self.elem,
            self.n,
            self.path,
            self.alloc,
            self.offset,
            self.in_place,
        ]
    }

    /// The digest the kernels compare across ranks (FNV-1a, the same on
    /// every rank and build), never 0 and never with its top bit clear (so
    /// a tag folded with it is never 0 on zeroed staging; see
    /// `one_shot_ll`).
    fn sig(&self) -> u32 {
        crate::collectives::digest(&self.words()) | 0x8000_0000
    }

    /// `words` spelled for an error, as [`Identity::words`] lays them out.
    fn describe(w: &[u64]) -> String {
        let name = ELEM_NAMES
            .iter()
            .find(|(code, _)| Some(code) == w.first())
            .map_or("?", |(_, name)| name);
        let path = Path::ALL
            .iter()
            .find(|p| Some(&(**p as u64)) == w.get(2))
            .map_or("?", |p| p.name());
        match w {
            [_, n, _, alloc, offset, in_place] => format!(
                "{n} {name} of allocation #{alloc} at byte {offset}{} by the {path} kernel",
                if *in_place == 1 { " in place" } else { "" }
            ),
            _ => "an unreadable call".into(),
        }
    }
}

/// Element types by the code [`Identity`] carries (`AllReduceElem::__CODE`).
const ELEM_NAMES: [(u64, &str); 5] = [
    (1, "f32"),
    (2, "bf16"),
    (3, "f16"),
    (4, "f8e4m3"),
    (5, "f8e5m2"),
];

/// The all-reduce's state on a rank: its channel, and the call identities
/// its group has agreed on.
struct AllReduceState {
    ch: u32,
    agreed: std::sync::Mutex<Agreed>,
}

/// The identities a rank's group agreed on, and the last one checked (most
/// loops repeat one call, or a few: a compare before the hash).
#[derive(Default)]
struct Agreed {
    last: Option<Identity>,
    all: std::collections::HashSet<Identity>,
}

/// Identities a rank remembers as agreed; past this many it forgets them
/// all (a pool that hands out tensors at ever new offsets must not grow
/// the set without bound), and the next call of each agrees again.
const MAX_AGREED: usize = 1024;

impl AllReduceState {
    /// Checks that every rank makes this call: once per identity through
    /// the group's store (with this rank's local `problem`, so a bad
    /// argument on one rank is the same error on all), then a hash lookup.
    fn agree(&self, comm: &Comm, id: Identity, problem: Option<&symm::Error>) -> Result<()> {
        {
            let mut agreed = self.agreed.lock().unwrap_or_else(|p| p.into_inner());
            if agreed.last == Some(id) || agreed.all.contains(&id) {
                agreed.last = Some(id);
                return Ok(());
            }
        }
        crate::collectives::agree_call(
            comm,
            "all_reduce",
            &id.words(),
            problem.map(|e| e.to_string()),
            Identity::describe,
        )?;
        let mut agreed = self.agreed.lock().unwrap_or_else(|p| p.into_inner());
        if agreed.all.len() >= MAX_AGREED {
            agreed.all.clear();
        }
        agreed.all.insert(id);
        agreed.last = Some(id);
        Ok(())
    }
}

/// The all-reduce's state on `comm`'s rank: its [`CHANNELS`] channels,
/// reserved on the first call ([`Channel::reserve`](symm::signal::Channel::reserve)),
/// and the identities agreed so far.
fn state(comm: &Comm) -> Result<Arc<AllReduceState>> {
    comm.extension(
        |_: &AllReduceState| true,
        |_| {
            let chans = symm::signal::Channel::reserve::<CHANNELS>(comm, CHANNEL_OWNER)?;
            Ok(AllReduceState {
                ch: chans[0].index(),
                agreed: Default::default(),
            })
        },
    )
}

/// In-place all-reduce: the sum of every rank's first `n` elements of
/// `buf` replaces them on every rank. Graph-safe, like [`all_reduce`]; the
/// path is [`all_reduce`]'s, or two-shot where that one would pull.
pub fn all_reduce_in_place<T: AllReduceElem>(
    comm: &Comm,
    buf: &SymmBuffer<T>,
    n: usize,
) -> Result<()> {
    // The whole buffer as the output is exactly the input: `all_reduce`
    // sees the alias, checks `n`, and picks its in-place path.
    let smem = buf.rendezvous()?;
    all_reduce(comm, &smem, &mut buf.slice(..)?, n)
}

/// Launches `path` on checked arguments, `n > 0`, with its staging.
fn launch<T: AllReduceElem>(
    path: Path,
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
    ch: u32,
    sig: u32,
) -> Result<()> {
    let world = comm.world_size();
    let bytes = n * std::mem::size_of::<T>();
    let fixed = || -> Result<LaunchConfig> {
        let (blocks, threads) = fixed_shape(path, world, bytes);
        let threads = threads_for::<T>(threads);
        let blocks = fit::<T>(comm, path, fixed_grid(comm, blocks), world, bytes)?;
        Ok(crate::with_pdl(comm, LaunchConfig::linear(blocks, threads)))
    };
    match path {
        Path::Ll => {
            // A packet holds 4 bytes of data; packets travel in pairs.
            let packets = n.div_ceil(4 / std::mem::size_of::<T>());
            let (stage, per_region) =
                staging::<u64, T>(comm, path, bytes, packets.div_ceil(2) * 2)?;
            let cap = (per_region / 2) as u32;
            let cfg = fixed()?;
            // SAFETY: `n` was checked against `input` and `out` (`check`),
            // and `stage` holds `cap` packet pairs per region for it.
            unsafe { T::__launch(path, comm, cfg, input, &stage, out, n as u32, cap, ch, sig) }
        }
        Path::Push | Path::Lamport | Path::LamportTwoShot => {
            // The two-shot's regions hold one chunk of whole vectors (and,
            // as every region of these paths, a 128-byte tail for the call's
            // identity, which `staging` adds).
            let v = 16 / std::mem::size_of::<T>();
            let per_region = if path == Path::LamportTwoShot {
                n.div_ceil(v).div_ceil(world) * v
            } else {
                n
            };
            let (stage, per_region) = staging::<T, T>(comm, path, bytes, per_region)?;
            let cfg = fixed()?;
            // SAFETY: `n` was checked against `input` and `out` (`check`),
            // and `stage` holds `per_region` elements per region for it.
            unsafe {
                T::__launch(
                    path,
                    comm,
                    cfg,
                    input,
                    &stage,
                    out,
                    n as u32,
                    per_region as u32,
                    ch,
                    sig,
                )
            }
        }
        Path::Pull => {
            let cfg = fitted::<T>(comm, path, config::<T>(n), bytes)?;
            let ctl = control(comm)?;
            // SAFETY: `n` was checked against `input` and `out` (`check`);
            // the pull kernel has no staging (`aux` is its control).
            unsafe { T::__launch(path, comm, cfg, input, &ctl, out, n as u32, 0, ch, sig) }
        }
        Path::TwoShot => {
            let (scratch, _) = staging::<T, T>(comm, path, bytes, n)?;
            // A thread per vector of one rank's chunk.
            let cfg = fitted::<T>(comm, path, config::<T>(n.div_ceil(world)), bytes)?;
            // SAFETY: `n` was checked against `input` and `out` (`check`),
            // and `scratch` holds `n` elements.
            unsafe { T::__launch(path, comm, cfg, input, &scratch, out, n as u32, 0, ch, sig) }
        }
    }
}

/// `cfg`, a barrier kernel's grid for this call, shrunk to fit a shared
/// GPU (see [`fit`]), with programmatic dependent launch.
fn fitted<T: AllReduceElem>(
    comm: &Comm,
    path: Path,
    cfg: LaunchConfig,
    bytes: usize,
) -> Result<LaunchConfig> {
    let blocks = fit::<T>(comm, path, cfg.grid.0, comm.world_size(), bytes)?;
    Ok(crate::with_pdl(
        comm,
        LaunchConfig::linear(blocks, cfg.block.0),
    ))
}

/// `blocks`, or fewer where ranks share a GPU: as many as every launch of
/// this call's staging family may use with all ranks' kernels resident at
/// once ([`family_threads`] lists the block sizes to allow for). The result
/// depends only on the family, the element type and the group, so a
/// family's grid stays fixed, and is the same on every rank.
fn fit<T: AllReduceElem>(
    comm: &Comm,
    path: Path,
    blocks: u32,
    world: usize,
    bytes: usize,
) -> Result<u32> {
    // The common case, with no host work: no rank shares its GPU.
    if comm.max_ranks_on_device() == 1 {
        return Ok(blocks);
    }
    let mut fitted = blocks;
    for &threads in family_threads(path, world, bytes) {
        let threads = threads_for::<T>(threads);
        if let Some(limit) = T::__co_resident_grid(path, comm, threads)? {
            fitted = fitted.min(limit);
        }
    }
    if fitted == 0 {
        return Err(invalid(
            comm,
            format!(
                "the {path:?} kernel cannot run on a GPU that {} ranks share: not even one \
                 block per rank fits with the others' (run fewer ranks per GPU)",
                comm.max_ranks_on_device()
            ),
        ));
    }
    Ok(fitted)
}

/// Every block size that the staging family of a `path` call of `bytes`
/// on `world` ranks launches with ([`fixed_shape`]'s threads; the barrier
/// kernels' [`THREADS`]).
fn family_threads(path: Path, world: usize, bytes: usize) -> &'static [u32] {
    match path {
        Path::Ll if bytes <= LL_SMALL_BYTES => &[LL_SMALL_GRID.1],
        Path::Lamport if world > 2 => &[LAMPORT_MANY_GRID.1],
        Path::LamportTwoShot if world > 2 => &[LTS_SMALL_THREADS, THREADS],
        _ => &[THREADS],
    }
}

/// (blocks, threads) of a fixed-grid kernel (LL, push, Lamport, Lamport
/// two-shot) for `bytes` on `world` ranks, as measured (`bench/NOTES.md`).
/// The block count depends only on the path, the world size and which
/// staging family the call uses, so the per-block epochs of each staging
/// area stay in step; the Lamport two-shot's threads per block may change.
fn fixed_shape(path: Path, world: usize, bytes: usize) -> (u32, u32) {
    match path {
        Path::Ll if bytes <= LL_SMALL_BYTES => LL_SMALL_GRID,
        Path::Ll => (LL_BLOCKS, THREADS),
        Path::Lamport if world > 2 => LAMPORT_MANY_GRID,
        // v10: on 4 GPUs 128-thread blocks are 15 % faster at 4 MiB and 512
        // at 16 MiB; on 2 GPUs 512 is faster from 1 MiB.
        Path::LamportTwoShot if world > 2 && bytes <= 4 << 20 => (PUSH_BLOCKS, LTS_SMALL_THREADS),
        _ => (PUSH_BLOCKS, THREADS),
    }
}

/// The fixed grid of the LL and push kernels: `blocks` on a GPU, and
/// `EMULATED_BLOCKS` on the emulator, where every thread is a CPU thread
/// (the kernels work with any fixed grid; fewer blocks only mean more
/// grid-stride steps per thread, which tests those loops harder).
pub(crate) fn fixed_grid(comm: &Comm, blocks: u32) -> u32 {
    match comm.backend_kind() {
        symm::BackendKind::Emulator => EMULATED_BLOCKS,
        _ => blocks,
    }
}

/// Blocks of the fixed-grid kernels on the emulator.
const EMULATED_BLOCKS: u32 = 4;

/// A rank's staging (or two-shot scratch) area of element type `E` for one
/// family of kernels, kept in the rank's [`Comm::extension`] (rendezvoused
/// memory only, no `Comm`, so it is freed with the rank). `per_region`
/// elements per region: `2 × world` (parity, rank) regions for the LL,
/// Lamport and push kernels, `4 × world` (parity, half, rank) regions of a
/// chunk for the Lamport two-shot, one of n for the two-shot scratch.
struct Staging<E, K> {
    smem: Arc<SymmetricMemory>,
    per_region: usize,
    /// The smaller areas this one replaced: CUDA graphs captured while one
    /// of them was current still point into it.
    _older: Option<Arc<Staging<E, K>>>,
    _k: PhantomData<(E, K)>,
}

/// Families that share a staging area (one layout and one epoch counter).
/// LL stages packets of any element type, but keeps one area per type: on
/// a GPU that ranks share, each type's kernel may fit a different grid,
/// and an area's grid must never change.
struct LlFamily<T>(PhantomData<T>);
struct LlSmallFamily<T>(PhantomData<T>);
struct PushFamily;
struct LamportFamily;
struct LamportTwoShotFamily;
struct ScratchFamily;
struct ControlFamily;

/// The barrier kernels' control allocation on `comm`'s rank: its pad holds
/// their call counters, barriers and identities, one pad for every buffer
/// and element type (so ranks in calls on different buffers meet, and
/// fail, at once). Its data is never touched.
fn control(comm: &Comm) -> Result<Arc<SymmetricMemory>> {
    Ok(grow::<u32, ControlFamily>(comm, 1, 1, 0)?.0)
}

/// The staging area `path` needs for a call of `bytes` with `per_region`
/// elements per region, grown (a collective allocation and rendezvous, reached by every rank in
/// the same call, since every rank passes the same `n`) when a larger
/// message first needs it.
fn staging<E: symm::dsl::Scalar, T: Send + Sync + 'static>(
    comm: &Comm,
    path: Path,
    bytes: usize,
    per_region: usize,
) -> Result<(Arc<SymmetricMemory>, usize)> {
    // The LL and push kernels index all regions in u32; the two-shot
    // scratch only needs n < 2^32, which `check` ensures.
    if per_region > MAX_STAGED
        && matches!(
            path,
            Path::Ll | Path::Push | Path::Lamport | Path::LamportTwoShot
        )
    {
        return Err(invalid(
            comm,
            format!(
                "the {path:?} kernel needs {per_region} staged elements per rank, more than \
                 {MAX_STAGED}; use all_reduce, which picks another kernel at this size"
            ),
        ));
    }
    let world = comm.world_size();
    // The identity takes one 16-byte vector; the tail is 128 bytes, so
    // every region stays aligned to a cache line (the regions' 16-byte
    // stores and polls would otherwise straddle lines).
    let id_tail = 128 / std::mem::size_of::<E>();
    match path {
        // Zeros, so no stale bits can look like a packet of epoch 1. The
        // smallest calls run on a grid of their own (`fixed_shape`), so
        // they keep their own staging and epochs.
        Path::Ll if bytes <= LL_SMALL_BYTES => {
            grow::<E, LlSmallFamily<T>>(comm, per_region, 2 * world, 0)
        }
        Path::Ll => grow::<E, LlFamily<T>>(comm, per_region, 2 * world, 0),
        // One more 16-byte vector per region, past any call's data, for
        // the call's identity, which travels as the message's last vector
        // (at the vector past the data in `one_shot_push` and
        // `one_shot_lamport`, `chunk` in `two_shot_lamport`).
        Path::Push => grow_with_tail::<E, PushFamily>(comm, per_region, id_tail, 2 * world, 0),
        // All ones: every slot starts empty.
        Path::Lamport => {
            grow_with_tail::<E, LamportFamily>(comm, per_region, id_tail, 2 * world, 0xFF)
        }
        Path::LamportTwoShot => {
            grow_with_tail::<E, LamportTwoShotFamily>(comm, per_region, id_tail, 4 * world, 0xFF)
        }
        Path::TwoShot | Path::Pull => grow::<E, ScratchFamily>(comm, per_region, 1, 0),
    }
}

/// The staging of family `K` on `comm`'s rank: `regions` regions of at
/// least `per_region` elements of `E` (rounded up to a power of two, at
/// least 1024), every byte `fill`, rendezvoused; a larger request replaces
/// it and keeps the older alive (graphs captured with it still use it).
pub(crate) fn grow<E: symm::dsl::Scalar, K: Send + Sync + 'static>(
    comm: &Comm,
    per_region: usize,
    regions: usize,
    fill: u8,
) -> Result<(Arc<SymmetricMemory>, usize)> {
    grow_with_tail::<E, K>(comm, per_region, 0, regions, fill)
}

/// [`grow`] with `tail` more elements in every region, past the rounded
/// data part (so a power-of-two message does not double its staging).
fn grow_with_tail<E: symm::dsl::Scalar, K: Send + Sync + 'static>(
    comm: &Comm,
    per_region: usize,
    tail: usize,
    regions: usize,
    fill: u8,
) -> Result<(Arc<SymmetricMemory>, usize)> {
    let s = comm.extension(
        |s: &Staging<E, K>| s.per_region >= per_region + tail,
        |older| {
            let per_region = per_region.next_power_of_two().max(1024) + tail;
            let buf = comm.alloc::<E>(regions * per_region)?;
            // Every byte `fill` (a device memset, finished) before the
            // rendezvous hands the memory to any peer.
            buf.fill_bytes(fill)?;
            Ok(Staging::<E, K> {
                smem: buf.rendezvous()?,
                per_region,
                _older: older,
                _k: PhantomData,
            })
        },
    )?;
    Ok((s.smem.clone(), s.per_region))
}

/// How `out` lies against this rank's buffer of `input`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overlap {
    None,
    /// Both start at the same address: in place.
    Exact,
    /// Any other overlap: some thread would overwrite input that another
    /// still has to send.
    Partial,
}

fn overlap_of<T: AllReduceElem>(input: &SymmetricMemory, out: &BoundSlice<'_, T>) -> Overlap {
    if out.device_ptr() == input.buffer_ptrs()[input.rank()] {
        Overlap::Exact
    } else if crate::overlaps_input(input, out) {
        Overlap::Partial
    } else {
        Overlap::None
    }
}

fn check<T: AllReduceElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &BoundSlice<'_, T>,
    n: usize,
) -> Result<()> {
    let cap = input.buffer_size() / std::mem::size_of::<T>();
    if n > cap || n > out.len() {
        return Err(invalid(
            comm,
            format!(
                "all_reduce of {n} elements, but the input holds {cap} and the output {}",
                out.len()
            ),
        ));
    }
    if n > u32::MAX as usize {
        return Err(invalid(
            comm,
            format!("all_reduce of {n} elements is more than 2^32 - 1"),
        ));
    }
    if !out.device_ptr().is_multiple_of(16) {
        return Err(invalid(
            comm,
            format!(
                "all_reduce's output at {:#x} is not 16-byte aligned",
                out.device_ptr()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{family_threads, fixed_shape, Path, LL_SMALL_BYTES, THREADS};

    /// On a shared GPU a family's grid is fitted for every block size the
    /// family launches with, so it never changes from call to call: the
    /// list must be the same for every size of one family and hold the
    /// block size of each of its launches.
    #[test]
    fn every_family_is_fitted_for_all_its_block_sizes() {
        for world in 1..=8 {
            for path in Path::ALL {
                let mut seen: Vec<(bool, &[u32])> = Vec::new();
                for shift in 0..27 {
                    for bytes in [1usize << shift, (1 << shift) + 12] {
                        let family = family_threads(path, world, bytes);
                        let threads = match path {
                            Path::Pull | Path::TwoShot => THREADS,
                            _ => fixed_shape(path, world, bytes).1,
                        };
                        assert!(
                            family.contains(&threads),
                            "{path:?} world {world} {bytes} B: {threads} not in {family:?}"
                        );
                        // LL keeps two families, split at LL_SMALL_BYTES.
                        let key = path == Path::Ll && bytes <= LL_SMALL_BYTES;
                        match seen.iter().find(|(k, _)| *k == key) {
                            Some((_, f)) => assert_eq!(*f, family, "{path:?} world {world}"),
                            None => seen.push((key, family)),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn in_place_never_pulls() {
        assert_eq!(Path::choose_for(2, 64 << 20, false), Path::Pull);
        assert_eq!(Path::choose_for(2, 64 << 20, true), Path::TwoShot);
        assert_eq!(Path::choose_for(2, 1 << 20, true), Path::Lamport);
        assert_eq!(Path::choose_for(4, 1 << 10, true), Path::Ll);
        for w in 2..=8 {
            for shift in 0..27 {
                assert!(Path::choose_for(w, 1 << shift, true).allows_alias());
            }
        }
    }

    #[test]
    fn fixed_grids_follow_the_measurements() {
        assert_eq!(fixed_shape(Path::Ll, 4, 1 << 10), (2, 64));
        assert_eq!(fixed_shape(Path::Ll, 2, (1 << 10) + 1), (64, 512));
        assert_eq!(fixed_shape(Path::Lamport, 2, 1 << 20), (128, 512));
        assert_eq!(fixed_shape(Path::Lamport, 3, 4 << 10), (16, 256));
        assert_eq!(fixed_shape(Path::LamportTwoShot, 4, 4 << 20), (128, 128));
        assert_eq!(
            fixed_shape(Path::LamportTwoShot, 4, (4 << 20) + 1),
            (128, 512)
        );
        assert_eq!(fixed_shape(Path::LamportTwoShot, 2, 1 << 20), (128, 512));
        assert_eq!(fixed_shape(Path::Push, 8, 1 << 10), (128, 512));
    }

    #[test]
    fn dispatch_follows_the_measured_crossovers() {
        assert_eq!(Path::choose(2, 1024), Path::Ll);
        assert_eq!(Path::choose(2, 64 << 10), Path::Ll);
        assert_eq!(Path::choose(2, (64 << 10) + 1), Path::Lamport);
        assert_eq!(Path::choose(2, 1 << 20), Path::Lamport);
        assert_eq!(Path::choose(2, (1 << 20) + 1), Path::LamportTwoShot);
        assert_eq!(Path::choose(2, 16 << 20), Path::LamportTwoShot);
        assert_eq!(Path::choose(2, (16 << 20) + 1), Path::Pull);
        assert_eq!(Path::choose(4, 16 << 10), Path::Ll);
        assert_eq!(Path::choose(4, (16 << 10) + 1), Path::Lamport);
        assert_eq!(Path::choose(3, 16 << 10), Path::Ll);
        assert_eq!(Path::choose(3, 32 << 10), Path::Lamport);
        assert_eq!(Path::choose(8, 2 << 10), Path::Ll);
        assert_eq!(Path::choose(8, (2 << 10) + 1), Path::Lamport);
        assert_eq!(Path::choose(4, 128 << 10), Path::Lamport);
        assert_eq!(Path::choose(4, (128 << 10) + 1), Path::LamportTwoShot);
        assert_eq!(Path::choose(4, 64 << 20), Path::LamportTwoShot);
        assert_eq!(Path::choose(4, (64 << 20) + 1), Path::TwoShot);
        assert_eq!(Path::choose(8, 1 << 20), Path::LamportTwoShot);
        assert_eq!(Path::choose(3, 256 << 20), Path::TwoShot);
    }
}
