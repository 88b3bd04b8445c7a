//! NCCL through cudarc: a group's communicator, made lazily from the
//! group's own store, and the registration of symm pool segments with it.
//!
//! libnccl is loaded at run time and probed before any call (cudarc panics
//! on a missing library or symbol), so a machine without it builds, runs
//! the emulator, and runs every call on symm's kernels.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use symm::cudarc::driver::CudaStream;
use symm::cudarc::nccl::{result as nccl, sys};
use symm::{Comm, DType, Error, Result, SegmentEvent, SymmPool};

use crate::collectives::ReduceOp;

/// Whether libnccl loads and exports `name`.
pub(crate) fn has(name: &str) -> bool {
    // SAFETY: only opens the library and looks a symbol up; nothing is
    // called through it.
    unsafe {
        sys::is_culib_present()
            && sys::culib()
                .get::<unsafe extern "C" fn()>(name.as_bytes())
                .is_ok()
    }
}

/// NCCL's version code (2.28.3 is 22803), or why there is none.
pub(crate) fn version() -> std::result::Result<i32, String> {
    // SAFETY: probing only.
    if !unsafe { sys::is_culib_present() } {
        return Err("libnccl is not loadable on this rank".into());
    }
    for f in [
        "ncclGetVersion",
        "ncclGetUniqueId",
        "ncclCommInitRank",
        "ncclAllReduce",
    ] {
        if !has(f) {
            return Err(format!("the loaded libnccl has no {f}"));
        }
    }
    nccl::get_nccl_version().map_err(|e| format!("ncclGetVersion: {e:?}"))
}

/// NCCL's type for `d`, or `None` where this NCCL has none.
pub(crate) fn dtype(d: DType, version: i32) -> Option<sys::ncclDataType_t> {
    use sys::ncclDataType_t as N;
    Some(match d {
        DType::F32 => N::ncclFloat32,
        DType::F64 => N::ncclFloat64,
        DType::F16 => N::ncclFloat16,
        DType::BF16 => N::ncclBfloat16,
        DType::U8 => N::ncclUint8,
        DType::U32 => N::ncclUint32,
        DType::I32 => N::ncclInt32,
        DType::U64 => N::ncclUint64,
        DType::I64 => N::ncclInt64,
        DType::F8E4M3 if version >= 22400 => N::ncclFloat8e4m3,
        DType::F8E5M2 if version >= 22400 => N::ncclFloat8e5m2,
        _ => return None,
    })
}

fn op(o: ReduceOp) -> sys::ncclRedOp_t {
    use sys::ncclRedOp_t as R;
    match o {
        ReduceOp::Sum => R::ncclSum,
        ReduceOp::Avg => R::ncclAvg,
        ReduceOp::Min => R::ncclMin,
        ReduceOp::Max => R::ncclMax,
        ReduceOp::Prod => R::ncclProd,
    }
}

/// How a segment is registered with the communicator.
enum Registered {
    /// A symmetric window (`ncclCommWindowRegister`, NCCL 2.27+).
    Window(sys::ncclWindow_t),
    /// A buffer registration (`ncclCommRegister`).
    Buffer(*mut std::ffi::c_void),
    /// Registration failed; NCCL runs on it unregistered.
    Failed,
}

/// Segments heard of and their registrations. Keyed by (pool, segment).
#[derive(Default)]
struct Segments {
    /// Heard of, not yet registered: registration is collective, so it
    /// waits for the next NCCL call (made at the same point on every rank),
    /// never runs in a hook, and never during CUDA-graph capture.
    pending: Vec<((u64, usize), u64, usize)>,
    /// In registration order (pool, then segment), so that every rank
    /// deregisters at exit in the same order (window deregistration is
    /// collective).
    done: BTreeMap<(u64, usize), Registered>,
}

