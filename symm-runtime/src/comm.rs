//! Ranks and groups: [`Comm`], and the entry points that create one per rank.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use cudarc::driver::CudaStream;

use crate::backend::{Backend, BackendKind, CudaBackend, HostBackend, Sharing};
use crate::buffer::SymmBuffer;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::layout::MAX_WORLD_SIZE;
use crate::placement::Placement;
use crate::store::{InProcessStore, Store};
use crate::symmetric_memory::SymmetricMemory;

/// Options shared by every rank of a group. Build with
/// `CommOptions::default().with_timeout(..)`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CommOptions {
    /// How long a rendezvous, and joining the group (GPU ranks), waits for
    /// the other ranks before failing with an error that names the missing
    /// ones.
    pub timeout: Duration,
    /// Namespace for this group's keys in the store, so several groups can
    /// share one store.
    pub group: String,
    /// How long a signal wait inside a `#[symm_kernel]` may spin before the
    /// kernel records a timeout (reported by the next `synchronize`).
    pub kernel_timeout: Duration,
    /// Whether symm's built-in kernels use programmatic dependent launch
    /// ([`LaunchConfig::pdl`](crate::LaunchConfig::pdl)), so back-to-back
    /// calls overlap one kernel's launch with the previous one's tail. On by
    /// default; off is for comparison and for tools that mishandle it.
    pub pdl: bool,
}

impl Default for CommOptions {
    fn default() -> Self {
        CommOptions {
            timeout: Duration::from_secs(60),
            group: "symm".into(),
            kernel_timeout: Duration::from_secs(10),
            pdl: true,
        }
    }
}

impl CommOptions {
    /// [`kernel_timeout`](Self::kernel_timeout) in nanoseconds, as kernels
    /// read it (saturating).
    pub(crate) fn kernel_timeout_ns(&self) -> u64 {
        u64::try_from(self.kernel_timeout.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Sets [`timeout`](Self::timeout).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`pdl`](Self::pdl).
    pub fn with_pdl(mut self, pdl: bool) -> Self {
        self.pdl = pdl;
        self
    }

    /// Sets [`kernel_timeout`](Self::kernel_timeout).
    pub fn with_kernel_timeout(mut self, timeout: Duration) -> Self {
        self.kernel_timeout = timeout;
        self
    }

    /// Sets [`group`](Self::group).
    pub fn with_group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }
}

/// A rendezvoused allocation: data base address, data bytes, and its memory.
type RegistryEntry = (u64, usize, Weak<SymmetricMemory>);

/// State shared by every handle to one rank (clones and stream variants).
struct RankState {
    /// See [`Comm::extension`].
    extensions: Mutex<HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>>>,
    next_alloc: AtomicU64,
    /// Rendezvous results by allocation id, to resolve raw pointers.
    registry: Mutex<HashMap<u64, RegistryEntry>>,
    /// See [`Comm::kernel_failed`].
    kernel_failed: AtomicBool,
    /// Which ranks of the group share a device.
    placement: Placement,
}

/// One rank of a group: its rank, the world size, its device and stream, and
/// the group's store. User code is written per rank (SPMD) against a `Comm`.
#[derive(Clone)]
pub struct Comm {
    rank: usize,
    world_size: usize,
    store: Arc<dyn Store>,
    options: Arc<CommOptions>,
    pub(crate) backend: Arc<dyn Backend>,
    state: Arc<RankState>,
    /// `<group>/<generation>`: every store key of this group starts with it.
    prefix: Arc<str>,
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("device", &self.backend.label())
            .finish()
    }
}

impl Comm {
    /// A rank on CUDA device `ordinal`. Every rank of the group must pass the
    /// same `world_size`, store and options. Collective: it waits (at most
    /// `options.timeout`, then [`Error::JoinTimeout`]) for every rank to
    /// join, so that each learns which ranks share a GPU.
    pub fn cuda(
        rank: usize,
        world_size: usize,
        ordinal: usize,
        store: Arc<dyn Store>,
        options: CommOptions,
    ) -> Result<Comm> {
        check_world(rank, world_size)?;
        let backend = Arc::new(CudaBackend::new(rank, ordinal, Sharing::InProcess)?);
        Comm::with_backend(rank, world_size, store, options, backend)
    }

