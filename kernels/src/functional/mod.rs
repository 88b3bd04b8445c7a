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
//! by `&mut`), so reading it first is a compile error.
//!
//! Every rank makes the same calls in the same order, as for the kernels
//! themselves; sizes, ops and roots are checked across ranks (a mismatch
//! is the same error on every rank). Every rank must also pass the same
//! kind of input (symmetric on every rank, or on none): the kernels read
//! peers' inputs at their symmetric addresses, so a difference fails the
//! call on every rank.

mod nccl;
pub mod rule;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use symm::cudarc::driver::{CudaEvent, CudaSlice, CudaStream, CudaView, CudaViewMut};
use symm::{
    Comm, DType, DeviceBuffer, DeviceSlice, Element, Error, PoolTensor, Result, SymmBuffer,
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

/// An input of a functional collective: this rank's device memory, with
/// where it lies (symmetric or not). Implemented for symm's buffers and
/// tensors, cudarc's memory, references to them, and [`Pending`] results.
pub trait Operand<T: Element> {
    /// The memory.
    fn memory(&self) -> &dyn DeviceSlice<T>;
    /// Where it lies.
    fn placed(&self) -> Placed {
        Placed::Plain
    }
    /// Every rank's view of it, where it is symmetric.
    fn symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        None
    }
}

/// An output of a functional collective: this rank's device memory,
/// owned (returned by [`Pending::wait`]) or borrowed (`&mut`).
pub trait Output<T: Element> {
    /// The memory, to write.
    fn memory_mut(&mut self) -> &mut dyn DeviceSlice<T>;
}

impl<T: Element> Operand<T> for SymmBuffer<T> {
    fn memory(&self) -> &dyn DeviceSlice<T> {
        self
    }
    fn placed(&self) -> Placed {
        Placed::Symmetric
    }
    fn symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        Some(self.rendezvous())
    }
}

impl<T: Element> Operand<T> for SymmView<'_, T> {
    fn memory(&self) -> &dyn DeviceSlice<T> {
        self
    }
    fn placed(&self) -> Placed {
        Placed::Symmetric
    }
    fn symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        Some(self.rendezvous())
    }
}

impl<T: Element> Operand<T> for PoolTensor<T> {
    fn memory(&self) -> &dyn DeviceSlice<T> {
        self
    }
    fn placed(&self) -> Placed {
        Placed::Pool {
            segment: self.place().1,
        }
    }
    fn symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        Some(self.rendezvous())
    }
}

