//! Functional collectives: the layer a model calls.
//!
//! A [`Collectives`] serves one group. Each call takes its input wherever
//! it lies (a pool tensor, a [`SymmBuffer`], a [`DeviceBuffer`], cudarc
//! memory, or the result of an earlier call still in flight), chooses a
//! backend by a rule it can explain ([`Collectives::explain`], [`rule`]),
//! enqueues the work (on the user's stream, or with
//! [`Options::with_own_stream`] on a communication stream of the group
//! that the user's stream overlaps), and returns at once a [`Pending`]
//! that holds the output (owned, or borrowed mutably) until it is waited
//! for:
//!
//! - **symm's kernels** when the message is small enough for them to win
//!   (each collective's threshold, from the measured crossovers) or NCCL
//!   cannot run it (the emulator, ranks sharing a GPU, min and max, device
//!   splits). A symmetric input is read in place; any other is first copied
//!   into the group's persistent symmetric staging buffer.
//! - **NCCL** otherwise, on a communicator made on first use from the
//!   group's own store (no second launcher). Pool segments are registered
//!   with it ([`Collectives::register_pool`]) through the pool's segment
//!   hooks: at the next NCCL call after a segment appears (registration is
//!   collective, and a hook must not block), never during CUDA-graph
//!   capture, and deregistered before the segment is freed.
//!
//! Waiting is device-side by default ([`Pending::wait`]: on a
//! communication stream of its own, the user's stream waits on an event;
//! the host does not block); [`Pending::wait_host`] blocks and reports any
//! kernel failure. A `Pending` passed by reference as the next call's
//! input is read in stream order, with no wait. A
//! `Pending` dropped unwaited is waited for (device-side), and says so at
//! debug level, so that no result is left dangling. The output cannot be
//! touched while its `Pending` lives: the `Pending` holds it (by value or
//! by `&mut`), so reading it first is a compile error; it also borrows the
//! input, which the call may still read.
//!
//! A group's calls share call counters and staging: one order per group.
//! Every `Collectives` of a group with its own stream shares the group's
//! one communication stream; a call on the user's stream must not run
//! while calls of the same group are in flight there (wait first). Two
//! groups (subgroups) may be in flight at once, with the caveat of
//! [`Comm::split`] on GPUs.
//!
//! Every rank makes the same calls in the same order, as for the kernels
//! themselves; sizes, ops and roots are checked across ranks (a mismatch
//! is the same error on every rank). Every rank must also pass the same
//! kind of input (symmetric on every rank, or on none): the kernels read
//! peers' inputs at their symmetric addresses, so a difference fails the
//! call on every rank.

mod nccl;
pub mod rule;

use crate::invalid;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use symm::cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut};
use symm::{
    BoundSlice, Comm, DeviceBuffer, DeviceSlice, Element, Error, PoolTensor, Result, SymmBuffer,
    SymmPool, SymmView, SymmetricMemory,
};

use crate::all_reduce::AllReduceElem;
use crate::collectives::{self, CopyElem, ReduceElem, ReduceOp};
pub use rule::{
    CallFacts, Choice, Collective, GroupFacts, Options, Placed, Prefer, Route, ENV_BACKEND,
    ENV_MAX_SYMM_BYTES,
};

/// Whether libnccl loads here (and exports what the NCCL route calls).
pub fn nccl_available() -> bool {
    nccl::version().is_ok()
}

/// Whether libnccl loads here and exports `symbol` (for example
/// `"ncclCommWindowRegister"`): symbols newer than the oldest NCCL you may
/// meet need probing before a call, as cudarc panics on a missing one.
pub fn nccl_exports(symbol: &str) -> bool {
    nccl::has(symbol)
}

/// An input of a functional collective: this rank's device memory, with
/// where it lies (symmetric or not). Implemented for symm's buffers and
/// tensors, cudarc's memory, references to them, and [`Pending`] results.
/// Its methods are the layer's own (hidden): a call reads the input
/// through them.
pub trait Operand<T: Element> {
    #[doc(hidden)]
    fn __memory(&self) -> &dyn DeviceSlice<T>;
    #[doc(hidden)]
    fn __placed(&self) -> Placed {
        Placed::Plain
    }
    /// Every rank's view of it, where it is symmetric.
    #[doc(hidden)]
    fn __symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        None
    }
    /// Orders `stream` after the work that makes this input, where that
    /// work is in flight on another stream (a [`Pending`] of another
    /// `Collectives`).
    #[doc(hidden)]
    fn __order(&self, _stream: &Arc<CudaStream>) -> Result<()> {
        Ok(())
    }
}

/// An output of a functional collective: this rank's device memory,
/// owned (returned by [`Pending::wait`]) or borrowed exclusively (`&mut`
/// of a buffer, a tensor or a cudarc slice; not a [`SymmView`], which is
/// `Copy` and would leave its buffer readable meanwhile).
pub trait Output<T: Element> {
    #[doc(hidden)]
    fn __memory_mut(&mut self) -> &mut dyn DeviceSlice<T>;
}

impl<T: Element> Operand<T> for SymmBuffer<T> {
    fn __memory(&self) -> &dyn DeviceSlice<T> {
        self
    }
    fn __placed(&self) -> Placed {
        Placed::Symmetric
    }
    fn __symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        Some(self.rendezvous())
    }
}

/// A view is read in place only where it starts its buffer (the kernels
/// read a symmetric input from its start); elsewhere it is staged.
impl<T: Element> Operand<T> for SymmView<'_, T> {
    fn __memory(&self) -> &dyn DeviceSlice<T> {
        self
    }
    fn __placed(&self) -> Placed {
        if self.offset() == 0 {
            Placed::Symmetric
        } else {
            Placed::Plain
        }
    }
    fn __symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        (self.offset() == 0).then(|| self.rendezvous())
    }
}

impl<T: Element> Operand<T> for PoolTensor<T> {
    fn __memory(&self) -> &dyn DeviceSlice<T> {
        self
    }
    fn __placed(&self) -> Placed {
        Placed::Pool {
            segment: self.place().1,
        }
    }
    fn __symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        Some(self.rendezvous())
    }
}

