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
//! kernel that used the old one (host copies synchronise with that stream
//! first). Work of other streams must finish before the tensor is freed,
//! and so must the **peers'** accesses to it: the last collective use of a
//! tensor must end with every peer done with this rank's memory (an exit
//! barrier, as the built-in all-reduce has), or a peer may read the next
//! tensor's data.
//!
//! **Tensors of a segment share its signal pad.** Kernels that keep state
//! in a `SymmBuf`'s pad slots key it by channel: channels requested from
//! the group keep protocols apart, on a shared pad as on any other.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::comm::Comm;
use crate::dtype::{as_bytes, DType, Element};
use crate::error::{Error, Result};
use crate::memory::buffer::{Lent, SymmBuffer};
use crate::memory::slice::{checked, read_elems, sealed, DeviceSlice, Memory};
use crate::memory::symmetric::{CollectiveCheck, SymmetricMemory};
use crate::store::StoreError;

/// Tensors start at multiples of this many bytes: 16-byte vectors and whole
/// cache lines, as [`crate::layout::DATA_ALIGN`] for whole allocations.
pub const POOL_ALIGN: usize = 128;

/// Bytes of a segment for small tensors, its signal pad included: one GPU
/// allocation granule, which a plain allocation would spend on a single
/// small buffer.
pub const SMALL_SEGMENT: usize = 2 << 20;

/// A tensor of at least this many bytes that no segment has room for gets
/// a new segment of its own size (its data and the segment's signal pad
/// rounded up to [`SMALL_SEGMENT`]); smaller ones a new segment of
/// [`SMALL_SEGMENT`]. Either way, existing segments are searched first.
pub const LARGE_TENSOR: usize = 1 << 20;

/// A caching allocator of symmetric memory on one rank of a group (the
/// book's Memory chapter explains its placement rule, stream order and
/// first-use check). Cloning gives another handle to the same pool.
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
    /// Held while the pool grows, one segment at a time.
    growing: Mutex<()>,
    /// Tensors put to collective use so far on this rank: the index of the
    /// next first-use record.
    uses: Arc<AtomicU64>,
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
    bytes: usize,
    /// Free blocks: offset to size, coalesced.
    free: BTreeMap<usize, usize>,
    live: usize,
}