    /// A simulated rank whose memory lives on the host (the CPU emulator).
    pub fn emulated(
        rank: usize,
        world_size: usize,
        store: Arc<dyn Store>,
        options: CommOptions,
    ) -> Result<Comm> {
        check_world(rank, world_size)?;
        Comm::with_backend(
            rank,
            world_size,
            store,
            options,
            Arc::new(HostBackend::new(rank)),
        )
    }

    pub(crate) fn with_backend(
        rank: usize,
        world_size: usize,
        store: Arc<dyn Store>,
        options: CommOptions,
        backend: Arc<dyn Backend>,
    ) -> Result<Comm> {
        // The n-th rank `r` to join a group on this store belongs to its n-th
        // generation. Ranks of one group (each joining once) agree on n without
        // waiting for each other, and a later group on the same store never
        // sees an earlier group's keys.
        let generation = store
            .add(&format!("{}/join/{rank}", options.group), 1)
            .map_err(|source| Error::Store { rank, source })?;
        let prefix: Arc<str> = format!("{}/{generation}", options.group).into();
        // GPU ranks learn which of them share a device (and refuse two
        // processes on one) before anything can launch.
        let placement = match backend.device_id() {
            Some(id) => {
                crate::placement::join(rank, world_size, &*store, &prefix, options.timeout, &id)?
            }
            None => Placement::alone(world_size),
        };
        Ok(Comm {
            rank,
            world_size,
            store,
            options: Arc::new(options),
            backend,
            state: Arc::new(RankState {
                extensions: Mutex::new(HashMap::new()),
                next_alloc: AtomicU64::new(0),
                registry: Mutex::new(HashMap::new()),
                kernel_failed: AtomicBool::new(false),
                placement,
            }),
            prefix,
        })
    }

    /// Prefix of this group's store keys.
    pub(crate) fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The same prefix, shared (a cheap per-launch key for the emulator).
    pub(crate) fn key_prefix_arc(&self) -> Arc<str> {
        self.prefix.clone()
    }

    /// This rank's index, in `0..world_size`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks in the group.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Where this rank runs.
    pub fn backend_kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// How many ranks of this group run on this rank's device, itself
    /// included: 1 unless ranks share a GPU (`Ranks::Cuda(vec![0, 0])`).
    pub fn ranks_on_device(&self) -> usize {
        self.state.placement.ranks_on_device(self.rank)
    }

    /// The most ranks of this group on any one device (1 when every rank
    /// has its own GPU). The same on every rank.
    pub fn max_ranks_on_device(&self) -> usize {
        self.state.placement.share()
    }

    /// The largest grid that every rank of the group may launch of a kernel
    /// that waits on peers, where one multiprocessor holds `blocks_per_sm`
    /// of its blocks (a kernel module's `co_resident_grid` asks the driver
    /// for that figure), so that the kernels of ranks sharing a GPU are all
    /// resident at once: `blocks_per_sm × multiprocessors / (2 × ranks on
    /// the busiest GPU)`, the 2 because a rank's next kernel may become
    /// resident early (programmatic dependent launch). `None` when no rank
    /// shares its GPU: then any grid works. The same on every rank.
    pub fn co_resident_blocks(&self, blocks_per_sm: u32) -> Option<u32> {
        self.state.placement.co_resident_blocks(blocks_per_sm)
    }

    /// Human-readable device, for example `cuda:1 (NVIDIA H200, sm_90)`.
    pub fn device(&self) -> String {
        self.backend.label()
    }

    /// The group's store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The group's options.
    pub fn options(&self) -> &CommOptions {
        &self.options
    }

    /// The CUDA stream this handle enqueues on, or `None` on the emulator.
    pub fn cuda_stream(&self) -> Option<Arc<CudaStream>> {
        self.backend.cuda_stream()
    }