macro_rules! plain_operand {
    ($($ty:ty),*) => {$(
        impl<T: Element> Operand<T> for $ty {
            fn memory(&self) -> &dyn DeviceSlice<T> {
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

impl<T: Element, X: Operand<T> + ?Sized> Operand<T> for &X {
    fn memory(&self) -> &dyn DeviceSlice<T> {
        (**self).memory()
    }
    fn placed(&self) -> Placed {
        (**self).placed()
    }
    fn symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        (**self).symmetric()
    }
}

impl<T: Element, X: Operand<T> + ?Sized> Operand<T> for &mut X {
    fn memory(&self) -> &dyn DeviceSlice<T> {
        (**self).memory()
    }
    fn placed(&self) -> Placed {
        (**self).placed()
    }
    fn symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        (**self).symmetric()
    }
}

/// A result still in flight is the next call's input in stream order (both
/// run on the group's communication stream), with no wait.
impl<T: Element, O: Operand<T>> Operand<T> for Pending<'_, O> {
    fn memory(&self) -> &dyn DeviceSlice<T> {
        self.out().memory()
    }
    fn placed(&self) -> Placed {
        self.out().placed()
    }
    fn symmetric(&self) -> Option<Result<Arc<SymmetricMemory>>> {
        self.out().symmetric()
    }
}

impl<T: Element, X: DeviceSlice<T>> Output<T> for &mut X {
    fn memory_mut(&mut self) -> &mut dyn DeviceSlice<T> {
        *self
    }
}

macro_rules! owned_output {
    ($($ty:ty),*) => {$(
        impl<T: Element> Output<T> for $ty {
            fn memory_mut(&mut self) -> &mut dyn DeviceSlice<T> {
                self
            }
        }
    )*};
}
owned_output!(DeviceBuffer<T>, PoolTensor<T>, SymmBuffer<T>, CudaSlice<T>);

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
        self.coll.cs.synchronize()?;
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

/// One element type's staging: a persistent symmetric buffer and every
/// older (smaller) one, kept for CUDA graphs captured with them.
struct Staging<T: Element> {
    buf: SymmBuffer<T>,
    smem: Arc<SymmetricMemory>,
    _older: Vec<SymmBuffer<T>>,
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
    staging: Mutex<HashMap<TypeId, Box<dyn Any + Send>>>,
    nccl: Mutex<NcclState>,
    pools: Mutex<Vec<SymmPool>>,
    seq: u64,
}

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
                let c = s
                    .context()
                    .new_stream()
                    .map_err(|e| driver(comm, "cuStreamCreate", e))?;
                let on = comm.with_cuda_stream(c.clone())?;
                (Some(c), on)
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
    /// first failure one of its kernels recorded.
    pub fn synchronize(&self) -> Result<()> {
        self.cs.synchronize()
    }

    /// The choice for `call`: its route and the reason, in words (also
    /// logged at debug level by every call).
    pub fn explain(&self, call: &CallFacts) -> Result<Choice> {
        rule::choose(&self.options, &self.group, call).map_err(|e| invalid(&self.cs, e))
    }

    fn driver(&self, op: &str, e: symm::cudarc::driver::DriverError) -> Error {
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
    /// or grown on every rank alike (every rank asks for the same `len` on
    /// every symm call, whatever its input), so the collective allocation
    /// meets its peers'.
    fn staging<T: Element>(&self, len: usize) -> Result<Arc<SymmetricMemory>> {
        let mut map = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        let slot = map.entry(TypeId::of::<T>());
        let entry = match slot {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let buf = self
                    .cs
                    .alloc::<T>(len.max(1).next_power_of_two().max(4096))?;
                let smem = buf.rendezvous()?;
                v.insert(Box::new(Staging {
                    buf,
                    smem,
                    _older: Vec::new(),
                }))
            }
        };
        let st = entry
            .downcast_mut::<Staging<T>>()
            .expect("staging of T is kept under T's TypeId");
        if st.buf.len() < len {
            let buf = self.cs.alloc::<T>(len.next_power_of_two())?;
            let smem = buf.rendezvous()?;
            let old = std::mem::replace(&mut st.buf, buf);
            st._older.push(old);
            st.smem = smem;
        }
        Ok(st.smem.clone())
    }

    /// The symmetric memory a symm kernel reads `input` from: the input
    /// itself where it is symmetric, otherwise the staging buffer, with
    /// `input` copied into it on the communication stream.
    fn symm_input<T: Element>(
        &self,
        input: &(impl Operand<T> + ?Sized),
        staged: bool,
    ) -> Result<Arc<SymmetricMemory>> {
        let len = input.memory().len();
        let stage = self.staging::<T>(len)?;
        if !staged {
            if let Some(s) = input.symmetric() {
                return s;
            }
        }
        let mut st = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        let buf = &st
            .get_mut(&TypeId::of::<T>())
            .and_then(|b| b.downcast_mut::<Staging<T>>())
            .expect("made above")
            .buf;
        let mut dst = buf.slice(..len)?;
        self.cs.copy(input.memory(), &mut dst)?;
        Ok(stage)
    }

    /// Checks the call across ranks (on the first call of its shape, as the
    /// kernels do) and returns its route; the choice in words goes to the
    /// debug log when that is on.
    fn decide(&self, facts: &CallFacts, shape: &[u64]) -> Result<Route> {
        let route =
            rule::route(&self.options, &self.group, facts).map_err(|e| invalid(&self.cs, e))?;
        let (code, staged) = match route {
            Route::Symm { staged, .. } => (1, u64::from(staged)),
            Route::Nccl => (2, 0),
        };
        let head = [0x46_554e_4300, code, staged, dtype_code(facts.dtype)];
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
        collectives::agree_call(&self.cs, name, key, None, |s| {
            format!(
                "{name} of shape {:?} on {}{}",
                &s[4..],
                if s[1] == 2 { "NCCL" } else { "symm" },
                if s[1] == 1 && s[2] == 1 {
                    " from a staged (non-symmetric) input"
                } else if s[1] == 1 {
                    " from a symmetric input"
                } else {
                    ""
                }
            )
        })?;
        if tracing::enabled!(tracing::Level::DEBUG) {
            if let Ok(choice) = rule::choose(&self.options, &self.group, facts) {
                tracing::debug!(rank = self.cs.rank(), call = name, "{choice}");
            }
        }
        Ok(route)
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
            bytes: input.memory().len() * std::mem::size_of::<T>(),
            bytes_per_peer,
            nccl_shape,
            placed: input.placed(),
        }
    }

    /// All-reduce by `op`: every rank's `input` reduced into this rank's
    /// `out` (at least as long as `input`).
    pub fn all_reduce<'c, T, O>(
        &'c self,
        input: &(impl Operand<T> + ?Sized),
        mut out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>>
    where
        T: ReduceElem + AllReduceElem,
        O: Output<T>,
    {
        let n = input.memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let mut facts = self.facts(Collective::AllReduce, Some(op), input, bytes, None);
        // The sum's pull and two-shot kernels read peers' inputs at their
        // symmetric addresses; they always stage, so a rank's input kind
        // cannot differ from its peers'.
        if op == ReduceOp::Sum
            && matches!(
                crate::all_reduce::Path::choose_for(self.cs.world_size(), bytes, false),
                crate::all_reduce::Path::Pull | crate::all_reduce::Path::TwoShot
            )
        {
            facts.placed = Placed::Plain;
        }
        let choice = self.decide(&facts, &[n as u64, op_code(op)])?;
        self.enter()?;
        match choice {
            Route::Symm { staged, .. } => {
                let smem = self.symm_input(input, staged)?;
                if op == ReduceOp::Sum {
                    crate::all_reduce::all_reduce(&self.cs, &smem, out.memory_mut(), n)?;
                } else {
                    collectives::all_reduce_op(&self.cs, &smem, out.memory_mut(), n, op)?;
                }
            }
            Route::Nccl => {
                let (nccl, ty) = self.nccl_typed::<T>()?;
                let src = self.cs.bind("input", input.memory())?;
                let dst = self.cs.bind_mut("out", out.memory_mut())?;
                self.fits(&dst, n)?;
                // SAFETY: `src` and `dst` hold `n` elements of this rank,
                // bound to the communication stream (NCCL's), and every rank
                // agreed on this call.
                unsafe {
                    nccl.all_reduce(
                        src.device_ptr(),
                        dst.device_ptr(),
                        n,
                        ty,
                        op,
                        self.stream()?,
                    )
                }?;
            }
        }
        self.pending(out, "all_reduce")
    }

    /// All-gather: every rank's `input` in rank order into this rank's
    /// `out` (at least `world ×` as long).
    pub fn all_gather<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &(impl Operand<T> + ?Sized),
        mut out: O,
    ) -> Result<Pending<'c, O>> {
        let n = input.memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::AllGather, None, input, bytes, None);
        let choice = self.decide(&facts, &[n as u64])?;
        self.enter()?;
        match choice {
            Route::Symm { staged, .. } => {
                let smem = self.symm_input(input, staged)?;
                collectives::all_gather(&self.cs, &smem, out.memory_mut(), n)?;
            }
            Route::Nccl => {
                let nccl = self.nccl()?;
                let src = self.cs.bind("input", input.memory())?;
                let dst = self.cs.bind_mut("out", out.memory_mut())?;
                self.fits(&dst, n * self.cs.world_size())?;
                // SAFETY: `src` holds `n` elements and `dst` `world × n`,
                // bound to the communication stream; agreed by every rank.
                unsafe {
                    nccl.all_gather(src.device_ptr(), dst.device_ptr(), bytes, self.stream()?)
                }?;
            }
        }
        self.pending(out, "all_gather")
    }

    /// Reduce-scatter by `op`: rank r's `out` gets the reduction of its
    /// chunk ([`collectives::reduce_scatter_chunk`]) of every rank's
    /// `input`.
    pub fn reduce_scatter<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &(impl Operand<T> + ?Sized),
        mut out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>> {
        let n = input.memory().len();
        let world = self.cs.world_size();
        let chunk = n.div_ceil(world);
        let shape = (!n.is_multiple_of(world)).then_some(
            "NCCL's reduce-scatter takes equal chunks, and n is no multiple of the world size",
        );
        let facts = self.facts(
            Collective::ReduceScatter,
            Some(op),
            input,
            chunk * std::mem::size_of::<T>(),
            shape,
        );
        let choice = self.decide(&facts, &[n as u64, op_code(op)])?;
        self.enter()?;
        match choice {
            Route::Symm { staged, .. } => {
                let smem = self.symm_input(input, staged)?;
                collectives::reduce_scatter(&self.cs, &smem, out.memory_mut(), n, op)?;
            }
            Route::Nccl => {
                let (nccl, ty) = self.nccl_typed::<T>()?;
                let src = self.cs.bind("input", input.memory())?;
                let dst = self.cs.bind_mut("out", out.memory_mut())?;
                self.fits(&dst, n / world)?;
                // SAFETY: `src` holds `n` and `dst` `n / world` elements,
                // bound to the communication stream; agreed by every rank.
                unsafe {
                    nccl.reduce_scatter(
                        src.device_ptr(),
                        dst.device_ptr(),
                        n / world,
                        ty,
                        op,
                        self.stream()?,
                    )
                }?;
            }
        }
        self.pending(out, "reduce_scatter")
    }

    /// Broadcast: rank `root`'s `input` into every rank's `out` (every
    /// rank passes an input of the same length; only the root's is read).
    pub fn broadcast<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &(impl Operand<T> + ?Sized),
        mut out: O,
        root: usize,
    ) -> Result<Pending<'c, O>> {
        let n = input.memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::Broadcast, None, input, bytes, None);
        let choice = self.decide(&facts, &[n as u64, root as u64])?;
        self.enter()?;
        match choice {
            Route::Symm { staged, .. } => {
                let smem = self.symm_input(input, staged)?;
                collectives::broadcast(&self.cs, &smem, out.memory_mut(), n, root)?;
            }
            Route::Nccl => {
                let nccl = self.nccl()?;
                if root >= self.cs.world_size() {
                    return Err(invalid(
                        &self.cs,
                        format!("root {root} is not a rank of {}", self.cs.world_size()),
                    ));
                }
                let src = self.cs.bind("input", input.memory())?;
                let dst = self.cs.bind_mut("out", out.memory_mut())?;
                self.fits(&dst, n)?;
                // SAFETY: `src` and `dst` hold `n` elements, bound to the
                // communication stream; agreed by every rank.
                unsafe {
                    nccl.broadcast(
                        src.device_ptr(),
                        dst.device_ptr(),
                        bytes,
                        root,
                        self.stream()?,
                    )
                }?;
            }
        }
        self.pending(out, "broadcast")
    }

    /// All-to-all with equal splits: rank p's `input[r × m..(r + 1) × m]`
    /// lands at `out[p × m..]` of rank r (`m` is the input's length over
    /// the world size, which must divide it).
    pub fn all_to_all<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &(impl Operand<T> + ?Sized),
        mut out: O,
    ) -> Result<Pending<'c, O>> {
        let len = input.memory().len();
        let world = self.cs.world_size();
        let m = len / world;
        let facts = self.facts(
            Collective::AllToAll,
            None,
            input,
            m * std::mem::size_of::<T>(),
            None,
        );
        let choice = self.decide(&facts, &[len as u64])?;
        if !len.is_multiple_of(world) {
            return Err(invalid(&self.cs, format!("all_to_all of {len} elements on {world} ranks: the world size must divide the input")));
        }
        self.enter()?;
        match choice {
            Route::Symm { staged, .. } => {
                let smem = self.symm_input(input, staged)?;
                collectives::all_to_all(&self.cs, &smem, out.memory_mut(), m)?;
            }
            Route::Nccl => {
                let bytes = m * std::mem::size_of::<T>();
                self.nccl_exchange(input, &mut out, &vec![bytes; world], &vec![bytes; world])?;
            }
        }
        self.pending(out, "all_to_all")
    }

    /// All-to-all with split sizes on the host (PyTorch's
    /// `all_to_all_single`), as [`collectives::all_to_all_single`].
    pub fn all_to_all_single<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &(impl Operand<T> + ?Sized),
        mut out: O,
        in_splits: &[usize],
        out_splits: &[usize],
    ) -> Result<Pending<'c, O>> {
        let world = self.cs.world_size();
        let biggest = in_splits.iter().copied().max().unwrap_or(0);
        let facts = self.facts(
            Collective::AllToAllSingle,
            None,
            input,
            biggest * std::mem::size_of::<T>(),
            None,
        );
        // Splits and input sizes differ between ranks: the kernel checks
        // the whole exchange on the device.
        let choice = self.decide(&facts, &[world as u64])?;
        self.enter()?;
        match choice {
            Route::Symm { staged, .. } => {
                let smem = self.symm_input(input, staged)?;
                collectives::all_to_all_single(
                    &self.cs,
                    &smem,
                    out.memory_mut(),
                    in_splits,
                    out_splits,
                )?;
            }
            Route::Nccl => {
                if in_splits.len() != world || out_splits.len() != world {
                    return Err(invalid(
                        &self.cs,
                        format!("all_to_all_single takes one split per rank ({world})"),
                    ));
                }
                let size = std::mem::size_of::<T>();
                let sb: Vec<usize> = in_splits.iter().map(|s| s * size).collect();
                let rb: Vec<usize> = out_splits.iter().map(|s| s * size).collect();
                self.nccl_exchange(input, &mut out, &sb, &rb)?;
            }
        }
        self.pending(out, "all_to_all_single")
    }

    /// All-to-all with split sizes in device memory, as
    /// [`collectives::all_to_all_v`]: symm's kernel only (NCCL needs its
    /// splits on the host).
    pub fn all_to_all_v<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &(impl Operand<T> + ?Sized),
        mut out: O,
        in_splits: &(impl DeviceSlice<u64> + ?Sized),
        out_splits_offsets: &mut (impl DeviceSlice<u64> + ?Sized),
    ) -> Result<Pending<'c, O>> {
        let facts = self.facts(
            Collective::AllToAllV,
            None,
            input,
            input.memory().len() * std::mem::size_of::<T>(),
            Some("its splits are in device memory, and NCCL needs them on the host"),
        );
        let choice = self.decide(&facts, &[self.cs.world_size() as u64])?;
        self.enter()?;
        let Route::Symm { staged, .. } = choice else {
            unreachable!("NCCL refuses device splits")
        };
        let smem = self.symm_input(input, staged)?;
        collectives::all_to_all_v(
            &self.cs,
            &smem,
            out.memory_mut(),
            in_splits,
            out_splits_offsets,
        )?;
        self.pending(out, "all_to_all_v")
    }

    /// Coalesced all-gather: each of `ranges` of `input` (the same on every
    /// rank) gathered, as [`collectives::all_gather_coalesced`] lays them
    /// out in `out`.
    pub fn all_gather_coalesced<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &(impl Operand<T> + ?Sized),
        ranges: &[std::ops::Range<usize>],
        mut out: O,
    ) -> Result<Pending<'c, O>> {
        let total: usize = ranges.iter().map(|r| r.len()).sum();
        let facts = self.facts(
            Collective::AllGatherCoalesced,
            None,
            input,
            total * std::mem::size_of::<T>(),
            None,
        );
        let mut shape = vec![input.memory().len() as u64];
        shape.extend(ranges.iter().flat_map(|r| [r.start as u64, r.end as u64]));
        let choice = self.decide(&facts, &shape)?;
        self.enter()?;
        match choice {
            Route::Symm { staged, .. } => {
                let smem = self.symm_input(input, staged)?;
                collectives::all_gather_coalesced(&self.cs, &smem, ranges, out.memory_mut())?;
            }
            Route::Nccl => {
                let nccl = self.nccl()?;
                let world = self.cs.world_size();
                let size = std::mem::size_of::<T>();
                let src = self.cs.bind("input", input.memory())?;
                let dst = self.cs.bind_mut("out", out.memory_mut())?;
                self.ranges_fit(ranges, src.len())?;
                self.fits(&dst, total * world)?;
                let stream = self.stream()?;
                // SAFETY: every range is inside `src` and its gathered span
                // inside `dst` (checked), bound to the communication stream;
                // agreed by every rank.
                unsafe {
                    nccl.grouped(|| {
                        let mut at = 0;
                        for r in ranges {
                            nccl.all_gather(
                                src.device_ptr() + (r.start * size) as u64,
                                dst.device_ptr() + (at * world * size) as u64,
                                r.len() * size,
                                stream,
                            )?;
                            at += r.len();
                        }
                        Ok(())
                    })
                }?;
            }
        }
        self.pending(out, "all_gather_coalesced")
    }

    /// Coalesced all-reduce by `op`: `out` (as long as `input`) gets
    /// `input` with each of `ranges` (the same on every rank) reduced
    /// across ranks. symm's kernel reduces in place, so the input is
    /// always staged and copied back out.
    pub fn all_reduce_coalesced<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &(impl Operand<T> + ?Sized),
        ranges: &[std::ops::Range<usize>],
        mut out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>> {
        let len = input.memory().len();
        let total: usize = ranges.iter().map(|r| r.len()).sum();
        let mut facts = self.facts(
            Collective::AllReduceCoalesced,
            Some(op),
            input,
            total * std::mem::size_of::<T>(),
            None,
        );
        facts.placed = Placed::Plain;
        let mut shape = vec![len as u64, op_code(op)];
        shape.extend(ranges.iter().flat_map(|r| [r.start as u64, r.end as u64]));
        let choice = self.decide(&facts, &shape)?;
        self.enter()?;
        match choice {
            Route::Symm { .. } => {
                self.symm_input(input, true)?;
                let st = self.staging.lock().unwrap_or_else(|p| p.into_inner());
                let buf = &st
                    .get(&TypeId::of::<T>())
                    .and_then(|b| b.downcast_ref::<Staging<T>>())
                    .expect("made by symm_input")
                    .buf;
                collectives::all_reduce_coalesced(&self.cs, buf, ranges, op)?;
                self.cs.copy(&buf.slice(..len)?, out.memory_mut())?;
            }
            Route::Nccl => {
                let (nccl, ty) = self.nccl_typed::<T>()?;
                let size = std::mem::size_of::<T>();
                self.ranges_fit(ranges, len)?;
                // The input first, then each range reduced in place: the
                // output is the input with its ranges reduced, as on symm.
                self.cs.copy(input.memory(), out.memory_mut())?;
                let dst = self.cs.bind_mut("out", out.memory_mut())?;
                let stream = self.stream()?;
                // SAFETY: every range is inside `dst` (checked, and `dst`
                // has the input's length), bound to the communication
                // stream; agreed by every rank.
                unsafe {
                    nccl.grouped(|| {
                        for r in ranges {
                            let at = dst.device_ptr() + (r.start * size) as u64;
                            nccl.all_reduce(at, at, r.len(), ty, op, stream)?;
                        }
                        Ok(())
                    })
                }?;
            }
        }
        self.pending(out, "all_reduce_coalesced")
    }

    fn nccl_typed<T: Element>(
        &self,
    ) -> Result<(Arc<nccl::Nccl>, symm::cudarc::nccl::sys::ncclDataType_t)> {
        let n = self.nccl()?;
        let ty = nccl::dtype(T::DTYPE, n.version()).ok_or_else(|| {
            invalid(
                &self.cs,
                format!("NCCL {} has no {}", n.version(), T::DTYPE),
            )
        })?;
        Ok((n, ty))
    }

    fn stream(&self) -> Result<&CudaStream> {
        self.stream
            .as_deref()
            .ok_or_else(|| invalid(&self.cs, "NCCL needs a GPU rank".into()))
    }

    fn fits<T: Element>(&self, out: &symm::BoundSlice<'_, T>, need: usize) -> Result<()> {
        if out.len() < need {
            return Err(invalid(
                &self.cs,
                format!(
                    "the output holds {} elements, and the call writes {need}",
                    out.len()
                ),
            ));
        }
        Ok(())
    }

    fn ranges_fit(&self, ranges: &[std::ops::Range<usize>], len: usize) -> Result<()> {
        match ranges.iter().find(|r| r.start > r.end || r.end > len) {
            Some(r) => Err(invalid(
                &self.cs,
                format!("the range {r:?} is not inside the input of {len} elements"),
            )),
            None => Ok(()),
        }
    }

    /// An NCCL point-to-point exchange of `sends[r]` bytes from `input`
    /// (consecutive, in rank order) and `recvs[r]` bytes into `out`.
    fn nccl_exchange<T: Element, O: Output<T>>(
        &self,
        input: &(impl Operand<T> + ?Sized),
        out: &mut O,
        sends: &[usize],
        recvs: &[usize],
    ) -> Result<()> {
        let nccl = self.nccl()?;
        let src = self.cs.bind("input", input.memory())?;
        let dst = self.cs.bind_mut("out", out.memory_mut())?;
        let size = std::mem::size_of::<T>();
        let spans =
            |base: u64, sizes: &[usize], cap: usize, what: &str| -> Result<Vec<(u64, usize)>> {
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
        unsafe { nccl.exchange(&s, &r, self.stream()?) }
    }
}

impl Drop for Collectives {
    fn drop(&mut self) {
        // NCCL's communicator is destroyed only after its last work.
        if let Err(e) = self.cs.synchronize() {
            tracing::warn!("a collective failed before its group's Collectives was dropped: {e}");
        }
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

fn invalid(comm: &Comm, message: String) -> Error {
    Error::InvalidArgument {
        rank: comm.rank(),
        message,
    }
}

fn driver(comm: &Comm, op: &str, e: symm::cudarc::driver::DriverError) -> Error {
    invalid(comm, format!("{op}: {e:?}"))
}

fn op_code(op: ReduceOp) -> u64 {
    ReduceOp::ALL
        .iter()
        .position(|&o| o == op)
        .unwrap_or_default() as u64
}

fn dtype_code(d: DType) -> u64 {
    d.name()
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
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
    let store_err = |source| Error::Store { rank, source };
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
