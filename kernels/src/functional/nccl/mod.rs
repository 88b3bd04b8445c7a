//! NCCL through cudarc: a group's communicator, made lazily from the
//! group's own store, and the registration of symm pool segments with it.
//!
//! libnccl is loaded at run time and probed before any call (cudarc panics
//! on a missing library or symbol), so a machine without it builds, runs
//! the emulator, and runs every call on symm's kernels.
//!
//! A failure must reach this route as fast as symm's own kernels: NCCL's
//! kernels wait for a peer forever. So the communicator is non-blocking
//! (NCCL 2.14+: calls return at once and report progress through
//! `ncclCommGetAsyncError`), and a watchdog thread aborts it
//! (`ncclCommAbort`, which ends its kernels) when a rank of the group fails
//! or exits, when NCCL reports an asynchronous error, or when a call has
//! not completed within the group's timeout. Every later call, and every
//! wait of the `Collectives`, then fails with the reason.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use symm::cudarc::driver::{CudaEvent, CudaStream};
use symm::cudarc::nccl::{result as nccl, sys};
use symm::{Comm, DType, Error, GroupName, GroupWatch, Result, SegmentEvent, SymmPool};

use crate::collectives::ReduceOp;

mod ops;
mod segments;

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
    /// The address ranges (base, bytes) of the segments in `pending` and
    /// `done`, by key: what [`Nccl::registered`] looks in.
    ranges: BTreeMap<(u64, usize), (u64, usize)>,
}

/// How often the watchdog looks at the group, at NCCL's asynchronous
/// error and at the oldest call in flight (a failure reaches this route
/// within about this, plus a store read).
const WATCH_EVERY: Duration = Duration::from_millis(10);

/// Why a communicator was aborted.
#[derive(Clone, Debug)]
enum Abort {
    /// A rank of the group failed or exited.
    Peer {
        peer: usize,
        cause: String,
        cause_kind: Option<symm::ErrorKind>,
    },
    /// NCCL reported an error, or a call outlived the group's timeout.
    Nccl(String),
}

impl Abort {
    fn error(&self, (rank, group): (usize, &GroupName)) -> Error {
        match self {
            Abort::Peer {
                peer,
                cause,
                cause_kind,
            } => Error::PeerFailed {
                rank,
                group: group.clone(),
                peer: *peer,
                cause: cause.clone(),
                cause_kind: *cause_kind,
            },
            Abort::Nccl(why) => Error::Nccl {
                rank,
                group: group.clone(),
                message: format!("the group's communicator was aborted: {why}"),
            },
        }
    }

    /// The abort for a group watch's error (a departed peer).
    fn of(e: Error) -> Abort {
        match e {
            Error::PeerFailed {
                peer,
                cause,
                cause_kind,
                ..
            } => Abort::Peer {
                peer,
                cause,
                cause_kind,
            },
            e => Abort::Nccl(e.to_string()),
        }
    }
}

/// Calls enqueued on the communication stream and not yet seen complete,
/// oldest first, each with when it was enqueued; and spent events to reuse.
#[derive(Default)]
struct InFlight {
    calls: VecDeque<(CudaEvent, Instant)>,
    spare: Vec<CudaEvent>,
}

