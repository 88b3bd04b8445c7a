//! A caching pool of symmetric memory: tensors carved out of segments that
//! are allocated and rendezvoused once.
//!
//! A plain [`Comm::alloc`] is one allocation (2 MiB granularity on a GPU)
//! and one rendezvous (milliseconds) per buffer. A [`SymmPool`] allocates
//! *segments* that way and hands out *tensors* inside them: an allocation
//! is a search of the free blocks, and a tensor's rendezvous builds the
//! tensor's pointer tables from its segment's, with no collective.
//!
//! **Determinism is the contract.** A tensor is the same memory on every
//! rank only if every rank carves it at the same (segment, offset). The
//! pool's placement depends on nothing but its own sequence of allocations
//! and frees (first fit over segments in creation order, best fit inside
//! one, never on timing), so ranks that allocate and free the same sequence
//! agree. Ranks that do not are caught at a tensor's **first collective
//! use** (the first kernel launch or signal operation that takes it as a
//! symmetric buffer, the all-reduce included): every rank publishes what it
//! placed there, and all ranks fail with the same error, naming every rank's
//! (allocation, segment, offset, size), instead of reading each other's
//! unrelated memory.
//!
//! **Reuse is in stream order.** A freed block is handed out again at once:
//! every use of the new tensor is enqueued on the rank's stream after every
//! kernel that used the old one (host copies synchronise with the stream
//! first). Work of other streams must finish before the tensor is freed.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::comm::Comm;
use crate::dtype::{as_bytes, DType, Element};
use crate::error::{Error, Result};
use crate::memory::buffer::{read_elems, SymmBuffer};
use crate::memory::symmetric::SymmetricMemory;
use crate::store::StoreError;

/// Tensors start at multiples of this many bytes: 16-byte vectors and whole
/// cache lines, as [`crate::layout::DATA_ALIGN`] for whole allocations.
pub const POOL_ALIGN: usize = 128;

/// Bytes of a segment for small tensors: one GPU allocation granule, which
/// a plain allocation would spend on a single small buffer.
pub const SMALL_SEGMENT: usize = 2 << 20;

/// Tensors of at least this many bytes get a segment of their own size
/// (rounded up to [`SMALL_SEGMENT`]): carving them out of shared segments
/// would strand large holes, and their allocation cost is small against
/// their use.
pub const LARGE_TENSOR: usize = 1 << 20;

/// A caching allocator of symmetric memory on one rank of a group (see the
/// [module docs](self)). Cloning gives another handle to the same pool.
///
/// Collective like [`Comm::alloc`]: every rank makes its pools in the same
/// order, and allocates and frees from each in the same sequence.
#[derive(Clone)]
pub struct SymmPool {
    inner: Arc<PoolInner>,
}

pub(crate) struct PoolInner {
    comm: Comm,
    segments: Arc<dyn SegmentAllocator>,
    /// Segment hooks, in registration order (see [`SymmPool::add_hook`]).
    hooks: Mutex<Vec<(u64, Hook)>>,
    next_hook: AtomicU64,
    /// The pool's place in the group's collective allocation order: its
    /// first-use records are kept under it.
    id: u64,
    state: Mutex<State>,
    /// Tensors put to collective use so far on this rank: the index of the
    /// next first-use record.
    uses: AtomicU64,
}

#[derive(Default)]
struct State {
    /// In creation order; a trimmed segment leaves `None`, so indices (the
    /// names errors give) never move.
    segments: Vec<Option<Segment>>,
    /// Allocations made so far on this rank (each tensor's number).
    allocs: u64,
    live: usize,
    used: usize,
}

struct Segment {
    smem: Arc<SymmetricMemory>,
    /// Kept so that the rendezvous cache entry lives as long as the segment.
    _buf: SymmBuffer<u8>,
    bytes: usize,
    /// Free blocks: offset to size, coalesced.
    free: BTreeMap<usize, usize>,
    live: usize,
}

/// How much a pool holds and hands out, on this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes of segments held (allocated from the backend).
    pub held_bytes: usize,
    /// Bytes in live tensors (each rounded up to [`POOL_ALIGN`]).
    pub used_bytes: usize,
    /// Segments held.
    pub segments: usize,
    /// Live tensors.
    pub tensors: usize,
    /// Tensors allocated so far.
    pub allocations: u64,
}

