//! Functional collectives: the layer a model calls.
//!
//! A [`Collectives`] serves one group. Each call takes its input wherever
//! it lies (a pool tensor, a [`SymmBuffer`], a [`DeviceBuffer`](symm::DeviceBuffer), cudarc
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
//!   cannot run it (the emulator, ranks sharing a GPU, min and max of floats,
//!   device splits, and reduce, gather and scatter, which NCCL 2.28 got
//!   wrong: `bench/NOTES.md` v37). A symmetric input is read in place; any other is first copied
//!   into the group's persistent symmetric staging buffer.
//! - **NCCL** otherwise, on a communicator made on first use from the
//!   group's own store (no second launcher). Pool segments are registered
//!   with it ([`Collectives::register_pool`]) through the pool's segment
//!   hooks: at the next NCCL call after a segment appears (registration is
//!   collective, and a hook must not block), never during CUDA-graph
//!   capture, and deregistered before the segment is freed.
//! - **Across NVLink domains** (a group that spans them,
//!   [`Comm::topology`](symm::Comm::topology)): the all-reduce,
//!   all-gather, reduce-scatter and broadcast hierarchically, symm's
//!   kernels inside each domain and NCCL between them on the rails
//!   (`hier.rs`; on the emulator, symm's kernels stand in for NCCL across
//!   its simulated domains); every other call on NCCL.
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
//! Calls cross groups: an input or output may be memory of any of the
//! rank's groups (the parent's, a sibling subgroup's), and a `Pending` of
//! one group's call is another group's input in stream order (its stream
//! waits on an event). Memory is symmetric for the group that allocated
//! it, and for another group only where a buffer was rendezvoused with
//! that group too ([`SymmBuffer::rendezvous_in`]): elsewhere another
//! group's call stages it. Each call also has an
//! in-place form where one is meaningful (`all_reduce_in_place`,
//! `all_gather_in_place`, `broadcast_in_place`,
//! `reduce_scatter_in_place`) and a `_new` form that allocates its output
//! at the right length from a pool.
//!
//! Every rank makes the same calls in the same order, as for the kernels
//! themselves; sizes, ops and roots are checked across ranks (a mismatch
//! is the same error on every rank). Every rank must also pass the same
//! kind of input (symmetric on every rank, or on none), and a view of a
//! symmetric buffer at the same offset on every rank: the kernels read
//! peers' inputs at their symmetric addresses, so a difference fails the
//! call on every rank.

mod calibrate;
mod calls;
mod hier;
mod in_place;
mod nccl;
mod operand;
mod p2p;
mod route;
pub mod rule;

/// The reduction a call applies (`symm::functional::ReduceOp`, as its
/// calls take it).
pub use crate::collectives::ReduceOp;
pub use calibrate::{crossover, CalibrateOptions, Calibration, Timed};
pub use operand::{Operand, Output};
pub use p2p::P2pOp;

use crate::shared::agree::{agree, Problem};
use crate::shared::checks::{invalid, root_problem, unsupported};
use crate::shared::key::CallKey;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use symm::cudarc::driver::{CudaEvent, CudaStream};
use symm::{
    BoundSlice, Comm, DeviceSlice, Element, Error, Result, SymmBuffer, SymmPool, SymmetricMemory,
};