macro_rules! plain_operand {
    ($($ty:ty),*) => {$(
        impl<T: Element> Operand<T> for $ty {
            fn __memory(&self) -> &dyn DeviceSlice<T> {
                self
            }
        }
    )*};
}
plain_operand!(
    DeviceBuffer<T>,
    CudaSlice<T>,
    CudaView<'_, T>,
    CudaViewMut<'_, T>
);

macro_rules! forward_operand {
    ($($ty:ty),*) => {$(
        impl<T: Element, X: Operand<T> + ?Sized> Operand<T> for $ty {
            fn __memory(&self) -> &dyn DeviceSlice<T> {
                (**self).__memory()
            }
            fn __placed(&self) -> Placed {
                (**self).__placed()
            }
            fn __symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
                (**self).__symmetric()
            }
            fn __order(&self, stream: &Arc<CudaStream>) -> Result<()> {
                (**self).__order(stream)
            }
        }
    )*};
}
forward_operand!(&X, &mut X);

/// A result still in flight is the next call's input in stream order, with
/// no wait: on the same stream as it is, or, from another `Collectives`
/// (another group's stream), after an event of its stream.
impl<T: Element, O: Operand<T>> Operand<T> for Pending<'_, O> {
    fn __memory(&self) -> &dyn DeviceSlice<T> {
        self.out().__memory()
    }
    fn __placed(&self) -> Placed {
        self.out().__placed()
    }
    fn __symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        self.out().__symmetric()
    }
    fn __order(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.out().__order(stream)?;
        let Some(mine) = &self.coll.stream else {
            return Ok(());
        };
        if Arc::ptr_eq(mine, stream) {
            return Ok(());
        }
        let wait = |e: &CudaEvent| {
            wait_on(stream, e).map_err(|err| self.coll.driver("cuStreamWaitEvent", err))
        };
        match &self.done {
            Some(e) => wait(e),
            None => {
                let e = self.coll.record(mine)?;
                let r = wait(&e);
                self.coll.give_event(e);
                r
            }
        }
    }
}

macro_rules! outputs {
    ($($ty:ty),*) => {$(
        impl<T: Element> Output<T> for $ty {
            fn __memory_mut(&mut self) -> &mut dyn DeviceSlice<T> {
                self
            }
        }
        impl<T: Element> Output<T> for &mut $ty {
            fn __memory_mut(&mut self) -> &mut dyn DeviceSlice<T> {
                *self
            }
        }
    )*};
}
outputs!(DeviceBuffer<T>, PoolTensor<T>, SymmBuffer<T>, CudaSlice<T>);

impl<T: Element> Output<T> for &mut CudaViewMut<'_, T> {
    fn __memory_mut(&mut self) -> &mut dyn DeviceSlice<T> {
        *self
    }
}

/// The result of a functional collective, in flight: it holds the output
/// until [`wait`](Self::wait) (device-side) or
/// [`wait_host`](Self::wait_host) gives it back. Dropped unwaited, it
/// waits device-side and says so at debug level.
#[must_use = "a collective's result is ready only after `wait` (dropping it waits, device-side)"]
pub struct Pending<'c, O> {
    out: Option<O>,
    done: Option<CudaEvent>,
    coll: &'c Collectives,
    what: &'static str,
}

impl<'c, O> Pending<'c, O> {
    fn out(&self) -> &O {
        // Present until `wait` or `wait_host` consumes `self`.
        self.out
            .as_ref()
            .expect("a Pending holds its output until it is waited")
    }

    /// Orders the user's stream after the call (a device-side wait: the
    /// host does not block) and gives the output back. Kernel failures
    /// surface at the next [`Collectives::synchronize`] or
    /// [`wait_host`](Self::wait_host).
    pub fn wait(mut self) -> Result<O> {
        self.settle()?;
        Ok(self.out.take().expect("present until waited"))
    }

    /// Blocks until the call is done, reports any failure a kernel of the
    /// group's communication stream recorded, orders the user's stream
    /// after it, and gives the output back.
    pub fn wait_host(mut self) -> Result<O> {
        if let Some(e) = &self.done {
            e.synchronize()
                .map_err(|e| self.coll.driver("cuEventSynchronize", e))?;
        }
        self.coll.synchronize()?;
        self.settle()?;
        Ok(self.out.take().expect("present until waited"))
    }

    /// Whether the call is done on the device (always, on the emulator).
    /// On the user's stream, whether everything enqueued there is.
    pub fn is_done(&self) -> bool {
        match (&self.done, &self.coll.stream) {
            (Some(e), _) => e.is_complete(),
            // SAFETY: a live stream of this rank; a query only.
            (None, Some(s)) => unsafe { symm::cudarc::driver::sys::cuStreamQuery(s.cu_stream()) }
                .result()
                .is_ok(),
            (None, None) => true,
        }
    }

    fn settle(&mut self) -> Result<()> {
        if let Some(e) = self.done.take() {
            let r = match &self.coll.user_stream {
                Some(s) => wait_on(s, &e).map_err(|err| self.coll.driver("cuStreamWaitEvent", err)),
                None => Ok(()),
            };
            self.coll.give_event(e);
            r?;
        }
        Ok(())
    }
}

impl<O> Drop for Pending<'_, O> {
    fn drop(&mut self) {
        if self.out.is_some() {
            tracing::debug!(
                rank = self.coll.cs.rank(),
                call = self.what,
                "a collective's result was dropped unwaited: the user's stream waits for it"
            );
            if let Err(e) = self.settle() {
                tracing::warn!("waiting for a dropped collective result failed: {e}");
            }
        }
    }
}

/// The lazily made NCCL communicator, or why there is none.
enum NcclState {
    NotYet,
    Ready(Arc<nccl::Nccl>),
    Failed(String),
}

/// One element type's staging: a persistent symmetric buffer, rendezvoused,
/// and the one it grew from (which keeps its own predecessor), kept for
/// CUDA graphs captured with them.
struct Staging<T: Element> {
    buf: SymmBuffer<T>,
    smem: Arc<SymmetricMemory>,
    _older: Option<Arc<Staging<T>>>,
}