impl Comm {
    /// A new, empty [`SymmPool`] on this rank, whose segments are symm's own
    /// allocations ([`DeviceSegments`]). Collective in order, like
    /// [`alloc`](Comm::alloc): it takes the next allocation number.
    pub fn pool(&self) -> SymmPool {
        self.pool_with(Arc::new(DeviceSegments::default()))
    }

    /// [`pool`](Comm::pool) with segments from `segments`.
    pub fn pool_with(&self, segments: Arc<dyn SegmentAllocator>) -> SymmPool {
        SymmPool {
            inner: Arc::new(PoolInner {
                segments,
                id: self.next_alloc_id(),
                comm: self.clone(),
                state: Mutex::new(State::default()),
                uses: AtomicU64::new(0),
                hooks: Mutex::new(Vec::new()),
                next_hook: AtomicU64::new(0),
            }),
        }
    }
}

impl SymmPool {
    /// A tensor of `len` elements of `T`, carved out of the first segment
    /// with room (the smallest free block that fits), or out of a new
    /// segment, which is allocated and rendezvoused with every rank (so
    /// every rank must reach the same allocations in the same order).
    pub fn alloc<T: Element>(&self, len: usize) -> Result<PoolTensor<T>> {
        let comm = &self.inner.comm;
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| b.max(1).checked_next_multiple_of(POOL_ALIGN))
            .ok_or_else(|| {
                comm.invalid(format!(
                    "{len} elements of {} overflow the address space",
                    T::DTYPE
                ))
            })?;
        let mut st = self.inner.lock();
        let found = st.segments.iter().enumerate().find_map(|(i, s)| {
            let s = s.as_ref()?;
            best_fit(&s.free, bytes).map(|off| (i, off))
        });
        let mut made = None;
        let (segment, offset) = match found {
            Some(f) => f,
            None => {
                let size = if bytes >= LARGE_TENSOR {
                    bytes
                        .checked_next_multiple_of(SMALL_SEGMENT)
                        .ok_or_else(|| {
                            comm.invalid(format!("a segment of {bytes} bytes overflows"))
                        })?
                } else {
                    SMALL_SEGMENT
                };
                let buf = self.inner.segments.allocate(comm, size)?;
                if buf.len() < size {
                    return Err(comm.invalid(format!(
                        "the segment allocator gave {} bytes for a segment of {size}",
                        buf.len()
                    )));
                }
                let smem = buf.rendezvous()?;
                let mut free = BTreeMap::new();
                free.insert(0, size);
                made = Some(SegmentInfo {
                    pool: self.inner.id,
                    index: st.segments.len(),
                    bytes: size,
                    memory: smem.clone(),
                });
                st.segments.push(Some(Segment {
                    smem,
                    _buf: buf,
                    bytes: size,
                    free,
                    live: 0,
                }));
                (st.segments.len() - 1, 0)
            }
        };
        let seg = st.segments[segment].as_mut().expect("just found or made");
        let block = seg.free.remove(&offset).expect("a free block");
        if block > bytes {
            seg.free.insert(offset + bytes, block - bytes);
        }
        seg.live += 1;
        let smem = seg.smem.clone();
        st.live += 1;
        st.used += bytes;
        st.allocs += 1;
        let seq = st.allocs - 1;
        // The hooks of this moment, read under the lock that `add_hook`
        // takes: a hook added later has this segment in its snapshot.
        let hooks = made.as_ref().map(|_| self.inner.hooks_now());
        drop(st);
        if let (Some(info), Some(hooks)) = (made, hooks) {
            call(&hooks, &SegmentEvent::Allocated(&info));
        }
        Ok(PoolTensor {
            block: Arc::new(Block {
                pool: self.inner.clone(),
                segment,
                offset,
                bytes,
            }),
            seq,
            len,
            segment_smem: smem,
            smem: OnceLock::new(),
            _t: PhantomData,
        })
    }

    /// Gives every segment that holds no live tensor back to the backend,
    /// and returns how many bytes that freed on this rank. Collective in
    /// order (every rank trims at the same point of its sequence), so the
    /// ranks' segments stay the same.
    pub fn trim(&self) -> usize {
        let mut st = self.inner.lock();
        let mut gone = Vec::new();
        for (index, s) in st.segments.iter_mut().enumerate() {
            if s.as_ref().is_some_and(|seg| seg.live == 0) {
                gone.extend(s.take().map(|seg| (index, seg)));
            }
        }
        let hooks = self.inner.hooks_now();
        drop(st);
        let mut freed = 0;
        for (index, seg) in gone {
            freed += seg.bytes;
            self.inner.release(&hooks, index, seg);
        }
        freed
    }

    /// Registers `hook` for this pool's segment events, and first calls it
    /// with [`SegmentEvent::Allocated`] for every segment already held (the
    /// snapshot), in creation order. Later, it hears of every new segment
    /// after it is rendezvoused and before any tensor in it is handed out,
    /// and of every segment about to be freed, before it is (freeing waits
    /// for every hook to return). As NCCL's buffer registration needs: a
    /// communicator registers each segment, and deregisters it before its
    /// memory goes. Hooks run on the thread that allocates or trims, never
    /// under the pool's lock, so they may use the pool.
    pub fn add_hook(&self, hook: impl Fn(&SegmentEvent<'_>) + Send + Sync + 'static) -> HookId {
        let hook: Hook = Arc::new(hook);
        // Registered under the segments' lock, so no segment is made or
        // freed between the snapshot and the registration.
        let st = self.inner.lock();
        let id = self.inner.next_hook.fetch_add(1, Ordering::Relaxed);
        let snapshot: Vec<SegmentInfo> = st
            .segments
            .iter()
            .enumerate()
            .filter_map(|(index, s)| s.as_ref().map(|seg| self.inner.info(index, seg)))
            .collect();
        self.inner
            .hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, hook.clone()));
        drop(st);
        for info in &snapshot {
            hook(&SegmentEvent::Allocated(info));
        }
        HookId(id)
    }

    /// Unregisters a hook; it hears of nothing more.
    pub fn remove_hook(&self, id: HookId) {
        self.inner
            .hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(h, _)| *h != id.0);
    }

    /// What the pool holds and hands out on this rank.
    pub fn stats(&self) -> PoolStats {
        let st = self.inner.lock();
        let held: Vec<&Segment> = st.segments.iter().flatten().collect();
        PoolStats {
            held_bytes: held.iter().map(|s| s.bytes).sum(),
            used_bytes: st.used,
            segments: held.len(),
            tensors: st.live,
            allocations: st.allocs,
        }
    }

    /// The rank the pool allocates on.
    pub fn comm(&self) -> &Comm {
        &self.inner.comm
    }
}

