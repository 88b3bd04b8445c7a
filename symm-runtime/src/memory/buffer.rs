//! Symmetric buffers: a rank's own allocation, and views into it.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, SyncOnDrop};

use crate::backend::LocalAlloc;
use crate::comm::Comm;
use crate::dtype::{as_bytes, DType, Element};
use crate::error::Result;
use crate::layout::{AllocLayout, SIGNAL_PAD_BYTES};
use crate::memory::interop::{self, CudaRef, CudaRefMut};
use crate::memory::symmetric::{self, SymmetricMemory};

pub(crate) struct BufInner {
    pub comm: Comm,
    pub id: u64,
    pub alloc: Arc<dyn LocalAlloc>,
    pub layout: AllocLayout,
    pub dtype: DType,
    pub len: usize,
    /// The per-allocation rendezvous cache. It lives and dies with the
    /// allocation, so a freed allocation can never be found again.
    smem: Mutex<Option<Arc<SymmetricMemory>>>,
    /// Where the memory is a pool's tensor ([`Comm::use_pool`]): its block,
    /// given back when the buffer goes, and its rendezvous.
    pooled: Option<crate::memory::pool::PoolTensor<u8>>,
}

/// Bytes of `len` elements of `T`, or an error on `comm`'s rank.
fn byte_len<T: Element>(comm: &Comm, len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
        comm.invalid(format!(
            "{len} elements of {} overflow the address space",
            T::DTYPE
        ))
    })
}

/// A pool tensor's memory as a [`LocalAlloc`]: its address and size, for
/// the buffer's accessors (it is never exported; its segment is).
struct PooledAlloc {
    ptr: u64,
    size: usize,
}

impl LocalAlloc for PooledAlloc {
    fn ptr(&self) -> u64 {
        self.ptr
    }
    fn size(&self) -> usize {
        self.size
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Drop for BufInner {
    fn drop(&mut self) {
        self.comm.unregister(self.id);
    }
}

/// One rank's part of a symmetric allocation of `len` elements of `T`.
///
/// Dropping it removes the allocation's rendezvous cache entry and this
/// handle's reference; the memory itself lives until the last
/// [`SymmetricMemory`] that maps it (this rank's or a peer's) is dropped.
pub struct SymmBuffer<T: Element> {
    pub(crate) inner: Arc<BufInner>,
    _t: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for SymmBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SymmBuffer<{}>(#{}, len {}, rank {})",
            T::DTYPE,
            self.inner.id,
            self.inner.len,
            self.inner.comm.rank()
        )
    }
}

impl<T: Element> SymmBuffer<T> {
    pub(crate) fn new(comm: Comm, id: u64, len: usize) -> Result<SymmBuffer<T>> {
        let backend = comm.backend.clone();
        SymmBuffer::new_in(comm, id, len, |bytes| backend.allocate(bytes))
    }

    /// [`SymmBuffer::new`] on memory from `allocate`, which gets the bytes
    /// the allocation needs (data, pad and padding to the granularity).
    pub(crate) fn new_in(
        comm: Comm,
        id: u64,
        len: usize,
        allocate: impl FnOnce(usize) -> Result<Arc<dyn LocalAlloc>>,
    ) -> Result<SymmBuffer<T>> {
        let bytes = byte_len::<T>(&comm, len)?;
        let layout = AllocLayout::new(bytes, comm.backend.granularity()).ok_or_else(|| {
            comm.invalid(format!(
                "{bytes} bytes plus a signal pad overflow the address space"
            ))
        })?;
        let alloc = allocate(layout.total_bytes)?;
        // Peers may signal as soon as rendezvous completes, so the pad must be
        // zero before this rank can publish it.
        comm.backend
            .fill(alloc.ptr() + layout.pad_offset as u64, 0, SIGNAL_PAD_BYTES)?;
        Ok(SymmBuffer {
            inner: Arc::new(BufInner {
                comm,
                id,
                alloc,
                layout,
                dtype: T::DTYPE,
                len,
                smem: Mutex::new(None),
                pooled: None,
            }),
            _t: PhantomData,
        })
    }