/// One rank's NCCL communicator over its group.
pub(crate) struct Nccl {
    comm: sys::ncclComm_t,
    /// Held across every call into NCCL with `comm`: a communicator takes
    /// one call at a time, and calls come from the `Collectives`' callers,
    /// from pool hooks on whatever thread trims, and from the watchdog's
    /// abort.
    calls: Mutex<()>,
    /// Why the communicator was aborted; set once, under `calls`, after
    /// which `comm` is gone and no call may use it.
    aborted: OnceLock<Abort>,
    /// An abort the watchdog asked for while a caller held `calls`: the
    /// caller carries it out at its next poll.
    asked: Mutex<Option<Abort>>,
    in_flight: Mutex<InFlight>,
    /// Whether calls return before NCCL has finished them (a non-blocking
    /// communicator, NCCL 2.14+).
    nonblocking: bool,
    group: GroupWatch,
    /// The group's timeout: the longest a call may take, from when it can
    /// start to done.
    timeout: Duration,
    /// Tells the watchdog to stop ([`Nccl::stop_watchdog`]).
    stop: AtomicBool,
    watchdog: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The communication stream, drained before a segment is deregistered
    /// (NCCL work on it may still read the segment).
    stream: Arc<CudaStream>,
    rank: usize,
    /// The group `rank` counts in, for errors.
    name: GroupName,
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

/// [`Error::Nccl`] on `rank` of `group`.
fn fail((rank, group): (usize, &GroupName), message: String) -> Error {
    Error::Nccl {
        rank,
        group: group.clone(),
        message,
    }
}

/// `ncclConfig_t` as `NCCL_CONFIG_INITIALIZER` makes it (every field
/// undefined, so NCCL's defaults hold), non-blocking. A library older than
/// these bindings reads only the fields it knows.
fn nonblocking_config() -> sys::ncclConfig_t {
    const UNDEF: i32 = i32::MIN;
    sys::ncclConfig_t {
        size: std::mem::size_of::<sys::ncclConfig_t>(),
        magic: 0xcafe_beef,
        version: 22800,
        blocking: 0,
        cgaClusterSize: UNDEF,
        minCTAs: UNDEF,
        maxCTAs: UNDEF,
        netName: std::ptr::null(),
        splitShare: UNDEF,
        trafficClass: UNDEF,
        commName: std::ptr::null(),
        collnetEnable: UNDEF,
        CTAPolicy: UNDEF,
        shrinkShare: UNDEF,
        nvlsCTAs: UNDEF,
        nChannelsPerNetPeer: UNDEF,
        nvlinkCentricSched: UNDEF,
    }
}

/// NCCL's error code, by name (cudarc's error prints no code).
fn code(e: &nccl::NcclError) -> String {
    format!("{:?}", e.0)
}

impl Nccl {
    /// This rank as its errors name it.
    fn who(&self) -> (usize, &GroupName) {
        (self.rank, &self.name)
    }