impl PoolInner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn info(&self, index: usize, seg: &Segment) -> SegmentInfo {
        SegmentInfo {
            pool: self.id,
            index,
            bytes: seg.bytes,
            memory: seg.smem.clone(),
        }
    }

    /// The hooks registered now, in order.
    fn hooks_now(&self) -> Vec<Hook> {
        self.hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(_, h)| h.clone())
            .collect()
    }

    /// Tells `hooks` that `seg` is about to be freed, then frees it.
    fn release(&self, hooks: &[Hook], index: usize, seg: Segment) {
        call(hooks, &SegmentEvent::Freeing(&self.info(index, &seg)));
        drop(seg);
    }

    /// Returns a tensor's block, coalesced with its free neighbours.
    fn free(&self, segment: usize, offset: usize, bytes: usize) {
        let mut st = self.lock();
        st.live -= 1;
        st.used -= bytes;
        let Some(seg) = st.segments[segment].as_mut() else {
            return;
        };
        seg.live -= 1;
        let (mut start, mut size) = (offset, bytes);
        if let Some((&prev, &len)) = seg.free.range(..offset).next_back() {
            if prev + len == offset {
                seg.free.remove(&prev);
                start = prev;
                size += len;
            }
        }
        if let Some(&len) = seg.free.get(&(offset + bytes)) {
            seg.free.remove(&(offset + bytes));
            size += len;
        }
        seg.free.insert(start, size);
    }
}