    /// A buffer of `len` elements in `pool`'s next tensor (see
    /// [`Comm::use_pool`]): its signal pad is the segment's.
    pub(crate) fn pooled(
        comm: Comm,
        id: u64,
        len: usize,
        pool: &crate::memory::pool::SymmPool,
    ) -> Result<SymmBuffer<T>> {
        let bytes = byte_len::<T>(&comm, len)?;
        let tensor = pool.alloc::<u8>(bytes)?;
        let ptr = tensor.device_ptr();
        let pad = tensor.segment_pad_ptr();
        let layout = AllocLayout {
            data_bytes: bytes,
            pad_offset: (pad - ptr) as usize,
            total_bytes: (pad - ptr) as usize + SIGNAL_PAD_BYTES,
        };
        Ok(SymmBuffer {
            inner: Arc::new(BufInner {
                comm,
                id,
                alloc: Arc::new(PooledAlloc { ptr, size: bytes }),
                layout,
                dtype: T::DTYPE,
                len,
                smem: Mutex::new(None),
                pooled: Some(tensor),
            }),
            _t: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// This allocation's position in the rank's collective allocation order.
    pub fn alloc_id(&self) -> u64 {
        self.inner.id
    }

    /// The rank that owns this buffer.
    pub fn comm(&self) -> &Comm {
        &self.inner.comm
    }

    /// Device address of element 0 (a host address on the emulator).
    pub fn device_ptr(&self) -> u64 {
        self.inner.alloc.ptr()
    }

    /// Device address of this rank's signal pad.
    pub fn signal_pad_ptr(&self) -> u64 {
        self.inner.alloc.ptr() + self.inner.layout.pad_offset as u64
    }

    /// The byte layout of this rank's allocation.
    pub fn layout(&self) -> AllocLayout {
        self.inner.layout
    }

    /// Copies `src` into elements `offset..offset + src.len()`.
    pub fn write(&self, offset: usize, src: &[T]) -> Result<()> {
        let ptr = self.checked(offset, src.len())?;
        self.inner.comm.backend.write(ptr, as_bytes(src))
    }

    /// Copies elements `offset..offset + len` to the host.
    pub fn read(&self, offset: usize, len: usize) -> Result<Vec<T>> {
        let ptr = self.checked(offset, len)?;
        read_elems(&*self.inner.comm.backend, ptr, len)
    }

    /// Copies the whole buffer to the host.
    pub fn to_host(&self) -> Result<Vec<T>> {
        self.read(0, self.len())
    }

    /// Sets every byte of the buffer to `byte` (a device memset; no host
    /// copy of the buffer's size), and waits: zeros, or a sentinel such as
    /// all ones (`0xFF`, a NaN in every float type) for kernels whose data
    /// marks its own arrival.
    pub fn fill_bytes(&self, byte: u8) -> Result<()> {
        let bytes = self.len() * std::mem::size_of::<T>();
        self.inner.comm.backend.fill(self.device_ptr(), byte, bytes)
    }

    /// Copies `src`, which must have exactly [`len`](Self::len) elements, into the buffer.
    pub fn copy_from_host(&self, src: &[T]) -> Result<()> {
        if src.len() != self.len() {
            return Err(self.inner.comm.invalid(format!(
                "copy_from_host got {} elements for a buffer of {}",
                src.len(),
                self.len()
            )));
        }
        self.write(0, src)
    }

    /// A cudarc view of the buffer on the allocating handle's stream, to
    /// read it in place with cuBLAS or a kernel of the user's (see
    /// [`CudaRef`] for stream ordering). GPU ranks only.
    pub fn cuda_view(&self) -> Result<CudaRef<'_, T>> {
        // SAFETY: this rank's own allocation, which the result borrows
        // (through `self`) for its whole life.
        let mem = unsafe { interop::view_of(&self.inner.comm, self.device_ptr(), self.len()) }?;
        Ok(CudaRef::new(mem))
    }

    /// [`cuda_view`](Self::cuda_view), writable ([`CudaRefMut`]).
    pub fn cuda_view_mut(&mut self) -> Result<CudaRefMut<'_, T>> {
        // SAFETY: this rank's own allocation, which the result borrows
        // (through `self`) for its whole life.
        let mem = unsafe { interop::view_of(&self.inner.comm, self.device_ptr(), self.len()) }?;
        Ok(CudaRefMut::new(mem))
    }

    /// A view of elements in `range`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<SymmView<'_, T>> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len(),
        };
        if start > end || end > self.len() {
            return Err(self.inner.comm.invalid(format!(
                "slice {start}..{end} is out of bounds for a buffer of {} elements",
                self.len()
            )));
        }
        Ok(SymmView {
            buf: self,
            offset: start,
            len: end - start,
        })
    }

