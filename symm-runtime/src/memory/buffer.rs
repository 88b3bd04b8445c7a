//! Symmetric buffers: a rank's own allocation, and views into it.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, Weak};

use crate::backend::LocalAlloc;
use crate::comm::Comm;
use crate::dtype::{as_bytes, DType, Element};
use crate::error::Result;
use crate::layout::{pad_bytes, AllocLayout};
use crate::memory::interop::{self, CudaRef, CudaRefMut};
use crate::memory::slice::{checked, read_elems, sealed, DeviceSlice, Memory};
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
    /// Its rendezvous with other groups of this rank
    /// ([`SymmBuffer::rendezvous_in`]), by the group's owner id.
    elsewhere: Mutex<Vec<(usize, Arc<SymmetricMemory>)>>,
    /// Where the memory is a pool's tensor ([`Comm::use_pool`]): its block,
    /// given back when the buffer goes, and its rendezvous.
    pooled: Option<Box<dyn Lent>>,
}

/// Memory a buffer takes from above it rather than from the backend: a
/// pool's tensor (`pool` implements this, so that buffers need not know
/// pools). Kept while the buffer lives.
pub(crate) trait Lent: Send + Sync {
    /// Device address of its first byte.
    fn ptr(&self) -> u64;
    /// Address of this rank's signal pad, which the memory shares.
    fn pad_ptr(&self) -> u64;
    /// The memory as every rank sees it, typed as `dtype`.
    fn rendezvous_as(&self, dtype: DType) -> Result<Arc<SymmetricMemory>>;
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

/// The check of [`SymmBuffer::rendezvous_in`] that every rank of `group`
/// makes before the data's rendezvous: each publishes its own `problem`
/// (under `id`, its pads' allocation), and every rank fails alike, naming
/// each rank's, if any has one.
fn every_rank_can_share(
    group: &Comm,
    id: u64,
    problem: Option<(crate::ErrorKind, String)>,
) -> Result<()> {
    let (rank, world) = (group.rank(), group.world_size());
    let key = |r: usize| format!("{}/rdv/x{id}/check/{r}", group.key_prefix());
    let store = group.store();
    let mine = match &problem {
        None => vec![0u8],
        Some((kind, text)) => [&[kind.code()][..], text.as_bytes()].concat(),
    };
    store
        .set(&key(rank), &mine)
        .map_err(|e| group.store_error(e))?;
    let keys: Vec<String> = (0..world).map(key).collect();
    let timeout = group.options().timeout;
    store.wait(&keys, timeout).map_err(|e| match e {
        crate::StoreError::Timeout { missing, .. } => crate::Error::RendezvousTimeout {
            rank,
            group: group.group_name().clone(),
            alloc: id,
            timeout,
            missing: crate::error::missing_ranks(&missing),
        },
        other => group.store_error(other),
    })?;
    let mut found: Vec<(u8, String)> = Vec::new();
    for (r, k) in keys.iter().enumerate() {
        let v = store
            .try_get(k)
            .map_err(|e| group.store_error(e))?
            .unwrap_or_default();
        if let Some((&code, text)) = v.split_first().filter(|(&c, _)| c != 0) {
            found.push((
                code,
                format!(
                    "rank {r} of group {}: {}",
                    group.group_label(),
                    String::from_utf8_lossy(text)
                ),
            ));
        }
    }
    let Some((code, _)) = found.first() else {
        return Ok(());
    };
    let kind = crate::ErrorKind::from_code(*code).unwrap_or(crate::ErrorKind::InvalidArgument);
    let each: Vec<&str> = found.iter().map(|(_, t)| t.as_str()).collect();
    Err(group.error(kind, format!("rendezvous_in: {}", each.join("; "))))
}

impl<T: Element> SymmBuffer<T> {
    /// This allocation as symmetric memory of `group`, another of this
    /// rank's groups (a subgroup of the buffer's group, its parent, a
    /// sibling): `group`'s kernels and functional calls then read and
    /// write it in place, as PyTorch's rendezvous of one tensor with
    /// several groups. Collective over `group` on the first call (every
    /// rank of `group` calls it, in the same order as its other
    /// allocations, with its matching buffer: the same length and type),
    /// cached after; the buffer's own group needs no call. The memory
    /// signals on pads of an allocation of `group`'s own, so the groups'
    /// channels never share a slot. Calls of two groups on the memory are
    /// ordered only as their streams are: synchronize (or chain the
    /// functional layer's `Pending`s) between them. A pool's tensor is its
    /// segment's memory, which this cannot rendezvous alone, and another
    /// rank's buffer is not this rank's to share: either is an error on
    /// every rank of `group` at once, naming the rank that passed it.
    pub fn rendezvous_in(&self, group: &Comm) -> Result<Arc<SymmetricMemory>> {
        let comm = &self.inner.comm;
        if comm.same_group(group) {
            return self.rendezvous();
        }
        let mut cache = self
            .inner
            .elsewhere
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some((_, s)) = cache.iter().find(|(id, _)| *id == group.owner_id()) {
            return Ok(s.clone());
        }
        let problem = if comm.owner().home != group.owner().home {
            Some((
                crate::ErrorKind::InvalidArgument,
                format!(
                    "it passed memory of {}, another rank: a buffer rendezvouses only with its \
                     own rank's groups",
                    comm.describe_rank()
                ),
            ))
        } else if self.inner.pooled.is_some() {
            Some((
                crate::ErrorKind::Unsupported,
                format!(
                    "it passed a pool tensor of {}, whose memory is its segment's: allocate it \
                     with `alloc_unpooled` (or pass it to {}'s calls, which stage it)",
                    comm.group_label(),
                    group.group_label()
                ),
            ))
        } else {
            None
        };
        // The pads: a one-byte allocation of `group`'s own, whose
        // rendezvous every rank of `group` makes first. Its id, drawn from
        // `group`'s numbering (the same on every rank of `group`, and used
        // by no other of its allocations), also names the data's
        // rendezvous: the buffer's own id counts in its home group, where
        // matching buffers of different homes may differ, and another
        // home's buffer may share it.
        let pad = SymmBuffer::<u8>::new(group.clone(), group.next_alloc_id(), 1)?;
        let pad_smem = pad.rendezvous()?;
        every_rank_can_share(group, pad_smem.alloc_id(), problem)?;
        let smem = symmetric::rendezvous(symmetric::Allocation {
            comm: group,
            id: pad_smem.alloc_id(),
            alloc: &self.inner.alloc,
            layout: self.inner.layout,
            dtype: self.inner.dtype,
            len: self.inner.len,
            space: "x",
        })?;
        let smem = Arc::new(smem.with_pads_of(pad_smem, Box::new(pad)));
        cache.push((group.owner_id(), smem.clone()));
        Ok(smem)
    }

