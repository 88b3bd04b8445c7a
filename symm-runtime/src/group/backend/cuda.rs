//! [`Backend`] on a CUDA GPU.

use std::any::Any;
use std::sync::{Arc, Weak};

use cudarc::driver::{CudaFunction, CudaStream};

use super::{
    decode_export, encode_export, entry_name, Backend, BackendKind, Export, KernelSpec, LaunchCtx,
    LocalAlloc, Mapped, RawFunction, Table,
};
use super::{EXPORT_CUDA_FABRIC, EXPORT_CUDA_FD, EXPORT_CUDA_IN_PROCESS};
use crate::cuda::{
    device, CudaDevice, DeviceMem, DrvErr, FunctionKey, Mapping, RankStreams, TrackedStream,
};
use crate::error::{Error, GroupName, Result};
use crate::launch::LaunchConfig;
use crate::placement::DeviceId;
use crate::status::{abort_words, DeviceRecord, RankMask, ABORT_WORD, STATUS_WORDS};

/// A rank on one CUDA device, enqueueing on one stream.
pub(crate) struct CudaBackend {
    rank: usize,
    /// The group `rank` counts in, for errors.
    group: GroupName,
    /// How peers map this rank's allocations.
    sharing: Sharing,
    pub(crate) dev: Arc<CudaDevice>,
    pub(crate) stream: Arc<CudaStream>,
    /// `stream` as the device's context object sees it, for cudarc's
    /// event tracking of the user's memory.
    tracked: TrackedStream,
    /// Where this stream's kernels record a timeout. One per stream of the
    /// rank (shared by every handle on that stream), so `synchronize`
    /// reports exactly the failures of the work it waited for.
    status: Arc<DeviceMem>,
    /// The ranks whose waits `abort_waits` ended, as `status`'s abort word
    /// holds them (kept here to write again after `status` is cleared).
    /// Held while the word is written or cleared, so that two writers (a
    /// peer's departure and a `synchronize`) cannot lose a bit.
    aborted: Arc<std::sync::Mutex<RankMask>>,
    /// Every stream of this rank: its memory waits for them before a free.
    streams: Arc<RankStreams>,
    /// Kernels launched through this handle, and how many of them a
    /// completed `synchronize` had waited for ([`Backend::launch_counts`]).
    launched: std::sync::atomic::AtomicU64,
    synced: std::sync::atomic::AtomicU64,
}

/// How ranks share allocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sharing {
    /// Ranks are threads of one process: a peer retains the handle by address.
    InProcess,
    /// One process per rank: a POSIX file descriptor crosses a unix socket.
    FileDescriptor,
    /// Processes on several nodes of one NVLink domain (multi-node NVLink):
    /// a 64-byte fabric handle travels through the store itself.
    Fabric,
}