    /// Exchanges this allocation with every rank (collective on first call)
    /// and returns the cached [`SymmetricMemory`] on every later call.
    pub fn rendezvous(&self) -> Result<Arc<SymmetricMemory>> {
        let mut slot = self.inner.smem.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = &*slot {
            return Ok(s.clone());
        }
        let s = match &self.inner.pooled {
            // Its segment's mapping at its offset: no collective (see
            // `PoolTensor::rendezvous`), typed as this buffer.
            Some(t) => t.rendezvous_as(T::DTYPE)?,
            None => Arc::new(symmetric::rendezvous(&self.inner)?),
        };
        self.inner.comm.register(
            self.inner.id,
            self.device_ptr(),
            self.inner.layout.data_bytes,
            &s,
        );
        *slot = Some(s.clone());
        Ok(s)
    }

    fn checked(&self, offset: usize, len: usize) -> Result<u64> {
        checked::<T>(
            &self.inner.comm,
            self.device_ptr(),
            self.len(),
            offset,
            len,
            "buffer",
        )
    }
}

/// A contiguous range of a [`SymmBuffer`].
#[derive(Debug, Clone, Copy)]
pub struct SymmView<'a, T: Element> {
    buf: &'a SymmBuffer<T>,
    offset: usize,
    len: usize,
}

impl<'a, T: Element> SymmView<'a, T> {
    /// The buffer this view is part of.
    pub fn buffer(&self) -> &'a SymmBuffer<T> {
        self.buf
    }

    /// First element's index in the owning buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device address of the view's first element.
    pub fn device_ptr(&self) -> u64 {
        self.buf.device_ptr() + (self.offset * std::mem::size_of::<T>()) as u64
    }

    /// Copies the view to the host.
    pub fn to_host(&self) -> Result<Vec<T>> {
        self.buf.read(self.offset, self.len)
    }

    /// Copies `src` (exactly [`len`](Self::len) elements) into the view.
    pub fn copy_from_host(&self, src: &[T]) -> Result<()> {
        if src.len() != self.len {
            return Err(self.buf.inner.comm.invalid(format!(
                "copy_from_host got {} elements for a view of {}",
                src.len(),
                self.len
            )));
        }
        self.buf.write(self.offset, src)
    }

    /// Rendezvous of the allocation that owns this view.
    pub fn rendezvous(&self) -> Result<Arc<SymmetricMemory>> {
        self.buf.rendezvous()
    }

    /// A cudarc view of this range, as [`SymmBuffer::cuda_view`]; it
    /// borrows the buffer, not this (copyable) view.
    pub fn cuda_view(&self) -> Result<CudaRef<'a, T>> {
        // SAFETY: this rank's own allocation, which the result borrows
        // (through `self`) for its whole life.
        let mem = unsafe { interop::view_of(&self.buf.inner.comm, self.device_ptr(), self.len) }?;
        Ok(CudaRef::new(mem))
    }

    /// [`cuda_view`](Self::cuda_view), writable ([`CudaRefMut`]).
    pub fn cuda_view_mut(&mut self) -> Result<CudaRefMut<'_, T>> {
        // SAFETY: this rank's own allocation, which the result borrows
        // (through `self`) for its whole life.
        let mem = unsafe { interop::view_of(&self.buf.inner.comm, self.device_ptr(), self.len) }?;
        Ok(CudaRefMut::new(mem))
    }
}