    /// The same rank, enqueueing on the caller's `stream` instead of symm's
    /// own. Allocations and rendezvous caches are shared with `self`. The
    /// rank keeps the stream (its memory waits for it before a free) until
    /// the rank is dropped; a stream that another rank on the same GPU
    /// already uses is an error.
    pub fn with_cuda_stream(&self, stream: Arc<CudaStream>) -> Result<Comm> {
        Ok(Comm {
            backend: self.backend.with_cuda_stream(stream)?,
            ..self.clone()
        })
    }

    /// Allocates `len` elements of symmetric memory plus a zeroed signal pad.
    ///
    /// Collective in order: every rank must make its allocations in the same
    /// sequence, because the n-th allocation of each rank rendezvous with the
    /// n-th of the others. Sizes are checked across ranks at rendezvous. A
    /// failed call still takes its place in the sequence, so a rank that
    /// fails here makes the matching rendezvous of its peers time out naming
    /// it, rather than pairing later allocations wrongly. The data is not
    /// initialised.
    pub fn alloc<T: Element>(&self, len: usize) -> Result<SymmBuffer<T>> {
        let id = self.state.next_alloc.fetch_add(1, Ordering::Relaxed);
        SymmBuffer::new(self.clone(), id, len)
    }

    /// Waits for everything enqueued on this handle's stream, and reports a
    /// signal timeout that a kernel recorded since the last call.
    pub fn synchronize(&self) -> Result<()> {
        self.note_kernel_result(self.backend.synchronize())
    }

    /// Whether a kernel of this rank has reported a failure (a timeout in
    /// the kernel, or a fault or hang on the emulator). A wait that gave up
    /// may leave a peer's late data in staging that the next call would read
    /// as fresh, and call counters out of step with the peers', so the
    /// built-in all-reduce refuses to run on this rank afterwards (its peers
    /// then time out naming it). Make a new group to continue.
    pub fn kernel_failed(&self) -> bool {
        self.state.kernel_failed.load(Ordering::Acquire)
    }

    /// Passes `r` through, remembering a kernel failure for
    /// [`kernel_failed`](Self::kernel_failed).
    pub(crate) fn note_kernel_result(&self, r: Result<()>) -> Result<()> {
        if let Err(
            Error::SignalTimeout { .. } | Error::KernelFault { .. } | Error::KernelHang { .. },
        ) = &r
        {
            self.state.kernel_failed.store(true, Ordering::Release);
        }
        r
    }

    /// Free and total memory of this rank's device, in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.backend.mem_info()
    }

    /// The cached [`SymmetricMemory`] of the live allocation whose data holds
    /// device address `ptr`, if that allocation has been rendezvoused.
    pub fn lookup(&self, ptr: u64) -> Option<Arc<SymmetricMemory>> {
        let reg = self
            .state
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        reg.values()
            .find(|(base, len, _)| ptr >= *base && ptr - *base < (*len).max(1) as u64)
            .and_then(|(_, _, w)| w.upgrade())
    }

    /// Number of allocations of this rank with a cached rendezvous.
    pub fn cached_rendezvous_count(&self) -> usize {
        self.state
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|e| e.2.strong_count() > 0)
            .count()
    }

    pub(crate) fn register(&self, id: u64, base: u64, len: usize, smem: &Arc<SymmetricMemory>) {
        self.state
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, (base, len, Arc::downgrade(smem)));
    }

    pub(crate) fn unregister(&self, id: u64) {
        self.state
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Per-rank state of type `E` that lives as long as this rank's `Comm`
    /// (shared by its clones): built-in kernels keep scratch buffers here.
    /// `make` runs when there is none yet, or when `keep` rejects the current
    /// one (to grow it), and gets the rejected one (to keep it alive, say, for
    /// CUDA graphs captured while it was current). `E` must not hold a
    /// `Comm`, which would keep itself alive.
    pub fn extension<E: std::any::Any + Send + Sync>(
        &self,
        keep: impl FnOnce(&E) -> bool,
        make: impl FnOnce(Option<Arc<E>>) -> Result<E>,
    ) -> Result<Arc<E>> {
        let id = std::any::TypeId::of::<E>();
        let current = self
            .state
            .extensions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned();
        let current = current.and_then(|a| a.downcast::<E>().ok());
        if let Some(e) = &current {
            if keep(e) {
                return Ok(e.clone());
            }
        }
        let e = Arc::new(make(current)?);
        self.state
            .extensions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, e.clone());
        Ok(e)
    }

    /// Identifies this rank's state, shared by its clones and stream variants.
    pub(crate) fn owner_id(&self) -> usize {
        Arc::as_ptr(&self.state) as *const () as usize
    }

    pub(crate) fn invalid(&self, message: impl Into<String>) -> Error {
        Error::InvalidArgument {
            rank: self.rank,
            message: message.into(),
        }
    }
}