impl Drop for PoolInner {
    /// The last handle and the last tensor are gone: every segment left
    /// goes, each announced to the hooks first.
    fn drop(&mut self) {
        let segments = std::mem::take(&mut self.lock().segments);
        let hooks = self.hooks_now();
        for (index, seg) in segments.into_iter().enumerate() {
            if let Some(seg) = seg {
                self.release(&hooks, index, seg);
            }
        }
    }
}

type Hook = Arc<dyn Fn(&SegmentEvent<'_>) + Send + Sync>;

fn call(hooks: &[Hook], event: &SegmentEvent<'_>) {
    for h in hooks {
        h(event);
    }
}

/// Names a hook registered with [`SymmPool::add_hook`], to remove it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HookId(u64);

/// A segment of a pool, as its hooks see it.
#[derive(Clone, Debug)]
pub struct SegmentInfo {
    /// The pool's allocation number (the same on every rank).
    pub pool: u64,
    /// The segment's index in the pool (the same on every rank).
    pub index: usize,
    /// Bytes of data in the segment.
    pub bytes: usize,
    /// The segment on every rank: this rank's address is
    /// `memory.buffer_ptrs()[memory.rank()]`.
    pub memory: Arc<SymmetricMemory>,
}

/// What a segment hook hears.
#[derive(Debug)]
pub enum SegmentEvent<'a> {
    /// A segment is ready: rendezvoused, no tensor in it handed out yet (or,
    /// in the snapshot a new hook gets, held already).
    Allocated(&'a SegmentInfo),
    /// A segment is about to be freed; it is not until every hook returns.
    Freeing(&'a SegmentInfo),
}

/// Where a pool's segments come from: each is a symmetric allocation,
/// rendezvoused by the pool.
pub trait SegmentAllocator: Send + Sync {
    /// A symmetric allocation of `bytes` data bytes on `comm`. Called in the
    /// same order on every rank (the pool grows at the same points), so it
    /// may be collective, like [`Comm::alloc`].
    fn allocate(&self, comm: &Comm, bytes: usize) -> Result<SymmBuffer<u8>>;
}

/// Segments that are symm's own allocations (as [`Comm::alloc`] makes them
/// outside [`Comm::use_pool`]: `cuMemCreate` memory on a GPU, shareable
/// in-process, by fabric handle or by file descriptor), on the rank's
/// device or, from [`DeviceSegments::on_host_numa`], in host memory.
#[derive(Default)]
pub struct DeviceSegments {
    numa: Option<u32>,
}

impl DeviceSegments {
    /// Segments whose physical memory is on host NUMA node `node`, mapped
    /// for the rank's device as device memory is (`cuMemCreate` with a host
    /// NUMA location: CUDA 12.2 or later, where the driver supports it;
    /// otherwise the first allocation fails with the driver's error). The
    /// emulator's memory is host memory anyway.
    pub fn on_host_numa(node: u32) -> DeviceSegments {
        DeviceSegments { numa: Some(node) }
    }
}

impl SegmentAllocator for DeviceSegments {
    fn allocate(&self, comm: &Comm, bytes: usize) -> Result<SymmBuffer<u8>> {
        // Not `comm.alloc`, which a current pool (this one, say) would
        // serve.
        let backend = comm.backend.clone();
        SymmBuffer::new_in(comm.clone(), comm.next_alloc_id(), bytes, |total| {
            backend.allocate_at(total, self.numa)
        })
    }
}

/// Segments from the user's own allocate and free functions, as PyTorch's
/// `MemPool` takes them (the RFC's `ncclMemAlloc` example).
///
/// `alloc(bytes)` returns the address of `bytes` bytes (or `None` when it
/// cannot), and `free(address, bytes)` gives them back; the pool asks for
/// the segment's data plus its signal pad, rounded up to the allocation
/// granularity. `free` runs once this rank's segment and every peer's
/// mapping of it are gone.
pub struct FnSegments {
    alloc: Box<dyn Fn(usize) -> Option<u64> + Send + Sync>,
    free: Arc<dyn Fn(u64, usize) + Send + Sync>,
}

impl FnSegments {
    /// Segments from `alloc` and `free`.
    ///
    /// # Safety
    ///
    /// Every address `alloc` returns must be memory of the rank's device
    /// (host memory on the emulator) of at least the bytes asked for,
    /// aligned to 128 bytes, valid and used by nothing else until `free`
    /// gets it; on a GPU, `cuMemCreate` memory mapped on the rank's device
    /// (what `ncclMemAlloc` returns), which peers map by its handle, so
    /// ranks must be threads of one process.
    pub unsafe fn new(
        alloc: impl Fn(usize) -> Option<u64> + Send + Sync + 'static,
        free: impl Fn(u64, usize) + Send + Sync + 'static,
    ) -> FnSegments {
        FnSegments {
            alloc: Box::new(alloc),
            free: Arc::new(free),
        }
    }
}

impl SegmentAllocator for FnSegments {
    fn allocate(&self, comm: &Comm, bytes: usize) -> Result<SymmBuffer<u8>> {
        let id = comm.next_alloc_id();
        SymmBuffer::new_in(comm.clone(), id, bytes, |total| {
            let ptr = (self.alloc)(total).ok_or_else(|| {
                comm.invalid(format!(
                    "the segment allocator could not allocate {total} bytes"
                ))
            })?;
            if ptr == 0 || ptr % crate::layout::DATA_ALIGN as u64 != 0 {
                return Err(comm.invalid(format!(
                    "the segment allocator returned {ptr:#x}, which is not {}-byte aligned",
                    crate::layout::DATA_ALIGN
                )));
            }
            let free = self.free.clone();
            // SAFETY: `FnSegments::new`'s contract: `ptr` is `total` bytes
            // of this rank's device memory (cuMemCreate memory on a GPU),
            // valid until `free` gets it, which runs once the last user
            // of the allocation is gone.
            unsafe {
                comm.backend
                    .adopt(ptr, total, Box::new(move || free(ptr, total)))
            }
        })
    }
}

/// The offset of the smallest free block of at least `bytes` (the lowest
/// such offset among equals): deterministic, so every rank picks the same.
fn best_fit(free: &BTreeMap<usize, usize>, bytes: usize) -> Option<usize> {
    free.iter()
        .filter(|(_, &len)| len >= bytes)
        .min_by_key(|(&off, &len)| (len, off))
        .map(|(&off, _)| off)
}

/// `len` elements of `T` in a [`SymmPool`]'s segment, at the same offset on
/// every rank whose sequence of allocations matched. Its block goes back to
/// the pool once it and every mapping made of it
/// ([`rendezvous`](Self::rendezvous)) are dropped (see the
/// [module docs](self) on stream order).
///
/// Kernels take it as `&[T]` / `&mut [T]` (it is a
/// [`DeviceSlice`](crate::DeviceSlice)) and, through
/// [`rendezvous`](Self::rendezvous), as a `SymmBuf<T>`.
pub struct PoolTensor<T: Element> {
    block: Arc<Block>,
    seq: u64,
    len: usize,
    segment_smem: Arc<SymmetricMemory>,
    smem: OnceLock<Arc<SymmetricMemory>>,
    _t: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for PoolTensor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PoolTensor<{}>(#{}, segment {}, offset {}, len {}, rank {})",
            T::DTYPE,
            self.seq,
            self.block.segment,
            self.block.offset,
            self.len,
            self.block.pool.comm.rank()
        )
    }
}

/// A tensor's block of its segment, given back to the pool when the tensor
/// and every mapping made of it ([`PoolTensor::rendezvous`]) are gone.
struct Block {
    pool: Arc<PoolInner>,
    segment: usize,
    offset: usize,
    bytes: usize,
}

impl Drop for Block {
    fn drop(&mut self) {
        self.pool.free(self.segment, self.offset, self.bytes);
    }
}

impl<T: Element> PoolTensor<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where it lies: (the pool's allocation number of it, segment, byte
    /// offset in the segment).
    pub fn place(&self) -> (u64, usize, usize) {
        (self.seq, self.block.segment, self.block.offset)
    }

    /// Device address of element 0 (a host address on the emulator).
    pub fn device_ptr(&self) -> u64 {
        self.segment_smem.buffer_ptrs()[self.segment_smem.rank()] + self.block.offset as u64
    }

    /// Copies `src` into elements `offset..offset + src.len()`.
    pub fn write(&self, offset: usize, src: &[T]) -> Result<()> {
        let ptr = self.checked(offset, src.len())?;
        self.block.pool.comm.backend.write(ptr, as_bytes(src))
    }

    /// Copies elements `offset..offset + len` to the host.
    pub fn read(&self, offset: usize, len: usize) -> Result<Vec<T>> {
        let ptr = self.checked(offset, len)?;
        read_elems(&*self.block.pool.comm.backend, ptr, len)
    }

    /// Copies the whole tensor to the host.
    pub fn to_host(&self) -> Result<Vec<T>> {
        self.read(0, self.len)
    }

    /// Sets every byte of the tensor to `byte`.
    pub fn fill_bytes(&self, byte: u8) -> Result<()> {
        let bytes = self.len * std::mem::size_of::<T>();
        self.block
            .pool
            .comm
            .backend
            .fill(self.device_ptr(), byte, bytes)
    }

    /// The tensor as every rank sees it, for a `SymmBuf<T>` parameter or
    /// the all-reduce: its segment's mapping at the tensor's offset. No
    /// collective (the segment was rendezvoused when it was made); cached.
    /// The ranks' placements are compared at its first collective use.
    pub fn rendezvous(&self) -> Result<Arc<SymmetricMemory>> {
        self.rendezvous_as(T::DTYPE)
    }

    /// Address of this rank's signal pad of the tensor's segment.
    pub(crate) fn segment_pad_ptr(&self) -> u64 {
        self.segment_smem.signal_pad_ptrs()[self.segment_smem.rank()]
    }

    /// [`rendezvous`](Self::rendezvous), typed as `dtype` (a `SymmBuffer`
    /// of any element type may live in a byte tensor).
    pub(crate) fn rendezvous_as(&self, dtype: DType) -> Result<Arc<SymmetricMemory>> {
        if let Some(s) = self.smem.get() {
            return Ok(s.clone());
        }
        let check = FirstUse {
            pool: self.block.pool.clone(),
            place: Place {
                seq: self.seq,
                segment: self.block.segment as u64,
                offset: self.block.offset as u64,
                bytes: (self.len * std::mem::size_of::<T>()) as u64,
                dtype,
            },
            done: OnceLock::new(),
        };
        let view = SymmetricMemory::view(
            &self.segment_smem,
            self.block.offset,
            self.len * std::mem::size_of::<T>(),
            dtype,
            Some(Box::new(check)),
            Box::new(self.block.clone()),
        )?;
        Ok(self.smem.get_or_init(|| Arc::new(view)).clone())
    }

    fn checked(&self, offset: usize, len: usize) -> Result<u64> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {
                Ok(self.device_ptr() + (offset * std::mem::size_of::<T>()) as u64)
            }
            _ => Err(self.block.pool.comm.invalid(format!(
                "elements {offset}..{offset}+{len} are out of bounds for a pool tensor of {}",
                self.len
            ))),
        }
    }

    pub(crate) fn owner(&self) -> usize {
        self.block.pool.comm.owner_id()
    }
}

