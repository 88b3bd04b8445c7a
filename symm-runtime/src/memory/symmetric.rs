//! [`SymmetricMemory`]: one allocation as every rank sees it, and the
//! rendezvous protocol that builds it.
//!
//! Rendezvous, per allocation, through the group's [`Store`](crate::Store),
//! under keys prefixed by the group's name and generation (so a store reused
//! by a later group never serves stale entries):
//! 1. each rank publishes its metadata (world size, backend, dtype, sizes)
//!    and an exported handle under `<group>/<gen>/rdv/<alloc>/info/<rank>`;
//! 2. each rank waits for every rank's entry (a timeout names the missing
//!    ranks), then validates all entries; since every rank validates the same
//!    set in the same order, a mismatch gives every rank the same error;
//! 3. each rank maps every peer's allocation, builds its device tables, and
//!    publishes success or its error under `.../mapped/<rank>`; then it waits
//!    for every rank's outcome, also after failing itself, so no owner frees
//!    memory that a peer is still mapping.
//!
//! Keys are never deleted: a group leaves two small entries per rank per
//! allocation in its store.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::{Backend, BackendKind, LocalAlloc, Mapped, Table};
use crate::comm::Comm;
use crate::dtype::{as_bytes, DType, Element};
use crate::error::{missing_ranks, Error, Result};
use crate::layout::{pad_bytes, pad_slots, AllocLayout};
use crate::memory::slice::{read_elems, Binder, DeviceSlice};
use crate::store::StoreError;

/// One symmetric allocation as every rank sees it: peer buffer and signal
/// pad addresses, on the host and on the device, plus the signal operations.
///
/// Obtained from [`SymmBuffer::rendezvous`](crate::SymmBuffer::rendezvous),
/// which caches one per allocation.
pub struct SymmetricMemory {
    rank: usize,
    world_size: usize,
    alloc_id: u64,
    dtype: DType,
    buffer_size: usize,
    buffer_ptrs: Vec<u64>,
    signal_pad_ptrs: Vec<u64>,
    buffer_ptrs_dev: Table,
    signal_pad_ptrs_dev: Table,
    /// Bytes from each `buffer_ptrs_dev` entry to this memory: a pool
    /// tensor shares its segment's tables (0 for a whole allocation).
    buffer_offset: u64,
    /// A pool tensor's own table of `buffer_ptrs`, made when a raw-kernel
    /// user asks for it ([`buffer_ptrs_dev`](Self::buffer_ptrs_dev)).
    own_table: Mutex<Option<Table>>,
    backend: Arc<dyn Backend>,
    /// Identifies the rank state of the `Comm` that made the allocation, to
    /// refuse channels of another rank or group. (Not the `Comm` itself:
    /// built-ins keep `SymmetricMemory` in a `Comm::extension`, and the
    /// extension would then keep its own `Comm` alive.)
    owner: crate::comm::Owner,
    /// The group's label ([`Comm::group_label`]), for errors.
    label: Arc<str>,
    /// The group as errors qualify its ranks ([`Comm::group_name`]).
    name: crate::GroupName,
    /// The group (for the emulator's hang detection) and which of its ranks
    /// share a device, as the signal operations' launches need them.
    group: crate::emulator::GroupKey,
    placement: crate::placement::Placement,
    /// Set once this memory's signal operations have loaded their kernels.
    signal_kernels: std::sync::OnceLock<()>,
    /// For a pool tensor: the check of every rank's placement that its
    /// first collective use runs.
    first_use: Option<Box<dyn CollectiveCheck>>,
    // Dropped after the tables: peers' mappings, then our own allocation
    // (a view keeps its segment's mapping, and its block of it, instead).
    _parent: Option<(Arc<SymmetricMemory>, Box<dyn std::any::Any + Send + Sync>)>,
    _peers: Vec<Mapped>,
    _local: Arc<dyn LocalAlloc>,
}

impl std::fmt::Debug for SymmetricMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymmetricMemory")
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("alloc_id", &self.alloc_id)
            .field("dtype", &self.dtype)
            .field("buffer_size", &self.buffer_size)
            .finish()
    }
}

/// What each rank publishes about its allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Info {
    world: u32,
    backend: u8,
    dtype: u8,
    len: u64,
    data_bytes: u64,
    total_bytes: u64,
    label: String,
    export: Vec<u8>,
}