/// Reads `len` elements at `ptr` (already bounds-checked) into a new vector.
pub(crate) fn read_elems<T: Element>(
    backend: &dyn crate::backend::Backend,
    ptr: u64,
    len: usize,
) -> Result<Vec<T>> {
    let mut bytes = vec![0u8; len * std::mem::size_of::<T>()];
    backend.read(ptr, &mut bytes)?;
    let mut out: Vec<T> = Vec::with_capacity(len);
    // SAFETY: `bytes` holds exactly `len` elements' worth of bytes, every bit
    // pattern is a valid `T` (Element is sealed to POD types), and the
    // destination has capacity for `len` elements.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
        out.set_len(len);
    }
    Ok(out)
}

/// Keeps [`DeviceSlice`] to the types whose address and length a launch
/// can trust: symm's buffers, and cudarc's, which vouch for theirs.
mod sealed {
    pub trait Sealed {}
}

impl<T: Element> sealed::Sealed for SymmBuffer<T> {}
impl<T: Element> sealed::Sealed for SymmView<'_, T> {}
impl<T: Element> sealed::Sealed for DeviceBuffer<T> {}
impl<T: Element> sealed::Sealed for BoundSlice<'_, T> {}
impl<T> sealed::Sealed for CudaSlice<T> {}
impl<T> sealed::Sealed for CudaView<'_, T> {}
impl<T> sealed::Sealed for CudaViewMut<'_, T> {}
impl<T: Element> sealed::Sealed for crate::memory::pool::PoolTensor<T> {}

/// Device memory a kernel can take as a `&[T]` or `&mut [T]` parameter, and
/// that [`Comm::copy`] and the peer copies of [`SymmetricMemory`] move:
/// symm's own buffers ([`SymmBuffer`], [`SymmView`], [`DeviceBuffer`]) and
/// cudarc's ([`CudaSlice`], [`CudaView`], [`CudaViewMut`]; a `CudaView` is
/// read-only, so passing one where the kernel writes is an error).
///
/// The trait is sealed, because a launch trusts the address and length.
/// A launch also checks that the memory is the launching rank's: a symm
/// buffer of another rank or group, cudarc memory of another device or
/// CUDA context, or cudarc memory given to an emulated rank, is
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
///
/// cudarc memory is used in cudarc's stream order. With event tracking on
/// (cudarc's default), the rank's stream first waits for the memory's
/// earlier writes (and, to write it, its reads), and cudarc's later users
/// of it, its free included, wait for the rank's work on it; where the
/// memory's context object has one stream only (cudarc then records no
/// events), the rank's stream and that one are joined both ways instead.
/// With tracking off (`CudaContext::disable_event_tracking`, which is
/// `unsafe` for this reason, and which capturing a CUDA graph needs, since
/// a capture cannot wait for events recorded outside it), ordering is the
/// caller's, as it is for cudarc's own operations.
pub trait DeviceSlice<T: Element>: sealed::Sealed {
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    #[doc(hidden)]
    fn __memory(&self) -> Memory;
    /// cudarc memory's own stream (the one it was allocated on).
    #[doc(hidden)]
    fn __home(&self) -> Option<&Arc<CudaStream>> {
        None
    }
    /// cudarc memory's address, with the guard that records its use on
    /// `stream` when dropped (after the work is enqueued); `None` for
    /// memory whose [`Memory`] holds its address.
    #[doc(hidden)]
    fn __bind<'a>(&'a self, _stream: &'a CudaStream) -> Option<(u64, SyncOnDrop<'a>)> {
        None
    }
    /// [`Self::__bind`] to write; `None` also for read-only memory.
    #[doc(hidden)]
    fn __bind_mut<'a>(&'a mut self, _stream: &'a CudaStream) -> Option<(u64, SyncOnDrop<'a>)> {
        None
    }
}

/// Where a [`DeviceSlice`]'s memory lives, as a launch checks it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// Allocated by symm for the rank whose state `owner` identifies
    /// (`Comm::owner_id`), at `ptr`.
    Rank { owner: usize, ptr: u64 },
    /// A [`BoundSlice`] of the rank `owner`: at `ptr`, bound to the stream
    /// `stream` if it is cudarc memory (whose stream ordering the binding
    /// did on that stream), `writable` or not.
    Bound {
        owner: usize,
        ptr: u64,
        stream: Option<usize>,
        writable: bool,
    },
    /// cudarc memory of the CUDA context `ctx` on device `ordinal`. Its
    /// address comes only with its stream ordering
    /// ([`DeviceSlice::__bind`]).
    Cuda { ctx: usize, ordinal: usize },
}