    /// This allocation's rendezvous with `group` if one was made
    /// ([`rendezvous_in`](Self::rendezvous_in), or `rendezvous` for its own
    /// group), with no collective.
    pub fn rendezvoused_in(&self, group: &Comm) -> Option<Arc<SymmetricMemory>> {
        if self.inner.comm.same_group(group) {
            return self
                .inner
                .smem
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
        }
        let cache = self
            .inner
            .elsewhere
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        cache
            .iter()
            .find(|(id, _)| *id == group.owner_id())
            .map(|(_, s)| s.clone())
    }

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
        let pad = pad_bytes(comm.world_size());
        let layout = AllocLayout::new(bytes, comm.backend.granularity(), comm.world_size())
            .ok_or_else(|| {
                comm.invalid(format!(
                    "{bytes} bytes plus a signal pad overflow the address space"
                ))
            })?;
        let alloc = allocate(layout.total_bytes)?;
        // Peers may signal as soon as rendezvous completes, so the pad must be
        // zero before this rank can publish it.
        comm.backend
            .fill(alloc.ptr() + layout.pad_offset as u64, 0, pad)?;
        Ok(SymmBuffer {
            inner: Arc::new(BufInner {
                comm,
                id,
                alloc,
                layout,
                dtype: T::DTYPE,
                len,
                smem: Mutex::new(None),
                elsewhere: Mutex::new(Vec::new()),
                pooled: None,
            }),
            _t: PhantomData,
        })
    }

