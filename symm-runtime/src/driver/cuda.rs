//! The CUDA device layer: a thin safe wrapper over cudarc's driver API.
//!
//! Everything `unsafe` about the driver lives in this file. cudarc loads
//! libcuda lazily and panics when it is absent, so [`cuda_available`] checks
//! for the library before touching any entry point.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use cudarc::driver::sys::{self, CUdeviceptr, CUmemGenericAllocationHandle};
use cudarc::driver::{
    result, CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError,
};
use cudarc::nvrtc::Ptx;

use crate::jit::{Arch, CompileRequest, JitEngine};
use crate::launch::LaunchConfig;

/// A failed driver call: which entry point, and its code. Callers attach the
/// rank and device to make an [`crate::Error::Driver`].
#[derive(Debug)]
pub(crate) struct DrvErr {
    pub op: &'static str,
    pub err: DriverError,
}

pub(crate) type DrvResult<T> = Result<T, DrvErr>;

trait Op<T> {
    fn op(self, op: &'static str) -> DrvResult<T>;
}

impl<T> Op<T> for Result<T, DriverError> {
    fn op(self, op: &'static str) -> DrvResult<T> {
        self.map_err(|err| DrvErr { op, err })
    }
}

fn check(op: &'static str, r: sys::CUresult) -> DrvResult<()> {
    r.result().op(op)
}

/// Whether a CUDA driver with at least one device can be used. Never panics,
/// also when libcuda is missing.
pub fn cuda_available() -> bool {
    cuda_device_count() > 0
}

/// Number of CUDA devices, or 0 when no usable driver is installed.
pub fn cuda_device_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        // SAFETY: only probes whether the shared library can be opened.
        if !unsafe { sys::is_culib_present() } {
            return 0;
        }
        // What the driver reads when it starts (see `queues_at_start`).
        let _ = QUEUES_AT_START.set(std::env::var(CONNECTIONS_VAR).ok());
        // A driver too old for a symbol cudarc needs panics inside cudarc;
        // treat that as "no CUDA" rather than taking the process down.
        std::panic::catch_unwind(|| {
            result::init().ok()?;
            result::device::get_count().ok()
        })
        .ok()
        .flatten()
        .map_or(0, |n| n.max(0) as usize)
    })
}

/// [`CONNECTIONS_VAR`] as it was when symm started the
/// driver, which reads it then and never again.
static QUEUES_AT_START: OnceLock<Option<String>> = OnceLock::new();

/// The value of [`CONNECTIONS_VAR`] that the driver
/// runs with (as symm saw it when it started the driver; if another library
/// started it earlier, the value at that time, which symm cannot see).
pub(crate) fn queues_at_start() -> Option<String> {
    cuda_device_count();
    QUEUES_AT_START.get().cloned().flatten()
}

/// Sets `CUDA_DEVICE_MAX_CONNECTIONS=32`, the most hardware work queues per
/// GPU, unless it is set or symm has started CUDA already. Ranks that share
/// a GPU need a queue each, and one more (see the book's launching
/// chapter): streams beyond a GPU's queues (8 by default) share one, and the
/// work of a shared queue starts in submission order, so one rank's kernel
/// could sit behind another rank's kernel that waits for it. Only programs
/// that share GPUs need it: more queues cost up to 0.15 µs per 1 MiB
/// all-reduce at world size 1 on an H100 (`bench/NOTES.md`). Setting the
/// variable in the environment that starts the program does the same.
///
/// # Safety
/// It writes the process environment: no other thread may read or write
/// the environment while it runs (through Rust's `std::env` that is
/// serialised, but C code such as the CUDA driver reads it directly). Call
/// it at the start of `main`, before any thread is spawned.
pub unsafe fn prepare_shared_gpus() {
    if std::env::var_os(CONNECTIONS_VAR).is_none() && QUEUES_AT_START.get().is_none() {
        std::env::set_var(CONNECTIONS_VAR, "32");
    }
}

/// The driver's variable for the number of hardware work queues per device
/// (1 to 32, default 8), read when the driver starts. Ranks that share a
/// GPU need a queue each (see [`crate::prepare_shared_gpus`]).
pub(crate) const CONNECTIONS_VAR: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// Why CUDA is unavailable, for error messages.
pub(crate) fn unavailable_reason() -> String {
    // SAFETY: only probes whether the shared library can be opened.
    if !unsafe { sys::is_culib_present() } {
        "libcuda could not be loaded (no NVIDIA driver on this machine)".into()
    } else {
        "the CUDA driver reports no devices".into()
    }
}

/// One CUDA device as symm uses it: its primary context, what ranks need to
/// know of it, and per-device caches. Ranks that share the device share this.
pub(crate) struct CudaDevice {
    pub ordinal: usize,
    pub ctx: Arc<CudaContext>,
    /// The device's own stream, for stream-ordered allocations and frees of
    /// plain memory: they must not wait for any rank's queued work. Held for
    /// the process's life, which also keeps cudarc from synchronising the
    /// whole context (as it does when it creates a stream while the context
    /// has none), which would wait for other ranks' spinning kernels.
    service: Arc<CudaStream>,
    pub arch: Arch,
    pub name: String,
    pub granularity: usize,
    /// Multiprocessors.
    pub sms: u32,
    /// The device's UUID (the same in every process).
    pub uuid: [u8; 16],
    /// Whether stream-ordered allocation (`cuMemAllocAsync`) is supported.
    /// Plain memory uses it where it is, because `cuMemFree` waits for every
    /// kernel on the device, other ranks' spinning ones included.
    pools: bool,
    /// Loaded kernels, each behind a lock of its own that is held while it compiles and
    /// loads, so that ranks sharing the device load each kernel once (a
    /// second load would wait for the first rank's kernel, which may wait for
    /// the second rank's). One lock per kernel, not one for all: a rank that
    /// loads its next kernel must not hold up a rank that needs one already
    /// loaded, whose launch the first rank's kernels may be waiting for.
    functions: Mutex<HashMap<FunctionKey, FunctionCell>>,
    /// Held shared by every launch and exclusively by a module load (see
    /// [`Self::load_when_idle`]).
    gate: RwLock<()>,
    /// The ranks on this device, whose streams a module load waits for.
    ranks: Mutex<Vec<Weak<RankStreams>>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cuda:{} ({}, {})", self.ordinal, self.name, self.arch)
    }
}