impl<T: Element> DeviceSlice<T> for SymmBuffer<T> {
    fn len(&self) -> usize {
        SymmBuffer::len(self)
    }
    fn __memory(&self) -> Memory {
        Memory::Rank {
            owner: self.inner.comm.owner_id(),
            ptr: self.device_ptr(),
        }
    }
}

impl<T: Element> DeviceSlice<T> for crate::memory::pool::PoolTensor<T> {
    fn len(&self) -> usize {
        crate::memory::pool::PoolTensor::len(self)
    }
    fn __memory(&self) -> Memory {
        Memory::Rank {
            owner: self.owner(),
            ptr: self.device_ptr(),
        }
    }
}

impl<T: Element> DeviceSlice<T> for SymmView<'_, T> {
    fn len(&self) -> usize {
        SymmView::len(self)
    }
    fn __memory(&self) -> Memory {
        Memory::Rank {
            owner: self.buf.inner.comm.owner_id(),
            ptr: self.device_ptr(),
        }
    }
}

/// After a binding on a rank's stream `rank` of cudarc memory whose context
/// object tracks events on one stream only, `home` (which cudarc then never
/// orders against others): makes `home` wait for `rank`'s work when the
/// binding ends, so that the memory's free (on `home`) and the user's
/// later work there come after the rank's use of it.
struct JoinAfter<'a> {
    home: Arc<CudaStream>,
    rank: &'a CudaStream,
}

impl Drop for JoinAfter<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.home.join(self.rank) {
            tracing::warn!("ordering cudarc memory's stream after the rank's failed: {e}");
        }
    }
}

/// A [`DeviceSlice`] checked for one rank and bound to its stream, from
/// [`Comm::bind`] or [`Comm::bind_mut`]: its address for checks of
/// alignment and overlap, and, for cudarc memory, its stream ordering
/// (the rank's stream has waited for the memory's earlier uses; dropping
/// this records the rank's work on it, so that cudarc waits for that).
/// Itself a `DeviceSlice` of that rank and stream, which a launch takes
/// without binding again: drop it after the work that uses it is enqueued.
pub struct BoundSlice<'a, T: Element> {
    ptr: u64,
    len: usize,
    owner: usize,
    /// The stream a cudarc binding was made on.
    stream: Option<usize>,
    writable: bool,
    _sync: Option<SyncOnDrop<'a>>,
    _join: Option<JoinAfter<'a>>,
    _t: PhantomData<&'a [T]>,
}

impl<T: Element> std::fmt::Debug for BoundSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "BoundSlice<{}>({:#x}, len {}{})",
            T::DTYPE,
            self.ptr,
            self.len,
            if self.writable { ", writable" } else { "" }
        )
    }
}

impl<T: Element> BoundSlice<'_, T> {
    /// Device address of element 0 (a host address on the emulator).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes from [`device_ptr`](Self::device_ptr) to the end.
    fn bytes(&self) -> u64 {
        (self.len * std::mem::size_of::<T>()) as u64
    }

    /// Whether this and `other` share a byte.
    pub(crate) fn overlaps<U: Element>(&self, other: &BoundSlice<'_, U>) -> bool {
        self.ptr < other.ptr + other.bytes() && other.ptr < self.ptr + self.bytes()
    }
}

impl<T: Element> DeviceSlice<T> for BoundSlice<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn __memory(&self) -> Memory {
        Memory::Bound {
            owner: self.owner,
            ptr: self.ptr,
            stream: self.stream,
            writable: self.writable,
        }
    }
}

/// What binds memory for a rank: its identity and its backend (whose
/// stream the work goes on).
pub(crate) struct Binder<'a> {
    pub owner: usize,
    pub rank: usize,
    pub backend: &'a dyn crate::backend::Backend,
}