    /// A communicator over `comm`'s group: rank 0 makes the unique id and
    /// publishes it under the group's store prefix (the `seq`-th NCCL
    /// communicator of this group), every rank reads it and joins. Every
    /// rank calls this at the same point (the first call the rule sends to
    /// NCCL), so none waits for a peer that never comes; a missing peer
    /// is a store timeout naming the key, a departed one an error naming
    /// it.
    pub(crate) fn new(comm: &Comm, stream: &Arc<CudaStream>, seq: u64) -> Result<Arc<Nccl>> {
        let rank = comm.rank();
        let who = (rank, comm.group_name());
        let version = version().map_err(|e| fail(who, e))?;
        let key = comm.store_key(&format!("functional/nccl/{seq}/id"));
        let store_err = |source| comm.store_error(source);
        if rank == 0 {
            let id = nccl::get_uniqueid()
                .map_err(|e| fail(who, format!("ncclGetUniqueId: {}", code(&e))))?;
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
                who,
                format!("NCCL unique id of {} bytes in the store", bytes.len()),
            ));
        }
        for (d, s) in id.internal.iter_mut().zip(bytes) {
            *d = s as _;
        }
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| fail(who, format!("binding the CUDA context: {e:?}")))?;
        // NCCL_COMM_BLOCKING=1 overrides the config: calls then block, and
        // a watchdog could wait behind a stuck one forever.
        let nonblocking = has("ncclCommInitRankConfig")
            && has("ncclCommGetAsyncError")
            && has("ncclCommAbort")
            && std::env::var("NCCL_COMM_BLOCKING").map_or(true, |v| v.trim() == "0");
        let mut raw = std::ptr::null_mut();
        let world = comm.world_size() as i32;
        let made = if nonblocking {
            let mut config = nonblocking_config();
            // SAFETY: `raw` and `config` are valid for the call; every rank
            // calls this with the same id, concurrently, from its own
            // thread, with its device's context current.
            unsafe { nccl::comm_init_rank_config(&mut raw, world, id, rank as i32, &mut config) }
        } else {
            // SAFETY: as above.
            unsafe { nccl::comm_init_rank(&mut raw, world, id, rank as i32) }
        };
        made.map_err(|e| fail(who, format!("ncclCommInitRank: {}", code(&e))))?;
        let n = Nccl {
            comm: raw,
            calls: Mutex::new(()),
            aborted: OnceLock::new(),
            asked: Mutex::new(None),
            in_flight: Mutex::default(),
            nonblocking,
            group: comm.watch(),
            timeout: comm.options().timeout,
            stop: AtomicBool::new(false),
            watchdog: Mutex::new(None),
            stream: stream.clone(),
            rank,
            name: comm.group_name().clone(),
            version,
            windows: has("ncclCommWindowRegister") && has("ncclCommWindowDeregister"),
            segments: Mutex::default(),
            pools: Mutex::default(),
        };
        {
            let _one = n.lock();
            // Joining waits for every peer: a departed one ends it, as its
            // timeout does.
            n.settle("ncclCommInitRank")?;
        }
        tracing::debug!(
            rank,
            version,
            nonblocking,
            "NCCL communicator created from the group's store"
        );
        let n = Arc::new(n);
        if nonblocking {
            let me = Arc::downgrade(&n);
            let h = std::thread::Builder::new()
                .name(format!("symm-nccl-watchdog-{rank}"))
                .spawn(move || watchdog(me))
                .map_err(|e| fail(who, format!("cannot start the NCCL watchdog: {e}")))?;
            *n.watchdog.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
        }
        Ok(n)
    }

    /// Stops the watchdog and waits for it, so that the communicator's last
    /// reference (and its collective teardown) stays with the caller, not
    /// with the watchdog's brief one.
    pub(crate) fn stop_watchdog(&self) {
        self.stop.store(true, Ordering::Release);
        let h = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = h {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    /// Waits, holding `calls`, until NCCL has finished the operation just
    /// issued (`what`): at once on a blocking communicator. Aborts the
    /// communicator, and fails, on an asynchronous error, a departed peer,
    /// the watchdog's request, or the group's timeout.
    fn settle(&self, what: &str) -> Result<()> {
        if !self.nonblocking {
            return Ok(());
        }
        let start = Instant::now();
        let mut looked = start;
        loop {
            let mut st = sys::ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator (callers hold `calls` and checked
            // `aborted`) and a valid out-pointer.
            let r = unsafe { sys::ncclCommGetAsyncError(self.comm, &mut st) }.result();
            let why = match (r, st.result()) {
                (Err(e), _) | (_, Err(e)) => Some(Abort::Nccl(format!("{what}: {}", code(&e)))),
                (Ok(_), Ok(nccl::NcclStatus::InProgress)) => None,
                (Ok(_), Ok(_)) => return Ok(()),
            };
            let why = why.or_else(|| self.asked.lock().unwrap_or_else(|p| p.into_inner()).take());
            let why = why.or_else(|| {
                // One store read a millisecond at most, while NCCL works.
                (looked.elapsed() >= Duration::from_millis(1))
                    .then(|| {
                        looked = Instant::now();
                        self.group.check().err().map(Abort::of)
                    })
                    .flatten()
            });
            let why = why.or_else(|| {
                (start.elapsed() > self.timeout).then(|| {
                    Abort::Nccl(format!(
                        "{what} was still in progress after the group's timeout of {:?}",
                        self.timeout
                    ))
                })
            });
            if let Some(why) = why {
                self.abort_locked(why.clone());
                return Err(why.error(self.who()));
            }
            // Calls settle at once; joining and connecting take longer.
            if start.elapsed() < Duration::from_micros(200) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// Aborts the communicator for `why`, unless it was already; the caller
    /// holds `calls`.
    fn abort_locked(&self, why: Abort) {
        if self.aborted.get().is_some() {
            return;
        }
        tracing::warn!(
            rank = self.rank,
            "aborting the group's NCCL communicator: {}",
            why.error(self.who())
        );
        let _ = self.aborted.set(why);
        // SAFETY: the communicator is ours, and `aborted` (set above, under
        // `calls`) keeps every later call from it; NCCL's kernels still
        // running end at the abort.
        if let Err(e) = unsafe { nccl::comm_abort(self.comm) } {
            tracing::warn!(rank = self.rank, "ncclCommAbort failed: {}", code(&e));
        }
    }

    /// Aborts the communicator for `why` from outside a call (the
    /// watchdog): a caller in a call carries it out at its next poll.
    fn abort(&self, why: Abort) {
        *self.asked.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
        let _one = self.lock();
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.abort_locked(why);
    }

    /// The error every call and wait gets once the communicator was
    /// aborted.
    pub(crate) fn aborted(&self) -> Option<Error> {
        self.aborted.get().map(|a| a.error(self.who()))
    }

    /// One watchdog look; false once the communicator is aborted.
    fn look(&self) -> bool {
        if self.aborted.get().is_some() || self.stop.load(Ordering::Acquire) {
            return false;
        }
        let async_error = || {
            // Under `calls`, so that no abort frees the communicator during
            // the query; a caller holding it polls the same error itself.
            let _one = match self.calls.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return None,
            };
            if self.aborted.get().is_some() {
                return None;
            }
            let mut st = sys::ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator (not aborted, and `calls` held)
            // and a valid out-pointer.
            let r = unsafe { sys::ncclCommGetAsyncError(self.comm, &mut st) }.result();
            match (r, st.result()) {
                (Err(e), _) | (_, Err(e)) => Some(Abort::Nccl(format!(
                    "NCCL reported an asynchronous error: {}",
                    code(&e)
                ))),
                _ => None,
            }
        };
        // A departed peer matters only to work that waits for it: with
        // nothing in flight, calls already done keep their results (the
        // next call's settle, or its wait here, meets the departure), and
        // the store is not read.
        let why = async_error().or_else(|| {
            let oldest = self.oldest_in_flight()?;
            self.group.check().err().map(Abort::of).or_else(|| {
                (oldest > self.timeout).then(|| {
                    Abort::Nccl(format!(
                        "a call running for {:.1} s has not completed (the group's timeout \
                         is {:?}): a rank did not make it, or made another",
                        oldest.as_secs_f64(),
                        self.timeout
                    ))
                })
            })
        });
        match why {
            Some(why) => {
                self.abort(why);
                false
            }
            None => true,
        }
    }

    /// How long the oldest call still in flight has been, forgetting those
    /// done.
    fn oldest_in_flight(&self) -> Option<Duration> {
        let mut f = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((e, at)) = f.calls.front() {
            if !e.is_complete() {
                return Some(at.elapsed());
            }
            let (e, _) = f.calls.pop_front().expect("present");
            f.spare.push(e);
            // The next call could start only now: its time counts from
            // here, not from its enqueue behind this one.
            if let Some((_, next)) = f.calls.front_mut() {
                *next = (*next).max(Instant::now());
            }
        }
        None
    }

    /// Notes a call just enqueued on `stream`, for the watchdog's timeout
    /// (not while it captures a CUDA graph: captured work runs at replay).
    fn enqueued(&self, stream: &CudaStream) {
        if !self.nonblocking {
            return;
        }
        use symm::cudarc::driver::sys::CUstreamCaptureStatus as S;
        if !stream
            .capture_status()
            .is_ok_and(|st| st == S::CU_STREAM_CAPTURE_STATUS_NONE)
        {
            return;
        }
        let mut f = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let e = match f.spare.pop() {
            Some(e) => Ok(e),
            None => stream.context().new_event(None),
        };
        match e.and_then(|e| e.record(stream).map(|()| e)) {
            Ok(e) => f.calls.push_back((e, Instant::now())),
            Err(e) => tracing::warn!(rank = self.rank, "NCCL watchdog: recording an event: {e:?}"),
        }
    }

    /// Holds `calls` for one call into NCCL: the error if the communicator
    /// was aborted.
    fn enter(&self) -> Result<std::sync::MutexGuard<'_, ()>> {
        let one = self.lock();
        match self.aborted() {
            Some(e) => Err(e),
            None => Ok(one),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// NCCL's version code.
    pub(crate) fn version(&self) -> i32 {
        self.version
    }
}

/// The watchdog of one communicator: looks every [`WATCH_EVERY`] until the
/// communicator is aborted or dropped (it holds it only while it looks).
fn watchdog(me: Weak<Nccl>) {
    loop {
        std::thread::sleep(WATCH_EVERY);
        let Some(n) = me.upgrade() else { return };
        if !n.look() {
            return;
        }
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
        // An aborted communicator is gone already.
        let Ok(_one) = self.enter() else { return };
        // SAFETY: the communicator is ours, live, and no call uses it any
        // more; the `Collectives` waited for its communication stream first.
        if let Err(e) = unsafe { nccl::comm_destroy(self.comm) } {
            tracing::warn!(rank = self.rank, "ncclCommDestroy failed: {}", code(&e));
        }
    }
}