/// How long a kernel load waits for the device to be idle before it loads
/// anyway (the kernels in the way then finish or time out first).
const LOAD_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// One kernel of [`CudaDevice::function`]: empty until loaded.
type FunctionCell = Arc<Mutex<Option<CudaFunction>>>;

/// Names a loaded kernel of a device. A `#[symm_kernel]` instantiation is
/// named without its source (launches are the hot path): by its kernel's
/// definition, a hash of its generic arguments, and whether its indexing is
/// bounds-checked (checked and unchecked are different functions).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum FunctionKey {
    /// (address of the kernel's definition, hash of its generic arguments,
    /// bounds-checked).
    Dsl(usize, u64, bool),
    /// (entry name, hash of the source) of CUDA C source (compiled with no
    /// extra options).
    Raw(String, u64),
}

/// Returns the process-wide [`CudaDevice`] for `ordinal`, creating it once.
pub(crate) fn device(ordinal: usize) -> DrvResult<Arc<CudaDevice>> {
    static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<CudaDevice>>>> = OnceLock::new();
    let map = DEVICES.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = map.get(&ordinal) {
        return Ok(d.clone());
    }
    let d = Arc::new(CudaDevice::open(ordinal)?);
    map.insert(ordinal, d.clone());
    Ok(d)
}

fn allocation_prop(ordinal: usize, fabric: bool) -> sys::CUmemAllocationProp {
    allocation_prop_at(ordinal, fabric, None)
}

/// [`allocation_prop`] with the physical memory on host NUMA node `numa`
/// where given (mapped for, and accessed from, device `ordinal` alike).
fn allocation_prop_at(ordinal: usize, fabric: bool, numa: Option<u32>) -> sys::CUmemAllocationProp {
    // SAFETY: CUmemAllocationProp is a plain C struct for which all-zero is
    // the documented "no flags" value of every field.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    match numa {
        None => {
            prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
            prop.location.id = ordinal as i32;
        }
        Some(node) => {
            prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST_NUMA;
            prop.location.id = node as i32;
        }
    }
    // Exportable as a file descriptor so that one process per GPU can share
    // it, and as a fabric handle (only where asked: not every device can)
    // for processes on other nodes of one NVLink domain.
    let fd = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.0;
    let fab = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC.0;
    prop.requestedHandleTypes = sys::CUmemAllocationHandleType(if fabric { fd | fab } else { fd });
    prop
}

fn access_desc(ordinal: usize) -> sys::CUmemAccessDesc {
    // SAFETY: plain C struct; zero is a valid starting value for every field.
    let mut desc: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
    desc.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = ordinal as i32;
    desc.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    desc
}