const INFO_VERSION: u8 = 1;

impl Info {
    fn encode(&self) -> Vec<u8> {
        let mut v = vec![INFO_VERSION];
        v.extend_from_slice(&self.world.to_le_bytes());
        v.push(self.backend);
        v.push(self.dtype);
        v.extend_from_slice(&self.len.to_le_bytes());
        v.extend_from_slice(&self.data_bytes.to_le_bytes());
        v.extend_from_slice(&self.total_bytes.to_le_bytes());
        for b in [self.label.as_bytes(), &self.export] {
            v.extend_from_slice(&(b.len() as u32).to_le_bytes());
            v.extend_from_slice(b);
        }
        v
    }

    fn decode(v: &[u8]) -> Option<Info> {
        let mut r = Reader(v);
        if r.take(1)?[0] != INFO_VERSION {
            return None;
        }
        let world = u32::from_le_bytes(r.take(4)?.try_into().ok()?);
        let backend = r.take(1)?[0];
        let dtype = r.take(1)?[0];
        let len = r.u64()?;
        let data_bytes = r.u64()?;
        let total_bytes = r.u64()?;
        let label = String::from_utf8(r.bytes()?.to_vec()).ok()?;
        let export = r.bytes()?.to_vec();
        r.0.is_empty().then_some(Info {
            world,
            backend,
            dtype,
            len,
            data_bytes,
            total_bytes,
            label,
            export,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize;
        self.take(n)
    }
}

/// Checks every rank's info against the others. Pure and order-independent
/// of the caller, so every rank derives the identical message. `own`: the
/// group's own allocations, whose mapped sizes agree too (another group's,
/// rendezvoused with this one, carry their home groups' pads, which differ
/// with those groups' sizes, and signal on this group's).
fn validate(
    infos: &[Info],
    group: &crate::GroupName,
    own: bool,
) -> std::result::Result<(), String> {
    fn differ<T: PartialEq + Clone>(
        (infos, group): (&[Info], &crate::GroupName),
        what: &str,
        get: impl Fn(&Info) -> T,
        show: impl Fn(&T) -> String,
    ) -> Option<String> {
        let first = get(&infos[0]);
        if infos.iter().all(|i| get(i) == first) {
            return None;
        }
        let per: Vec<String> = infos
            .iter()
            .enumerate()
            .map(|(r, i)| format!("rank {r}: {}", show(&get(i))))
            .collect();
        Some(format!(
            "{what} differ across ranks{group} ({})",
            per.join(", ")
        ))
    }
    let dtype_name = |c: &u8| {
        DType::from_code(*c).map_or_else(|| format!("unknown dtype code {c}"), |d| d.to_string())
    };
    let checks = [
        differ(
            (infos, group),
            "world sizes",
            |i| i.world,
            |w| w.to_string(),
        ),
        differ(
            (infos, group),
            "backends",
            |i| i.backend,
            |b| {
                BackendKind::from_code(*b).map_or_else(|| format!("unknown {b}"), |k| k.to_string())
            },
        ),
        differ((infos, group), "element types", |i| i.dtype, dtype_name),
        differ(
            (infos, group),
            "buffer sizes",
            |i| (i.len, i.dtype, i.data_bytes),
            |(len, d, bytes)| format!("{len} × {} = {bytes} bytes", dtype_name(d)),
        ),
        differ(
            (infos, group),
            "mapped sizes",
            |i| if own { i.total_bytes } else { 0 },
            |b| format!("{b} bytes"),
        ),
    ];
    match checks.into_iter().flatten().next() {
        Some(m) => Err(m),
        None => Ok(()),
    }
}

fn key(group: &str, alloc: (&str, u64), phase: &str, rank: usize) -> String {
    format!("{group}/rdv/{}{}/{phase}/{rank}", alloc.0, alloc.1)
}

/// Runs the rendezvous protocol (module docs) for one allocation.
/// This rank's part of an allocation, as its rendezvous publishes and maps
/// it (a `SymmBuffer`'s, which `buffer` lends without this module knowing
/// buffers).
pub(crate) struct Allocation<'a> {
    pub comm: &'a Comm,
    pub id: u64,
    pub alloc: &'a Arc<dyn LocalAlloc>,
    pub layout: AllocLayout,
    pub dtype: DType,
    pub len: usize,
    /// The namespace of `id` in the group's keys: `""` for the group's own
    /// allocations, `"x"` for another group's allocation rendezvoused with
    /// this group too, named by the id of its pads' allocation in this
    /// group (so the keys never meet that allocation's own).
    pub space: &'static str,
}

/// A check that memory runs before its first collective use (a pool
/// tensor's comparison of every rank's placement, which `pool` implements:
/// the pool sits above this module).
pub(crate) trait CollectiveCheck: Send + Sync {
    /// Runs the check once; later calls repeat its outcome.
    fn run(&self) -> Result<()>;
}

pub(crate) fn rendezvous(buf: Allocation<'_>) -> Result<SymmetricMemory> {
    let comm = buf.comm;
    comm.one_domain(|| format!("rendezvous of allocation #{}", buf.id))?;
    let (rank, world) = (comm.rank(), comm.world_size());
    let store = comm.store();
    let group = comm.key_prefix();
    let timeout = comm.options().timeout;
    let backend = comm.backend.clone();
    let store_err = |source: StoreError| comm.store_error(source);
    let wait_all = |phase: &str| -> Result<()> {
        let keys: Vec<String> = (0..world)
            .map(|r| key(group, (buf.space, buf.id), phase, r))
            .collect();
        store.wait(&keys, timeout).map_err(|e| match e {
            StoreError::Timeout { missing, .. } => Error::RendezvousTimeout {
                rank,
                group: comm.group_name().clone(),
                alloc: buf.id,
                timeout,
                missing: missing_ranks(&missing),
            },
            other => store_err(other),
        })
    };

    // Kept until every peer has mapped (a descriptor server, across processes).
    let crate::backend::Export {
        bytes: export,
        _serving: serving,
    } = backend.export(&**buf.alloc)?;
    let mine = Info {
        world: world as u32,
        backend: backend.kind().code(),
        dtype: buf.dtype.code(),
        len: buf.len as u64,
        data_bytes: buf.layout.data_bytes as u64,
        total_bytes: buf.alloc.size() as u64,
        label: backend.label(),
        export,
    };
    store
        .set(
            &key(group, (buf.space, buf.id), "info", rank),
            &mine.encode(),
        )
        .map_err(store_err)?;
    wait_all("info")?;
    let mut infos = Vec::with_capacity(world);
    for r in 0..world {
        let raw = store
            .try_get(&key(group, (buf.space, buf.id), "info", r))
            .map_err(store_err)?
            .unwrap_or_default();
        let info = Info::decode(&raw).ok_or_else(|| Error::RendezvousMismatch {
            alloc: buf.id,
            group: comm.group_name().clone(),
            detail: format!(
                "rank {r}{} published an unreadable entry (a different symm version?)",
                comm.group_name()
            ),
        })?;
        infos.push(info);
    }
    validate(&infos, comm.group_name(), buf.space.is_empty()).map_err(|detail| {
        Error::RendezvousMismatch {
            alloc: buf.id,
            group: comm.group_name().clone(),
            detail,
        }
    })?;

    // Everything that can fail on one rank alone (mapping, the device
    // tables) happens before the outcome is published, so every rank learns
    // of any failure.
    let built = map_peers(&*backend, &buf, &infos, timeout).and_then(|(peers, buffer_ptrs)| {
        let pad_offset = buf.layout.pad_offset as u64;
        let signal_pad_ptrs: Vec<u64> = buffer_ptrs.iter().map(|p| p + pad_offset).collect();
        let buffer_ptrs_dev = backend.table(&buffer_ptrs)?;
        let signal_pad_ptrs_dev = backend.table(&signal_pad_ptrs)?;
        Ok((
            peers,
            buffer_ptrs,
            signal_pad_ptrs,
            buffer_ptrs_dev,
            signal_pad_ptrs_dev,
        ))
    });
    let outcome = match &built {
        Ok(_) => vec![0u8],
        Err(e) => {
            let mut v = vec![1u8];
            v.extend_from_slice(e.to_string().as_bytes());
            v
        }
    };
    store
        .set(&key(group, (buf.space, buf.id), "mapped", rank), &outcome)
        .map_err(store_err)?;
    // Wait for every outcome even after our own failure: until a peer has
    // published, it may still be retaining our allocation's handle, and our
    // caller must not free it under them.
    let waited = wait_all("mapped");
    drop(serving);
    let (peers, buffer_ptrs, signal_pad_ptrs, buffer_ptrs_dev, signal_pad_ptrs_dev) = built?;
    waited?;
    for r in 0..world {
        let v = store
            .try_get(&key(group, (buf.space, buf.id), "mapped", r))
            .map_err(store_err)?
            .unwrap_or_default();
        if v.first() != Some(&0) {
            return Err(Error::RendezvousPeerFailed {
                alloc: buf.id,
                failed_rank: r,
                group: comm.group_name().clone(),
                detail: String::from_utf8_lossy(v.get(1..).unwrap_or_default()).into_owned(),
            });
        }
    }
    Ok(SymmetricMemory {
        rank,
        world_size: world,
        alloc_id: buf.id,
        dtype: buf.dtype,
        buffer_size: buf.layout.data_bytes,
        buffer_ptrs_dev,
        signal_pad_ptrs_dev,
        buffer_offset: 0,
        own_table: Mutex::new(None),
        buffer_ptrs,
        signal_pad_ptrs,
        backend,
        owner: comm.owner(),
        label: comm.group_label().into(),
        name: comm.group_name().clone(),
        group: comm.group_key().clone(),
        placement: comm.placement().clone(),
        signal_kernels: std::sync::OnceLock::new(),
        first_use: None,
        _parent: None,
        _peers: peers,
        _local: buf.alloc.clone(),
    })
}

fn map_peers(
    backend: &dyn Backend,
    buf: &Allocation<'_>,
    infos: &[Info],
    timeout: Duration,
) -> Result<(Vec<Mapped>, Vec<u64>)> {
    let rank = buf.comm.rank();
    let mut peers = Vec::new();
    let mut ptrs = Vec::with_capacity(infos.len());
    for (r, info) in infos.iter().enumerate() {
        if r == rank {
            ptrs.push(buf.alloc.ptr());
        } else {
            let m = backend.import(r, &info.export, info.total_bytes as usize, timeout)?;
            ptrs.push(m.ptr);
            peers.push(m);
        }
    }
    Ok((peers, ptrs))
}

impl SymmetricMemory {
    /// `bytes` of `parent` from byte `offset` on, on every rank, as memory
    /// of its own (a pool tensor): `parent`'s pointer tables at an offset,
    /// its signal pads, and its mapping kept alive, with `keep` (the
    /// tensor's block). No collective and no device work; `first_use` runs
    /// before its first collective use.
    pub(crate) fn view(
        parent: &Arc<SymmetricMemory>,
        offset: usize,
        bytes: usize,
        dtype: DType,
        first_use: Option<Box<dyn CollectiveCheck>>,
        keep: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<SymmetricMemory> {
        if offset
            .checked_add(bytes)
            .is_none_or(|end| end > parent.buffer_size)
        {
            return Err(parent.invalid(format!(
                "a view of bytes {offset}..{offset}+{bytes} is out of bounds for an allocation \
                 of {} bytes",
                parent.buffer_size
            )));
        }
        let buffer_ptrs: Vec<u64> = parent
            .buffer_ptrs
            .iter()
            .map(|p| p + offset as u64)
            .collect();
        Ok(SymmetricMemory {
            rank: parent.rank,
            world_size: parent.world_size,
            alloc_id: parent.alloc_id,
            dtype,
            buffer_size: bytes,
            buffer_ptrs_dev: Table {
                ptr: parent.buffer_ptrs_dev.ptr,
                _keep: Box::new(parent.clone()),
            },
            signal_pad_ptrs_dev: Table {
                ptr: parent.signal_pad_ptrs_dev.ptr,
                _keep: Box::new(()),
            },
            buffer_offset: parent.buffer_offset + offset as u64,
            own_table: Mutex::new(None),
            buffer_ptrs,
            signal_pad_ptrs: parent.signal_pad_ptrs.clone(),
            backend: parent.backend.clone(),
            owner: parent.owner,
            label: parent.label.clone(),
            name: parent.name.clone(),
            group: parent.group.clone(),
            placement: parent.placement.clone(),
            signal_kernels: std::sync::OnceLock::new(),
            first_use,
            _parent: Some((parent.clone(), keep)),
            _peers: Vec::new(),
            _local: parent._local.clone(),
        })
    }

    /// This memory with the signal pads of `pad` instead of its own (an
    /// allocation rendezvoused with a second group signals on pads of that
    /// group's own, so the two groups' channels never share a slot), and
    /// `pad` kept alive with `keep` (its buffer).
    pub(crate) fn with_pads_of(
        mut self,
        pad: Arc<SymmetricMemory>,
        keep: Box<dyn std::any::Any + Send + Sync>,
    ) -> SymmetricMemory {
        self.signal_pad_ptrs = pad.signal_pad_ptrs.clone();
        self.signal_pad_ptrs_dev = Table {
            ptr: pad.signal_pad_ptrs_dev.ptr,
            _keep: Box::new(()),
        };
        self._parent = Some((pad, keep));
        self
    }

    /// Runs a pool tensor's check of every rank's placement, before its
    /// first collective use (and repeats its outcome after); nothing for
    /// other memory.
    pub(crate) fn before_collective_use(&self) -> Result<()> {
        self.first_use.as_ref().map_or(Ok(()), |f| f.run())
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The allocation's collective sequence number.
    pub fn alloc_id(&self) -> u64 {
        self.alloc_id
    }

    /// The element type the allocation was made with.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Bytes of data in each rank's buffer.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }

    /// Bytes in each rank's signal pad (see [`crate::layout::pad_bytes`]).
    pub fn signal_pad_size(&self) -> usize {
        pad_bytes(self.buffer_ptrs.len())
    }

    /// Every rank's buffer address, as mapped for this rank.
    pub fn buffer_ptrs(&self) -> &[u64] {
        &self.buffer_ptrs
    }

    /// Every rank's signal-pad address, as mapped for this rank.
    pub fn signal_pad_ptrs(&self) -> &[u64] {
        &self.signal_pad_ptrs
    }

    /// Device address of a `u64[world_size]` array of
    /// [`buffer_ptrs`](Self::buffer_ptrs), for raw kernels. A pool tensor's
    /// is made (once) on first call, and its placement is checked against
    /// every rank's first (the call is its first collective use).
    pub fn buffer_ptrs_dev(&self) -> Result<u64> {
        self.before_collective_use()?;
        if self.buffer_offset == 0 {
            return Ok(self.buffer_ptrs_dev.ptr);
        }
        let mut own = self.own_table.lock().unwrap_or_else(|p| p.into_inner());
        if own.is_none() {
            *own = Some(self.backend.table(&self.buffer_ptrs)?);
        }
        Ok(own.as_ref().map_or(0, |t| t.ptr))
    }

    /// The device table kernels' `SymmBuf` carries: every rank's address
    /// of the allocation this memory lies in (its pool segment, for a
    /// tensor), to which [`buffer_offset`](Self::buffer_offset) is added.
    pub(crate) fn shared_ptrs_dev(&self) -> u64 {
        self.buffer_ptrs_dev.ptr
    }

    /// What a kernel's `SymmBuf` argument carries for this memory, with
    /// elements of `elem_bytes` bytes: the one place the ABI value is
    /// filled, for a launch's slots and the emulator's handle alike.
    pub(crate) fn abi_arg(&self, elem_bytes: usize) -> symm_abi::SymmBufArg {
        symm_abi::SymmBufArg {
            ptrs: self.shared_ptrs_dev(),
            pads: self.signal_pad_ptrs_dev(),
            rank: self.rank() as u32,
            world: self.world_size() as u32,
            len: (self.buffer_size / elem_bytes) as u64,
            local: self.buffer_ptrs[self.rank()],
            lpad: self.signal_pad_ptrs[self.rank()],
            off: self.buffer_offset,
        }
    }

    /// This memory's offset in its pool segment (0 for a whole allocation):
    /// what kernels' `SymmBuf` adds to its segment's addresses.
    pub fn buffer_offset(&self) -> u64 {
        self.buffer_offset
    }

    /// Device address of a `u64[world_size]` array of [`signal_pad_ptrs`](Self::signal_pad_ptrs).
    pub fn signal_pad_ptrs_dev(&self) -> u64 {
        self.signal_pad_ptrs_dev.ptr
    }

    /// A typed view of rank `peer`'s buffer. `T` need not be the allocation's
    /// element type: the bytes are reinterpreted, as torch's `get_buffer` does.
    pub fn peer_buffer<T: Element>(&self, peer: usize) -> Result<PeerBuffer<'_, T>> {
        self.before_collective_use()?;
        self.check_rank("peer", peer)?;
        Ok(PeerBuffer {
            smem: self,
            peer,
            len: self.buffer_size / std::mem::size_of::<T>(),
            _t: std::marker::PhantomData,
        })
    }

    /// Copies `src` into elements `offset..offset + src.len()` of rank
    /// `peer`'s buffer (counted in `T`s, as [`peer_buffer`](Self::peer_buffer)
    /// views it), on the stream of the handle that rendezvoused this memory,
    /// where the signal operations run: enqueued in stream order, not waited
    /// for, and capturable into a CUDA graph. On a GPU the copy engines move
    /// the data (over NVLink or PCIe from this GPU's mapping of the peer's
    /// memory), leaving the SMs to kernels; on the emulator it is copied at
    /// once. `src` is symm or cudarc memory of this rank (see
    /// [`DeviceSlice`]). The peer learns of the data from a signal sent
    /// after it, on the same stream ([`put_signal`](Self::put_signal)).
    pub fn copy_to_peer<T: Element>(
        &self,
        peer: usize,
        offset: usize,
        src: &(impl DeviceSlice<T> + ?Sized),
    ) -> Result<()> {
        self.before_collective_use()?;
        let b = self.binder();
        let s = b.bind("src", src)?;
        let at = self.peer_range::<T>(peer, offset, s.len())?;
        self.copy_checked(at, s.device_ptr(), s.len() * std::mem::size_of::<T>())
    }

    /// Copies elements `offset..offset + dst.len()` of rank `peer`'s buffer
    /// into `dst`, as [`copy_to_peer`](Self::copy_to_peer) does the other
    /// way. Ordered after this rank's earlier work on the stream only: wait
    /// for the peer's signal (on the same stream) before copying what it
    /// wrote.
    pub fn copy_from_peer<T: Element>(
        &self,
        peer: usize,
        offset: usize,
        dst: &mut (impl DeviceSlice<T> + ?Sized),
    ) -> Result<()> {
        self.before_collective_use()?;
        let b = self.binder();
        let d = b.bind_mut("dst", dst)?;
        let at = self.peer_range::<T>(peer, offset, d.len())?;
        self.copy_checked(d.device_ptr(), at, d.len() * std::mem::size_of::<T>())
    }

    /// [`copy_from_peer`](Self::copy_from_peer) on `comm`'s stream
    /// instead of this memory's: `comm` is a handle of the rank that
    /// rendezvoused it (on any of its streams), such as the one a
    /// collective's kernels run on, so that the copy sits in their order.
    pub fn copy_from_peer_on<T: Element>(
        &self,
        comm: &crate::comm::Comm,
        peer: usize,
        offset: usize,
        dst: &mut (impl DeviceSlice<T> + ?Sized),
    ) -> Result<()> {
        self.before_collective_use()?;
        if comm.owner_id() != self.owner.id {
            return Err(self.invalid(
                "copy_from_peer_on: the handle is another rank's or group's than the one that \
                 rendezvoused this memory"
                    .to_string(),
            ));
        }
        let b = Binder::of(comm);
        let d = b.bind_mut("dst", dst)?;
        let at = self.peer_range::<T>(peer, offset, d.len())?;
        // SAFETY: `d` is bound on `comm`'s backend, which is this rank's
        // (checked above) and enqueues on `comm`'s stream.
        unsafe {
            self.copy_checked_on(
                b.backend,
                d.device_ptr(),
                at,
                d.len() * std::mem::size_of::<T>(),
            )
        }
    }

    /// Binds memory for this rank, on this memory's stream.
    fn binder(&self) -> Binder<'_> {
        Binder {
            owner: self.owner,
            rank: self.rank,
            group: &self.label,
            name: &self.name,
            backend: &*self.backend,
        }
    }

