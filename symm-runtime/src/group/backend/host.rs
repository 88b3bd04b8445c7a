//! [`Backend`] on host memory: the memory half of the CPU emulator.
//!
//! Every access to symmetric memory goes through [`crate::hostmem`], because
//! simulated ranks are threads that touch each other's memory concurrently.
//!
//! Unlike on a GPU, signal operations here run immediately on the calling
//! thread (blocking until done or timed out) instead of being queued on a
//! stream; their outcome is still reported by the next `synchronize`.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use cudarc::driver::CudaStream;

use super::EXPORT_HOST_IN_PROCESS;
use super::{
    decode_export, encode_export, Backend, BackendKind, Export, KernelSpec, LaunchCtx, LocalAlloc,
    Mapped, RawFunction, Table,
};
use crate::error::{Error, GroupName, Result};
use crate::hostmem;
use crate::status::StatusRecord;

/// Host allocations are page-aligned, like a GPU mapping is granularity-aligned.
const HOST_ALIGN: usize = 4096;

/// Host memory standing in for one rank's physical allocation.
pub(crate) struct HostAlloc {
    ptr: *mut u8,
    layout: Layout,
    /// For memory of a user's segment allocator: its free, run instead of
    /// `dealloc`.
    foreign: Option<super::ForeignFree>,
}

// SAFETY: the memory is only ever accessed through `hostmem` atomics, and the
// pointer is owned uniquely by this value.
unsafe impl Send for HostAlloc {}
// SAFETY: as above.
unsafe impl Sync for HostAlloc {}

impl HostAlloc {
    fn new(size: usize) -> Option<HostAlloc> {
        // Whole 8-byte words, so `hostmem` never touches a word out of bounds.
        let layout =
            Layout::from_size_align(size.max(1).checked_next_multiple_of(8)?, HOST_ALIGN).ok()?;
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        (!ptr.is_null()).then_some(HostAlloc {
            ptr,
            layout,
            foreign: None,
        })
    }
}

impl Drop for HostAlloc {
    fn drop(&mut self) {
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(self.ptr as u64));
        if self.foreign.is_some() {
            // The user's free runs as the field drops.
            return;
        }
        // SAFETY: allocated in `new` with this layout; freed only here.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

struct HostLocal(Arc<HostAlloc>);

impl LocalAlloc for HostLocal {
    fn ptr(&self) -> u64 {
        self.0.ptr as u64
    }
    fn size(&self) -> usize {
        self.0.layout.size()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Live host allocations by address, so an importing rank can take a strong
/// reference (as cuMemRetainAllocationHandle does on a GPU).
fn registry() -> &'static Mutex<HashMap<u64, Weak<HostAlloc>>> {
    static R: OnceLock<Mutex<HashMap<u64, Weak<HostAlloc>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// A simulated rank whose memory lives on the host.
pub(crate) struct HostBackend {
    rank: usize,
    /// The group `rank` counts in, for errors.
    group: GroupName,
    /// The emulated device: the rank's number in its top-level group,
    /// which its subgroups' backends keep.
    device: usize,
    status: Mutex<Option<StatusRecord>>,
}

impl HostBackend {
    /// Rank `rank` of a group not made by a split, on emulated device
    /// `rank`.
    pub(crate) fn new(rank: usize) -> HostBackend {
        HostBackend {
            rank,
            group: GroupName::NONE,
            device: rank,
            status: Mutex::new(None),
        }
    }

    fn record(&self, rec: StatusRecord) {
        let mut s = self.status.lock().unwrap_or_else(|p| p.into_inner());
        s.get_or_insert(rec);
    }
}

impl Backend for HostBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Emulator
    }

    fn label(&self) -> String {
        format!("emulator:{}", self.device)
    }

    fn granularity(&self) -> usize {
        HOST_ALIGN
    }

    /// Emulated memory is host memory wherever asked for: the node is not
    /// modelled.
    fn allocate_at(&self, size: usize, _numa: Option<u32>) -> Result<Arc<dyn LocalAlloc>> {
        let a = Arc::new(HostAlloc::new(size).ok_or_else(|| Error::InvalidArgument {
            rank: self.rank,
            group: self.group.clone(),
            message: format!("cannot allocate {size} bytes of host memory for the emulator"),
        })?);
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(a.ptr as u64, Arc::downgrade(&a));
        Ok(Arc::new(HostLocal(a)))
    }

    fn allocate_plain(&self, size: usize) -> Result<Arc<dyn LocalAlloc>> {
        self.allocate(size)
    }

    unsafe fn adopt(
        &self,
        ptr: u64,
        size: usize,
        free: Box<dyn FnOnce() + Send>,
    ) -> Result<Arc<dyn LocalAlloc>> {
        // `hostmem` touches whole 8-byte words.
        let layout = Layout::from_size_align(size, 8)
            .ok()
            .filter(|l| l.size().is_multiple_of(8) && ptr.is_multiple_of(8) && ptr != 0)
            .ok_or_else(|| Error::InvalidArgument {
                rank: self.rank,
                group: self.group.clone(),
                message: format!(
                    "adopted memory at {ptr:#x} of {size} bytes is not whole 8-byte words"
                ),
            })?;
        let a = Arc::new(HostAlloc {
            ptr: ptr as *mut u8,
            layout,
            foreign: Some(super::ForeignFree::new(free)),
        });
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ptr, Arc::downgrade(&a));
        Ok(Arc::new(HostLocal(a)))
    }