impl CudaDevice {
    fn open(ordinal: usize) -> DrvResult<CudaDevice> {
        let ctx = CudaContext::new(ordinal).op("cuDevicePrimaryCtxRetain")?;
        let stream = ctx.new_stream().op("cuStreamCreate")?;
        let (major, minor) = ctx.compute_capability().op("cuDeviceGetAttribute")?;
        let name = ctx.name().op("cuDeviceGetName")?;
        let uuid = ctx.uuid().op("cuDeviceGetUuid")?;
        let attr = |a| ctx.attribute(a).op("cuDeviceGetAttribute");
        let sms = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let pools = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0;
        let prop = allocation_prop(ordinal, false);
        let mut granularity = 0usize;
        // SAFETY: `prop` is fully initialised and `granularity` is a valid out-pointer.
        check("cuMemGetAllocationGranularity", unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
            )
        })?;
        Ok(CudaDevice {
            ordinal,
            ctx,
            service: stream,
            arch: Arch::from_compute_capability(major, minor),
            name,
            granularity: granularity.max(1).next_power_of_two(),
            sms: u32::try_from(sms).unwrap_or(0),
            uuid: uuid.bytes.map(|b| b as u8),
            pools,
            functions: Mutex::new(HashMap::new()),
            gate: RwLock::new(()),
            ranks: Mutex::new(Vec::new()),
        })
    }

    /// Whether allocations can be exported as POSIX file descriptors (what
    /// one process per GPU needs).
    pub(crate) fn supports_fd_handles(&self) -> bool {
        self.ctx
            .attribute(
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
            )
            .is_ok_and(|v| v != 0)
    }

    /// Whether allocations can be exported as fabric handles (multi-node
    /// NVLink; needs the driver's IMEX service as well).
    pub(crate) fn supports_fabric_handles(&self) -> bool {
        self.ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)
            .is_ok_and(|v| v != 0)
    }

    pub(crate) fn bind(&self) -> DrvResult<()> {
        self.ctx.bind_to_thread().op("cuCtxSetCurrent")
    }

    /// The loaded function `key`, compiled (through the JIT engine, for this
    /// device's architecture) and loaded on first use, from what `make`
    /// gives then: the entry's name, the CUDA C, and NVRTC options.
    pub(crate) fn function(
        &self,
        rank: usize,
        key: FunctionKey,
        make: &dyn Fn() -> (String, String, Vec<String>),
    ) -> crate::Result<CudaFunction> {
        let cell = self
            .functions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_default()
            .clone();
        let mut slot = cell.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = &*slot {
            return Ok(f.clone());
        }
        let (entry, source, options) = make();
        let req = CompileRequest {
            kernel_name: &entry,
            source: &source,
            arch: self.arch,
            options: &options,
        };
        crate::jit::dump(&req);
        let (compiled, _) = JitEngine::global().compile(&req)?;
        let f = self
            .load_when_idle(&compiled.cubin, &entry)
            .map_err(|e| self.error(rank, e))?;
        *slot = Some(f.clone());
        Ok(f)
    }

    /// Loads `kernel` from `cubin` once no kernel of any rank runs on the
    /// device. Loading a module waits for every kernel on the device, and
    /// while it waits the driver lets no other thread launch on it: if a
    /// rank's kernel were waiting for a kernel that a rank sharing the
    /// device has yet to launch, both would wait until the kernel timed out.
    /// So the load happens under the exclusive side of [`Self::gate`], which
    /// every launch holds shared, and only when every stream of every rank
    /// on the device is idle; until then launches go on, and the kernels in
    /// flight finish.
    fn load_when_idle(&self, cubin: &[u8], kernel: &str) -> DrvResult<CudaFunction> {
        let start = std::time::Instant::now();
        loop {
            // Taken outside the gate, and released after it: dropping the
            // last handle to a rank waits for its streams.
            let ranks = self.live_rank_streams();
            // Never blocks: a waiting writer would hold off new launches.
            if let Ok(gate) = self.gate.try_write() {
                let give_up = start.elapsed() > LOAD_PATIENCE;
                if give_up || self.idle(&ranks)? {
                    if give_up {
                        tracing::warn!(
                            "loading `{kernel}` on cuda:{} waited {LOAD_PATIENCE:?} for the \
                             device to be idle; loading anyway",
                            self.ordinal
                        );
                    }
                    let module = self.load_module(cubin)?;
                    let f = module.load_function(kernel).op("cuModuleGetFunction")?;
                    drop(gate);
                    return Ok(f);
                }
            }
            drop(ranks);
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    /// Every rank alive on the device.
    fn live_rank_streams(&self) -> Vec<Arc<RankStreams>> {
        let mut ranks = self.ranks.lock().unwrap_or_else(|p| p.into_inner());
        ranks.retain(|r| r.strong_count() > 0);
        ranks.iter().filter_map(Weak::upgrade).collect()
    }

    /// Whether every stream of `ranks` has finished its work. A stream being
    /// captured into a graph counts as idle: querying it would end the
    /// capture, and captured work does not run.
    fn idle(&self, ranks: &[Arc<RankStreams>]) -> DrvResult<bool> {
        self.bind()?;
        for s in ranks.iter().flat_map(|r| r.streams()) {
            let mut capture = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
            // SAFETY: the stream is alive (its rank is held) and belongs to
            // this device's context; `capture` is a valid out-pointer.
            check("cuStreamIsCapturing", unsafe {
                sys::cuStreamIsCapturing(s.cu_stream(), &mut capture)
            })?;
            if capture != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
                continue;
            }
            // SAFETY: as above.
            match unsafe { sys::cuStreamQuery(s.cu_stream()) } {
                sys::CUresult::CUDA_SUCCESS => {}
                sys::CUresult::CUDA_ERROR_NOT_READY => return Ok(false),
                other => check("cuStreamQuery", other)?,
            }
        }
        Ok(true)
    }

    /// Number of ranks alive on the device.
    fn live_ranks(&self) -> usize {
        self.ranks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|r| r.strong_count() > 0)
            .count()
    }

    /// Whether a rank other than `me` on this device enqueues on `stream`.
    pub(crate) fn stream_taken(&self, me: &Arc<RankStreams>, stream: &CudaStream) -> bool {
        self.live_rank_streams()
            .iter()
            .any(|r| !Arc::ptr_eq(r, me) && r.has(stream))
    }

    /// How many blocks of `f`, `block` threads each with `shared_mem`
    /// bytes of dynamic shared memory, one multiprocessor holds at once.
    pub(crate) fn occupancy(
        &self,
        f: &CudaFunction,
        block: u32,
        shared_mem: u32,
    ) -> DrvResult<u32> {
        self.bind()?;
        f.occupancy_max_active_blocks_per_multiprocessor(block, shared_mem as usize, None)
            .op("cuOccupancyMaxActiveBlocksPerMultiprocessor")
    }

    fn load_module(&self, cubin: &[u8]) -> DrvResult<Arc<CudaModule>> {
        self.ctx
            .load_module(Ptx::from_binary(cubin.to_vec()))
            .op("cuModuleLoadData")
    }

    pub(crate) fn error(&self, rank: usize, e: DrvErr) -> crate::Error {
        crate::Error::Driver {
            rank,
            // The backend that knows the group qualifies it.
            group: crate::GroupName::NONE,
            device: format!("cuda:{}", self.ordinal),
            op: e.op,
            source: e.err,
        }
    }

    /// Whether this device can map memory that lives on `peer`.
    pub(crate) fn can_access(&self, peer: usize) -> DrvResult<bool> {
        if peer == self.ordinal {
            return Ok(true);
        }
        let me = result::device::get(self.ordinal as i32).op("cuDeviceGet")?;
        let other = result::device::get(peer as i32).op("cuDeviceGet")?;
        let mut can = 0i32;
        // SAFETY: both handles come from cuDeviceGet; `can` is a valid out-pointer.
        check("cuDeviceCanAccessPeer", unsafe {
            sys::cuDeviceCanAccessPeer(&mut can, me, other)
        })?;
        Ok(can != 0)
    }

    /// Launches `f` with raw parameter slots on `stream`.
    pub(crate) fn launch(
        &self,
        f: &CudaFunction,
        stream: &CudaStream,
        cfg: &LaunchConfig,
        params: &mut [[u8; 8]],
    ) -> DrvResult<()> {
        self.bind()?;
        // No module loads while the launch is enqueued (see `load_when_idle`).
        let _gate = self.gate.read().unwrap_or_else(|p| p.into_inner());
        // Launches are the hot path: the pointer array lives on the stack for
        // any kernel of up to 32 parameters.
        let mut stack = [std::ptr::null_mut::<c_void>(); 32];
        let mut heap = Vec::new();
        let ptrs: &mut [*mut c_void] = if params.len() <= stack.len() {
            &mut stack[..params.len()]
        } else {
            heap.resize(params.len(), std::ptr::null_mut());
            &mut heap
        };
        for (p, slot) in ptrs.iter_mut().zip(params.iter_mut()) {
            *p = slot.as_mut_ptr().cast();
        }
        // Before sm_90 there is no programmatic launch, and the kernel's
        // `griddepcontrol` instructions compile to nothing.
        let pdl = cfg.pdl && self.arch.major >= 9;
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: sys::CUlaunchAttributeValue {
                programmaticStreamSerializationAllowed: 1,
            },
        };
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid.0,
            gridDimY: cfg.grid.1,
            gridDimZ: cfg.grid.2,
            blockDimX: cfg.block.0,
            blockDimY: cfg.block.1,
            blockDimZ: cfg.block.2,
            sharedMemBytes: cfg.shared_mem,
            hStream: stream.cu_stream(),
            attrs: if pdl { &mut attr } else { std::ptr::null_mut() },
            numAttrs: u32::from(pdl),
        };
        // SAFETY: every kernel parameter is at most 8 bytes and each pointer
        // addresses an 8-byte slot that outlives this call; the driver copies
        // parameters before returning. The caller matched the slots to the
        // kernel's signature. `config` and `attr` outlive the call.
        check("cuLaunchKernelEx", unsafe {
            sys::cuLaunchKernelEx(
                &config,
                f.cu_function(),
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    /// Copies host bytes to device address `dst`, ordered on `stream`, and waits.
    pub(crate) fn write(&self, stream: &CudaStream, dst: u64, src: &[u8]) -> DrvResult<()> {
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // The stream's work first: a copy from pageable memory waits for it
        // inside the driver, where it keeps other threads of the context
        // from launching, and a kernel of ours may be waiting for a launch
        // of a rank that shares the GPU.
        stream.synchronize().op("cuStreamSynchronize")?;
        // SAFETY: the caller checked that [dst, dst + len) lies in memory
        // mapped into this context; `src` stays borrowed until the sync below.
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr().cast(), src.len(), stream.cu_stream())
        })?;
        stream.synchronize().op("cuStreamSynchronize")
    }

    /// Copies from device address `src` into host bytes, ordered on `stream`.
    pub(crate) fn read(&self, stream: &CudaStream, src: u64, dst: &mut [u8]) -> DrvResult<()> {
        if dst.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // As in `write`: the stream's work first.
        stream.synchronize().op("cuStreamSynchronize")?;
        // SAFETY: as in `write`; `dst` stays borrowed until the sync below.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), src, dst.len(), stream.cu_stream())
        })?;
        stream.synchronize().op("cuStreamSynchronize")
    }

    /// Sets `bytes` bytes at `dst` to `byte`, ordered on `stream`, and waits.
    pub(crate) fn fill(
        &self,
        stream: &CudaStream,
        dst: u64,
        byte: u8,
        bytes: usize,
    ) -> DrvResult<()> {
        self.bind()?;
        // SAFETY: the caller checked that the range is mapped in this context.
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(dst, byte, bytes, stream.cu_stream())
        })?;
        stream.synchronize().op("cuStreamSynchronize")
    }

    /// Enqueues a copy of `bytes` bytes from device address `src` to `dst`
    /// on `stream` and returns without waiting: the copy engines move it,
    /// also between this device and a peer's memory mapped here, and a
    /// stream being captured records it as a memcpy node.
    ///
    /// # Safety
    /// `[src, src + bytes)` and `[dst, dst + bytes)` must be memory mapped
    /// for this device in `stream`'s context, must not overlap, and must
    /// stay mapped until the copy has run.
    pub(crate) unsafe fn copy(
        &self,
        stream: &CudaStream,
        dst: u64,
        src: u64,
        bytes: usize,
    ) -> DrvResult<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the caller's promise: both ranges are mapped here, apart,
        // and outlive the enqueued copy.
        check("cuMemcpyDtoDAsync", unsafe {
            sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream.cu_stream())
        })
    }

    /// Free and total device memory, in bytes.
    pub(crate) fn mem_info(&self) -> DrvResult<(usize, usize)> {
        self.bind()?;
        result::mem_get_info().op("cuMemGetInfo")
    }
}