/// One rank's NCCL communicator over its group.
pub(crate) struct Nccl {
    comm: sys::ncclComm_t,
    /// Held across every call into NCCL with `comm`: a communicator takes
    /// one call at a time, and calls come from the `Collectives`' callers
    /// and from pool hooks on whatever thread trims.
    calls: Mutex<()>,
    /// The communication stream, drained before a segment is deregistered
    /// (NCCL work on it may still read the segment).
    stream: Arc<CudaStream>,
    rank: usize,
    version: i32,
    windows: bool,
    segments: Mutex<Segments>,
    /// Pools whose hooks report to this communicator.
    pools: Mutex<Vec<(SymmPool, symm::HookId)>>,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a
// time; every call through `comm` holds `calls`.
unsafe impl Send for Nccl {}
// SAFETY: as for `Send`.
unsafe impl Sync for Nccl {}

fn fail(rank: usize, message: String) -> Error {
    Error::InvalidArgument { rank, message }
}

impl Nccl {
    /// A communicator over `comm`'s group: rank 0 makes the unique id and
    /// publishes it under the group's store prefix (the `seq`-th NCCL
    /// communicator of this group), every rank reads it and joins. Every
    /// rank calls this at the same point (the first call the rule sends to
    /// NCCL), so none waits for a peer that never comes; a missing peer
    /// is a store timeout naming the key.
    pub(crate) fn new(comm: &Comm, stream: &Arc<CudaStream>, seq: u64) -> Result<Arc<Nccl>> {
        let rank = comm.rank();
        let version = version().map_err(|e| fail(rank, e))?;
        let key = comm.store_key(&format!("functional/nccl/{seq}/id"));
        let store_err = |source| comm.store_error(source);
        if rank == 0 {
            let id =
                nccl::get_uniqueid().map_err(|e| fail(rank, format!("ncclGetUniqueId: {e:?}")))?;
            let bytes: Vec<u8> = id.internal.iter().map(|&b| b as u8).collect();
            comm.store().set(&key, &bytes).map_err(store_err)?;
        }
        let bytes = comm
            .store()
            .get(&key, comm.options().timeout)
            .map_err(store_err)?;
        let mut id = sys::ncclUniqueId { internal: [0; 128] };
        if bytes.len() != id.internal.len() {
            return Err(fail(
                rank,
                format!("NCCL unique id of {} bytes in the store", bytes.len()),
            ));
        }
        for (d, s) in id.internal.iter_mut().zip(bytes) {
            *d = s as _;
        }
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| fail(rank, format!("binding the CUDA context: {e:?}")))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; every rank calls this with
        // the same id, concurrently, from its own thread, with its device's
        // context current.
        unsafe { nccl::comm_init_rank(&mut raw, comm.world_size() as i32, id, rank as i32) }
            .map_err(|e| fail(rank, format!("ncclCommInitRank: {e:?}")))?;
        tracing::debug!(
            rank,
            version,
            "NCCL communicator created from the group's store"
        );
        Ok(Arc::new(Nccl {
            comm: raw,
            calls: Mutex::new(()),
            stream: stream.clone(),
            rank,
            version,
            windows: has("ncclCommWindowRegister") && has("ncclCommWindowDeregister"),
            segments: Mutex::default(),
            pools: Mutex::default(),
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// NCCL's version code.
    pub(crate) fn version(&self) -> i32 {
        self.version
    }

    /// Registers `pool`'s segments with this communicator: those it holds
    /// now (the hook's snapshot) and those it makes later, at the next
    /// NCCL call after each; and deregisters each before it is freed.
    pub(crate) fn watch(self: &Arc<Self>, pool: &SymmPool) {
        // The list is held across the hook's registration, whose snapshot
        // reports to `hear` (which takes only the segments' lock).
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if pools.iter().any(|(p, _)| p.id() == pool.id()) {
            return;
        }
        let me: Weak<Nccl> = Arc::downgrade(self);
        let id = pool.add_hook(move |event| {
            if let Some(n) = me.upgrade() {
                n.hear(event);
            }
        });
        pools.push((pool.clone(), id));
    }

    fn hear(&self, event: &SegmentEvent<'_>) {
        let mut s = self.segments.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            SegmentEvent::Allocated(info) => {
                let base = info.memory.buffer_ptrs()[info.memory.rank()];
                s.pending.push(((info.pool, info.index), base, info.bytes));
            }
            SegmentEvent::Freeing(info) => {
                let key = (info.pool, info.index);
                s.pending.retain(|(k, ..)| *k != key);
                if let Some(r) = s.done.remove(&key) {
                    // Trims run at the same points on every rank (the pool's
                    // contract), so this collective deregistration meets its
                    // peers'; NCCL work still queued may read the segment.
                    if let Err(e) = self.stream.synchronize() {
                        tracing::warn!(rank = self.rank, "draining the NCCL stream: {e:?}");
                    }
                    self.deregister(r);
                }
            }
        }
    }

    fn deregister(&self, r: Registered) {
        let _one = self.lock();
        // SAFETY: each handle came from a registration on this communicator
        // and is deregistered once (it was removed from `done`).
        let res = unsafe {
            match r {
                Registered::Window(w) => sys::ncclCommWindowDeregister(self.comm, w).result(),
                Registered::Buffer(h) => sys::ncclCommDeregister(self.comm, h).result(),
                Registered::Failed => return,
            }
        };
        if let Err(e) = res {
            tracing::warn!(rank = self.rank, "NCCL deregistration failed: {e:?}");
        }
    }

    /// Registers the segments heard of since the last call, unless
    /// `capturing` (registration is not stream work; it waits for the next
    /// call outside capture). Returns how many are still pending.
    pub(crate) fn flush(&self, capturing: bool) -> usize {
        let mut s = self.segments.lock().unwrap_or_else(|p| p.into_inner());
        if capturing {
            if !s.pending.is_empty() {
                tracing::debug!(
                    rank = self.rank,
                    pending = s.pending.len(),
                    "NCCL registration deferred: the stream is capturing a CUDA graph"
                );
            }
            return s.pending.len();
        }
        for (key, base, bytes) in std::mem::take(&mut s.pending) {
            let r = self.register(base, bytes);
            s.done.insert(key, r);
        }
        0
    }

    fn register(&self, base: u64, bytes: usize) -> Registered {
        let _one = self.lock();
        let ptr = base as *mut std::ffi::c_void;
        if self.windows {
            let mut win = std::ptr::null_mut();
            // SAFETY: `ptr..ptr + bytes` is a live symm segment (a cuMem
            // allocation of the same size on every rank, as windows need);
            // every rank registers the same segments in the same order.
            match unsafe { sys::ncclCommWindowRegister(self.comm, ptr, bytes, &mut win, 1) }
                .result()
            {
                Ok(_) => {
                    tracing::debug!(
                        rank = self.rank,
                        bytes,
                        "pool segment registered as an NCCL window"
                    );
                    return Registered::Window(win);
                }
                Err(e) => tracing::debug!(
                    rank = self.rank,
                    "ncclCommWindowRegister failed ({e:?}); trying buffer registration"
                ),
            }
        }
        if has("ncclCommRegister") {
            let mut handle = std::ptr::null_mut();
            // SAFETY: as above; the handle is kept until deregistration.
            match unsafe { sys::ncclCommRegister(self.comm, ptr, bytes, &mut handle) }.result() {
                Ok(_) => {
                    tracing::debug!(rank = self.rank, bytes, "pool segment registered with NCCL");
                    return Registered::Buffer(handle);
                }
                Err(e) => tracing::warn!(rank = self.rank, "ncclCommRegister failed: {e:?}"),
            }
        }
        Registered::Failed
    }

    /// Counts of (windows, buffer registrations, failed, pending), for
    /// tests and explanations.
    pub(crate) fn registrations(&self) -> (usize, usize, usize, usize) {
        let s = self.segments.lock().unwrap_or_else(|p| p.into_inner());
        let mut c = (0, 0, 0, s.pending.len());
        for r in s.done.values() {
            match r {
                Registered::Window(_) => c.0 += 1,
                Registered::Buffer(_) => c.1 += 1,
                Registered::Failed => c.2 += 1,
            }
        }
        c
    }

    fn check<X>(&self, what: &str, r: std::result::Result<X, nccl::NcclError>) -> Result<()> {
        r.map(|_| ())
            .map_err(|e| fail(self.rank, format!("{what}: {e:?}")))
    }

    /// `ncclReduceScatter`: `recv` elements into `dst` of `world × recv` in `src`.
    ///
    /// # Safety
    ///
    /// `src` and `dst` hold those elements of `ty` on this rank's device,
    /// alive until the work on `stream` is done; every rank makes the same
    /// call.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn reduce_scatter(
        &self,
        src: u64,
        dst: u64,
        recv: usize,
        ty: sys::ncclDataType_t,
        o: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        let _one = self.lock();
        // SAFETY: the caller's contract.
        let r = unsafe {
            nccl::reduce_scatter(
                src as _,
                dst as _,
                recv,
                ty,
                op(o),
                self.comm,
                stream.cu_stream() as _,
            )
        };
        self.check("ncclReduceScatter", r)
    }

    /// `ncclBroadcast` of `bytes` from `root`.
    ///
    /// # Safety
    ///
    /// As [`Nccl::reduce_scatter`], for `bytes` in both (`src` is read on
    /// the root only).
    pub(crate) unsafe fn broadcast(
        &self,
        src: u64,
        dst: u64,
        bytes: usize,
        root: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let _one = self.lock();
        // SAFETY: the caller's contract.
        let r = unsafe {
            nccl::broadcast(
                src as _,
                dst as _,
                bytes,
                sys::ncclDataType_t::ncclUint8,
                root as i32,
                self.comm,
                stream.cu_stream() as _,
            )
        };
        self.check("ncclBroadcast", r)
    }

    /// Point-to-point exchange in one NCCL group: `sends[r]` = (address,
    /// bytes) to rank r, `recvs[r]` from rank r (zero bytes: none).
    ///
    /// # Safety
    ///
    /// Every span is this rank's device memory alive until the work on
    /// `stream` is done; every rank's sends match its peers' receives.
    pub(crate) unsafe fn exchange(
        &self,
        sends: &[(u64, usize)],
        recvs: &[(u64, usize)],
        stream: &CudaStream,
    ) -> Result<()> {
        let ty = sys::ncclDataType_t::ncclUint8;
        let ops: Vec<(usize, bool, u64, usize)> = sends
            .iter()
            .zip(recvs)
            .enumerate()
            .flat_map(|(peer, (&(sp, sb), &(rp, rb)))| {
                [(peer, true, sp, sb), (peer, false, rp, rb)]
            })
            .filter(|op| op.3 > 0)
            .collect();
        self.group(stream, &ops, |(peer, send, at, bytes), s| {
            // SAFETY: the caller's contract.
            unsafe {
                if send {
                    (
                        "ncclSend",
                        nccl::send(at as _, bytes, ty, peer as i32, self.comm, s),
                    )
                } else {
                    (
                        "ncclRecv",
                        nccl::recv(at as _, bytes, ty, peer as i32, self.comm, s),
                    )
                }
            }
        })
    }

    /// All-gathers (`(src, dst, bytes per rank)`) in one NCCL group.
    ///
    /// # Safety
    ///
    /// As [`Nccl::reduce_scatter`], for each `src` of `bytes` and `dst` of
    /// `world × bytes`.
    pub(crate) unsafe fn all_gathers(
        &self,
        ops: &[(u64, u64, usize)],
        stream: &CudaStream,
    ) -> Result<()> {
        let ty = sys::ncclDataType_t::ncclUint8;
        self.group(stream, ops, |(src, dst, bytes), s| {
            // SAFETY: the caller's contract.
            ("ncclAllGather", unsafe {
                nccl::all_gather(src as _, dst as _, bytes, ty, self.comm, s)
            })
        })
    }

    /// All-reduces (`(src, dst, count)`) in one NCCL group.
    ///
    /// # Safety
    ///
    /// As [`Nccl::reduce_scatter`], for each `src` and `dst` of `count`.
    pub(crate) unsafe fn all_reduces(
        &self,
        ops: &[(u64, u64, usize)],
        ty: sys::ncclDataType_t,
        o: ReduceOp,
        stream: &CudaStream,
    ) -> Result<()> {
        self.group(stream, ops, |(src, dst, count), s| {
            // SAFETY: the caller's contract.
            ("ncclAllReduce", unsafe {
                nccl::all_reduce(src as _, dst as _, count, ty, op(o), self.comm, s)
            })
        })
    }

    /// `call` for each of `ops` in one NCCL group on `stream`, under the
    /// communicator's lock; the first failure stops the rest, and the group
    /// is closed whatever happened.
    fn group<X: Copy>(
        &self,
        stream: &CudaStream,
        ops: &[X],
        call: impl Fn(
            X,
            sys::cudaStream_t,
        ) -> (
            &'static str,
            std::result::Result<nccl::NcclStatus, nccl::NcclError>,
        ),
    ) -> Result<()> {
        let s = stream.cu_stream() as sys::cudaStream_t;
        let _one = self.lock();
        self.check("ncclGroupStart", nccl::group_start())?;
        let mut r = Ok(());
        for &x in ops {
            let (what, res) = call(x, s);
            r = self.check(what, res);
            if r.is_err() {
                break;
            }
        }
        let end = self.check("ncclGroupEnd", nccl::group_end());
        r.and(end)
    }
}

impl Drop for Nccl {
    fn drop(&mut self) {
        for (pool, id) in self
            .pools
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            pool.remove_hook(id);
        }
        let done: Vec<Registered> = self
            .segments
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .done
            .split_off(&(0, 0))
            .into_values()
            .collect();
        for r in done {
            self.deregister(r);
        }
        let _one = self.lock();
        // SAFETY: the communicator is ours and no call uses it any more;
        // the `Collectives` waited for its communication stream first.
        if let Err(e) = unsafe { nccl::comm_destroy(self.comm) } {
            tracing::warn!(rank = self.rank, "ncclCommDestroy failed: {e:?}");
        }
    }
}