pub(crate) fn check_world(rank: usize, world_size: usize) -> Result<()> {
    if world_size == 0 || world_size > MAX_WORLD_SIZE {
        return Err(Error::InvalidArgument {
            rank,
            message: format!(
                "world size {world_size} is not supported; use 1 to {MAX_WORLD_SIZE} ranks"
            ),
        });
    }
    if rank >= world_size {
        return Err(Error::InvalidArgument {
            rank,
            message: format!("rank {rank} is out of range for world size {world_size}"),
        });
    }
    Ok(())
}

/// Where [`run`] puts its ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ranks {
    /// One rank per listed CUDA device, in order. A device may be listed
    /// more than once: those ranks share it, each with its own stream,
    /// memory and signal pads (the kernels that wait on peers must then fit
    /// on the GPU together; see [`Comm::co_resident_blocks`]).
    Cuda(Vec<usize>),
    /// This many simulated ranks on the CPU emulator.
    Emulator(usize),
}

impl Ranks {
    /// Every local GPU when there are any, otherwise `emulated` simulated ranks.
    pub fn auto(emulated: usize) -> Ranks {
        match crate::cuda::cuda_device_count().min(MAX_WORLD_SIZE) {
            0 => Ranks::Emulator(emulated),
            n => Ranks::Cuda((0..n).collect()),
        }
    }

    /// `world` GPU ranks on the first `gpus` devices, `per_gpu` consecutive
    /// ranks on each (rank r on device r / per_gpu), or `None` when that
    /// needs more than `gpus` devices. `per_gpu` of `None` takes as few per
    /// device as the devices allow. `cuda_packed(4, 1, None)` is
    /// `Ranks::Cuda(vec![0, 0, 0, 0])`.
    pub fn cuda_packed(world: usize, gpus: usize, per_gpu: Option<usize>) -> Option<Ranks> {
        let per_gpu = match per_gpu {
            Some(0) => return None,
            Some(k) => k,
            None => world.div_ceil(gpus.max(1)).max(1),
        };
        if world.div_ceil(per_gpu) > gpus {
            return None;
        }
        Some(Ranks::Cuda((0..world).map(|r| r / per_gpu).collect()))
    }

    /// `world` ranks on this machine's GPUs: one per GPU while there are
    /// enough, otherwise as few per GPU as fit (rank r on GPU r / k), or
    /// exactly `SYMM_RANKS_PER_GPU` consecutive ranks per GPU when that is
    /// set. `None` when the ranks need more GPUs than there are (or
    /// `SYMM_RANKS_PER_GPU` is not a positive number). Ranks that share a GPU
    /// prove correctness, not speed: their kernels compete for its SMs.
    /// Ranks that share a GPU need more of the driver's hardware work queues
    /// than it gives by default: see [`prepare_shared_gpus`](crate::prepare_shared_gpus).
    pub fn gpus(world: usize) -> Option<Ranks> {
        let per_gpu = Ranks::ranks_per_gpu().ok()?;
        Ranks::cuda_packed(world, crate::cuda::cuda_device_count(), per_gpu)
    }