impl<'a> Binder<'a> {
    pub(crate) fn of(comm: &'a Comm) -> Binder<'a> {
        Binder {
            owner: comm.owner_id(),
            rank: comm.rank(),
            backend: &*comm.backend,
        }
    }

    fn invalid(&self, message: String) -> crate::Error {
        crate::Error::InvalidArgument {
            rank: self.rank,
            message,
        }
    }

    fn stream_id(&self) -> Option<usize> {
        self.backend.cuda_stream().map(|s| s.cu_stream() as usize)
    }

    fn driver(&self, op: &'static str, source: cudarc::driver::DriverError) -> crate::Error {
        crate::Error::Driver {
            rank: self.rank,
            device: self.backend.label(),
            op,
            source,
        }
    }

    /// Orders the rank's `stream` after cudarc memory whose own stream is
    /// `home`, where cudarc's events do not: when `home`'s context object
    /// tracks events but has one stream only (cudarc then records nothing),
    /// `stream` waits for everything queued on `home` now, and the result
    /// makes `home` wait for `stream` when the binding ends. (Without event
    /// tracking, which is `unsafe` to turn off, ordering is the user's; with
    /// it and several streams, cudarc's events do it.)
    fn join_home(
        &self,
        home: Option<&Arc<CudaStream>>,
        stream: &'a CudaStream,
    ) -> Result<Option<JoinAfter<'a>>> {
        let Some(home) = home else { return Ok(None) };
        let ctx = home.context();
        if !ctx.is_event_tracking() || ctx.is_managing_stream_synchronization() {
            return Ok(None);
        }
        stream
            .join(home)
            .map_err(|e| self.driver("cuStreamWaitEvent", e))?;
        Ok(Some(JoinAfter {
            home: home.clone(),
            rank: stream,
        }))
    }

    /// Checks memory `m` (argument `name`) for this rank, to write if
    /// `write`: its address if it has one, or else the stream on which to
    /// bind cudarc memory.
    fn check(&self, name: &str, m: Memory, write: bool) -> Result<Checked<'a>> {
        match m {
            Memory::Rank { owner, ptr } => {
                if owner != self.owner {
                    return Err(self.invalid(format!(
                        "argument `{name}` belongs to another rank or group than this launch"
                    )));
                }
                Ok(Checked::Addr(ptr, None))
            }
            Memory::Bound {
                owner,
                ptr,
                stream,
                writable,
            } => {
                if owner != self.owner {
                    return Err(self.invalid(format!(
                        "argument `{name}` was bound for another rank or group than this launch"
                    )));
                }
                if stream.is_some() && stream != self.stream_id() {
                    return Err(self.invalid(format!(
                        "argument `{name}` is cudarc memory bound to another stream of this \
                         rank; bind it with the `Comm` whose stream does the work"
                    )));
                }
                if write && !writable {
                    return Err(self.invalid(format!(
                        "argument `{name}` was bound for reading (`Comm::bind`); bind it with \
                         `Comm::bind_mut` to write it"
                    )));
                }
                Ok(Checked::Addr(ptr, stream))
            }
            Memory::Cuda { ctx, ordinal } => {
                let Some(stream) = self.backend.tracked_stream() else {
                    return Err(self.invalid(format!(
                        "argument `{name}` is CUDA memory (cuda:{ordinal}), but rank {} is \
                         emulated ({}), which cannot reach GPU memory; use symm's buffers on \
                         the emulator",
                        self.rank,
                        self.backend.label()
                    )));
                };
                let own = stream.context();
                if ctx != own.cu_ctx() as usize {
                    let which = if ordinal == own.ordinal() {
                        format!("another CUDA context on cuda:{ordinal}")
                    } else {
                        format!("cuda:{ordinal}")
                    };
                    return Err(self.invalid(format!(
                        "argument `{name}` is CUDA memory of {which}, but rank {} runs on {} \
                         (its stream's context); allocate it on that device's primary \
                         context (`CudaContext::new({})`)",
                        self.rank,
                        self.backend.label(),
                        own.ordinal()
                    )));
                }
                Ok(Checked::Cuda(stream))
            }
        }
    }

    /// `s` (argument `name`), checked and bound for reading.
    pub(crate) fn bind<T: Element, S: DeviceSlice<T> + ?Sized>(
        &self,
        name: &str,
        s: &'a S,
    ) -> Result<BoundSlice<'a, T>> {
        let (ptr, stream, sync, join) = match self.check(name, s.__memory(), false)? {
            Checked::Addr(ptr, stream) => (ptr, stream, None, None),
            Checked::Cuda(stream) => {
                let join = self.join_home(s.__home(), stream)?;
                let Some((ptr, sync)) = s.__bind(stream) else {
                    return Err(self.invalid(format!("argument `{name}` cannot be read")));
                };
                (ptr, self.stream_id(), Some(sync), join)
            }
        };
        Ok(self.bound(ptr, s.len(), stream, false, sync, join))
    }

    /// `s` (argument `name`), checked and bound for writing.
    pub(crate) fn bind_mut<T: Element, S: DeviceSlice<T> + ?Sized>(
        &self,
        name: &str,
        s: &'a mut S,
    ) -> Result<BoundSlice<'a, T>> {
        let len = s.len();
        let (ptr, stream, sync, join) = match self.check(name, s.__memory(), true)? {
            Checked::Addr(ptr, stream) => (ptr, stream, None, None),
            Checked::Cuda(stream) => {
                let join = self.join_home(s.__home(), stream)?;
                let Some((ptr, sync)) = s.__bind_mut(stream) else {
                    return Err(self.invalid(format!(
                        "argument `{name}` is a read-only cudarc view (`CudaView`), but it \
                         is written; pass a `CudaViewMut` or the `CudaSlice`"
                    )));
                };
                (ptr, self.stream_id(), Some(sync), join)
            }
        };
        Ok(self.bound(ptr, len, stream, true, sync, join))
    }

    fn bound<T: Element>(
        &self,
        ptr: u64,
        len: usize,
        stream: Option<usize>,
        writable: bool,
        sync: Option<SyncOnDrop<'a>>,
        join: Option<JoinAfter<'a>>,
    ) -> BoundSlice<'a, T> {
        BoundSlice {
            ptr,
            len,
            owner: self.owner,
            stream,
            writable,
            _sync: sync,
            _join: join,
            _t: PhantomData,
        }
    }
}