    /// The address of elements `offset..offset + len` of `peer`'s buffer, as
    /// mapped here, or an error when they are out of its bounds.
    fn peer_range<T: Element>(&self, peer: usize, offset: usize, len: usize) -> Result<u64> {
        self.check_rank("peer", peer)?;
        let cap = self.buffer_size / std::mem::size_of::<T>();
        match offset.checked_add(len) {
            Some(end) if end <= cap => {
                Ok(self.buffer_ptrs[peer] + (offset * std::mem::size_of::<T>()) as u64)
            }
            _ => Err(self.invalid(format!(
                "elements {offset}..{} are out of bounds for rank {peer}'s buffer of {cap} {}",
                offset.saturating_add(len),
                T::DTYPE
            ))),
        }
    }

    /// Copies `bytes` from `src` to `dst`, one of them in bounds of a peer's
    /// buffer mapped here and the other bound for this rank, unless they
    /// overlap.
    fn copy_checked(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        // SAFETY: this memory's own backend is its rank's.
        unsafe { self.copy_checked_on(&*self.backend, dst, src, bytes) }
    }

    /// [`copy_checked`](Self::copy_checked) enqueued on `backend`.
    ///
    /// # Safety
    /// `backend` is this memory's rank's (on any of its streams).
    unsafe fn copy_checked_on(
        &self,
        backend: &dyn Backend,
        dst: u64,
        src: u64,
        bytes: usize,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        if dst < src + bytes as u64 && src < dst + bytes as u64 {
            return Err(self.invalid(format!(
                "copy of {bytes} bytes from {src:#x} to {dst:#x}: source and destination overlap"
            )));
        }
        // SAFETY: one range lies in a peer's buffer, mapped here for as
        // long as this memory lives (and unmapped only after the rank's
        // streams are idle); the other is memory bound for this rank, kept
        // alive likewise or by cudarc's tracking; they do not overlap; the
        // caller's promise: `backend` is this rank's, which maps both.
        unsafe { backend.copy(dst, src, bytes) }
    }