impl CudaBackend {
    /// Counts a launch for the store watch ([`Backend::launch_counts`]),
    /// where one runs. The counts only pace the watch and publish no data,
    /// so relaxed order is enough.
    fn count_launch(&self) {
        if self.watches_store() {
            self.launched
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub(crate) fn new(rank: usize, ordinal: usize, sharing: Sharing) -> Result<CudaBackend> {
        if !crate::cuda::cuda_available() {
            return Err(Error::CudaUnavailable(crate::cuda::unavailable_reason()));
        }
        let count = crate::cuda::cuda_device_count();
        if ordinal >= count {
            return Err(Error::InvalidArgument {
                rank,
                group: GroupName::NONE,
                message: format!(
                    "device cuda:{ordinal} does not exist; this machine has {count} CUDA devices"
                ),
            });
        }
        let dev = device(ordinal).map_err(|e| Error::Driver {
            rank,
            group: GroupName::NONE,
            device: format!("cuda:{ordinal}"),
            op: e.op,
            source: e.err,
        })?;
        if sharing == Sharing::FileDescriptor && !dev.supports_fd_handles() {
            return Err(Error::InvalidArgument {
                rank,
                group: GroupName::NONE,
                message: format!(
                    "{dev:?} cannot export memory as POSIX file descriptors, which one process per GPU needs"
                ),
            });
        }
        if sharing == Sharing::Fabric && !dev.supports_fabric_handles() {
            return Err(Error::InvalidArgument {
                rank,
                group: GroupName::NONE,
                message: format!(
                    "{dev:?} cannot export memory as fabric handles, which ranks on several nodes \
                     need (multi-node NVLink with the IMEX service); on one node use \
                     SYMM_HANDLES=fd"
                ),
            });
        }
        // A stream of the rank's own (non-blocking, so it never waits for
        // the legacy stream), which ranks sharing the device do not share.
        let stream = dev.ctx.new_stream().map_err(|err| {
            dev.error(
                rank,
                DrvErr {
                    op: "cuStreamCreate",
                    err,
                },
            )
        })?;
        let streams = RankStreams::new(&dev, &stream).map_err(|e| dev.error(rank, e))?;
        CudaBackend::on_stream(rank, GroupName::NONE, dev, stream, sharing, streams)
    }

    fn on_stream(
        rank: usize,
        group: GroupName,
        dev: Arc<CudaDevice>,
        stream: Arc<CudaStream>,
        sharing: Sharing,
        streams: Arc<RankStreams>,
    ) -> Result<CudaBackend> {
        // Kernels are loaded in the device's primary context, and memory
        // (symm's, and the cudarc memory that launches check) belongs to
        // it: a stream of another context is refused before it is
        // registered.
        let tracked = TrackedStream::new(&dev, &stream).ok_or_else(|| Error::InvalidArgument {
            rank,
            group: group.clone(),
            message: format!(
                "the stream belongs to another CUDA context on cuda:{} than the device's \
                 primary one, which this rank uses; make it from `CudaContext::new({})`",
                dev.ordinal, dev.ordinal
            ),
        })?;
        let status = streams
            .status_for(&stream)
            .map_err(|e| dev.error(rank, e).in_group(&group))?;
        Ok(CudaBackend {
            rank,
            group,
            sharing,
            dev,
            stream,
            tracked,
            status,
            aborted: Default::default(),
            streams,
            launched: Default::default(),
            synced: Default::default(),
        })
    }

    fn err(&self, e: DrvErr) -> Error {
        self.dev.error(self.rank, e).in_group(&self.group)
    }

    /// What this rank's memory waits for before it is freed.
    fn owner(&self) -> Weak<RankStreams> {
        Arc::downgrade(&self.streams)
    }

    /// `alloc` as this backend's own symmetric allocation.
    fn local<'a>(&self, alloc: &'a dyn LocalAlloc) -> Result<&'a CudaLocal> {
        alloc
            .as_any()
            .downcast_ref::<CudaLocal>()
            .ok_or_else(|| Error::InvalidArgument {
                rank: self.rank,
                group: self.group.clone(),
                message: "only symmetric allocations can be exported".into(),
            })
    }

    /// Fails unless this device can map memory of device `ordinal` (rank
    /// `peer`'s) peer-to-peer.
    fn check_peer_access(&self, peer: usize, ordinal: usize) -> Result<()> {
        if self.dev.can_access(ordinal).map_err(|e| self.err(e))? {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            rank: self.rank,
            group: self.group.clone(),
            message: format!(
                "cuda:{} cannot access cuda:{ordinal} (rank {peer}) peer-to-peer; symmetric memory needs \
                 NVLink or PCIe P2P between every pair of devices",
                self.dev.ordinal
            ),
        })
    }
}

struct CudaLocal(Mapping);

struct CudaPlain(DeviceMem);

/// Memory of the user's segment allocator, freed by the user's function
/// when this is dropped.
struct CudaForeign {
    ptr: u64,
    size: usize,
    _free: super::ForeignFree,
}