/// What [`Binder::check`] found.
enum Checked<'a> {
    /// An address, bound to this stream if it is cudarc memory's.
    Addr(u64, Option<usize>),
    /// cudarc memory, to bind on this stream (the rank's, as the device's
    /// context object sees it).
    Cuda(&'a CudaStream),
}

/// Plain (not symmetric) device memory of one rank: kernel inputs and
/// outputs that no peer needs to see.
pub struct DeviceBuffer<T: Element> {
    comm: Comm,
    alloc: Arc<dyn LocalAlloc>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>(len {}, rank {})",
            T::DTYPE,
            self.len,
            self.comm.rank()
        )
    }
}

/// A rendezvoused allocation: data base address, data bytes, and its memory.
type RegistryEntry = (u64, usize, Weak<SymmetricMemory>);

/// Rendezvous results by allocation id, to resolve raw pointers.
#[derive(Default)]
struct Registry(Mutex<HashMap<u64, RegistryEntry>>);

impl Comm {
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
        let id = self.next_alloc_id();
        if let Some(pool) = crate::memory::pool::current_pool(self) {
            return SymmBuffer::pooled(self.clone(), id, len, &pool);
        }
        SymmBuffer::new(self.clone(), id, len)
    }

    /// The cached [`SymmetricMemory`] of the live allocation whose data holds
    /// device address `ptr`, if that allocation has been rendezvoused.
    pub fn lookup(&self, ptr: u64) -> Option<Arc<SymmetricMemory>> {
        let reg = self.registry();
        let reg = reg.0.lock().unwrap_or_else(|p| p.into_inner());
        reg.values()
            .find(|(base, len, _)| ptr >= *base && ptr - *base < (*len).max(1) as u64)
            .and_then(|(_, _, w)| w.upgrade())
    }

    /// Number of allocations of this rank with a cached rendezvous.
    pub fn cached_rendezvous_count(&self) -> usize {
        self.registry()
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|e| e.2.strong_count() > 0)
            .count()
    }

    pub(crate) fn register(&self, id: u64, base: u64, len: usize, smem: &Arc<SymmetricMemory>) {
        self.registry()
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, (base, len, Arc::downgrade(smem)));
    }

    pub(crate) fn unregister(&self, id: u64) {
        self.registry()
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    fn registry(&self) -> Arc<Registry> {
        self.extension::<Registry>(|_| true, |_| Ok(Registry::default()))
            .expect("making an empty registry cannot fail")
    }

    /// Allocates `len` uninitialised elements of plain device memory.
    pub fn device_buffer<T: Element>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            self.invalid(format!(
                "{len} elements of {} overflow the address space",
                T::DTYPE
            ))
        })?;
        let alloc = self.backend.allocate_plain(bytes)?;
        Ok(DeviceBuffer {
            comm: self.clone(),
            alloc,
            len,
            _t: PhantomData,
        })
    }

    /// Allocates device memory holding a copy of `src`.
    pub fn device_buffer_from<T: Element>(&self, src: &[T]) -> Result<DeviceBuffer<T>> {
        let b = self.device_buffer(src.len())?;
        b.write(0, src)?;
        Ok(b)
    }
}