    /// Reads rank `peer`'s whole signal pad (for diagnostics and tests).
    pub fn read_signal_pad(&self, peer: usize) -> Result<Vec<u32>> {
        self.check_rank("peer", peer)?;
        read_elems(
            &*self.backend,
            self.signal_pad_ptrs[peer],
            pad_slots(self.buffer_ptrs.len()),
        )
    }

    /// Zeroes this rank's own signal pad. Correct only when no peer is
    /// signalling it; use it to recover a channel after a timeout left a
    /// stale signal. Call it on every rank (and only then resume): it also
    /// resets the built-in collectives' per-block call counters, which must
    /// agree across ranks.
    pub fn reset_signal_pad(&self) -> Result<()> {
        self.backend
            .fill(self.signal_pad_ptrs[self.rank], 0, self.signal_pad_size())
    }

    /// The backend this memory's operations are enqueued on.
    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Identifies the rank state of the `Comm` that made the allocation.
    pub(crate) fn owner(&self) -> usize {
        self.owner.id
    }

    /// The label of the group that allocated it ([`Comm::group_label`]).
    pub fn group_label(&self) -> &str {
        &self.label
    }

    /// The group, as the emulator knows it.
    pub(crate) fn group_key(&self) -> &crate::emulator::GroupKey {
        &self.group
    }