impl LocalAlloc for CudaForeign {
    fn ptr(&self) -> u64 {
        self.ptr
    }
    fn size(&self) -> usize {
        self.size
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl LocalAlloc for CudaPlain {
    fn ptr(&self) -> u64 {
        self.0.ptr
    }
    fn size(&self) -> usize {
        self.0.bytes
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl LocalAlloc for CudaLocal {
    fn ptr(&self) -> u64 {
        self.0.ptr
    }
    fn size(&self) -> usize {
        self.0.size
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn label(&self) -> String {
        format!("{:?}", self.dev)
    }

    fn granularity(&self) -> usize {
        self.dev.granularity
    }

    fn allocate_at(&self, size: usize, numa: Option<u32>) -> Result<Arc<dyn LocalAlloc>> {
        let a = Mapping::create(
            &self.dev,
            self.owner(),
            size,
            self.sharing == Sharing::Fabric,
            numa,
        )
        .map_err(|e| self.err(e))?;
        Ok(Arc::new(CudaLocal(a)))
    }

    fn allocate_plain(&self, size: usize) -> Result<Arc<dyn LocalAlloc>> {
        let m = DeviceMem::new_plain(&self.dev, self.owner(), size).map_err(|e| self.err(e))?;
        Ok(Arc::new(CudaPlain(m)))
    }

    unsafe fn adopt(
        &self,
        ptr: u64,
        size: usize,
        free: Box<dyn FnOnce() + Send>,
    ) -> Result<Arc<dyn LocalAlloc>> {
        Ok(Arc::new(CudaForeign {
            ptr,
            size,
            _free: super::ForeignFree::new(free),
        }))
    }

    fn export(&self, alloc: &dyn LocalAlloc) -> Result<Export> {
        let ordinal = self.dev.ordinal as u32;
        if self.sharing != Sharing::InProcess && alloc.as_any().is::<CudaForeign>() {
            return Err(Error::InvalidArgument {
                rank: self.rank,
                group: self.group.clone(),
                message: "memory from a user's segment allocator can be shared only between \
                          ranks of one process (each peer retains its cuMemCreate handle by \
                          address); ranks in separate processes need symm's own segments"
                    .into(),
            });
        }
        match self.sharing {
            Sharing::InProcess => Ok(Export::plain(encode_export(
                EXPORT_CUDA_IN_PROCESS,
                ordinal,
                alloc.ptr(),
            ))),
            Sharing::Fabric => {
                let local = self.local(alloc)?;
                let h = local.0.export_fabric().map_err(|e| self.err(e))?;
                let mut bytes = encode_export(EXPORT_CUDA_FABRIC, ordinal, 0);
                bytes.extend_from_slice(&h);
                Ok(Export::plain(bytes))
            }
            Sharing::FileDescriptor => {
                let local = self.local(alloc)?;
                let fd = local.0.export_fd().map_err(|e| self.err(e))?;
                let server =
                    crate::ipc::FdServer::serve(fd).map_err(|e| Error::InvalidArgument {
                        rank: self.rank,
                        group: self.group.clone(),
                        message: format!(
                            "cannot serve an allocation's file descriptor to peers: {e}"
                        ),
                    })?;
                // The header's address is 0 and the socket's path follows
                // it; the importer checks the tag, not the process id (the
                // exporter is another process).
                let mut bytes = encode_export(EXPORT_CUDA_FD, ordinal, 0);
                bytes.extend_from_slice(server.path().as_os_str().as_encoded_bytes());
                Ok(Export {
                    bytes,
                    _serving: Some(Box::new(server)),
                })
            }
        }
    }

    fn import(
        &self,
        peer: usize,
        exported: &[u8],
        size: usize,
        timeout: std::time::Duration,
    ) -> Result<Mapped> {
        let m = match self.sharing {
            Sharing::InProcess => {
                let (ordinal, addr) =
                    decode_export(self.rank, peer, EXPORT_CUDA_IN_PROCESS, exported)
                        .map_err(|e| e.in_group(&self.group))?;
                self.check_peer_access(peer, ordinal as usize)?;
                Mapping::retain_in_process(&self.dev, self.owner(), addr, size)
                    .map_err(|e| self.err(e))?
            }
            Sharing::Fabric => {
                let h: [u8; 64] = exported
                    .get(17..)
                    .filter(|_| exported[0] == EXPORT_CUDA_FABRIC)
                    .and_then(|h| h.try_into().ok())
                    .ok_or_else(|| Error::InvalidArgument {
                        rank: self.rank,
                        group: self.group.clone(),
                        message: format!(
                            "rank {peer}'s exported allocation is not a fabric handle"
                        ),
                    })?;
                Mapping::import_fabric(&self.dev, self.owner(), h, size).map_err(|e| self.err(e))?
            }
            Sharing::FileDescriptor => {
                let bad = |why: String| Error::InvalidArgument {
                    rank: self.rank,
                    group: self.group.clone(),
                    message: format!("rank {peer}'s exported allocation {why}"),
                };
                if exported.len() <= 17 || exported[0] != EXPORT_CUDA_FD {
                    return Err(bad(
                        "is not a file-descriptor export (are all ranks separate processes?)"
                            .into(),
                    ));
                }
                // Any process id is fine here; the ordinal is that process's.
                let path = std::path::Path::new(
                    <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&exported[17..]),
                );
                let fd = crate::ipc::fetch_fd(path, timeout).map_err(|e| {
                    bad(format!(
                        "could not be fetched from its socket {}: {e}",
                        path.display()
                    ))
                })?;
                Mapping::import_fd(&self.dev, self.owner(), &fd, size).map_err(|e| self.err(e))?
            }
        };
        Ok(Mapped {
            ptr: m.ptr,
            _keep: Box::new(m),
        })
    }

    fn write(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.dev
            .write(&self.stream, dst, src)
            .map_err(|e| self.err(e))
    }

    fn read(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        self.dev
            .read(&self.stream, src, dst)
            .map_err(|e| self.err(e))
    }

    fn fill(&self, dst: u64, byte: u8, bytes: usize) -> Result<()> {
        self.dev
            .fill(&self.stream, dst, byte, bytes)
            .map_err(|e| self.err(e))
    }

    unsafe fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller's promise is `CudaDevice::copy`'s; both ranges
        // are mapped in this device's context, which `self.stream` is of.
        unsafe { self.dev.copy(&self.stream, dst, src, bytes) }.map_err(|e| self.err(e))
    }

    fn table(&self, values: &[u64]) -> Result<Table> {
        let m = DeviceMem::from_u64s(&self.dev, self.owner(), values).map_err(|e| self.err(e))?;
        Ok(Table {
            ptr: m.ptr,
            _keep: Box::new(m),
        })
    }

    fn synchronize(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        let launched = self.launched.load(Ordering::Relaxed);
        self.dev.bind().map_err(|e| self.err(e))?;
        self.stream.synchronize().map_err(|err| {
            self.err(DrvErr {
                op: "cuStreamSynchronize",
                err,
            })
        })?;
        self.synced.fetch_max(launched, Ordering::Relaxed);
        let mut words = [0u32; STATUS_WORDS];
        self.status
            .read_u32s(&self.stream, &mut words)
            .map_err(|e| self.err(e))?;
        match DeviceRecord::decode(&words) {
            Some(r) => {
                let aborted = self.aborted.lock().unwrap_or_else(|p| p.into_inner());
                self.status.zero().map_err(|e| self.err(e))?;
                // The ranks that left stay left.
                if *aborted != 0 {
                    self.write_aborted(*aborted).map_err(|e| self.err(e))?;
                }
                Err(r.into_error(&self.group))
            }
            None => Ok(()),
        }
    }

    fn synchronize_watching(&self, watch: &dyn Fn() -> Option<RankMask>) -> Result<()> {
        // Ranks of this process hear of a departure from the group's state
        // at once (`abort_waits` through its hooks); only ranks in other
        // processes need the store watched.
        if !self.watches_store() {
            return self.synchronize();
        }
        self.dev.bind().map_err(|e| self.err(e))?;
        let mut last = std::time::Instant::now();
        loop {
            // SAFETY: the stream is alive (held by `self`).
            let r = unsafe { cudarc::driver::sys::cuStreamQuery(self.stream.cu_stream()) };
            if r != cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_READY {
                break;
            }
            if last.elapsed() >= crate::backend::WATCH_EVERY {
                last = std::time::Instant::now();
                if let Some(ranks) = watch() {
                    self.abort_waits(ranks);
                }
            }
            std::thread::yield_now();
        }
        self.synchronize()
    }

    fn watches_store(&self) -> bool {
        self.sharing != Sharing::InProcess
    }

    fn launch_counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering;
        (
            self.launched.load(Ordering::Relaxed),
            self.synced.load(Ordering::Relaxed),
        )
    }

    fn abort_waits(&self, ranks: RankMask) {
        let mut aborted = self.aborted.lock().unwrap_or_else(|p| p.into_inner());
        if *aborted | ranks != *aborted {
            *aborted |= ranks;
            // Best effort: a device that cannot take the words leaves the
            // waits to their timeouts.
            let _ = self.write_aborted(*aborted);
        }
    }

    fn mem_info(&self) -> Result<(usize, usize)> {
        self.dev.mem_info().map_err(|e| self.err(e))
    }

    fn device_id(&self) -> Option<DeviceId> {
        Some(DeviceId {
            uuid: self.dev.uuid,
            pid: std::process::id(),
            process: crate::placement::process_token(),
            ordinal: self.dev.ordinal as u32,
            sms: self.dev.sms,
            arch: (self.dev.arch.major, self.dev.arch.minor),
            domain: if self.sharing == Sharing::Fabric {
                crate::placement::FABRIC_DOMAIN
            } else {
                crate::placement::machine_domain()
            },
            // The group's to set (`Comm::sharing_devices`).
            nodes: 1,
        })
    }

    fn cuda_stream(&self) -> Option<&Arc<CudaStream>> {
        Some(&self.stream)
    }

    fn tracked_stream(&self) -> Option<&CudaStream> {
        Some(self.tracked.get())
    }

    fn fork(&self, rank: usize, group: GroupName) -> Result<Arc<dyn Backend>> {
        // A new stream of this rank (its status record is the stream's
        // own), not a new rank: the device still counts one rank here, so
        // frees wait as they did before the subgroup existed.
        let stream = self.dev.ctx.new_stream().map_err(|err| {
            self.err(DrvErr {
                op: "cuStreamCreate",
                err,
            })
        })?;
        Ok(Arc::new(CudaBackend::on_stream(
            rank,
            group,
            self.dev.clone(),
            stream,
            self.sharing,
            self.streams.clone(),
        )?))
    }

    fn with_cuda_stream(&self, stream: Arc<CudaStream>) -> Result<Arc<dyn Backend>> {
        if stream.context().ordinal() != self.dev.ordinal {
            return Err(Error::InvalidArgument {
                rank: self.rank,
                group: self.group.clone(),
                message: format!(
                    "the stream belongs to cuda:{}, but this rank runs on cuda:{}",
                    stream.context().ordinal(),
                    self.dev.ordinal
                ),
            });
        }
        // Two ranks on one stream would run each other's kernels in order,
        // and a kernel waiting for the other rank's would never end. (Asked
        // once per stream: the signal ops on a user stream come here on
        // every call.)
        if !self.streams.has(&stream) && self.dev.stream_taken(&self.streams, &stream) {
            return Err(Error::InvalidArgument {
                rank: self.rank,
                group: self.group.clone(),
                message: "the stream is already used by another rank on this GPU; give each \
                          rank streams of its own"
                    .into(),
            });
        }
        Ok(Arc::new(CudaBackend::on_stream(
            self.rank,
            self.group.clone(),
            self.dev.clone(),
            stream,
            self.sharing,
            self.streams.clone(),
        )?))
    }

    fn launch(
        &self,
        kernel: &KernelSpec<'_>,
        cfg: &LaunchConfig,
        params: &mut [[u8; 8]],
        ctx: &LaunchCtx<'_>,
    ) -> Result<()> {
        let f = self.dsl_function(kernel)?;
        // Only kernels that can wait on peers, and only where ranks share a
        // GPU, must fit beside the other ranks' kernels.
        if kernel.peers && ctx.placement.share() > 1 {
            let blocks = u64::from(cfg.grid.0) * u64::from(cfg.grid.1) * u64::from(cfg.grid.2);
            let threads = cfg.block.0 * cfg.block.1 * cfg.block.2;
            let (limit, per_sm) = self.co_resident(&f, threads, cfg.shared_mem, ctx)?;
            if blocks > u64::from(limit) {
                return Err(ctx.invalid(not_co_resident(
                    kernel, ctx, blocks, threads, limit, per_sm, &self.dev,
                )));
            }
        }
        let hidden = symm_abi::KernelCtx {
            status: self.status.ptr,
            timeout_ns: ctx.kernel_timeout_ns(),
            rank: self.rank as u32,
        };
        params[..symm_abi::KernelCtx::SLOTS].copy_from_slice(&hidden.slots());
        let cfg = cfg.pdl_where_safe(kernel.peers, ctx.placement.share());
        self.dev
            .launch(&f, &self.stream, &cfg, params)
            .map_err(|e| {
                self.launch_error(e, &f, &cfg, &format!("kernel `{}`", kernel.name), |n| {
                    format!("declare `#[symm_kernel(max_threads = {n})]`")
                })
            })?;
        self.count_launch();
        Ok(())
    }

    fn prepare(&self, kernels: &[&KernelSpec<'_>]) -> Result<()> {
        for k in kernels {
            self.dsl_function(k)?;
        }
        Ok(())
    }

    fn co_resident_grid(
        &self,
        kernel: &KernelSpec<'_>,
        block: u32,
        shared_mem: u32,
        ctx: &LaunchCtx<'_>,
    ) -> Result<Option<u32>> {
        if ctx.placement.share() == 1 {
            return Ok(None);
        }
        let f = self.dsl_function(kernel)?;
        Ok(Some(self.co_resident(&f, block, shared_mem, ctx)?.0))
    }

    fn raw_function(&self, name: &str, source: &str) -> Result<RawFunction> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(source, &mut h);
        let key = FunctionKey::Raw(name.to_owned(), std::hash::Hasher::finish(&h));
        let f = self
            .dev
            .function(self.rank, key, &|| {
                (name.to_owned(), source.to_owned(), Vec::new())
            })
            .map_err(|e| e.in_group(&self.group))?;
        Ok(RawFunction {
            f,
            ordinal: self.dev.ordinal,
        })
    }

    unsafe fn launch_raw(
        &self,
        f: &RawFunction,
        cfg: &LaunchConfig,
        params: &mut [[u8; 8]],
    ) -> Result<()> {
        if f.ordinal != self.dev.ordinal {
            return Err(Error::InvalidArgument {
                rank: self.rank,
                group: self.group.clone(),
                message: format!(
                    "the kernel was loaded for cuda:{}, not for this rank's {:?}",
                    f.ordinal, self.dev
                ),
            });
        }
        self.dev
            .launch(&f.f, &self.stream, cfg, params)
            .map_err(|e| {
                self.launch_error(e, &f.f, cfg, "a raw kernel", |n| {
                    format!("give it `__launch_bounds__({n})`")
                })
            })?;
        self.count_launch();
        Ok(())
    }
}

impl CudaBackend {
    /// The error of `what` (`f`) launched with `cfg`, which the driver
    /// refused with `e`: where it ran out of resources because the block is
    /// larger than `f`'s registers (or launch bounds) allow, an
    /// `InvalidArgument` that says so and how to compile it for such blocks
    /// (`fit` of the block's threads); else the driver's error.
    fn launch_error(
        &self,
        e: DrvErr,
        f: &CudaFunction,
        cfg: &LaunchConfig,
        what: &str,
        fit: impl FnOnce(u64) -> String,
    ) -> Error {
        if e.err.0 != cudarc::driver::sys::CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES {
            return self.err(e);
        }
        // (Never overflows: a raw launch's block is not checked before the
        // driver sees it.)
        let threads = u64::from(cfg.block.0) * u64::from(cfg.block.1) * u64::from(cfg.block.2);
        let most = f
            .max_threads_per_block()
            .ok()
            .and_then(|m| u64::try_from(m).ok());
        match (most, f.num_regs()) {
            (Some(most), Ok(regs)) if threads > most => Error::InvalidArgument {
                rank: self.rank,
                group: self.group.clone(),
                message: format!(
                    "{what}: a block of {threads} threads, but its registers ({regs} a thread) \
                     or its launch bounds allow at most {most} on this GPU; launch smaller \
                     blocks, or {} so that it is compiled to fit",
                    fit(threads)
                ),
            },
            _ => self.err(e),
        }
    }

    /// Writes the abort words for `ranks` (see [`ABORT_WORD`]).
    fn write_aborted(&self, ranks: RankMask) -> crate::driver::cuda::DrvResult<()> {
        self.status.write_u32s(ABORT_WORD, &abort_words(ranks))
    }

    /// The loaded instantiation `kernel` on this device, compiled on first use.
    fn dsl_function(&self, kernel: &KernelSpec<'_>) -> Result<CudaFunction> {
        let (def, inst) = kernel.id;
        self.dev
            .function(
                self.rank,
                FunctionKey::Dsl(def, inst, kernel.checked),
                &|| {
                    let entry = entry_name(kernel.name, inst, kernel.checked);
                    let source = (kernel.source)(&entry);
                    (entry, source, crate::jit::kernel_options())
                },
            )
            .map_err(|e| e.in_group(&self.group))
    }

    /// (largest co-resident grid, blocks per multiprocessor) of `f` launched
    /// with `threads` per block on a GPU that ranks share.
    fn co_resident(
        &self,
        f: &CudaFunction,
        threads: u32,
        shared_mem: u32,
        ctx: &LaunchCtx<'_>,
    ) -> Result<(u32, u32)> {
        let per_sm = self
            .dev
            .occupancy(f, threads, shared_mem)
            .map_err(|e| self.err(e))?;
        Ok((
            ctx.placement.co_resident_blocks(per_sm).unwrap_or(u32::MAX),
            per_sm,
        ))
    }
}

/// Why a grid of `blocks` cannot run on a GPU that ranks share.
fn not_co_resident(
    spec: &KernelSpec<'_>,
    ctx: &LaunchCtx<'_>,
    blocks: u64,
    threads: u32,
    limit: u32,
    per_sm: u32,
    dev: &CudaDevice,
) -> String {
    let kernel = spec.name;
    if per_sm == 0 {
        // (A kernel compiled for such blocks has registers that fit them:
        // then it is shared memory.)
        let fit = if spec.max_threads == 0 {
            format!(
                ", or declare `#[symm_kernel(max_threads = {threads})]` so that its registers \
                 are fitted to such a block"
            )
        } else {
            String::new()
        };
        return format!(
            "kernel `{kernel}`: the driver reports that no block of {threads} threads fits on a \
             multiprocessor of {dev:?} (too many registers or too much shared memory per block); \
             use smaller blocks{fit}"
        );
    }
    format!(
        "kernel `{kernel}`: a grid of {blocks} blocks of {threads} threads cannot be resident \
         together with the kernels of the other ranks that share {dev:?} ({} ranks on this \
         GPU, up to {} on one in this group), and kernels that wait on peers need that: \
         the GPU holds {per_sm} such blocks per multiprocessor, and each rank may use half \
         of its share (its next kernel can become resident early); launch at most {limit} \
         blocks (`{kernel}::co_resident_grid` gives this number)",
        ctx.placement.ranks_on_device(ctx.rank),
        ctx.placement.share()
    )
}