/// The functional collectives of one group, on a communication stream of
/// their own. See the [module docs](self).
pub struct Collectives {
    /// The group as the user holds it: its stream is the user's.
    user: Comm,
    /// The same rank on the communication stream (the user's on the
    /// emulator, whose launches finish before they return).
    cs: Comm,
    user_stream: Option<Arc<CudaStream>>,
    stream: Option<Arc<CudaStream>>,
    options: Options,
    group: GroupFacts,
    events: Mutex<Vec<CudaEvent>>,
    /// Per element type, an `Arc<Staging<T>>`.
    staging: Mutex<HashMap<TypeId, Box<dyn Any + Send>>>,
    nccl: Mutex<NcclState>,
    pools: Mutex<Vec<SymmPool>>,
    seq: u64,
}

/// A group's communication stream (kept by the rank, not a `Comm`, which
/// would keep its own rank alive).
struct CommStream(Arc<CudaStream>);

/// Counts the `Collectives` made on a group (their store keys' sequence).
#[derive(Default)]
struct Made(std::sync::atomic::AtomicU64);

impl Collectives {
    /// The functional collectives of `comm`'s group, with [`Options::from_env`].
    /// Collective: every rank makes it at the same point.
    pub fn new(comm: &Comm) -> Result<Collectives> {
        let options = Options::from_env().map_err(|e| invalid(comm, e))?;
        Collectives::with_options(comm, options)
    }

    /// [`new`](Self::new) with `options` (the same on every rank, which
    /// this checks).
    pub fn with_options(comm: &Comm, options: Options) -> Result<Collectives> {
        let seq = comm
            .extension(|_: &Made| true, |_| Ok(Made::default()))?
            .0
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let user_stream = comm.cuda_stream();
        let (stream, on_stream) = match &user_stream {
            Some(s) if !options.own_stream() => (Some(s.clone()), comm.clone()),
            Some(s) => {
                // One communication stream per group (this handle's rank),
                // shared by its `Collectives`: a group's calls share call
                // counters and staging, so they must stay in one order.
                let cs = comm.extension(
                    |_: &CommStream| true,
                    |_| {
                        s.context()
                            .new_stream()
                            .map(CommStream)
                            .map_err(|e| driver(comm, "cuStreamCreate", e))
                    },
                )?;
                (Some(cs.0.clone()), comm.with_cuda_stream(cs.0.clone())?)
            }
            None => (None, comm.clone()),
        };
        let group = group_facts(comm, &user_stream, &options, seq)?;
        Ok(Collectives {
            user: comm.clone(),
            cs: on_stream,
            user_stream,
            stream,
            options,
            group,
            events: Mutex::default(),
            staging: Mutex::default(),
            nccl: Mutex::new(NcclState::NotYet),
            pools: Mutex::default(),
            seq,
        })
    }

    /// The group, as the user holds it (on the user's stream).
    pub fn comm(&self) -> &Comm {
        &self.user
    }

    /// The same rank on the group's communication stream (`None` on the
    /// emulator, which has no streams).
    pub fn comm_stream(&self) -> Option<&Arc<CudaStream>> {
        self.stream.as_ref()
    }

    /// The options every rank agreed on.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// What the rule knows of the group.
    pub fn group_facts(&self) -> &GroupFacts {
        &self.group
    }

    /// Registers `pool`'s segments with the group's NCCL communicator, now
    /// if it exists and otherwise when it is made: every segment the pool
    /// holds and every later one, at the next NCCL call after it appears
    /// (outside CUDA-graph capture), deregistered before it is freed.
    /// Every rank registers the same pools in the same order.
    pub fn register_pool(&self, pool: &SymmPool) {
        if let NcclState::Ready(n) = &*self.nccl.lock().unwrap_or_else(|p| p.into_inner()) {
            n.watch(pool);
        }
        self.pools
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(pool.clone());
    }

    /// Pool segments registered with NCCL so far on this rank, as
    /// (windows, buffer registrations, failed, pending); zeros before the
    /// communicator exists.
    pub fn nccl_registrations(&self) -> (usize, usize, usize, usize) {
        match &*self.nccl.lock().unwrap_or_else(|p| p.into_inner()) {
            NcclState::Ready(n) => n.registrations(),
            _ => (0, 0, 0, 0),
        }
    }

    /// Waits for everything on the communication stream and reports the
    /// first failure one of its kernels recorded, or the abort of the
    /// group's NCCL communicator (a peer that failed or exited, an NCCL
    /// error, or a call that outlived the group's timeout), after which
    /// every call fails.
    pub fn synchronize(&self) -> Result<()> {
        let r = self.cs.synchronize();
        match self.nccl_aborted() {
            Some(e) => Err(e),
            None => r,
        }
    }

    /// Why the group's NCCL communicator was aborted, if it was.
    fn nccl_aborted(&self) -> Option<Error> {
        match &*self.nccl.lock().unwrap_or_else(|p| p.into_inner()) {
            NcclState::Ready(n) => n.aborted(),
            _ => None,
        }
    }

    /// The choice for `call`: its route and the reason, in words (also
    /// logged at debug level by every call).
    pub fn explain(&self, call: &CallFacts) -> Result<Choice> {
        rule::choose(&self.options, &self.group, call).map_err(|e| invalid(&self.cs, e))
    }

    fn driver(&self, op: &'static str, e: symm::cudarc::driver::DriverError) -> Error {
        driver(&self.cs, op, e)
    }