/// The pools that [`Comm::use_pool`] made current on a rank, innermost last
/// (weak: the guards keep them alive, and a `Comm` extension must not hold
/// a `Comm`).
#[derive(Default)]
struct PoolStack(Mutex<Vec<std::sync::Weak<PoolInner>>>);

fn pool_stack(comm: &Comm) -> Result<Arc<PoolStack>> {
    comm.extension(|_: &PoolStack| true, |_| Ok(PoolStack::default()))
}

/// The pool `comm.alloc` allocates from now, if a [`PoolGuard`] is alive.
pub(crate) fn current_pool(comm: &Comm) -> Option<SymmPool> {
    let stack = pool_stack(comm).ok()?;
    let s = stack.0.lock().unwrap_or_else(|p| p.into_inner());
    let inner = s.last()?.upgrade()?;
    Some(SymmPool { inner })
}

/// While alive, [`Comm::alloc`] on the rank (and so every symm allocation
/// made through it, the built-in all-reduce's staging included) takes its
/// memory from a pool, as PyTorch's `use_mem_pool` does. From
/// [`Comm::use_pool`]; guards nest, and dropping one restores the pool
/// before it.
#[must_use = "the pool is current only while the guard lives"]
pub struct PoolGuard {
    comm: Comm,
    pool: SymmPool,
}