    /// `SYMM_RANKS_PER_GPU` as [`Ranks::gpus`] reads it: `None` when unset,
    /// or why it is not a positive number.
    pub fn ranks_per_gpu() -> std::result::Result<Option<usize>, String> {
        match std::env::var("SYMM_RANKS_PER_GPU") {
            Err(_) => Ok(None),
            Ok(v) => match v.trim().parse::<usize>() {
                Ok(k) if k > 0 => Ok(Some(k)),
                _ => Err(format!("SYMM_RANKS_PER_GPU={v:?} is not a positive number")),
            },
        }
    }

    /// Whether two ranks run on one GPU.
    pub fn shares_a_gpu(&self) -> bool {
        match self {
            Ranks::Cuda(d) => d.iter().enumerate().any(|(i, x)| d[..i].contains(x)),
            Ranks::Emulator(_) => false,
        }
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        match self {
            Ranks::Cuda(d) => d.len(),
            Ranks::Emulator(n) => *n,
        }
    }

    /// One line saying where the ranks run, for a program's first line of
    /// output: `CUDA, 2 GPU rank(s) on devices [0, 1]`, or `CPU emulator, 4
    /// simulated ranks (no CUDA device found)`.
    pub fn describe(&self) -> String {
        match self {
            Ranks::Cuda(d) => {
                let mut devices = d.clone();
                devices.sort_unstable();
                devices.dedup();
                let counts: Vec<usize> = devices
                    .iter()
                    .map(|x| d.iter().filter(|y| *y == x).count())
                    .collect();
                let most = counts.iter().copied().max().unwrap_or(0);
                let shared = if most > 1 {
                    format!(
                        " ({} of {} GPU(s) shared, up to {most} ranks on one: a correctness \
                         run, not a timing)",
                        counts.iter().filter(|&&c| c > 1).count(),
                        devices.len()
                    )
                } else {
                    String::new()
                };
                format!("CUDA, {} GPU rank(s) on devices {d:?}{shared}", d.len())
            }
            Ranks::Emulator(n) if !crate::cuda::cuda_available() => {
                format!("CPU emulator, {n} simulated ranks (no CUDA device found)")
            }
            Ranks::Emulator(n) => format!("CPU emulator, {n} simulated ranks"),
        }
    }
}

/// Every failed rank's error from [`run`] or [`run_local`].
#[derive(Debug)]
pub struct RunError {
    /// `(rank, error)` for each rank that failed, in rank order.
    pub errors: Vec<(usize, Error)>,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rank(s) failed", self.errors.len())?;
        for (r, e) in &self.errors {
            // Most errors name their rank already; say it once.
            let msg = e.to_string();
            if msg.starts_with(&format!("rank {r}:")) || msg.starts_with(&format!("rank {r} ")) {
                write!(f, "\n  {msg}")?;
            } else {
                write!(f, "\n  rank {r}: {msg}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for RunError {}

/// Runs `f` once per rank, one thread per rank, and joins them all.
///
/// Returns every rank's result in rank order, or every failed rank's error
/// (a panic is reported as [`Error::RankPanicked`]). A rank that fails early
/// does not hang the others: their collectives (or, for a GPU rank that
/// fails before its `Comm` exists, their joining the group) time out naming
/// it. `Ranks::Cuda` may list a GPU more than once: those ranks share it
/// (see [`prepare_shared_gpus`](crate::prepare_shared_gpus) and the book's
/// launching chapter).
pub fn run<R, F>(ranks: Ranks, options: CommOptions, f: F) -> Result<Vec<R>, RunError>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    let world = ranks.world_size();
    if let Err(e) = check_world(0, world) {
        return Err(RunError {
            errors: vec![(0, e)],
        });
    }
    let store: Arc<dyn Store> = Arc::new(InProcessStore::new());
    let outcomes: Vec<Result<R>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let (store, options, ranks, f) = (store.clone(), options.clone(), &ranks, &f);
                std::thread::Builder::new()
                    .name(format!("symm-rank-{rank}"))
                    .spawn_scoped(s, move || {
                        let comm = match ranks {
                            Ranks::Cuda(devs) => {
                                Comm::cuda(rank, world, devs[rank], store, options)?
                            }
                            Ranks::Emulator(_) => Comm::emulated(rank, world, store, options)?,
                        };
                        let _finished = matches!(ranks, Ranks::Emulator(_))
                            .then(|| crate::emulator::FinishGuard(crate::emulator::group(&comm)));
                        f(&comm)
                    })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(rank, h)| match h {
                Err(e) => Err(Error::RankPanicked {
                    rank,
                    message: format!("could not spawn its thread: {e}"),
                }),
                Ok(h) => h.join().unwrap_or_else(|p| {
                    Err(Error::RankPanicked {
                        rank,
                        message: panic_message(&*p),
                    })
                }),
            })
            .collect()
    });
    let mut ok = Vec::with_capacity(world);
    let mut errors = Vec::new();
    for (rank, o) in outcomes.into_iter().enumerate() {
        match o {
            Ok(v) => ok.push(v),
            Err(e) => errors.push((rank, e)),
        }
    }
    if errors.is_empty() {
        Ok(ok)
    } else {
        Err(RunError { errors })
    }
}