/// The streams one rank enqueues on, each with the status record its
/// kernels report timeouts in. Memory of the rank waits for these streams
/// alone before it is freed, never for the whole device: ranks that share
/// a GPU must not wait for each other's kernels, which may be spinning until
/// this very rank launches its next one. (With one process per GPU, the
/// rank's streams are the whole context's, as before.)
pub(crate) struct RankStreams {
    dev: Arc<CudaDevice>,
    /// The rank's own stream first, then the ones it was given.
    entries: Mutex<Vec<(Arc<CudaStream>, Arc<DeviceMem>)>>,
}

impl RankStreams {
    /// The streams of a rank that enqueues on `own`.
    pub(crate) fn new(dev: &Arc<CudaDevice>, own: &Arc<CudaStream>) -> DrvResult<Arc<RankStreams>> {
        let streams = Arc::new(RankStreams {
            dev: dev.clone(),
            entries: Mutex::new(Vec::new()),
        });
        streams.status_for(own)?;
        let mut ranks = dev.ranks.lock().unwrap_or_else(|p| p.into_inner());
        ranks.retain(|r| r.strong_count() > 0);
        ranks.push(Arc::downgrade(&streams));
        Ok(streams)
    }

    /// Whether the rank enqueues on `stream` already.
    pub(crate) fn has(&self, stream: &CudaStream) -> bool {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|(s, _)| s.cu_stream() == stream.cu_stream())
    }

    /// The rank's streams.
    fn streams(&self) -> Vec<Arc<CudaStream>> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// The status record of kernels this rank runs on `stream`, registering
    /// the stream (so frees wait for it) on first use.
    pub(crate) fn status_for(&self, stream: &Arc<CudaStream>) -> DrvResult<Arc<DeviceMem>> {
        let find = |entries: &[(Arc<CudaStream>, Arc<DeviceMem>)]| {
            entries
                .iter()
                .find(|(s, _)| s.cu_stream() == stream.cu_stream())
                .map(|(_, st)| st.clone())
        };
        if let Some(st) = find(&self.entries.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(st);
        }
        // Made without the lock held (a module load reads the rank's streams
        // while launches are held off). No owner to wait for: a status
        // record is freed only when the rank's streams are, after `Drop for
        // RankStreams` waited for them.
        let status = DeviceMem::new(&self.dev, Weak::new(), STATUS_BYTES)?;
        status.zero()?;
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(st) = find(&entries) {
            return Ok(st);
        }
        let status = Arc::new(status);
        entries.push((stream.clone(), status.clone()));
        Ok(status)
    }

    /// Waits for everything enqueued on every stream of the rank.
    pub(crate) fn synchronize_all(&self) -> DrvResult<()> {
        for s in self.streams() {
            s.synchronize().op("cuStreamSynchronize")?;
        }
        Ok(())
    }
}