impl Comm {
    /// Makes `pool` the one [`alloc`](Comm::alloc) takes memory from on this
    /// rank (every clone of this `Comm` included), until the guard drops.
    /// Buffers allocated meanwhile are pool tensors: no rendezvous of their
    /// own (their segment's), their signal pad their segment's, and
    /// placement compared across ranks at first collective use. Every rank
    /// must enter and leave the same scopes at the same points.
    pub fn use_pool(&self, pool: &SymmPool) -> Result<PoolGuard> {
        pool_stack(self)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(&pool.inner));
        Ok(PoolGuard {
            comm: self.clone(),
            pool: pool.clone(),
        })
    }
}

impl Drop for PoolGuard {
    fn drop(&mut self) {
        if let Ok(stack) = pool_stack(&self.comm) {
            let mut s = stack.0.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = s
                .iter()
                .rposition(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&self.pool.inner)))
            {
                s.remove(i);
            }
        }
    }
}

/// What a rank placed for one tensor: the record ranks compare at its first
/// collective use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    seq: u64,
    segment: u64,
    offset: u64,
    bytes: u64,
    dtype: DType,
}

impl Place {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(33);
        for x in [self.seq, self.segment, self.offset, self.bytes] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.push(self.dtype.code());
        v
    }

    fn decode(v: &[u8]) -> Option<Place> {
        if v.len() != 33 {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Some(Place {
            seq: word(0),
            segment: word(1),
            offset: word(2),
            bytes: word(3),
            dtype: DType::from_code(v[32])?,
        })
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "allocation #{} (segment {}, offset {}, {} bytes of {})",
            self.seq, self.segment, self.offset, self.bytes, self.dtype
        )
    }
}