    /// Which ranks of the group share a device.
    pub(crate) fn placement(&self) -> &crate::placement::Placement {
        &self.placement
    }

    /// Runs `load` the first time it is called on this memory (and again
    /// after it failed).
    pub(crate) fn once_signal_kernels(&self, load: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.signal_kernels.get().is_none() {
            load()?;
            let _ = self.signal_kernels.set(());
        }
        Ok(())
    }

    pub(crate) fn check_rank(&self, what: &str, r: usize) -> Result<()> {
        if r >= self.world_size {
            return Err(self.invalid(format!(
                "{what} rank {r} is out of range for world size {}",
                self.world_size
            )));
        }
        Ok(())
    }

    pub(crate) fn invalid(&self, message: String) -> Error {
        Error::InvalidArgument {
            rank: self.rank,
            group: self.name.clone(),
            message,
        }
    }

    /// The group as errors qualify its ranks ([`Comm::group_name`]).
    pub(crate) fn group_name(&self) -> &crate::GroupName {
        &self.name
    }
}

/// A typed view of one rank's buffer, through this rank's mapping of it.
pub struct PeerBuffer<'a, T: Element> {
    smem: &'a SymmetricMemory,
    peer: usize,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: Element> PeerBuffer<'_, T> {
    /// The rank whose buffer this is.
    pub fn peer(&self) -> usize {
        self.peer
    }