impl Drop for RankStreams {
    fn drop(&mut self) {
        // The status records (and any memory whose owner this was) are freed
        // after this; nothing of the rank may still run on them.
        if let Err(e) = self.synchronize_all() {
            tracing::warn!("{} while a rank's streams were released", e.op);
        }
    }
}

/// Bytes of a status record (see [`crate::status::StatusRecord`]).
const STATUS_BYTES: usize = crate::status::STATUS_WORDS * 4;

/// A plain device allocation of one rank (pointer tables, status records,
/// [`DeviceBuffer`](crate::DeviceBuffer)s).
pub(crate) struct DeviceMem {
    dev: Arc<CudaDevice>,
    /// The rank whose streams may use the memory, waited for before the
    /// free (see [`RankStreams`]).
    owner: Weak<RankStreams>,
    /// The stream a stream-ordered allocation is freed on, or `None` for
    /// one from `cuMemAlloc`.
    free_on: Option<Arc<CudaStream>>,
    pub ptr: u64,
    pub bytes: usize,
}

impl DeviceMem {
    /// `bytes` of device memory for the rank `owner`, ready for any stream
    /// when this returns.
    pub(crate) fn new(
        dev: &Arc<CudaDevice>,
        owner: Weak<RankStreams>,
        bytes: usize,
    ) -> DrvResult<DeviceMem> {
        DeviceMem::alloc(dev, owner, bytes, true)
    }

    /// [`DeviceMem::new`] for data the user's kernels stream through: from
    /// the stream-ordered allocator only while ranks share the device,
    /// since its memory made a 1 MiB all-reduce into it 0.05 µs slower
    /// (world size 1, H100), and otherwise `cuMemFree` waits only for this
    /// rank's kernels anyway.
    pub(crate) fn new_plain(
        dev: &Arc<CudaDevice>,
        owner: Weak<RankStreams>,
        bytes: usize,
    ) -> DrvResult<DeviceMem> {
        let shared = dev.live_ranks() > 1;
        DeviceMem::alloc(dev, owner, bytes, shared)
    }

    fn alloc(
        dev: &Arc<CudaDevice>,
        owner: Weak<RankStreams>,
        bytes: usize,
        ordered: bool,
    ) -> DrvResult<DeviceMem> {
        dev.bind()?;
        let free_on = (dev.pools && ordered).then(|| dev.service.clone());
        let ptr = match &free_on {
            Some(service) => {
                // SAFETY: the context is current and the service stream
                // belongs to it; the pointer is freed exactly once, in Drop,
                // on the same stream.
                let ptr = unsafe { result::malloc_async(service.cu_stream(), bytes.max(1)) }
                    .op("cuMemAllocAsync")?;
                // Any stream may use it once the service stream, which holds
                // only allocations and frees, has made it.
                service.synchronize().op("cuStreamSynchronize")?;
                ptr
            }
            // SAFETY: the context is current; the pointer is freed exactly
            // once, in Drop.
            None => unsafe { result::malloc_sync(bytes.max(1)) }.op("cuMemAlloc")?,
        };
        Ok(DeviceMem {
            dev: dev.clone(),
            owner,
            free_on,
            ptr,
            bytes,
        })
    }