/// How much a pool holds and hands out, on this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes of segment data held (each segment also holds its signal pad,
    /// so that data and pad fill whole 2 MiB granules).
    pub held_bytes: usize,
    /// Bytes in live tensors (each rounded up to 128 bytes).
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
                growing: Mutex::new(()),
                uses: Arc::new(AtomicU64::new(0)),
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
        self.alloc_reserving(len, len)
    }

    /// [`alloc`](Self::alloc) of a tensor of `len` elements that takes the
    /// block `reserve` elements would (the larger of the two): for ranks
    /// whose tensors differ in length (a reduce-scatter's uneven chunks)
    /// but must allocate alike, so that every rank's pool grows at the
    /// same allocation.
    pub fn alloc_reserving<T: Element>(&self, len: usize, reserve: usize) -> Result<PoolTensor<T>> {
        let comm = &self.inner.comm;
        let bytes = len
            .max(reserve)
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| b.max(1).checked_next_multiple_of(POOL_ALIGN))
            .ok_or_else(|| {
                comm.invalid(format!(
                    "{len} elements of {} overflow the address space",
                    T::DTYPE
                ))
            })?;
        let fit = |st: &State| {
            st.segments.iter().enumerate().find_map(|(i, s)| {
                let s = s.as_ref()?;
                best_fit(&s.free, bytes).map(|off| (i, off))
            })
        };
        let mut st = self.inner.lock();
        let mut made = None;
        let (segment, offset) = match fit(&st) {
            Some(f) => f,
            None => {
                // Grown outside the segments' lock: the rendezvous may wait
                // for peers up to the timeout, and tensor drops, stats and
                // hooks must not wait with it.
                drop(st);
                let (index, info) = self.grow(bytes)?;
                st = self.inner.lock();
                made = Some(info);
                (index, 0)
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
        drop(st);
        let block = Arc::new(Block {
            pool: Arc::downgrade(&self.inner),
            segment,
            offset,
            bytes,
        });
        if let Some((info, hooks)) = made {
            call(&hooks, &SegmentEvent::Allocated(&info));
        }
        Ok(PoolTensor {
            pool: self.inner.clone(),
            block,
            seq,
            len,
            segment_smem: smem,
            smem: OnceLock::new(),
            _t: PhantomData,
        })
    }

    /// A new segment with room for `bytes`, rendezvoused, pushed last and
    /// wholly free; with the hooks to tell of it (read under the segments'
    /// lock that `add_hook` takes, so a hook added later has it in its
    /// snapshot instead). One growth at a time per pool.
    fn grow(&self, bytes: usize) -> Result<(usize, (SegmentInfo, Vec<Hook>))> {
        let comm = &self.inner.comm;
        // A segment allocator that allocates from the pool it serves (through
        // `comm.alloc` while the pool is current) would wait for itself.
        let me = Arc::as_ptr(&self.inner) as usize;
        if GROWING.with(|g| g.borrow().contains(&me)) {
            return Err(comm.invalid(
                "a pool's segment allocator allocated from that same pool (comm.alloc while \
                 it is current): allocate segments with symm's own allocator or outside \
                 use_pool"
                    .to_string(),
            ));
        }
        let _one = self.inner.growing.lock().unwrap_or_else(|p| p.into_inner());
        GROWING.with(|g| g.borrow_mut().push(me));
        let made = (|| {
            // The data plus its signal pad fill whole 2 MiB granules (the
            // pad of a domain of more than 8 ranks is larger, so a smaller
            // tensor may need more than one).
            let pad = crate::layout::pad_bytes(comm.world_size());
            let size = if bytes >= LARGE_TENSOR || bytes.saturating_add(pad) > SMALL_SEGMENT {
                bytes
                    .checked_add(pad)
                    .and_then(|b| b.checked_next_multiple_of(SMALL_SEGMENT))
                    .ok_or_else(|| comm.invalid(format!("a segment of {bytes} bytes overflows")))?
                    - pad
            } else {
                SMALL_SEGMENT - pad
            };
            let buf = self.inner.segments.allocate(comm, size)?;
            if buf.len() < size {
                return Err(comm.invalid(format!(
                    "the segment allocator gave {} bytes for a segment of {size}",
                    buf.len()
                )));
            }
            if buf.comm().owner_id() != comm.owner_id() {
                return Err(comm.invalid(
                    "the segment allocator returned memory of another rank or group".to_string(),
                ));
            }
            // The mapping keeps the memory; the buffer itself goes, so the
            // segment is never found by `Comm::lookup` as one allocation.
            let smem = buf.rendezvous()?;
            Ok((size, smem))
        })();
        GROWING.with(|g| g.borrow_mut().retain(|&p| p != me));
        let (size, smem) = made?;
        let mut st = self.inner.lock();
        let mut free = BTreeMap::new();
        free.insert(0, size);
        let info = SegmentInfo {
            pool: self.inner.id,
            index: st.segments.len(),
            bytes: size,
            memory: smem.clone(),
        };
        st.segments.push(Some(Segment {
            smem,
            bytes: size,
            free,
            live: 0,
        }));
        let hooks = self.inner.hooks_now();
        Ok((st.segments.len() - 1, (info, hooks)))
    }

    /// Gives every segment that holds no live tensor back to the backend,
    /// and returns how many bytes of segment data that freed on this rank.
    /// No communication, but part of the sequence every rank must share:
    /// trim at the same points on every rank, so the ranks' segments stay
    /// the same.
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

    /// Unregisters a hook; it hears of nothing that starts after this
    /// returns.
    pub fn remove_hook(&self, id: HookId) {
        self.inner
            .hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(h, _)| *h != id.0);
    }

    /// The pool's allocation number: the same on every rank, and the
    /// `pool` of its [`SegmentInfo`]s.
    pub fn id(&self) -> u64 {
        self.inner.id
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
    /// gets it. On a GPU it must be the start of one `cuMemCreate`
    /// allocation of at least that size, mapped on the rank's device (what
    /// `ncclMemAlloc` returns; never an address inside a larger one, since
    /// peers map the whole allocation from its handle), and `free` must
    /// release it with `cuMemUnmap` and `cuMemRelease`, which leaves it to
    /// the peers that still map it; ranks must be threads of one process.
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
            let ptr = (self.alloc)(total).filter(|&p| p != 0).ok_or_else(|| {
                comm.capacity(format!(
                    "the segment allocator could not allocate {total} bytes"
                ))
            })?;
            if ptr % crate::layout::DATA_ALIGN as u64 != 0 {
                // Not ours to keep, but the user's to free.
                (self.free)(ptr, total);
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
/// book's Memory chapter on stream order).
///
/// Kernels take it as `&[T]` / `&mut [T]` (it is a
/// [`DeviceSlice`](crate::DeviceSlice)) and, through
/// [`rendezvous`](Self::rendezvous), as a `SymmBuf<T>`.
pub struct PoolTensor<T: Element> {
    /// Keeps the pool (and its segments) while the tensor lives.
    pool: Arc<PoolInner>,
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
            self.pool.comm.rank()
        )
    }
}

