//! The backend seam: what a rank needs from the machine it runs on.
//!
//! [`Comm`](crate::Comm), symmetric allocation, rendezvous and the signal
//! operations are written once against [`Backend`]. [`CudaBackend`] runs them
//! on a GPU; [`HostBackend`] runs them on host memory with the same layout,
//! which is what the CPU emulator is built on.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::CudaStream;

use crate::error::{Error, GroupName, Result};

mod cuda;
mod host;

pub(crate) use cuda::{CudaBackend, Sharing};
pub(crate) use host::HostBackend;

/// Where a rank's memory and kernels live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendKind {
    /// A CUDA GPU.
    Cuda,
    /// The CPU emulator: host memory laid out as on a GPU.
    Emulator,
}

impl BackendKind {
    pub(crate) const fn code(self) -> u8 {
        match self {
            BackendKind::Cuda => 1,
            BackendKind::Emulator => 2,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<BackendKind> {
        match c {
            1 => Some(BackendKind::Cuda),
            2 => Some(BackendKind::Emulator),
            _ => None,
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendKind::Cuda => "cuda",
            BackendKind::Emulator => "emulator",
        })
    }
}

/// What frees memory someone else allocated (see [`Backend::adopt`]): run
/// once, when this is dropped.
pub(crate) struct ForeignFree(std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl ForeignFree {
    pub(crate) fn new(free: Box<dyn FnOnce() + Send>) -> ForeignFree {
        ForeignFree(std::sync::Mutex::new(Some(free)))
    }
}

impl Drop for ForeignFree {
    fn drop(&mut self) {
        let free = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(free) = free {
            free();
        }
    }
}

/// One rank's own physical allocation, mapped for itself.
pub(crate) trait LocalAlloc: Send + Sync {
    /// Address of byte 0, valid for this rank's backend.
    fn ptr(&self) -> u64;
    /// Mapped bytes.
    fn size(&self) -> usize;
    /// The backend's own type, for exporting.
    fn as_any(&self) -> &dyn Any;
}

/// What a rank publishes so that peers can map one of its allocations,
/// and whatever must stay alive until they have (a descriptor server).
pub(crate) struct Export {
    pub bytes: Vec<u8>,
    pub _serving: Option<Box<dyn Any + Send>>,
}

impl Export {
    /// Bytes that are enough on their own (in-process sharing).
    pub(crate) fn plain(bytes: Vec<u8>) -> Export {
        Export {
            bytes,
            _serving: None,
        }
    }
}

/// A peer's allocation mapped for this rank; dropping it unmaps.
pub(crate) struct Mapped {
    pub ptr: u64,
    pub _keep: Box<dyn Any + Send + Sync>,
}

/// A device-visible array of `u64`s; dropping it frees the array.
pub(crate) struct Table {
    pub ptr: u64,
    pub _keep: Box<dyn Any + Send + Sync>,
}

/// One `#[symm_kernel]` instantiation, as a backend compiles and runs it.
pub(crate) struct KernelSpec<'a> {
    /// The kernel's name, for diagnostics and its CUDA entry.
    pub name: &'static str,
    /// Identifies the instantiation: the kernel's definition (the address of
    /// its [`KernelDef`](crate::__private_0_1_0::KernelDef), so that two kernels
    /// of one name never share a compiled function) and a hash of its
    /// generic arguments.
    pub id: (usize, u64),
    /// Whether every index is bounds-checked (a safe `launch`): a separate
    /// compiled function from the unchecked one (`launch_unchecked`).
    pub checked: bool,
    /// Whether the kernel takes a `SymmBuf`, so it may wait on peers, which
    /// ranks sharing a GPU can do only with grids that fit together.
    pub peers: bool,
    /// `#[symm_kernel(max_threads)]`'s bound, or 0.
    pub max_threads: u32,
    /// The complete CUDA C, given the entry name to export.
    pub source: &'a dyn Fn(&str) -> String,
    /// The body as Rust, run by every simulated thread on the emulator.
    pub cpu: &'a dyn Fn(),
}

/// The CUDA entry of a kernel's instantiation `inst` (a hash of its generic
/// arguments), checked or not.
pub(crate) fn entry_name(kernel: &str, inst: u64, checked: bool) -> String {
    let suffix = if checked { "_c" } else { "" };
    format!("{kernel}__{inst:016x}{suffix}")
}

/// What a launch needs to know of the rank's group.
pub(crate) struct LaunchCtx<'a> {
    pub rank: usize,
    pub world: usize,
    /// How long a kernel's waits may take.
    pub kernel_timeout: Duration,
    /// Which ranks share a device (co-residency of kernels that wait).
    pub placement: &'a crate::placement::Placement,
    /// The group, for the emulator's hang detection.
    pub group: &'a crate::emulator::GroupKey,
    /// The group `rank` counts in, for errors.
    pub name: &'a GroupName,
}