    /// Allocates a device array holding `values`, copied in and waited for.
    pub(crate) fn from_u64s(
        dev: &Arc<CudaDevice>,
        owner: Weak<RankStreams>,
        values: &[u64],
    ) -> DrvResult<DeviceMem> {
        let m = DeviceMem::new(dev, owner, values.len() * 8)?;
        let s = &dev.service;
        // SAFETY: the allocation holds exactly `values.len()` u64s, and
        // `values` stays borrowed until the stream sync below.
        unsafe { result::memcpy_htod_async(m.ptr, values, s.cu_stream()) }
            .op("cuMemcpyHtoDAsync")?;
        s.synchronize().op("cuStreamSynchronize")?;
        Ok(m)
    }

    /// Zeroes the allocation and waits.
    pub(crate) fn zero(&self) -> DrvResult<()> {
        self.dev.bind()?;
        let s = &self.dev.service;
        // SAFETY: the range is this allocation.
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(self.ptr, 0, self.bytes, s.cu_stream())
        })?;
        s.synchronize().op("cuStreamSynchronize")
    }

    /// Writes `values` to the `u32` words from `index` of the allocation,
    /// through the device's service stream (a copy, which needs no
    /// multiprocessor, so it lands while kernels on other streams spin),
    /// finished on return.
    pub(crate) fn write_u32s(&self, index: usize, values: &[u32]) -> DrvResult<()> {
        if (index + values.len()) * 4 > self.bytes {
            return Ok(());
        }
        self.dev.bind()?;
        let s = &self.dev.service;
        // SAFETY: writes `values.len()` words inside this allocation from
        // `values`, which stays borrowed until the sync below.
        unsafe { result::memcpy_htod_async(self.ptr + (index * 4) as u64, values, s.cu_stream()) }
            .op("cuMemcpyHtoDAsync")?;
        s.synchronize().op("cuStreamSynchronize")
    }

    /// Copies the allocation out, ordered on `stream`.
    pub(crate) fn read_u32s(&self, stream: &CudaStream, out: &mut [u32]) -> DrvResult<()> {
        self.dev.bind()?;
        let n = out.len().min(self.bytes / 4);
        // SAFETY: reads at most `bytes` from this allocation into `out`, which
        // stays borrowed until the sync below.
        unsafe { result::memcpy_dtoh_async(&mut out[..n], self.ptr, stream.cu_stream()) }
            .op("cuMemcpyDtoHAsync")?;
        stream.synchronize().op("cuStreamSynchronize")
    }
}

impl Drop for DeviceMem {
    fn drop(&mut self) {
        let _ = self.dev.bind();
        // Kernels the rank still has queued may read this memory; freeing
        // under them would fault (and kill the context) or read reused memory.
        wait_for_owner(&self.dev, &self.owner, "freeing device memory");
        let r = match &self.free_on {
            // SAFETY: allocated on this (service) stream by cuMemAllocAsync
            // in `alloc`, unused by the rank's work (waited for above),
            // freed only here.
            Some(s) => unsafe { result::free_async(self.ptr, s.cu_stream()) },
            // SAFETY: allocated by cuMemAlloc in `alloc`, as above
            // (cuMemFree waits for the whole device).
            None => unsafe { result::free_sync(self.ptr) },
        };
        if let Err(e) = r {
            tracing::warn!("freeing device memory failed: {e}");
        }
    }
}

/// Waits for what may still use memory of the rank `owner` on `dev`: the
/// whole device where no other rank runs on it (which also covers the
/// user's own streams), otherwise the rank's streams alone (see
/// [`RankStreams`]). A rank that is gone waited for its streams as it went.
/// Logs a failure before `op`.
fn wait_for_owner(dev: &CudaDevice, owner: &Weak<RankStreams>, op: &str) {
    let r = if dev.live_ranks() <= 1 {
        dev.ctx.synchronize().op("cuCtxSynchronize")
    } else {
        match owner.upgrade() {
            Some(o) => o.synchronize_all(),
            None => Ok(()),
        }
    };
    if let Err(e) = r {
        tracing::warn!("{} before {op} failed: {}", e.op, e.err);
    }
}

/// A reference to a physical allocation, mapped into this device's address
/// space with read/write access for this device.
///
/// The owner's own allocation and a peer's allocation mapped here are the same
/// thing: each holds its own handle reference (created or retained), so
/// physical memory lives until the last rank unmaps, whatever order ranks
/// free in.
pub(crate) struct Mapping {
    dev: Arc<CudaDevice>,
    /// The rank whose kernels use this mapping (see [`RankStreams`]).
    owner: Weak<RankStreams>,
    handle: CUmemGenericAllocationHandle,
    pub ptr: CUdeviceptr,
    pub size: usize,
}

impl Mapping {
    /// Creates `size` bytes (a multiple of the granularity) on this device,
    /// exportable as a fabric handle too if `fabric`.
    pub(crate) fn create(
        dev: &Arc<CudaDevice>,
        owner: Weak<RankStreams>,
        size: usize,
        fabric: bool,
        numa: Option<u32>,
    ) -> DrvResult<Mapping> {
        dev.bind()?;
        let prop = allocation_prop_at(dev.ordinal, fabric, numa);
        let mut handle: CUmemGenericAllocationHandle = 0;
        // SAFETY: `prop` is initialised; `handle` is a valid out-pointer.
        check("cuMemCreate", unsafe {
            sys::cuMemCreate(&mut handle, size, &prop, 0)
        })?;
        Mapping::map(dev, owner, handle, size)
    }