    fn give_event(&self, e: CudaEvent) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e);
    }

    /// An event recorded on `stream` (reused from earlier calls).
    fn record(&self, stream: &Arc<CudaStream>) -> Result<CudaEvent> {
        let e = self.events.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let e = match e {
            Some(e) => e,
            None => stream
                .context()
                .new_event(None)
                .map_err(|e| self.driver("cuEventCreate", e))?,
        };
        // SAFETY: a live event and stream of this rank's context. Raw, with
        // no binding of the context first (a call per record saved); a
        // failure binds it and tries once more.
        let record = || unsafe {
            symm::cudarc::driver::result::event::record(e.cu_event(), stream.cu_stream())
        };
        record()
            .or_else(|_| {
                stream.context().bind_to_thread()?;
                record()
            })
            .map_err(|err| self.driver("cuEventRecord", err))?;
        Ok(e)
    }

    /// Orders the communication stream after the user's work so far (the
    /// inputs it wrote, the outputs it still reads).
    fn enter(&self) -> Result<()> {
        if let Some((user, comm)) = self.forked() {
            let e = self.record(user)?;
            let r = wait_on(comm, &e).map_err(|err| self.driver("cuStreamWaitEvent", err));
            self.give_event(e);
            r?;
        }
        Ok(())
    }

    /// The user's stream and the communication stream, where they differ.
    fn forked(&self) -> Option<(&Arc<CudaStream>, &Arc<CudaStream>)> {
        match (&self.user_stream, &self.stream) {
            (Some(u), Some(c)) if !Arc::ptr_eq(u, c) => Some((u, c)),
            _ => None,
        }
    }

    /// The handle of a call just enqueued.
    fn pending<O>(&self, out: O, what: &'static str) -> Result<Pending<'_, O>> {
        let done = match self.forked() {
            Some((_, comm)) => Some(self.record(comm)?),
            None => None,
        };
        Ok(Pending {
            out: Some(out),
            done,
            coll: self,
            what,
        })
    }

    /// Whether the communication stream is capturing a CUDA graph.
    fn capturing(&self) -> bool {
        use symm::cudarc::driver::sys::CUstreamCaptureStatus as S;
        self.stream
            .as_ref()
            .and_then(|s| s.capture_status().ok())
            .is_some_and(|st| st != S::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// The group's NCCL communicator, made on first use.
    fn nccl(&self) -> Result<Arc<nccl::Nccl>> {
        let mut st = self.nccl.lock().unwrap_or_else(|p| p.into_inner());
        if let NcclState::NotYet = &*st {
            let stream = self
                .stream
                .as_ref()
                .ok_or_else(|| invalid(&self.cs, "NCCL needs a GPU rank".into()))?;
            *st = match nccl::Nccl::new(&self.cs, stream, self.seq) {
                Ok(n) => {
                    for p in self.pools.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                        n.watch(p);
                    }
                    NcclState::Ready(n)
                }
                Err(e) => NcclState::Failed(e.to_string()),
            };
        }
        match &*st {
            NcclState::Ready(n) => {
                if let Some(e) = n.aborted() {
                    return Err(e);
                }
                n.flush(self.capturing());
                Ok(n.clone())
            }
            NcclState::Failed(e) => Err(invalid(
                &self.cs,
                format!("the group's NCCL communicator could not be made: {e}"),
            )),
            NcclState::NotYet => unreachable!("made above"),
        }
    }

    /// This rank's staging for `T`, holding at least `len` elements: made
    /// or grown on every rank alike (every rank asks for the same agreed
    /// `len` on every symm call, whatever its input, so the collective
    /// allocation meets its peers').
    fn staging<T: Element>(&self, len: usize) -> Result<Arc<Staging<T>>> {
        let mut map = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        let now = map
            .get(&TypeId::of::<T>())
            .and_then(|b| b.downcast_ref::<Arc<Staging<T>>>())
            .cloned();
        if let Some(st) = now.as_ref().filter(|st| st.buf.len() >= len) {
            return Ok(st.clone());
        }
        let min = if now.is_some() {
            len
        } else {
            len.max(MIN_STAGING)
        };
        let buf = self.cs.alloc::<T>(min.next_power_of_two())?;
        let st = Arc::new(Staging {
            smem: buf.rendezvous()?,
            buf,
            _older: now,
        });
        map.insert(TypeId::of::<T>(), Box::new(st.clone()));
        Ok(st)
    }

    /// Elements the staging of `T` holds now (what it will hold when first
    /// made, before that): no allocation.
    fn staging_len<T: Element>(&self) -> usize {
        let map = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&TypeId::of::<T>())
            .and_then(|b| b.downcast_ref::<Arc<Staging<T>>>())
            .map_or(MIN_STAGING, |st| st.buf.len())
    }

    /// The symmetric memory a symm kernel reads `input` from: the input
    /// itself where it is symmetric, otherwise the staging buffer, with
    /// `input` copied into it on the communication stream. `grow` is the
    /// agreed length the staging must hold (the same on every rank).
    fn symm_input<T: Element>(
        &self,
        input: &(impl Operand<T> + ?Sized),
        staged: bool,
        grow: usize,
    ) -> Result<Arc<SymmetricMemory>> {
        let st = self.staging::<T>(grow)?;
        if !staged {
            if let Some(s) = input.__symmetric() {
                return s;
            }
        }
        let mut dst = st.buf.slice(..input.__memory().len())?;
        self.cs.copy(input.__memory(), &mut dst)?;
        Ok(st.smem.clone())
    }

    /// What this rank finds wrong with a call before any peer is waited
    /// for: the call's own `extra` problem, an output too small for what
    /// the call writes, and, for NCCL (which waits for a peer that returned
    /// early forever), memory it may not use. Published in the agreement,
    /// so that every rank fails alike. (symm's kernels check their memory
    /// in their own agreement, and time out rather than hang.)
    fn local_problem<T: Element>(
        &self,
        route: Route,
        input: &(impl Operand<T> + ?Sized),
        out: &mut dyn DeviceSlice<T>,
        need_out: usize,
        extra: Option<String>,
    ) -> Option<String> {
        if extra.is_some() {
            return extra;
        }
        if out.len() < need_out {
            return Some(format!(
                "the output holds {} elements, and the call writes {need_out}",
                out.len()
            ));
        }
        if route != Route::Nccl {
            return None;
        }
        if let Err(e) = self.cs.bind("input", input.__memory()) {
            return Some(e.to_string());
        }
        self.cs.bind_mut("out", out).err().map(|e| e.to_string())
    }

    /// Checks the call across ranks (on the first call of its shape, as the
    /// kernels do: the route, the element type, the shape, and every rank's
    /// local problem); the choice in words goes to the debug log when that
    /// is on.
    fn decide(
        &self,
        facts: &CallFacts,
        route: Route,
        shape: &[u64],
        problem: Option<String>,
    ) -> Result<()> {
        // Where each rank's input lies is not in the key: it may differ
        // between ranks only as an error, which the kernels' digest (the
        // input's identity) reports on every rank.
        let code = match route {
            Route::Symm { .. } => 1,
            Route::Nccl => 2,
        };
        let head = [0x46_554e_4300, code, collectives::dtype_word(facts.dtype)];
        let mut buf = [0u64; 16];
        let key_vec;
        let key: &[u64] = if shape.len() + head.len() <= buf.len() {
            buf[..head.len()].copy_from_slice(&head);
            buf[head.len()..head.len() + shape.len()].copy_from_slice(shape);
            &buf[..head.len() + shape.len()]
        } else {
            key_vec = [&head[..], shape].concat();
            &key_vec
        };
        let name = facts.collective.name();
        collectives::agree_call(&self.cs, name, key, problem, |s| {
            let backend = match s.get(1) {
                Some(2) => "NCCL",
                Some(1) => "symm",
                _ => "?",
            };
            format!(
                "{name} of {} of shape {:?} on {backend}",
                collectives::type_name(s.get(1..).unwrap_or(&[])),
                s.get(3..).unwrap_or(&[])
            )
        })?;
        if tracing::enabled!(tracing::Level::DEBUG) {
            if let Ok(choice) = rule::choose(&self.options, &self.group, facts) {
                tracing::debug!(rank = self.cs.rank(), call = name, "{choice}");
            }
        }
        Ok(())
    }

    fn facts<T: Element>(
        &self,
        collective: Collective,
        op: Option<ReduceOp>,
        input: &(impl Operand<T> + ?Sized),
        bytes_per_peer: usize,
        nccl_shape: Option<&'static str>,
    ) -> CallFacts {
        CallFacts {
            collective,
            dtype: T::DTYPE,
            op,
            bytes: input.__memory().len() * std::mem::size_of::<T>(),
            bytes_per_peer,
            nccl_shape,
            placed: input.__placed(),
        }
    }

    /// The route of `facts`, or the rule's error (the same on every rank).
    fn route(&self, facts: &CallFacts) -> Result<Route> {
        rule::route(&self.options, &self.group, facts).map_err(|e| invalid(&self.cs, e))
    }

    /// One call: its route, checked across ranks with every rank's local
    /// problem (`extra`, and an output shorter than `need_out`); the
    /// communication stream ordered after the user's work and the input's
    /// producer; then `symm` (the kernel on the input's symmetric memory,
    /// in place or staged into a staging of at least `grow` elements) or
    /// `nccl` (on the input and output bound to the communication
    /// stream); and the handle, which borrows the input (it may not change
    /// before the wait).
    #[allow(clippy::too_many_arguments)]
    fn run<'c, T: Element, I: Operand<T> + ?Sized, O: Output<T>>(
        &'c self,
        facts: CallFacts,
        shape: &[u64],
        input: &'c I,
        mut out: O,
        (need_out, grow, extra): (usize, usize, Option<String>),
        what: &'static str,
        symm: impl FnOnce(&Comm, &SymmetricMemory, &mut dyn DeviceSlice<T>) -> Result<()>,
        nccl: impl FnOnce(
            &nccl::Nccl,
            &BoundSlice<'_, T>,
            &mut BoundSlice<'_, T>,
            &CudaStream,
        ) -> Result<()>,
    ) -> Result<Pending<'c, O>> {
        let route = self.route(&facts)?;
        let problem = self.local_problem(route, input, out.__memory_mut(), need_out, extra);
        self.decide(&facts, route, shape, problem)?;
        self.enter()?;
        if let Some(s) = &self.stream {
            input.__order(s)?;
        }
        match route {
            Route::Symm { staged, .. } => {
                let smem = self.symm_input(input, staged, grow)?;
                symm(&self.cs, &smem, out.__memory_mut())?;
            }
            Route::Nccl => {
                let n = self.nccl()?;
                let src = self.cs.bind("input", input.__memory())?;
                let mut dst = self.cs.bind_mut("out", out.__memory_mut())?;
                nccl(&n, &src, &mut dst, self.stream()?)?;
            }
        }
        self.pending(out, what)
    }

    /// All-reduce by `op`: every rank's `input` reduced into this rank's
    /// `out` (at least as long as `input`).
    pub fn all_reduce<'c, T, O>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>>
    where
        T: ReduceElem + AllReduceElem,
        O: Output<T>,
    {
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let mut facts = self.facts(Collective::AllReduce, Some(op), input, bytes, None);
        // The sum's pull and two-shot kernels read peers' inputs at their
        // symmetric addresses and carry no digest of them: they always
        // stage, so no rank's input kind can differ from its peers'.
        if op == ReduceOp::Sum
            && matches!(
                crate::all_reduce::Path::choose_for(self.cs.world_size(), bytes, false),
                crate::all_reduce::Path::Pull | crate::all_reduce::Path::TwoShot
            )
        {
            facts.placed = Placed::Plain;
        }
        self.run(
            facts,
            &[n as u64, op.code()],
            input,
            out,
            (n, n, None),
            "all_reduce",
            |c, smem, out| match op {
                ReduceOp::Sum => crate::all_reduce::all_reduce(c, smem, out, n),
                _ => collectives::all_reduce_op(c, smem, out, n, op),
            },
            |nccl, src, dst, stream| {
                let ty = self.nccl_type::<T>(nccl)?;
                // SAFETY: `src` and `dst` hold `n` elements of this rank
                // (checked before the agreement), bound to the
                // communication stream (NCCL's); every rank agreed on this
                // call.
                unsafe {
                    nccl.all_reduces(&[(src.device_ptr(), dst.device_ptr(), n)], ty, op, stream)
                }
            },
        )
    }

    /// All-gather: every rank's `input` in rank order into this rank's
    /// `out` (at least `world ×` as long).
    pub fn all_gather<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::AllGather, None, input, bytes, None);
        let world = self.cs.world_size();
        self.run(
            facts,
            &[n as u64],
            input,
            out,
            (n.saturating_mul(world), n, None),
            "all_gather",
            |c, smem, out| collectives::all_gather(c, smem, out, n),
            |nccl, src, dst, stream| {
                // SAFETY: `src` holds `n` elements and `dst` `world × n`
                // (checked before the agreement), bound to the
                // communication stream; agreed by every rank.
                unsafe { nccl.all_gathers(&[(src.device_ptr(), dst.device_ptr(), bytes)], stream) }
            },
        )
    }

    /// Reduce-scatter by `op`: rank r's `out` gets the reduction of its
    /// chunk ([`collectives::reduce_scatter_chunk`]) of every rank's
    /// `input`. The rule weighs the chunk's bytes (what each rank gets, as
    /// the measured tables give the size).
    pub fn reduce_scatter<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let world = self.cs.world_size();
        let chunk = n.div_ceil(world);
        let uneven = (!n.is_multiple_of(world)).then_some(
            "NCCL's reduce-scatter takes equal chunks, and n is no multiple of the world size",
        );
        let bytes = chunk * std::mem::size_of::<T>();
        let mut facts = self.facts(Collective::ReduceScatter, Some(op), input, bytes, uneven);
        facts.bytes = bytes;
        let mine = collectives::reduce_scatter_chunk(n, world, self.cs.rank()).len();
        self.run(
            facts,
            &[n as u64, op.code()],
            input,
            out,
            (mine, n, None),
            "reduce_scatter",
            |c, smem, out| collectives::reduce_scatter(c, smem, out, n, op),
            |nccl, src, dst, stream| {
                let ty = self.nccl_type::<T>(nccl)?;
                // SAFETY: `src` holds `n` and `dst` `n / world` elements
                // (checked before the agreement; NCCL's route has equal
                // chunks), bound to the communication stream; agreed by
                // every rank.
                unsafe {
                    nccl.reduce_scatter(
                        src.device_ptr(),
                        dst.device_ptr(),
                        n / world,
                        ty,
                        op,
                        stream,
                    )
                }
            },
        )
    }

    /// Broadcast: rank `root`'s `input` into every rank's `out` (every
    /// rank passes an input of the same length; only the root's is read).
    pub fn broadcast<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        root: usize,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::Broadcast, None, input, bytes, None);
        let world = self.cs.world_size();
        let bad_root = (root >= world).then(|| format!("root {root} is not a rank of {world}"));
        self.run(
            facts,
            &[n as u64, root as u64],
            input,
            out,
            (n, n, bad_root),
            "broadcast",
            |c, smem, out| collectives::broadcast(c, smem, out, n, root),
            |nccl, src, dst, stream| {
                // SAFETY: `src` and `dst` hold `n` elements (checked before
                // the agreement), bound to the communication stream; root
                // is a rank; agreed by every rank.
                unsafe { nccl.broadcast(src.device_ptr(), dst.device_ptr(), bytes, root, stream) }
            },
        )
    }

    /// All-to-all with equal splits: rank p's `input[r × m..(r + 1) × m]`
    /// lands at `out[p × m..]` of rank r (`m` is the input's length over
    /// the world size, which must divide it).
    pub fn all_to_all<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
    ) -> Result<Pending<'c, O>> {
        let len = input.__memory().len();
        let world = self.cs.world_size();
        let uneven = (!len.is_multiple_of(world)).then(|| {
            format!("all_to_all of {len} elements on {world} ranks: the world size must divide the input")
        });
        let m = len / world;
        let bytes = m * std::mem::size_of::<T>();
        let facts = self.facts(Collective::AllToAll, None, input, bytes, None);
        self.run(
            facts,
            &[len as u64],
            input,
            out,
            (len, len, uneven),
            "all_to_all",
            |c, smem, out| collectives::all_to_all(c, smem, out, m),
            |nccl, src, dst, stream| {
                let each = vec![bytes; world];
                self.nccl_exchange(nccl, src, dst, &each, &each, stream)
            },
        )
    }

    /// All-to-all with split sizes on the host (PyTorch's
    /// `all_to_all_single`), as [`collectives::all_to_all_single`]: symm's
    /// kernel only, which checks every rank's splits against its peers' on
    /// the device (NCCL would wait forever on a mismatch). The ranks'
    /// inputs may differ in length, so a non-symmetric input is staged only
    /// up to the staging's present length (at least 4096 elements); a
    /// longer one must be a pool tensor or a `SymmBuffer`.
    pub fn all_to_all_single<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        in_splits: &[usize],
        out_splits: &[usize],
    ) -> Result<Pending<'c, O>> {
        let world = self.cs.world_size();
        let len = input.__memory().len();
        let size = std::mem::size_of::<T>();
        let biggest = in_splits.iter().copied().max().unwrap_or(0);
        let facts = self.facts(
            Collective::AllToAllSingle,
            None,
            input,
            biggest * size,
            Some("its splits differ by rank and NCCL would wait forever on a mismatch"),
        );
        let sent = in_splits.iter().fold(0usize, |a, &b| a.saturating_add(b));
        let received = out_splits.iter().fold(0usize, |a, &b| a.saturating_add(b));
        let problem = if in_splits.len() != world || out_splits.len() != world {
            Some(format!(
                "all_to_all_single takes one split per rank ({world}), and got {} send and {} \
                 receive splits",
                in_splits.len(),
                out_splits.len()
            ))
        } else if sent > len {
            Some(format!(
                "the send splits total {sent} elements, and the input holds {len}"
            ))
        } else if !facts.placed.is_symmetric() && len > self.staging_len::<T>() {
            Some(format!(
                "a non-symmetric input of {len} elements is longer than the group's staging \
                 ({}): the ranks' inputs differ in length, so it cannot grow for one; pass a \
                 pool tensor or a SymmBuffer",
                self.staging_len::<T>()
            ))
        } else {
            None
        };
        // Splits and input sizes differ between ranks: the kernel checks
        // the whole exchange on the device.
        self.run(
            facts,
            &[world as u64],
            input,
            out,
            (received, 0, problem),
            "all_to_all_single",
            |c, smem, out| collectives::all_to_all_single(c, smem, out, in_splits, out_splits),
            |_, _, _, _| {
                Err(invalid(
                    &self.cs,
                    "all_to_all_single runs on symm only".into(),
                ))
            },
        )
    }

    /// All-to-all with split sizes in device memory, as
    /// [`collectives::all_to_all_v`]: symm's kernel only (NCCL needs its
    /// splits on the host), from a symmetric input on every rank (a pool
    /// tensor or a `SymmBuffer`: the kernel checks the device splits
    /// against the input's size, which staging would hide).
    pub fn all_to_all_v<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        in_splits: &(impl DeviceSlice<u64> + ?Sized),
        out_splits_offsets: &mut (impl DeviceSlice<u64> + ?Sized),
    ) -> Result<Pending<'c, O>> {
        let facts = self.facts(
            Collective::AllToAllV,
            None,
            input,
            input.__memory().len() * std::mem::size_of::<T>(),
            Some("its splits are in device memory, and NCCL needs them on the host"),
        );
        let problem = (!facts.placed.is_symmetric()).then(|| {
            "all_to_all_v takes its input in symmetric memory (a pool tensor or a \
             SymmBuffer): the kernel checks the device splits against the input's size"
                .to_string()
        });
        self.run(
            facts,
            &[self.cs.world_size() as u64],
            input,
            out,
            (0, 0, problem),
            "all_to_all_v",
            |c, smem, out| collectives::all_to_all_v(c, smem, out, in_splits, out_splits_offsets),
            |_, _, _, _| Err(invalid(&self.cs, "NCCL takes no device splits".into())),
        )
    }

    /// Coalesced all-gather: each of `ranges` of `input` (the same on every
    /// rank) gathered, as [`collectives::all_gather_coalesced`] lays them
    /// out in `out`.
    pub fn all_gather_coalesced<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        ranges: &[std::ops::Range<usize>],
        out: O,
    ) -> Result<Pending<'c, O>> {
        let size = std::mem::size_of::<T>();
        let len = input.__memory().len();
        let total: usize = ranges.iter().map(|r| r.len()).sum();
        let facts = self.facts(
            Collective::AllGatherCoalesced,
            None,
            input,
            total * size,
            None,
        );
        let mut shape = vec![len as u64];
        shape.extend(ranges.iter().flat_map(|r| [r.start as u64, r.end as u64]));
        let world = self.cs.world_size();
        self.run(
            facts,
            &shape,
            input,
            out,
            (
                total.saturating_mul(world),
                len,
                ranges_problem(ranges, len),
            ),
            "all_gather_coalesced",
            |c, smem, out| collectives::all_gather_coalesced(c, smem, ranges, out),
            |nccl, src, dst, stream| {
                let mut at = 0;
                let mut ops = Vec::with_capacity(ranges.len());
                for r in ranges {
                    ops.push((
                        src.device_ptr() + (r.start * size) as u64,
                        dst.device_ptr() + (at * world * size) as u64,
                        r.len() * size,
                    ));
                    at += r.len();
                }
                // SAFETY: every range is inside `src` and its gathered span
                // inside `dst` (checked before the agreement), bound to the
                // communication stream; agreed by every rank.
                unsafe { nccl.all_gathers(&ops, stream) }
            },
        )
    }

    /// Coalesced all-reduce by `op`: `out` (as long as `input`) gets
    /// `input` with each of `ranges` (the same on every rank) reduced
    /// across ranks. symm's kernel reduces in place, so the input is
    /// always staged and copied back out.
    pub fn all_reduce_coalesced<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        ranges: &[std::ops::Range<usize>],
        mut out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>> {
        let len = input.__memory().len();
        let out_len = out.__memory_mut().len();
        let problem = ranges_problem(ranges, len).or_else(|| {
            (out_len != len).then(|| {
                format!("the output holds {out_len} elements, and the input {len}: they must match")
            })
        });
        let size = std::mem::size_of::<T>();
        let total: usize = ranges.iter().map(|r| r.len()).sum();
        let mut facts = self.facts(
            Collective::AllReduceCoalesced,
            Some(op),
            input,
            total * size,
            None,
        );
        facts.placed = Placed::Plain;
        let mut shape = vec![len as u64, op.code()];
        shape.extend(ranges.iter().flat_map(|r| [r.start as u64, r.end as u64]));
        self.run(
            facts,
            &shape,
            input,
            out,
            (len, len, problem),
            "all_reduce_coalesced",
            |c, _, out| {
                // Staged (placed as plain above): the staging holds the input.
                let st = self.staging::<T>(len)?;
                collectives::all_reduce_coalesced(c, &st.buf, ranges, op)?;
                c.copy(&st.buf.slice(..len)?, out)
            },
            |nccl, src, dst, stream| {
                let ty = self.nccl_type::<T>(nccl)?;
                let ops: Vec<(u64, u64, usize)> = ranges
                    .iter()
                    .map(|r| {
                        let off = (r.start * size) as u64;
                        (src.device_ptr() + off, dst.device_ptr() + off, r.len())
                    })
                    .collect();
                // The input first, then each range reduced into the same
                // place of `out`: the output is the input with its ranges
                // reduced, as on symm.
                self.cs.copy(src, dst)?;
                // SAFETY: every range is inside `src` and `dst`, both the
                // input's length (checked before the agreement), bound to
                // the communication stream; agreed by every rank.
                unsafe { nccl.all_reduces(&ops, ty, op, stream) }
            },
        )
    }

    /// NCCL's name for `T`.
    fn nccl_type<T: Element>(
        &self,
        n: &nccl::Nccl,
    ) -> Result<symm::cudarc::nccl::sys::ncclDataType_t> {
        nccl::dtype(T::DTYPE, n.version()).ok_or_else(|| {
            invalid(
                &self.cs,
                format!("NCCL {} has no {}", n.version(), T::DTYPE),
            )
        })
    }

    fn stream(&self) -> Result<&CudaStream> {
        self.stream
            .as_deref()
            .ok_or_else(|| invalid(&self.cs, "NCCL needs a GPU rank".into()))
    }

    /// An NCCL point-to-point exchange of `sends[r]` bytes from `src`
    /// (consecutive, in rank order) and `recvs[r]` bytes into `dst`.
    fn nccl_exchange<T: Element>(
        &self,
        nccl: &nccl::Nccl,
        src: &BoundSlice<'_, T>,
        dst: &BoundSlice<'_, T>,
        sends: &[usize],
        recvs: &[usize],
        stream: &CudaStream,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let spans = |base: u64, sizes: &[usize], cap: usize, what: &str| {
            let mut at = 0usize;
            let mut v = Vec::with_capacity(sizes.len());
            for &b in sizes {
                v.push((base + at as u64, b));
                at = at.saturating_add(b);
            }
            if at > cap * size {
                return Err(invalid(
                    &self.cs,
                    format!(
                        "the {what} splits total {at} bytes, and it holds {}",
                        cap * size
                    ),
                ));
            }
            Ok(v)
        };
        let s = spans(src.device_ptr(), sends, src.len(), "send")?;
        let r = spans(dst.device_ptr(), recvs, dst.len(), "receive")?;
        // SAFETY: every span is inside `src` or `dst` (checked), bound to
        // the communication stream; every rank agreed on the splits.
        unsafe { nccl.exchange(&s, &r, stream) }
    }
}