use crate::collectives::{self, CopyElem, ReduceElem};
pub use rule::{
    CallFacts, Choice, Collective, GroupFacts, Options, Placed, Prefer, Route, RuleError,
    ENV_BACKEND, ENV_COPY_ENGINE_MIN_BYTES, ENV_DETERMINISTIC, ENV_MAX_SYMM_BYTES,
    ENV_MIN_HIER_BYTES,
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

/// A result still in flight is the next call's input in stream order, with
/// no wait: on the same stream as it is, or, from another `Collectives`
/// (another group's stream), after an event of its stream.
impl<T: Element, O: Operand<T>> Operand<T> for Pending<'_, O> {
    fn __memory(&self) -> &dyn DeviceSlice<T> {
        self.out().__memory()
    }
    fn __placed(&self, comm: &Comm) -> Placed {
        self.out().__placed(comm)
    }
    fn __symmetric(&self, comm: &Comm) -> Option<Result<Arc<SymmetricMemory>>> {
        self.out().__symmetric(comm)
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

/// Plain bytes for NCCL's sends and receives of pool memory (`p2p.rs`):
/// one room per operation of a batch, and the rooms they outgrew, kept
/// for the CUDA graphs captured with them (as the staging keeps its
/// older areas).
#[derive(Default)]
struct P2pScratch {
    rooms: Vec<symm::DeviceBuffer<u8>>,
    older: Vec<symm::DeviceBuffer<u8>>,
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

/// The functional collectives of one group. Calls run on the user's stream
/// (the comm's), or on a communication stream of the group's with
/// [`Options::with_own_stream`]. See the [module docs](self).
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
    /// Per element type, the `Vec<DeviceBuffer<T>>` of plain scratch
    /// memory an in-place reduce-scatter writes a misaligned chunk through
    /// (the last is the largest; the others stay for captured graphs).
    scratch: Mutex<HashMap<TypeId, Box<dyn Any + Send>>>,
    /// Plain bytes that NCCL's sends and receives use in place of pool
    /// memory (`p2p.rs`), one per operation of a batch, grown as needed.
    p2p_scratch: Mutex<P2pScratch>,
    /// symm's point-to-point stages, on the communication stream; `None`
    /// on a group that spans NVLink
    /// domains, whose messages all take NCCL.
    p2p: Option<crate::p2p::P2p>,
    /// Where new outputs come from when no pool is in use on the group.
    own_pool: std::sync::OnceLock<SymmPool>,
    /// A group that spans NVLink domains: its domain and rail collectives
    /// (`hier.rs`'s `Hier`, which this file does not name: the calls'
    /// files sit above it), made with the `Collectives` wherever it has
    /// tiers (`tiers_apply`), domains of one rank included (whose rail is
    /// the group's ranks again, with an NCCL communicator of its own once
    /// an exact reduction runs there).
    hier: std::sync::OnceLock<Box<dyn Any + Send + Sync>>,
    seq: u64,
    /// A domain's or rail's collectives under a spanning group
    /// ([`made`](Self::made)).
    leg: bool,
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
        let options = Options::from_env().map_err(|e| invalid(comm, e.to_string()))?;
        Collectives::with_options(comm, options)
    }

    /// [`new`](Self::new) with `options` (the same on every rank, which
    /// this checks).
    pub fn with_options(comm: &Comm, options: Options) -> Result<Collectives> {
        Collectives::made(comm, options, false)
    }

    /// [`with_options`](Self::with_options); `leg`: a domain's or rail's
    /// collectives under a group that spans domains, which run each leg
    /// as given and never cross domains again themselves.
    fn made(comm: &Comm, options: Options, leg: bool) -> Result<Collectives> {
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
            // An emulated group across simulated domains runs its calls
            // on the stand-in for NCCL between them (`GroupFacts::stand_in`).
            None => (
                None,
                comm.topology()
                    .spans_domains()
                    .then(|| comm.__emulated_network())
                    .flatten()
                    .unwrap_or_else(|| comm.clone()),
            ),
        };
        let group = group_facts(comm, &user_stream, &options, seq)?;
        // Collective: the group's point-to-point stage, made here since a
        // send or receive involves two ranks only.
        let p2p = match on_stream.topology().spans_domains() && !on_stream.__is_emulated_network() {
            true => None,
            false => Some(crate::p2p::P2p::new(&on_stream)?),
        };
        let coll = Collectives {
            p2p,
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
            own_pool: std::sync::OnceLock::new(),
            hier: std::sync::OnceLock::new(),
            scratch: Mutex::default(),
            p2p_scratch: Mutex::default(),
            seq,
            leg,
        };
        // Collective, so made here: the first call that needs them may
        // differ between ranks (as an error, which they then agree on).
        if coll.tiers_apply() {
            coll.hier()?;
        }
        Ok(coll)
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

    /// Why the group's NCCL communicator (or its domain's or rails',
    /// which its hierarchical calls take) was aborted, if it was.
    fn nccl_aborted(&self) -> Option<Error> {
        let own = match &*self.nccl.lock().unwrap_or_else(|p| p.into_inner()) {
            NcclState::Ready(n) => n.aborted(),
            _ => None,
        };
        own.or_else(|| self.legs_aborted())
    }

    /// The choice for `call`: its route and the reason, in words (also
    /// logged at debug level by every call).
    pub fn explain(&self, call: &CallFacts) -> Result<Choice> {
        // (An uneven reduce-scatter fails in the exact form as the rule
        // refuses it.)
        let exact = match call.collective {
            Collective::AllReduce | Collective::AllReduceCoalesced => true,
            Collective::ReduceScatter => call.nccl_shape.is_none(),
            _ => false,
        } && call.op.is_some_and(|op| self.exact_across(op, call.dtype));
        let hierarchical = exact
            || self.hierarchical(call.collective, call.nccl_shape.is_none(), hier_bytes(call));
        // A hierarchical call's NCCL runs on its rails, whose verdict is
        // the call's (its domains may share GPUs, which NCCL refuses); an
        // exact reduction's is its all-to-all's, a copy.
        let group = match hierarchical {
            true => self.rails_facts(),
            false => self.group.clone(),
        };
        let moves = exact.then(|| {
            // The all-to-all's chunk, as the call weighs it (a
            // reduce-scatter's facts give its chunk already).
            let size = call.dtype.size().max(1);
            // (A coalesced call's packed ranges are its bytes per peer.)
            let chunk = match call.collective {
                Collective::AllReduce => self.exact_chunk(call.bytes / size) * size,
                Collective::AllReduceCoalesced => {
                    self.exact_chunk(call.bytes_per_peer / size) * size
                }
                _ => call.bytes,
            };
            self.exact_moves(call, chunk)
        });
        let mut choice = rule::choose(&self.options, &group, moves.as_ref().unwrap_or(call))
            .map_err(|e| rule_error(&self.cs, e))?;
        if exact {
            let t = self.user.topology();
            let (d, l) = (t.domains(), self.cs.world_size() / t.domains().max(1));
            let why = match call
                .op
                .and_then(|op| rule::nccl_op_refusal(&self.group, op, call.dtype))
            {
                _ if self.options.deterministic() => {
                    "the deterministic mode's rank-order reduction".to_string()
                }
                Some(why) => format!("NCCL cannot reduce it: {why}"),
                None => String::new(),
            };
            let then = match call.collective {
                Collective::AllReduce => ", then the all-gather of the folded chunks",
                Collective::AllReduceCoalesced => {
                    ", then the all-gather of the folded chunks (its ranges packed into one \
                     message, and unpacked)"
                }
                _ => "",
            };
            choice.reason = format!(
                "exact across {d} NVLink domains of {l} ranks ({why}): the all-to-all of its \
                 chunks (symm's in each domain, the rail's between them), this rank's chunk \
                 of every rank folded in rank order by symm's kernel{then} ({})",
                choice.reason
            );
        } else if hierarchical {
            let t = self.user.topology();
            let (d, l) = (t.domains(), self.cs.world_size() / t.domains().max(1));
            // (The reduce-scatter's facts weigh each rank's chunk.)
            let whole = match call.collective {
                Collective::AllGather | Collective::ReduceScatter => {
                    call.bytes.saturating_mul(self.cs.world_size())
                }
                _ => call.bytes,
            };
            let elems = call.bytes / call.dtype.size().max(1);
            let reorder = self.options.reorder_min_bytes();
            let big = rule::size_name(reorder);
            let legs = match (call.collective, whole < reorder) {
                (Collective::AllReduce, _) if l > 1 && !elems.is_multiple_of(l) => {
                    "symm's all-reduce of the whole message in each domain (a length the \
                     domain cannot split evenly), then the rail's"
                        .to_string()
                }
                (Collective::AllReduce, _) => "symm's reduce-scatter and all-gather in each \
                                               domain, the rail's all-reduce between them"
                    .to_string(),
                (Collective::AllReduceCoalesced, _) => "its ranges packed into one message, \
                    symm's reduce-scatter and all-gather in each domain and the rail's \
                    all-reduce between them, unpacked"
                    .to_string(),
                (Collective::AllGather, true) => {
                    "symm's all-gather in each domain, then the rail's".to_string()
                }
                (Collective::AllGather, false) => format!(
                    "the rail's all-gather, then symm's in each domain, reordered into rank \
                     order (≥ {big} in all)"
                ),
                (Collective::ReduceScatter, true) => {
                    "the rail's reduce-scatter, then symm's in each domain".to_string()
                }
                (Collective::ReduceScatter, false) => format!(
                    "reordered into domain order, symm's reduce-scatter in each domain, then \
                     the rail's (≥ {big} in all)"
                ),
                (Collective::AllToAll, _) => "grouped by local index, symm's all-to-all in \
                                              each domain, regrouped by domain, then the \
                                              rail's"
                    .to_string(),
                _ => "the root's rail's broadcast, then symm's in each domain".to_string(),
            };
            choice.reason = format!(
                "hierarchical across {d} NVLink domains of {l} ranks: {legs} ({})",
                choice.reason
            );
        } else if self.has_hierarchy(call.collective, call.nccl_shape.is_none()) {
            choice.reason = format!(
                "flat across NVLink domains: {} < {}, the smallest message it takes \
                 hierarchically (Options::min_hier_bytes, which a Calibration measures) ({})",
                rule::size_name(hier_bytes(call)),
                rule::size_name(self.options.min_hier_bytes(call.collective)),
                choice.reason
            );
        }
        Ok(choice)
    }

    /// Whether a call of `collective` on a group that spans domains goes
    /// hierarchically (`hier.rs`), under the rule's choice
    /// ([`Prefer::Auto`]); otherwise the rule sends it to NCCL whole, or
    /// refuses it. `even`: whether NCCL could take its shape (a
    /// reduce-scatter the world size divides); `bytes`: the call's size as
    /// [`hier_bytes`] weighs it, which takes the hierarchical form from the
    /// collective's [`Options::min_hier_bytes`]. Ranks whose sizes differ
    /// may take different forms; both start with an agreement on the whole
    /// group, which then fails on every rank for a call it has not agreed
    /// on before (a call agreed before relies on the kernels' and NCCL's
    /// own checks, as any call whose sizes later differ).
    ///
    /// Only the all-reduce (coalesced too), all-gather, reduce-scatter,
    /// broadcast and all-to-all have hierarchical forms; all but the
    /// all-reduce's and broadcast's need domains of consecutive ranks, and every form
    /// domains of one size (a chunk's rail must meet every domain). Not on
    /// GPUs where every domain has one rank (a rail, say): there the
    /// hierarchy is NCCL alone, and its rail would be the group itself
    /// again. (On the emulator the rail is the stand-in, which spans no
    /// domains.) The deterministic mode's reductions, and those NCCL
    /// cannot run, take the exact form instead
    /// ([`exact_across`](Self::exact_across)).
    pub(super) fn hierarchical(&self, collective: Collective, even: bool, bytes: usize) -> bool {
        self.has_hierarchy(collective, even) && bytes >= self.options.min_hier_bytes(collective)
    }

    /// Whether `collective` has a hierarchical form on this group
    /// ([`hierarchical`](Self::hierarchical) at any size).
    pub(super) fn has_hierarchy(&self, collective: Collective, even: bool) -> bool {
        let blocks = || self.user.topology().in_blocks();
        self.hierarchy_applies()
            && match collective {
                Collective::AllReduce | Collective::AllReduceCoalesced => {
                    !self.options.deterministic()
                }
                Collective::ReduceScatter => !self.options.deterministic() && even && blocks(),
                Collective::AllGather | Collective::AllToAll => blocks(),
                Collective::Broadcast => true,
                _ => false,
            }
    }

    /// Whether a reduction by `op` of `dtype` on a group that spans
    /// domains takes the exact form (`hier.rs`: an all-to-all, symm's fold
    /// in rank order, an all-gather): in the deterministic mode, whose
    /// rank-order sums it keeps, and where NCCL cannot reduce by `op` on
    /// the rails (float min and max), which it still copies. It needs
    /// domains of consecutive ranks and of one size, of any size, one
    /// rank included (its legs are then NCCL's copies and the fold).
    pub(super) fn exact_across(&self, op: ReduceOp, dtype: symm::DType) -> bool {
        // (On the whole group's facts, which every rank shares: a rail's
        // own could differ between rails.)
        self.tiers_apply()
            && self.user.topology().in_blocks()
            && (self.options.deterministic()
                || rule::nccl_op_refusal(&self.group, op, dtype).is_some())
    }

    /// Whether any call of this group may go hierarchically
    /// ([`hierarchical`](Self::hierarchical)'s conditions on the group).
    fn hierarchy_applies(&self) -> bool {
        self.tiers_apply()
            && self
                .user
                .topology()
                .domain_size()
                .is_some_and(|l| l > 1 || self.user.backend_kind() == symm::BackendKind::Emulator)
    }

    /// Whether this group has a domain and rails to run calls across
    /// domains on: it spans domains of one size, under the rule's choice.
    fn tiers_apply(&self) -> bool {
        !self.leg
            && self.group.spans_domains
            && !self.user.__is_emulated_network()
            && self.options.prefer() == Prefer::Auto
            && self.user.topology().domain_size().is_some()
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
        crate::shared::checks::capturing(self.stream.as_deref())
    }

    /// The group's NCCL communicator, made on first use.
    fn nccl(&self) -> Result<Arc<nccl::Nccl>> {
        let mut st = self.nccl.lock().unwrap_or_else(|p| p.into_inner());
        if let NcclState::NotYet = &*st {
            let stream = self
                .stream
                .as_ref()
                .ok_or_else(|| unsupported(&self.cs, "NCCL needs a GPU rank".into()))?;
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
            NcclState::Failed(e) => Err(Error::Nccl {
                rank: self.cs.rank(),
                group: self.cs.group_name().clone(),
                message: format!("the group's NCCL communicator could not be made: {e}"),
            }),
            NcclState::NotYet => unreachable!("made above"),
        }
    }

    /// NCCL's name for `T`.
    fn nccl_type<T: Element>(
        &self,
        n: &nccl::Nccl,
    ) -> Result<symm::cudarc::nccl::sys::ncclDataType_t> {
        nccl::dtype(T::DTYPE, n.version()).ok_or_else(|| {
            unsupported(
                &self.cs,
                format!("NCCL {} has no {}", n.version(), T::DTYPE),
            )
        })
    }

    fn stream(&self) -> Result<&CudaStream> {
        self.stream
            .as_deref()
            .ok_or_else(|| unsupported(&self.cs, "NCCL needs a GPU rank".into()))
    }

    /// An NCCL point-to-point exchange of `sends[r]` bytes from `src`
    /// (consecutive, in rank order) and `recvs[r]` bytes into `dst`.
    fn nccl_exchange<T: Element>(
        &self,
        nccl: &nccl::Nccl,
        src: &BoundSlice<'_, T>,
        dst: &mut BoundSlice<'_, T>,
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
        spans(src.device_ptr(), sends, src.len(), "send")?;
        spans(dst.device_ptr(), recvs, dst.len(), "receive")?;
        // Pool memory registered with NCCL goes through plain scratch, as
        // `send_recv`'s does (bench/NOTES.md v37): the sends copied in
        // before the group, the receives out after it.
        let (sent, got): (usize, usize) = (sends.iter().sum(), recvs.iter().sum());
        let short = || invalid(&self.cs, "the exchange's scratch is too short".into());
        let mut scratch = self.p2p_scratch.lock().unwrap_or_else(|p| p.into_inner());
        let mut src_base = src.device_ptr();
        if sent > 0 && nccl.registered(src_base, sent) {
            src_base = self.p2p_room(&mut scratch, 0, sent)?;
            let mut room = self.cs.bind_mut("scratch", &mut scratch.rooms[0])?;
            let mut room = room.bytes_mut();
            let mut room = room.sub_mut(0..sent).ok_or_else(short)?;
            let from = src.bytes();
            let from = from.sub(0..sent).ok_or_else(short)?;
            self.cs.copy(&from, &mut room)?;
        }
        let staged_dst = got > 0 && nccl.registered(dst.device_ptr(), got);
        let dst_base = if staged_dst {
            self.p2p_room(&mut scratch, 1, got)?
        } else {
            dst.device_ptr()
        };
        let s = spans(src_base, sends, src.len(), "send")?;
        let r = spans(dst_base, recvs, dst.len(), "receive")?;
        // SAFETY: every span is inside `src` or `dst` (checked), or the
        // same bytes of the scratch, bound to the communication stream;
        // every rank agreed on the splits.
        unsafe { nccl.exchange(&s, &r, stream)? };
        if staged_dst {
            let room = self.cs.bind("scratch", &scratch.rooms[1])?;
            let room = room.bytes();
            let room = room.sub(0..got).ok_or_else(short)?;
            let mut to = dst.bytes_mut();
            let mut to = to.sub_mut(0..got).ok_or_else(short)?;
            self.cs.copy(&room, &mut to)?;
        }
        Ok(())
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
    comm.driver_error(op, source)
}

/// Elements a staging buffer holds at least (so that small calls of
/// different sizes share one).
const MIN_STAGING: usize = 4096;

/// Why a coalesced all-reduce of `ranges` of an input of `len` elements
/// into an output of `out_len` cannot run, if it cannot.
fn coalesced_problem(
    ranges: &[std::ops::Range<usize>],
    len: usize,
    out_len: usize,
) -> Option<String> {
    ranges_problem(ranges, len).or_else(|| {
        (out_len != len).then(|| {
            format!("the output holds {out_len} elements, and the input {len}: they must match")
        })
    })
}

/// A range that is not inside an input of `len` elements, as a problem.
fn ranges_problem(ranges: &[std::ops::Range<usize>], len: usize) -> Option<String> {
    ranges
        .iter()
        .find(|r| r.start > r.end || r.end > len)
        .map(|r| format!("the range {r:?} is not inside the input of {len} elements"))
}

/// Every rank's NCCL support and options, compared: the same facts on
/// every rank, or an error on every rank.
/// A call's size as [`Options::min_hier_bytes`] weighs it: its facts'
/// bytes (this rank's input; the reduce-scatter's chunk), and for the
/// coalesced all-reduce its packed ranges' (what its hierarchical form
/// sends), its bytes per peer.
fn hier_bytes(call: &CallFacts) -> usize {
    match call.collective {
        Collective::AllReduceCoalesced => call.bytes_per_peer,
        _ => call.bytes,
    }
}

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
        return Err(Error::Mismatch {
            rank: comm.rank(),
            group: comm.group_name().clone(),
            message: format!(
                "the ranks' functional collective options differ (every rank must choose \
                 alike): {}",
                opts.iter()
                    .enumerate()
                    .map(|(r, o)| format!("rank {r}: {o}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
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
    if comm.group_ranks_on_device() > 1 {
        no_nccl = Some("ranks share a GPU, which NCCL does not allow".into());
    }
    let spans_domains = comm.topology().spans_domains();
    // On the emulator, symm's kernels stand in for NCCL across simulated
    // domains (of a group no larger than a kernel's): the rule then
    // refuses what NCCL would refuse on GPUs.
    let stand_in = spans_domains && comm.__emulated_network().is_some();
    if stand_in {
        (no_nccl, fp8) = (None, true);
    }
    Ok(GroupFacts {
        world,
        nccl_fp8: fp8 && no_nccl.is_none(),
        no_nccl,
        spans_domains,
        stand_in,
    })
}

/// One functional call as the ranks agree on it: the collective, its
/// backend, element type and shape (the sizes and op its method passes).
#[derive(Hash)]
struct Key<'a> {
    collective: Collective,
    nccl: bool,
    dtype: symm::DType,
    shape: &'a [u64],
}

impl CallKey for Key<'_> {
    const FAMILY: &'static str = "symm_kernels::functional";

    fn name(&self) -> &'static str {
        self.collective.name()
    }
}

impl std::fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} of shape {:?} on {}",
            self.name(),
            self.dtype,
            self.shape,
            if self.nccl { "NCCL" } else { "symm" }
        )
    }
}

/// The error of a rule that cannot route a call: a malformed setting is
/// an invalid argument, NCCL forced onto a call it cannot run is
/// unsupported.
fn rule_error(comm: &Comm, e: rule::RuleError) -> Error {
    match e {
        rule::RuleError::Setting(m) => invalid(comm, m),
        rule::RuleError::NcclRefused(m) => unsupported(comm, m),
    }
}