    fn export(&self, alloc: &dyn LocalAlloc) -> Result<Export> {
        Ok(Export::plain(encode_export(
            EXPORT_HOST_IN_PROCESS,
            0,
            alloc.ptr(),
        )))
    }

    fn import(&self, peer: usize, exported: &[u8], size: usize, _: Duration) -> Result<Mapped> {
        let (_, addr) = decode_export(self.rank, peer, EXPORT_HOST_IN_PROCESS, exported)
            .map_err(|e| e.in_group(&self.group))?;
        let strong = registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&addr)
            .and_then(Weak::upgrade);
        match strong {
            Some(a) if a.layout.size() >= size => Ok(Mapped {
                ptr: addr,
                _keep: Box::new(a),
            }),
            _ => Err(Error::InvalidArgument {
                rank: self.rank,
                group: self.group.clone(),
                message: format!("rank {peer}'s allocation at {addr:#x} is no longer alive"),
            }),
        }
    }

    fn write(&self, dst: u64, src: &[u8]) -> Result<()> {
        hostmem::write(dst, src);
        Ok(())
    }

    fn read(&self, src: u64, dst: &mut [u8]) -> Result<()> {
        hostmem::read(src, dst);
        Ok(())
    }

    fn fill(&self, dst: u64, byte: u8, bytes: usize) -> Result<()> {
        // In pieces, so a large fill needs no buffer of its size.
        const PIECE: usize = 1 << 16;
        let piece = vec![byte; bytes.min(PIECE)];
        for at in (0..bytes).step_by(PIECE) {
            hostmem::write(dst + at as u64, &piece[..(bytes - at).min(PIECE)]);
        }
        Ok(())
    }

    unsafe fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        // In pieces, through `hostmem` (peers may touch either range at
        // once), so a large copy needs no buffer of its size.
        const PIECE: usize = 1 << 16;
        let mut piece = vec![0u8; bytes.min(PIECE)];
        for at in (0..bytes).step_by(PIECE) {
            let n = (bytes - at).min(PIECE);
            hostmem::read(src + at as u64, &mut piece[..n]);
            hostmem::write(dst + at as u64, &piece[..n]);
        }
        Ok(())
    }

    fn table(&self, values: &[u64]) -> Result<Table> {
        let v: Box<[u64]> = values.into();
        Ok(Table {
            ptr: v.as_ptr() as u64,
            _keep: Box::new(v),
        })
    }

    fn synchronize(&self) -> Result<()> {
        match self.status.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(r) => Err(r.into_error(&self.group)),
            None => Ok(()),
        }
    }

    fn device_id(&self) -> Option<crate::placement::DeviceId> {
        None
    }

    fn mem_info(&self) -> Result<(usize, usize)> {
        Err(Error::Unsupported {
            rank: self.rank,
            group: self.group.clone(),
            message: "the emulator has no device memory to report".into(),
        })
    }

    fn cuda_stream(&self) -> Option<&Arc<CudaStream>> {
        None
    }

    fn tracked_stream(&self) -> Option<&CudaStream> {
        None
    }

    fn fork(&self, rank: usize, group: GroupName) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(HostBackend {
            rank,
            group,
            device: self.device,
            status: Mutex::new(None),
        }))
    }

    fn with_cuda_stream(&self, _stream: Arc<CudaStream>) -> Result<Arc<dyn Backend>> {
        Err(Error::Unsupported {
            rank: self.rank,
            group: self.group.clone(),
            message: "an emulated rank has no CUDA stream to replace".into(),
        })
    }

    fn launch(
        &self,
        kernel: &KernelSpec<'_>,
        cfg: &crate::launch::LaunchConfig,
        _params: &mut [[u8; 8]],
        ctx: &LaunchCtx<'_>,
    ) -> Result<()> {
        crate::emulator::run(
            (ctx.rank, ctx.world, ctx.group, &self.group),
            ctx.kernel_timeout,
            kernel.name,
            cfg,
            kernel.cpu,
            &|rec| self.record(rec),
        )
    }

    fn prepare(&self, _kernels: &[&KernelSpec<'_>]) -> Result<()> {
        Ok(())
    }

    fn co_resident_grid(
        &self,
        _kernel: &KernelSpec<'_>,
        _block: u32,
        _shared_mem: u32,
        _ctx: &LaunchCtx<'_>,
    ) -> Result<Option<u32>> {
        Ok(None)
    }

    fn raw_function(&self, _name: &str, _source: &str) -> Result<RawFunction> {
        Err(Error::Unsupported {
            rank: self.rank,
            group: self.group.clone(),
            message: "CUDA C kernels need a GPU rank; on the emulator, write the kernel with \
                      #[symm_kernel]"
                .into(),
        })
    }

    unsafe fn launch_raw(
        &self,
        _f: &RawFunction,
        _cfg: &crate::launch::LaunchConfig,
        _params: &mut [[u8; 8]],
    ) -> Result<()> {
        // No `RawFunction` of the emulator exists.
        Err(Error::Unsupported {
            rank: self.rank,
            group: self.group.clone(),
            message: "the emulator cannot run CUDA C kernels".into(),
        })
    }
}