impl Drop for Collectives {
    fn drop(&mut self) {
        // NCCL's communicator is destroyed only after its last work.
        if let Err(e) = self.cs.synchronize() {
            tracing::warn!("a collective failed before its group's Collectives was dropped: {e}");
        }
        // Its collective teardown runs here, while this rank is still in
        // the group (the `Comm` fields drop after), and on this thread.
        let st = std::mem::replace(
            &mut *self.nccl.lock().unwrap_or_else(|p| p.into_inner()),
            NcclState::NotYet,
        );
        if let NcclState::Ready(n) = &st {
            n.stop_watchdog();
        }
        drop(st);
    }
}

/// `stream` waits for `e` (raw, as [`Collectives::record`]).
fn wait_on(
    stream: &CudaStream,
    e: &CudaEvent,
) -> std::result::Result<(), symm::cudarc::driver::DriverError> {
    // SAFETY: a live event and stream of one context.
    let wait = || unsafe {
        symm::cudarc::driver::result::stream::wait_event(
            stream.cu_stream(),
            e.cu_event(),
            symm::cudarc::driver::sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    };
    wait().or_else(|_| {
        stream.context().bind_to_thread()?;
        wait()
    })
}

fn driver(comm: &Comm, op: &'static str, source: symm::cudarc::driver::DriverError) -> Error {
    Error::Driver {
        rank: comm.rank(),
        device: comm.device(),
        op,
        source,
    }
}

/// Elements a staging buffer holds at least (so that small calls of
/// different sizes share one).
const MIN_STAGING: usize = 4096;

/// A range that is not inside an input of `len` elements, as a problem.
fn ranges_problem(ranges: &[std::ops::Range<usize>], len: usize) -> Option<String> {
    ranges
        .iter()
        .find(|r| r.start > r.end || r.end > len)
        .map(|r| format!("the range {r:?} is not inside the input of {len} elements"))
}

/// Every rank's NCCL support and options, compared: the same facts on
/// every rank, or an error on every rank.
fn group_facts(
    comm: &Comm,
    stream: &Option<Arc<CudaStream>>,
    options: &Options,
    seq: u64,
) -> Result<GroupFacts> {
    let world = comm.world_size();
    let (rank, timeout) = (comm.rank(), comm.options().timeout);
    let mine = match stream {
        None => format!("no the emulator runs no NCCL|{options:?}"),
        Some(stream) => {
            use symm::cudarc::driver::sys::CUdevice_attribute as A;
            let sm = stream
                .context()
                .attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                .unwrap_or(0);
            match nccl::version() {
                Ok(v) => format!("ok {v} {sm}|{options:?}"),
                Err(e) => format!("no {e}|{options:?}"),
            }
        }
    };
    let key = |r: usize| comm.store_key(&format!("symm_kernels/functional/{seq}/facts/{r}"));
    let store_err = |source| comm.store_error(source);
    comm.store()
        .set(&key(rank), mine.as_bytes())
        .map_err(store_err)?;
    let mut all = Vec::with_capacity(world);
    for r in 0..world {
        let v = comm.store().get(&key(r), timeout).map_err(store_err)?;
        all.push(String::from_utf8_lossy(&v).into_owned());
    }
    let opts: Vec<&str> = all
        .iter()
        .map(|s| s.split_once('|').map_or("", |x| x.1))
        .collect();
    if opts.iter().any(|o| *o != opts[0]) {
        return Err(invalid(
            comm,
            format!(
                "the ranks' functional collective options differ (every rank must choose \
                 alike): {}",
                opts.iter()
                    .enumerate()
                    .map(|(r, o)| format!("rank {r}: {o}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ));
    }
    let mut no_nccl = None;
    let mut fp8 = true;
    for (r, s) in all.iter().enumerate() {
        let head = s.split_once('|').map_or(s.as_str(), |x| x.0);
        let mut it = head.split(' ');
        match it.next() {
            Some("ok") => {
                let v: i32 = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
                let sm: i32 = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
                fp8 &= v >= 22400 && sm >= 9;
            }
            _ => {
                let why = head.trim_start_matches("no ");
                no_nccl.get_or_insert(if stream.is_none() {
                    why.to_string()
                } else {
                    format!("rank {r}: {why}")
                });
            }
        }
    }
    if comm.max_ranks_on_device() > 1 {
        no_nccl = Some("ranks share a GPU, which NCCL does not allow".into());
    }
    Ok(GroupFacts {
        world,
        nccl_fp8: fp8 && no_nccl.is_none(),
        no_nccl,
    })
}