impl<T: Element> DeviceBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device address of element 0.
    pub fn device_ptr(&self) -> u64 {
        self.alloc.ptr()
    }

    /// Copies `src` into elements `offset..offset + src.len()`.
    pub fn write(&self, offset: usize, src: &[T]) -> Result<()> {
        let ptr = checked::<T>(
            &self.comm,
            self.alloc.ptr(),
            self.len,
            offset,
            src.len(),
            "device buffer",
        )?;
        self.comm.backend.write(ptr, as_bytes(src))
    }

    /// Copies elements `offset..offset + len` to the host.
    pub fn read(&self, offset: usize, len: usize) -> Result<Vec<T>> {
        let ptr = checked::<T>(
            &self.comm,
            self.alloc.ptr(),
            self.len,
            offset,
            len,
            "device buffer",
        )?;
        read_elems(&*self.comm.backend, ptr, len)
    }

    /// Copies the whole buffer to the host.
    pub fn to_host(&self) -> Result<Vec<T>> {
        self.read(0, self.len)
    }

    /// A cudarc view of the buffer, as [`SymmBuffer::cuda_view`].
    pub fn cuda_view(&self) -> Result<CudaRef<'_, T>> {
        // SAFETY: this rank's own allocation, which the result borrows
        // (through `self`) for its whole life.
        let mem = unsafe { interop::view_of(&self.comm, self.alloc.ptr(), self.len) }?;
        Ok(CudaRef::new(mem))
    }

    /// [`cuda_view`](Self::cuda_view), writable ([`CudaRefMut`]).
    pub fn cuda_view_mut(&mut self) -> Result<CudaRefMut<'_, T>> {
        // SAFETY: this rank's own allocation, which the result borrows
        // (through `self`) for its whole life.
        let mem = unsafe { interop::view_of(&self.comm, self.alloc.ptr(), self.len) }?;
        Ok(CudaRefMut::new(mem))
    }
}

impl<T: Element> DeviceSlice<T> for DeviceBuffer<T> {
    fn len(&self) -> usize {
        self.len
    }
    fn __memory(&self) -> Memory {
        Memory::Rank {
            owner: self.comm.owner_id(),
            ptr: self.alloc.ptr(),
        }
    }
}

/// Address of elements `offset..offset + n` of a `len`-element buffer at
/// `base`, or an error naming `what`.
pub(crate) fn checked<T: Element>(
    comm: &Comm,
    base: u64,
    len: usize,
    offset: usize,
    n: usize,
    what: &str,
) -> Result<u64> {
    match offset.checked_add(n) {
        Some(end) if end <= len => Ok(base + (offset * std::mem::size_of::<T>()) as u64),
        _ => Err(comm.invalid(format!(
            "elements {offset}..{} are out of bounds for a {what} of {len}",
            offset.saturating_add(n)
        ))),
    }
}