/// A tensor's block of its segment, given back to the pool when the tensor
/// and every mapping made of it ([`PoolTensor::rendezvous`]) are gone.
struct Block {
    /// Weak: the all-reduce keeps mappings of its staging in the rank's
    /// `Comm`, and a strong pool here (which holds the `Comm`) would keep
    /// the rank alive for ever. A pool already gone has nothing to free
    /// into; the segment's memory lives on in the mapping.
    pool: std::sync::Weak<PoolInner>,
    segment: usize,
    offset: usize,
    bytes: usize,
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.free(self.segment, self.offset, self.bytes);
        }
    }
}

thread_local! {
    /// The pools this thread is growing (see `SymmPool::grow`).
    static GROWING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
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

    /// The rank and group whose pool it came from: the group it is
    /// symmetric memory of.
    pub fn comm(&self) -> &Comm {
        &self.pool.comm
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
        self.pool.comm.backend.write(ptr, as_bytes(src))
    }

    /// Copies elements `offset..offset + len` to the host.
    pub fn read(&self, offset: usize, len: usize) -> Result<Vec<T>> {
        let ptr = self.checked(offset, len)?;
        read_elems(&*self.pool.comm.backend, ptr, len)
    }

    /// Copies the whole tensor to the host.
    pub fn to_host(&self) -> Result<Vec<T>> {
        self.read(0, self.len)
    }

    /// Sets every byte of the tensor to `byte`.
    pub fn fill_bytes(&self, byte: u8) -> Result<()> {
        let bytes = self.len * std::mem::size_of::<T>();
        self.pool.comm.backend.fill(self.device_ptr(), byte, bytes)
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
        let comm = &self.pool.comm;
        let check = FirstUse {
            rank: comm.rank(),
            name: comm.group_name().clone(),
            world: comm.world_size(),
            prefix: format!("{}/pool/{}", comm.key_prefix(), self.pool.id),
            store: comm.store().clone(),
            timeout: comm.options().timeout,
            uses: self.pool.uses.clone(),
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
        checked::<T>(
            &self.pool.comm,
            self.device_ptr(),
            self.len,
            offset,
            len,
            "pool tensor",
        )
    }
}

impl<T: Element> sealed::Sealed for PoolTensor<T> {}

impl<T: Element> DeviceSlice<T> for PoolTensor<T> {
    fn len(&self) -> usize {
        PoolTensor::len(self)
    }
    fn __memory(&self) -> Memory {
        Memory::Rank {
            owner: self.pool.comm.owner(),
            ptr: self.device_ptr(),
        }
    }
    fn __whose(&self) -> Option<String> {
        Some(self.pool.comm.describe_rank())
    }
}

impl<T: Element> Lent for PoolTensor<T> {
    fn ptr(&self) -> u64 {
        self.device_ptr()
    }
    fn pad_ptr(&self) -> u64 {
        self.segment_pad_ptr()
    }
    fn rendezvous_as(&self, dtype: DType) -> Result<Arc<SymmetricMemory>> {
        PoolTensor::rendezvous_as(self, dtype)
    }
}

/// The pools that [`Comm::use_pool`] made current on a rank, innermost last
/// (weak: the guards keep them alive, and a `Comm` extension must not hold
/// a `Comm`).
#[derive(Default)]
struct PoolStack(Mutex<Vec<(u64, std::sync::Weak<PoolInner>)>>);

fn pool_stack(comm: &Comm) -> Result<Arc<PoolStack>> {
    comm.extension(|_: &PoolStack| true, |_| Ok(PoolStack::default()))
}

/// The pool `comm.alloc` allocates from now, if a [`PoolGuard`] is alive.
pub(crate) fn current_pool(comm: &Comm) -> Option<SymmPool> {
    let stack = pool_stack(comm).ok()?;
    let s = stack.0.lock().unwrap_or_else(|p| p.into_inner());
    let inner = s.last()?.1.upgrade()?;
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
    /// Keeps the pool while it is current.
    _pool: SymmPool,
    /// This guard's entry in the rank's stack (a pool may be current twice).
    token: u64,
}

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
        if let Some(pool) = current_pool(self) {
            return SymmBuffer::lent(self.clone(), id, len, |bytes| {
                Ok(Box::new(pool.alloc::<u8>(bytes)?) as Box<dyn Lent>)
            });
        }
        SymmBuffer::new(self.clone(), id, len)
    }

    /// [`alloc`](Self::alloc) that never takes from a pool: an allocation
    /// of its own, whose signal pad no other allocation shares, so that a
    /// library may signal on any channel of it without reserving the
    /// group's channels. Collective in order, as `alloc`.
    pub fn alloc_unpooled<T: Element>(&self, len: usize) -> Result<SymmBuffer<T>> {
        SymmBuffer::new(self.clone(), self.next_alloc_id(), len)
    }

    /// The pool [`alloc`](Comm::alloc) takes memory from now (the innermost
    /// [`use_pool`](Self::use_pool) scope's), if any.
    pub fn current_pool(&self) -> Option<SymmPool> {
        current_pool(self)
    }

    /// Makes `pool` the one [`alloc`](Comm::alloc) takes memory from on this
    /// rank, until the guard drops: for every thread that allocates through
    /// this `Comm` or a clone of it (unlike PyTorch's `use_mem_pool`, which
    /// is per thread), so allocate from one thread while a guard lives.
    /// Buffers allocated meanwhile are pool tensors: no rendezvous of their
    /// own (their segment's), their signal pad their segment's, and
    /// placement compared across ranks at first collective use. Every rank
    /// must enter and leave the same scopes at the same points.
    pub fn use_pool(&self, pool: &SymmPool) -> Result<PoolGuard> {
        if pool.inner.comm.owner_id() != self.owner_id() {
            return Err(self.invalid(
                "use_pool got a pool of another rank or group; make pools from this rank's Comm",
            ));
        }
        static TOKENS: AtomicU64 = AtomicU64::new(0);
        let token = TOKENS.fetch_add(1, Ordering::Relaxed);
        pool_stack(self)?
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((token, Arc::downgrade(&pool.inner)));
        Ok(PoolGuard {
            comm: self.clone(),
            _pool: pool.clone(),
            token,
        })
    }
}