/// The check a pool tensor's mapping runs at its first collective use.
pub(crate) struct FirstUse {
    pool: Arc<PoolInner>,
    place: Place,
    done: OnceLock<std::result::Result<(), String>>,
}

impl FirstUse {
    /// Publishes this rank's placement as its next collective use, waits for
    /// every rank's, and fails (the same text on every rank) where they
    /// differ. Once per tensor; later uses repeat the outcome.
    pub(crate) fn run(&self) -> Result<()> {
        let comm = &self.pool.comm;
        let out = self.done.get_or_init(|| self.exchange());
        out.clone().map_err(|detail| Error::AllocationMismatch {
            rank: comm.rank(),
            detail,
        })
    }

    fn exchange(&self) -> std::result::Result<(), String> {
        let comm = &self.pool.comm;
        let (rank, world) = (comm.rank(), comm.world_size());
        let k = self.pool.uses.fetch_add(1, Ordering::Relaxed);
        let key = |r: usize| format!("{}/pool/{}/use/{k}/{r}", comm.key_prefix(), self.pool.id);
        let store = comm.store();
        store
            .set(&key(rank), &self.place.encode())
            .map_err(|e| format!("publishing pool tensor {}: {e}", self.place))?;
        let keys: Vec<String> = (0..world).map(key).collect();
        store
            .wait(&keys, comm.options().timeout)
            .map_err(|e| match e {
                StoreError::Timeout { missing, .. } => format!(
                    "pool tensor {} is this rank's collective use #{k} of the pool, which \
                     ranks {missing:?} never reached in {:?}; every rank must allocate from the \
                     pool, and use its tensors collectively, in the same sequence",
                    self.place,
                    comm.options().timeout
                ),
                other => format!("reading the pool's use #{k}: {other}"),
            })?;
        let mut places = Vec::with_capacity(world);
        for (r, key) in keys.iter().enumerate() {
            let raw = store
                .try_get(key)
                .map_err(|e| format!("reading the pool's use #{k}: {e}"))?
                .unwrap_or_default();
            places.push(
                Place::decode(&raw)
                    .ok_or_else(|| format!("rank {r} published an unreadable pool record"))?,
            );
        }
        if places.iter().all(|p| *p == places[0]) {
            return Ok(());
        }
        let each: Vec<String> = places
            .iter()
            .enumerate()
            .map(|(r, p)| format!("rank {r}: {p}"))
            .collect();
        Err(format!(
            "the pool's collective use #{k} is a different tensor on different ranks ({}); \
             every rank must allocate from the pool, and free, in the same sequence",
            each.join("; ")
        ))
    }
}