    /// A buffer of `len` elements in memory that `lend` gives for its bytes
    /// (a pool's next tensor, see [`Comm::use_pool`]): its signal pad is
    /// the lender's.
    pub(crate) fn lent(
        comm: Comm,
        id: u64,
        len: usize,
        lend: impl FnOnce(usize) -> Result<Box<dyn Lent>>,
    ) -> Result<SymmBuffer<T>> {
        let bytes = byte_len::<T>(&comm, len)?;
        let tensor = lend(bytes)?;
        let ptr = tensor.ptr();
        let pad = tensor.pad_ptr();
        let layout = AllocLayout {
            data_bytes: bytes,
            pad_offset: (pad - ptr) as usize,
            total_bytes: (pad - ptr) as usize + pad_bytes(comm.world_size()),
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
                elsewhere: Mutex::new(Vec::new()),
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
            None => Arc::new(symmetric::rendezvous(symmetric::Allocation {
                comm: &self.inner.comm,
                id: self.inner.id,
                alloc: &self.inner.alloc,
                layout: self.inner.layout,
                dtype: self.inner.dtype,
                len: self.inner.len,
                space: "",
            })?),
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
    /// This view as symmetric memory of its own: the allocation's
    /// rendezvous (collective on the allocation's first), narrowed to the
    /// view's elements at the same offset on every rank, with no
    /// collective and no device work. A collective on it reads and writes
    /// only the view's elements, at any element offset: the collectives'
    /// kernels load 16-byte vectors where the offset reaches a boundary,
    /// single elements elsewhere (the built-in all-reduce and the fused
    /// kernel, which load vectors from the start, refuse an input off 16
    /// bytes; `collectives::sum` takes it). Every rank must take the same
    /// view: the kernels' check of each call names the allocation and byte
    /// offset.
    pub fn symmetric(&self) -> Result<Arc<SymmetricMemory>> {
        let whole = self.buf.rendezvous()?;
        let size = std::mem::size_of::<T>();
        Ok(Arc::new(SymmetricMemory::view(
            &whole,
            self.offset * size,
            self.len * size,
            T::DTYPE,
            None,
            Box::new(()),
        )?))
    }

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

impl<T: Element> sealed::Sealed for SymmBuffer<T> {}
impl<T: Element> sealed::Sealed for SymmView<'_, T> {}
impl<T: Element> sealed::Sealed for DeviceBuffer<T> {}

impl<T: Element> DeviceSlice<T> for SymmBuffer<T> {
    fn len(&self) -> usize {
        SymmBuffer::len(self)
    }
    fn __memory(&self) -> Memory {
        Memory::Rank {
            owner: self.inner.comm.owner(),
            ptr: self.device_ptr(),
        }
    }
    fn __whose(&self) -> Option<String> {
        Some(self.inner.comm.describe_rank())
    }
}

impl<T: Element> DeviceSlice<T> for SymmView<'_, T> {
    fn len(&self) -> usize {
        SymmView::len(self)
    }
    fn __memory(&self) -> Memory {
        Memory::Rank {
            owner: self.buf.inner.comm.owner(),
            ptr: self.device_ptr(),
        }
    }
    fn __whose(&self) -> Option<String> {
        Some(self.buf.inner.comm.describe_rank())
    }
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
            owner: self.comm.owner(),
            ptr: self.alloc.ptr(),
        }
    }
    fn __whose(&self) -> Option<String> {
        Some(self.comm.describe_rank())
    }
}