    /// Maps the allocation that starts at `peer_ptr`, an address that another
    /// rank of this process mapped.
    pub(crate) fn retain_in_process(
        dev: &Arc<CudaDevice>,
        owner: Weak<RankStreams>,
        peer_ptr: u64,
        size: usize,
    ) -> DrvResult<Mapping> {
        dev.bind()?;
        let mut handle: CUmemGenericAllocationHandle = 0;
        // SAFETY: `peer_ptr` is the start of a live cuMemMap'ed range in this
        // process (its owner is blocked in the same rendezvous); `handle` is a
        // valid out-pointer.
        check("cuMemRetainAllocationHandle", unsafe {
            sys::cuMemRetainAllocationHandle(&mut handle, peer_ptr as *mut c_void)
        })?;
        Mapping::map(dev, owner, handle, size)
    }

    /// A POSIX file descriptor for this allocation, for another process to
    /// import with [`Mapping::import_fd`].
    pub(crate) fn export_fd(&self) -> DrvResult<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        self.dev.bind()?;
        let mut fd: std::ffi::c_int = -1;
        // SAFETY: `handle` is live (we hold a reference); the allocation was
        // created with the POSIX-descriptor handle type; `fd` is a valid
        // out-pointer for an int, which is what this handle type writes.
        check("cuMemExportToShareableHandle", unsafe {
            sys::cuMemExportToShareableHandle(
                (&mut fd as *mut std::ffi::c_int).cast(),
                self.handle,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        })?;
        // SAFETY: the driver returned a new descriptor that nothing else owns.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }

    /// A fabric handle for this allocation (created with `fabric`), which a
    /// process on another node of the same NVLink domain can import.
    pub(crate) fn export_fabric(&self) -> DrvResult<[u8; 64]> {
        self.dev.bind()?;
        let mut h = sys::CUmemFabricHandle { data: [0; 64] };
        // SAFETY: `handle` is live and was created with the fabric handle
        // type; `h` is the 64-byte struct this handle type writes.
        check("cuMemExportToShareableHandle", unsafe {
            sys::cuMemExportToShareableHandle(
                (&mut h as *mut sys::CUmemFabricHandle).cast(),
                self.handle,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC,
                0,
            )
        })?;
        Ok(h.data)
    }

    /// Maps the allocation another process exported as fabric handle `data`.
    pub(crate) fn import_fabric(
        dev: &Arc<CudaDevice>,
        owner: Weak<RankStreams>,
        data: [u8; 64],
        size: usize,
    ) -> DrvResult<Mapping> {
        dev.bind()?;
        let mut h = sys::CUmemFabricHandle { data };
        let mut handle: CUmemGenericAllocationHandle = 0;
        // SAFETY: for fabric handles the "OS handle" argument points to the
        // 64-byte handle, which lives across the call; `handle` is a valid
        // out-pointer.
        check("cuMemImportFromShareableHandle", unsafe {
            sys::cuMemImportFromShareableHandle(
                &mut handle,
                (&mut h as *mut sys::CUmemFabricHandle).cast(),
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC,
            )
        })?;
        Mapping::map(dev, owner, handle, size)
    }

    /// Maps the allocation another process exported as `fd`.
    pub(crate) fn import_fd(
        dev: &Arc<CudaDevice>,
        owner: Weak<RankStreams>,
        fd: &std::os::fd::OwnedFd,
        size: usize,
    ) -> DrvResult<Mapping> {
        use std::os::fd::AsRawFd;
        dev.bind()?;
        let mut handle: CUmemGenericAllocationHandle = 0;
        // SAFETY: for POSIX descriptors the "OS handle" argument is the
        // descriptor's value cast to a pointer; `fd` stays open across the
        // call (the driver takes its own reference); `handle` is a valid
        // out-pointer.
        check("cuMemImportFromShareableHandle", unsafe {
            sys::cuMemImportFromShareableHandle(
                &mut handle,
                fd.as_raw_fd() as isize as *mut c_void,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        })?;
        Mapping::map(dev, owner, handle, size)
    }

    /// Takes ownership of one reference to `handle` and maps it.
    fn map(
        dev: &Arc<CudaDevice>,
        owner: Weak<RankStreams>,
        handle: CUmemGenericAllocationHandle,
        size: usize,
    ) -> DrvResult<Mapping> {
        match map_handle(dev, handle, size) {
            Ok(ptr) => Ok(Mapping {
                dev: dev.clone(),
                owner,
                handle,
                ptr,
                size,
            }),
            Err(e) => {
                // SAFETY: drops the one reference this function was given.
                unsafe { sys::cuMemRelease(handle) };
                Err(e)
            }
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let _ = self.dev.bind();
        // cuMemUnmap does not wait for kernels that still use the range. Only
        // this rank's kernels use this mapping (a peer maps the memory at its
        // own address, with its own handle reference), so its streams are
        // all there is to wait for.
        wait_for_owner(&self.dev, &self.owner, "cuMemUnmap");
        // Order matters: unmap, release our handle reference, free the range.
        // SAFETY: ptr/size/handle are exactly what `map` set up; no queued
        // work of the owner uses them after the wait above, and no other rank
        // uses this range; nothing else unmaps them or releases this reference.
        unsafe {
            log_err("cuMemUnmap", sys::cuMemUnmap(self.ptr, self.size));
            log_err("cuMemRelease", sys::cuMemRelease(self.handle));
            log_err(
                "cuMemAddressFree",
                sys::cuMemAddressFree(self.ptr, self.size),
            );
        }
    }
}

/// Reserves a range, maps `handle` into it and grants `dev` read/write access.
fn map_handle(
    dev: &CudaDevice,
    handle: CUmemGenericAllocationHandle,
    size: usize,
) -> DrvResult<CUdeviceptr> {
    let mut ptr: CUdeviceptr = 0;
    // SAFETY: `ptr` is a valid out-pointer; size is granularity-aligned.
    check("cuMemAddressReserve", unsafe {
        sys::cuMemAddressReserve(&mut ptr, size, dev.granularity, 0, 0)
    })?;
    // SAFETY: maps the whole handle at offset 0 into the range just reserved.
    if let Err(e) = check("cuMemMap", unsafe {
        sys::cuMemMap(ptr, size, 0, handle, 0)
    }) {
        // SAFETY: frees the range reserved above, which has no mapping.
        unsafe { sys::cuMemAddressFree(ptr, size) };
        return Err(e);
    }
    let desc = access_desc(dev.ordinal);
    // SAFETY: the range is mapped; `desc` is one initialised descriptor.
    if let Err(e) = check("cuMemSetAccess", unsafe {
        sys::cuMemSetAccess(ptr, size, &desc, 1)
    }) {
        // SAFETY: undoes the map and reservation above, in order.
        unsafe {
            sys::cuMemUnmap(ptr, size);
            sys::cuMemAddressFree(ptr, size);
        }
        return Err(e);
    }
    Ok(ptr)
}

fn log_err(op: &str, r: sys::CUresult) {
    if let Err(e) = r.result() {
        tracing::warn!("{op} failed during cleanup: {e}");
    }
}

/// A rank's stream as cudarc's event tracking sees it through the device's
/// own context object (which symm made, with several streams, so it tracks
/// events unless a user turned that off): the stream that cudarc memory of
/// the rank's kernels and copies is bound on, so that cudarc records their
/// use and the memory's frees wait for it, whatever context object the
/// stream itself was handed in with (one with a single stream tracks
/// nothing). Never handed out, so it never outlives `own`, which it does
/// not keep alive.
pub(crate) struct TrackedStream {
    view: Arc<CudaStream>,
    // Dropped after `view`, which borrows its stream.
    _own: Arc<CudaStream>,
}

impl TrackedStream {
    /// `own`, a stream of `dev`'s primary context, seen through `dev`'s
    /// context object; `None` when `own` belongs to another context.
    pub(crate) fn new(dev: &CudaDevice, own: &Arc<CudaStream>) -> Option<TrackedStream> {
        if own.context().cu_ctx() != dev.ctx.cu_ctx() {
            return None;
        }
        let view = if Arc::ptr_eq(own.context(), &dev.ctx) {
            own.clone()
        } else {
            // SAFETY: `own` belongs to this context (checked above), and
            // this value holds it for as long as the wrapper lives; the
            // wrapper never destroys it. Ordering work through the wrapper
            // is what it is for.
            unsafe { dev.ctx.wrap_borrowed_stream(own.cu_stream()) }
        };
        Some(TrackedStream {
            view,
            _own: own.clone(),
        })
    }

    /// The stream, through the device's context object.
    pub(crate) fn get(&self) -> &CudaStream {
        &self.view
    }
}

/// Memory that cudarc sees as a [`CudaSlice`] living on a stream, but that
/// belongs to someone else (a symm buffer): cudarc never frees it. Dropping
/// this hands the pointer back with [`CudaSlice::leak`], which makes the
/// stream wait for the slice's last recorded reads and writes (cudarc's
/// event tracking) instead of freeing.
pub(crate) struct Borrowed<T>(std::mem::ManuallyDrop<CudaSlice<T>>);

impl<T> Borrowed<T> {
    /// `len` elements at `ptr` as a slice on `stream`. Where `stream`'s
    /// context tracks events (cudarc's default), the slice's write event is
    /// recorded on `stream` now, so cudarc work on other streams waits for
    /// what `stream` has queued (unless `stream` is being captured, where an
    /// event recorded in the capture must not be waited for outside it).
    ///
    /// # Safety
    /// `ptr` must address `len` elements of `T`, of memory mapped for
    /// `stream`'s device and context, that stays mapped while this value
    /// lives (and while work enqueued through it runs), and every bit
    /// pattern must be a valid `T`.
    pub(crate) unsafe fn new(
        stream: &Arc<CudaStream>,
        ptr: u64,
        len: usize,
    ) -> DrvResult<Borrowed<T>> {
        use cudarc::driver::DevicePtrMut;
        // cudarc unwraps a failed event creation; that is an error here.
        let slice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the caller's promise covers cudarc's conditions (a
            // valid allocation of `len` elements, any bits valid); and the
            // slice is never dropped, so never freed (see `Drop`).
            unsafe { stream.upgrade_device_ptr::<T>(ptr, len) }
        }))
        .map_err(|_| DrvErr {
            op: "cuEventCreate",
            err: DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        })?;
        let mut b = Borrowed(std::mem::ManuallyDrop::new(slice));
        let ctx = stream.context();
        if ctx.is_managing_stream_synchronization() {
            let capture = stream.capture_status().op("cuStreamIsCapturing")?;
            if capture == sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
                // The guard records the write event on `stream` as it drops.
                drop(b.0.device_ptr_mut(stream));
            }
        }
        Ok(b)
    }

    /// The slice, for shared use.
    pub(crate) fn get(&self) -> &CudaSlice<T> {
        &self.0
    }

    /// The slice, for views that write. Never moved out or replaced: a
    /// `CudaSlice` in the caller's hands would free memory it does not own.
    pub(crate) fn get_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.0
    }
}

impl<T> Drop for Borrowed<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.0` is never used again.
        let slice = unsafe { std::mem::ManuallyDrop::take(&mut self.0) };
        // Waits (on the slice's stream) for its recorded uses and frees
        // nothing.
        let _ = slice.leak();
    }
}