    /// Number of `T`s that fit in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no `T`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Address of element 0 as mapped for this rank.
    pub fn device_ptr(&self) -> u64 {
        self.smem.buffer_ptrs[self.peer]
    }

    /// Copies `src` into the peer's elements `offset..offset + src.len()`.
    pub fn write(&self, offset: usize, src: &[T]) -> Result<()> {
        let ptr = self.checked(offset, src.len())?;
        self.smem.backend.write(ptr, as_bytes(src))
    }

    /// Copies the peer's elements `offset..offset + len` to the host.
    pub fn read(&self, offset: usize, len: usize) -> Result<Vec<T>> {
        let ptr = self.checked(offset, len)?;
        read_elems(&*self.smem.backend, ptr, len)
    }

    fn checked(&self, offset: usize, len: usize) -> Result<u64> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {
                Ok(self.device_ptr() + (offset * std::mem::size_of::<T>()) as u64)
            }
            _ => Err(self.smem.invalid(format!(
                "elements {offset}..{} are out of bounds for rank {}'s buffer of {}",
                offset.saturating_add(len),
                self.peer,
                self.len
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(world: u32, dtype: DType, len: u64) -> Info {
        Info {
            world,
            backend: BackendKind::Cuda.code(),
            dtype: dtype.code(),
            len,
            data_bytes: len * dtype.size() as u64,
            total_bytes: 2 << 20,
            label: "cuda:0".into(),
            export: vec![1, 2, 3],
        }
    }

    #[test]
    fn info_round_trips_and_rejects_garbage() {
        let i = info(4, DType::BF16, 12345);
        assert_eq!(Info::decode(&i.encode()), Some(i.clone()));
        let mut bad = i.encode();
        bad.push(0);
        assert_eq!(Info::decode(&bad), None);
        assert_eq!(Info::decode(&i.encode()[..10]), None);
        assert_eq!(Info::decode(&[]), None);
        assert_eq!(Info::decode(&[9, 9, 9]), None);
    }

    #[test]
    fn validation_names_every_rank_and_is_identical() {
        let none = crate::GroupName::NONE;
        let ok = vec![info(3, DType::F32, 100); 3];
        assert_eq!(validate(&ok, &none, true), Ok(()));
        // Mapped sizes that differ (home groups of more and fewer than 8
        // ranks, whose pads differ): a mismatch of the group's own
        // allocation, not of another group's rendezvoused with it.
        let mut mapped = ok.clone();
        mapped[2].total_bytes = 4 << 20;
        assert!(validate(&mapped, &none, true)
            .unwrap_err()
            .contains("mapped sizes"));
        assert_eq!(validate(&mapped, &none, false), Ok(()));
        let mut sizes = ok.clone();
        sizes[1] = info(3, DType::F32, 200);
        let m = validate(&sizes, &none, true).unwrap_err();
        assert!(m.contains("buffer sizes"), "{m}");
        assert!(
            m.contains("rank 0: 100 × f32 = 400 bytes")
                && m.contains("rank 1: 200 × f32 = 800 bytes"),
            "{m}"
        );
        let mut dtypes = ok.clone();
        dtypes[2] = info(3, DType::BF16, 100);
        assert!(validate(&dtypes, &none, true).unwrap_err().contains(
            "element types differ across ranks (rank 0: f32, rank 1: f32, rank 2: bf16)"
        ));
        // A subgroup's ranks are its own, said once.
        let sub = crate::GroupName::of("symm.split0[1,3,5]");
        assert!(validate(&dtypes, &sub, true).unwrap_err().contains(
            "element types differ across ranks of group symm.split0[1,3,5] (rank 0: f32, rank \
             1: f32, rank 2: bf16)"
        ));
        let mut worlds = ok.clone();
        worlds[0].world = 2;
        assert!(validate(&worlds, &none, true)
            .unwrap_err()
            .starts_with("world sizes"));
        let mut backends = ok;
        backends[1].backend = BackendKind::Emulator.code();
        assert!(validate(&backends, &none, true)
            .unwrap_err()
            .contains("rank 1: emulator"));
    }

    #[test]
    fn missing_ranks_parse_from_keys() {
        assert_eq!(
            missing_ranks(&[key("g", ("", 3), "info", 1), key("g", ("", 3), "info", 7)]),
            vec![1, 7]
        );
    }
}