impl LaunchCtx<'_> {
    pub(crate) fn kernel_timeout_ns(&self) -> u64 {
        u64::try_from(self.kernel_timeout.as_nanos()).unwrap_or(u64::MAX)
    }

    pub(crate) fn invalid(&self, message: impl Into<String>) -> Error {
        Error::InvalidArgument {
            rank: self.rank,
            group: self.name.clone(),
            message: message.into(),
        }
    }
}

/// What a rank needs from the machine it runs on. One instance per rank.
pub(crate) trait Backend: Send + Sync {
    fn kind(&self) -> BackendKind;
    /// Human-readable device name, for example `cuda:1 (NVIDIA H200, sm_90)`.
    fn label(&self) -> String;
    /// Allocation sizes are rounded up to this power of two.
    fn granularity(&self) -> usize;
    /// Creates and maps `size` bytes of symmetric-capable memory.
    fn allocate(&self, size: usize) -> Result<Arc<dyn LocalAlloc>> {
        self.allocate_at(size, None)
    }
    /// [`allocate`](Backend::allocate), with the physical memory on host
    /// NUMA node `numa` where given (still mapped for the device).
    fn allocate_at(&self, size: usize, numa: Option<u32>) -> Result<Arc<dyn LocalAlloc>>;
    /// Allocates `size` bytes of plain (not symmetric) device memory.
    fn allocate_plain(&self, size: usize) -> Result<Arc<dyn LocalAlloc>>;
    /// `size` bytes at `ptr` that someone else allocated, as this rank's
    /// symmetric-capable allocation; `free` runs once this rank's handle and
    /// every peer's mapping of it are gone.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + size` is memory of this rank's device (host memory on the
    /// emulator), valid until `free` runs and used by nothing else; on a GPU
    /// it is `cuMemCreate` memory (what `ncclMemAlloc` returns), which peers
    /// can map.
    unsafe fn adopt(
        &self,
        ptr: u64,
        size: usize,
        free: Box<dyn FnOnce() + Send>,
    ) -> Result<Arc<dyn LocalAlloc>>;
    /// What lets a peer map `alloc`; keep it until every peer has.
    fn export(&self, alloc: &dyn LocalAlloc) -> Result<Export>;
    /// Maps a peer's exported allocation of `size` bytes, waiting at most
    /// `timeout` for the peer's part (a descriptor server) to answer.
    fn import(
        &self,
        peer: usize,
        exported: &[u8],
        size: usize,
        timeout: Duration,
    ) -> Result<Mapped>;
    /// Copies host bytes to `dst` (which the caller has bounds-checked) and waits.
    fn write(&self, dst: u64, src: &[u8]) -> Result<()>;
    /// Copies from `src` (bounds-checked by the caller) into host bytes.
    fn read(&self, src: u64, dst: &mut [u8]) -> Result<()>;
    /// Sets `bytes` bytes at `dst` (bounds-checked by the caller) to `byte`,
    /// and waits.
    fn fill(&self, dst: u64, byte: u8, bytes: usize) -> Result<()>;
    /// Copies `bytes` bytes from `src` to `dst`, ordered on the stream
    /// without waiting (on the emulator, at once).
    ///
    /// # Safety
    /// Both ranges must be memory this rank may use (its own, or a peer's
    /// mapped for it) for `bytes` bytes, must not overlap, and must stay
    /// mapped until the copy has run.
    unsafe fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<()>;
    /// Makes a device-visible copy of `values`.
    fn table(&self, values: &[u64]) -> Result<Table>;
    /// Waits for all enqueued work and reports any recorded failure (a
    /// timeout, on the emulator too).
    fn synchronize(&self) -> Result<()>;
    /// [`synchronize`](Self::synchronize), and meanwhile, every
    /// [`WATCH_EVERY`] while it waits, asks `watch` whether ranks left
    /// the group: for the ranks whose bits it returns, the waits of this
    /// rank's kernels end ([`abort_waits`](Self::abort_waits)). For ranks
    /// in other processes, whose departure only the store tells.
    fn synchronize_watching(
        &self,
        watch: &dyn Fn() -> Option<crate::status::RankMask>,
    ) -> Result<()> {
        let _ = watch;
        self.synchronize()
    }
    /// Ends the device waits of this rank's kernels on every rank whose bit
    /// is set in `ranks` (they record [`Error::PeerFailed`]), now and in
    /// later kernels: those ranks left the group. Nothing on the emulator,
    /// whose waits see the group's record themselves.
    fn abort_waits(&self, ranks: crate::status::RankMask) {
        let _ = ranks;
    }
    /// Whether peers in other processes may wait with this rank's kernels,
    /// so that only the store can tell of their departure (a GPU rank of
    /// one process per GPU): then the group's store is watched while its
    /// kernels run, whoever waits for them.
    fn watches_store(&self) -> bool {
        false
    }
    /// Kernels launched through this handle, and how many of them a
    /// completed [`synchronize`](Self::synchronize) had waited for: host
    /// counts only, never a query of the stream, which another thread must
    /// not make while a CUDA graph is being captured (it would end the
    /// capture). A CUDA graph replayed by another library counts as the
    /// launches its capture made.
    fn launch_counts(&self) -> (u64, u64) {
        (0, 0)
    }
    /// Free and total memory of the device, in bytes.
    fn mem_info(&self) -> Result<(usize, usize)>;
    /// The device this rank runs on, if it is a GPU (see
    /// [`crate::placement`]).
    fn device_id(&self) -> Option<crate::placement::DeviceId>;
    /// The CUDA stream work is enqueued on, if this is a CUDA backend.
    fn cuda_stream(&self) -> Option<&Arc<CudaStream>>;
    /// [`Self::cuda_stream`] as the device's own cudarc context object sees
    /// it: what cudarc memory is bound on, so that cudarc's event tracking
    /// records the rank's use of it (see `cuda::TrackedStream`).
    fn tracked_stream(&self) -> Option<&CudaStream>;
    /// The same rank and device, enqueueing on `stream` instead.
    fn with_cuda_stream(&self, stream: Arc<CudaStream>) -> Result<Arc<dyn Backend>>;
    /// A new backend on the same device with a stream (on a GPU) and a
    /// status record of its own: a subgroup's ([`crate::Comm::split`]), so
    /// its work runs beside this one's and its failures are its own,
    /// reported as those of `rank` of `group`.
    fn fork(&self, rank: usize, group: GroupName) -> Result<Arc<dyn Backend>>;
    /// Runs `kernel` with `params` (its hidden slots, status record, kernel
    /// timeout and rank, are filled here), compiling it on first use: enqueued
    /// on the stream on a GPU, run to completion on the emulator. `cfg` has
    /// been checked for zero dimensions and block size.
    fn launch(
        &self,
        kernel: &KernelSpec<'_>,
        cfg: &crate::launch::LaunchConfig,
        params: &mut [[u8; 8]],
        ctx: &LaunchCtx<'_>,
    ) -> Result<()>;
    /// Compiles and loads `kernels` now, on a GPU, so that a later launch
    /// of any of them needs no module load (which waits until no kernel of
    /// any rank runs on the device: a peer sharing the GPU may be spinning
    /// until this rank's next kernel runs).
    fn prepare(&self, kernels: &[&KernelSpec<'_>]) -> Result<()>;
    /// The largest grid of `kernel`, with `block` threads and `shared_mem`
    /// bytes of dynamic shared memory per block, whose blocks are resident
    /// together with the other ranks' kernels on a shared GPU; `None` when
    /// any grid is (no shared GPU, or the emulator).
    fn co_resident_grid(
        &self,
        kernel: &KernelSpec<'_>,
        block: u32,
        shared_mem: u32,
        ctx: &LaunchCtx<'_>,
    ) -> Result<Option<u32>>;
    /// Compiles and loads a CUDA C kernel that is not a `#[symm_kernel]`
    /// (see [`crate::RawKernel`]); only a GPU can run one.
    fn raw_function(&self, name: &str, source: &str) -> Result<RawFunction>;
    /// Enqueues a [`RawFunction`] of this backend.
    ///
    /// # Safety
    /// `params` must match the kernel's C parameters, and every address in
    /// them must be valid for what the kernel does with it.
    unsafe fn launch_raw(
        &self,
        f: &RawFunction,
        cfg: &crate::launch::LaunchConfig,
        params: &mut [[u8; 8]],
    ) -> Result<()>;
}

/// How often [`Backend::synchronize_watching`] asks whether ranks left.
pub(crate) const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// A loaded CUDA C kernel of one device (see [`Backend::raw_function`]).
pub(crate) struct RawFunction {
    pub f: cudarc::driver::CudaFunction,
    pub ordinal: usize,
}

/// Tag bytes at the start of every exported handle, so a rank never
/// misreads another backend's or another process's handle.
pub(crate) const EXPORT_CUDA_IN_PROCESS: u8 = 1;
pub(crate) const EXPORT_HOST_IN_PROCESS: u8 = 2;
pub(crate) const EXPORT_CUDA_FD: u8 = 3;
pub(crate) const EXPORT_CUDA_FABRIC: u8 = 4;

/// Encodes an export's 17-byte header: tag, process id, device ordinal and
/// address (0 for the file-descriptor and fabric forms, whose socket path or
/// handle follows the header).
pub(crate) fn encode_export(tag: u8, ordinal: u32, addr: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(17);
    v.push(tag);
    v.extend_from_slice(&std::process::id().to_le_bytes());
    v.extend_from_slice(&ordinal.to_le_bytes());
    v.extend_from_slice(&addr.to_le_bytes());
    v
}

/// Decodes an in-process export, checking its tag and process.
pub(crate) fn decode_export(rank: usize, peer: usize, tag: u8, v: &[u8]) -> Result<(u32, u64)> {
    let bad = |why: String| Error::InvalidArgument {
        rank,
        // The backend that knows the group qualifies it.
        group: GroupName::NONE,
        message: format!("rank {peer}'s exported allocation {why}"),
    };
    if v.len() != 17 {
        return Err(bad(format!("has {} bytes, expected 17", v.len())));
    }
    if v[0] != tag {
        return Err(bad(format!(
            "has tag {}, expected {tag} (backends differ?)",
            v[0]
        )));
    }
    let pid = u32::from_le_bytes([v[1], v[2], v[3], v[4]]);
    if pid != std::process::id() {
        return Err(bad(format!(
            "comes from process {pid}; this in-process backend only maps allocations of its own process"
        )));
    }
    let ordinal = u32::from_le_bytes([v[5], v[6], v[7], v[8]]);
    let mut a = [0u8; 8];
    a.copy_from_slice(&v[9..17]);
    Ok((ordinal, u64::from_le_bytes(a)))
}