impl Drop for PoolGuard {
    fn drop(&mut self) {
        if let Ok(stack) = pool_stack(&self.comm) {
            let mut s = stack.0.lock().unwrap_or_else(|p| p.into_inner());
            s.retain(|(t, _)| *t != self.token);
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
    /// What the check needs of the pool, without the pool itself (which
    /// holds the rank's `Comm`: the all-reduce keeps mappings of its
    /// staging in that `Comm`, and would keep the rank alive through it).
    rank: usize,
    /// The group `rank` counts in, for errors.
    name: crate::GroupName,
    world: usize,
    /// The store key of the pool's records, and the group's timeout.
    prefix: String,
    store: Arc<dyn crate::store::Store>,
    timeout: std::time::Duration,
    /// The pool's count of first uses so far.
    uses: Arc<AtomicU64>,
    place: Place,
    done: OnceLock<std::result::Result<(), String>>,
}

impl CollectiveCheck for FirstUse {
    /// Publishes this rank's placement as its next collective use, waits for
    /// every rank's, and fails (the same text on every rank) where they
    /// differ. Once per tensor; later uses repeat the outcome.
    fn run(&self) -> Result<()> {
        let out = self.done.get_or_init(|| self.exchange());
        out.clone().map_err(|detail| Error::AllocationMismatch {
            rank: self.rank,
            group: self.name.clone(),
            detail,
        })
    }
}

impl FirstUse {
    fn exchange(&self) -> std::result::Result<(), String> {
        let (rank, world) = (self.rank, self.world);
        let k = self.uses.fetch_add(1, Ordering::Relaxed);
        let key = |r: usize| format!("{}/use/{k}/{r}", self.prefix);
        let store = &self.store;
        store
            .set(&key(rank), &self.place.encode())
            .map_err(|e| format!("publishing pool tensor {}: {e}", self.place))?;
        let keys: Vec<String> = (0..world).map(key).collect();
        store.wait(&keys, self.timeout).map_err(|e| match e {
            StoreError::Timeout { missing, .. } => format!(
                "pool tensor {} is this rank's collective use #{k} of the pool, which \
                     ranks {missing:?} never reached in {:?}; every rank must allocate from the \
                     pool, and use its tensors collectively, in the same sequence",
                self.place, self.timeout
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
             every rank must allocate from the pool, free, and first use its tensors \
             collectively, in the same sequence (from one thread)",
            each.join("; ")
        ))
    }
}