/// [`run`] with one rank per listed CUDA device and default options.
pub fn run_local<R, F>(devices: &[usize], f: F) -> Result<Vec<R>, RunError>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    run(Ranks::Cuda(devices.to_vec()), CommOptions::default(), f)
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

#[cfg(test)]
mod tests {
    use super::Ranks;

    #[test]
    fn packed_placements_share_gpus_only_when_asked_or_needed() {
        let cuda = |v: &[usize]| Some(Ranks::Cuda(v.to_vec()));
        // Enough GPUs: one rank each.
        assert_eq!(Ranks::cuda_packed(4, 8, None), cuda(&[0, 1, 2, 3]));
        // Too few: as few per GPU as fit, in consecutive runs.
        assert_eq!(Ranks::cuda_packed(4, 1, None), cuda(&[0, 0, 0, 0]));
        assert_eq!(Ranks::cuda_packed(3, 2, None), cuda(&[0, 0, 1]));
        assert_eq!(
            Ranks::cuda_packed(8, 3, None),
            cuda(&[0, 0, 0, 1, 1, 1, 2, 2])
        );
        // Asked for: k per GPU, even when more GPUs are there.
        assert_eq!(Ranks::cuda_packed(4, 4, Some(2)), cuda(&[0, 0, 1, 1]));
        assert_eq!(Ranks::cuda_packed(1, 1, Some(4)), cuda(&[0]));
        // Impossible placements.
        assert_eq!(Ranks::cuda_packed(4, 1, Some(2)), None);
        assert_eq!(Ranks::cuda_packed(2, 0, None), None);
        assert_eq!(Ranks::cuda_packed(2, 2, Some(0)), None);
    }

    #[test]
    fn ranks_per_gpu_must_be_a_positive_number() {
        // No other test of this binary reads the variable.
        std::env::remove_var("SYMM_RANKS_PER_GPU");
        assert_eq!(Ranks::ranks_per_gpu(), Ok(None));
        std::env::set_var("SYMM_RANKS_PER_GPU", " 4 ");
        assert_eq!(Ranks::ranks_per_gpu(), Ok(Some(4)));
        for bad in ["0", "four", "-1"] {
            std::env::set_var("SYMM_RANKS_PER_GPU", bad);
            let e = Ranks::ranks_per_gpu().unwrap_err();
            assert!(e.contains("is not a positive number"), "{e}");
        }
        std::env::remove_var("SYMM_RANKS_PER_GPU");
    }

    #[test]
    fn shared_placements_say_so() {
        let d = Ranks::Cuda(vec![0, 0, 1]).describe();
        assert!(d.contains("devices [0, 0, 1]"), "{d}");
        assert!(
            d.contains("1 of 2 GPU(s) shared, up to 2 ranks on one"),
            "{d}"
        );
        assert!(!Ranks::Cuda(vec![0, 1]).describe().contains("shared"));
    }
}
