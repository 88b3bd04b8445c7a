//! The CPU emulator's kernel execution: every simulated GPU thread of a
//! launch runs the kernel's CPU body as a stackful coroutine on the calling
//! (rank's) OS thread.
//!
//! Threads yield at block barriers, warp collectives, failed wait
//! conditions, and every few ordered memory operations; a round-robin
//! scheduler resumes them. Blocks run in windows of at most
//! [`WINDOW_THREADS`] threads, in block order on every rank, so kernels
//! whose blocks wait on the same block index of other ranks (the usual
//! pattern) make progress.
//!
//! A launch fails, instead of hanging, when no simulated thread of any rank
//! has made progress for [`stall`] time while every rank is in a launch or
//! done (or for the kernel timeout, when some rank is busy elsewhere): the
//! error lists, per group of blocked threads, what they wait for and the
//! kernel source line.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::panic::{AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::dsl::thread::{set_current, KernelThread};
use crate::error::{Error, GroupName, Result};
use crate::launch::LaunchConfig;
use crate::layout::MAX_DOMAIN_SIZE;
use crate::status::StatusRecord;

/// Most simulated threads alive at once on one rank of a group of up to 8.
/// Each has its own stack mapping (plus a guard page), and the kernel
/// limits mappings per process (`vm.max_map_count`, 65530 by default), so
/// 8 ranks × 1024 threads stay well inside it; a larger group's ranks take
/// fewer each ([`window_threads`]), but never less than a block.
pub const WINDOW_THREADS: usize = 1024;

/// Threads alive at once on each rank of a group of `world` ranks:
/// [`WINDOW_THREADS`] up to 8 ranks, and as many in all past them.
fn window_threads(world: usize) -> usize {
    let max = crate::layout::MAX_WORLD_SIZE;
    WINDOW_THREADS * max / world.max(max)
}
/// Stack of one simulated thread, unless `SYMM_EMULATOR_STACK_KIB` says
/// otherwise. A GPU thread may hold up to 512 KiB of local memory, and a
/// debug build of a kernel's body copies an array a few times over (into a
/// `let`, out of a block), so a simulated thread gets four times that. The
/// mapping is reserved, not
/// touched: a thread's stack costs memory only as deep as it runs.
const STACK_BYTES: usize = 2 * 1024 * 1024;

/// The stack of each simulated thread, read once.
fn stack_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("SYMM_EMULATOR_STACK_KIB")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&k| k >= 64)
            .map_or(STACK_BYTES, |k| k * 1024)
    })
}
/// Ordered memory operations between forced yields.
const PREEMPT_EVERY: u32 = 32;

/// How long a launch whose thread failed a `kernel_assert!` waits, with
/// the whole group settled and idle, before it reports the assertion: a
/// few polling rounds of every rank, so a thread that was about to send
/// something a peer waits for has run.
const ASSERT_SETTLE: Duration = Duration::from_millis(20);

/// How long a launch blocked with an exited peer waits, once the group has
/// settled, before it fails (instead of [`stall`]).
const DOWN_STALL: Duration = Duration::from_millis(30);

/// One value per rank of the largest domain (arrays that long have no
/// `Default` of their own).
pub(crate) struct PerRank<T>([T; MAX_DOMAIN_SIZE]);

impl<T: Default> Default for PerRank<T> {
    fn default() -> Self {
        PerRank(std::array::from_fn(|_| T::default()))
    }
}

impl<T> std::ops::Deref for PerRank<T> {
    type Target = [T; MAX_DOMAIN_SIZE];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// What the emulator knows of one group of ranks. Per group, so that
/// unrelated emulations in the same process (concurrent tests) cannot hide
/// a deadlock.
#[derive(Default)]
pub(crate) struct Group {
    /// Bumped whenever a simulated thread of any rank makes progress
    /// ([`Group::bump`]).
    progress: AtomicU64,
    /// Rank threads dozing in [`Group::doze`], woken by the next bump.
    sleepers: AtomicU32,
    /// What a dozing rank thread waits on.
    bell: Mutex<()>,
    ring: Condvar,
    /// Per rank: [`ON_HOST`], [`IN_LAUNCH`] or [`FINISHED`].
    status: PerRank<AtomicU8>,
    /// Per rank: one more than the `progress` count at which the rank last
    /// resumed every thread of its launch and none progressed (0: never).
    quiet: PerRank<AtomicU64>,
    /// Whether `down` holds any record (read on every check, without the
    /// lock).
    any_down: AtomicBool,
    /// The ranks of this process that left the group, in the order they
    /// did: failed (an error or a panic) or exited.
    down: Mutex<Vec<Down>>,
    /// Per rank of this process: what ends its device waits on the ranks
    /// whose bits it is given (see [`Group::on_down`]).
    stoppers: Mutex<Vec<(usize, Stopper)>>,
    /// Whether `links` holds any (read on every check, without the lock).
    any_link: AtomicBool,
    /// When the links were last looked at ([`since_start`] µs): at most
    /// once a millisecond, since every wait poll asks.
    links_seen: AtomicU64,
    /// The last words this process's ranks left with the store's host
    /// ([`Group::hold_last_word`]).
    links: Mutex<Vec<HostLink>>,
    /// The calls this process's ranks made on each channel
    /// ([`crate::Comm::check_call`]), unless the group shares a ledger.
    ledger: crate::ledger::Ledger,
    /// Settled once, when a rank of this process joins a group whose ranks
    /// span states ([`crate::Comm`]'s join): the ledger every process of
    /// the host maps, or `None` where it could not be made or mapped.
    shared_ledger: std::sync::OnceLock<Option<crate::ledger::Ledger>>,
    /// The thread that watches the store for departures of ranks in other
    /// processes ([`Group::claim_watch`]).
    watch: Mutex<WatchState>,
}

/// Where a group state's store watch is.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum WatchState {
    /// No rank of this process started one.
    #[default]
    Unclaimed,
    Running,
    /// A rank of this state left: no look runs any more.
    Closed,
}

/// A rank's last word with the group's store host, and the host's rank
/// (when it said it): the host's end is the end of this connection.
struct HostLink {
    rank: usize,
    word: crate::store::LastWord,
    host: Option<usize>,
}

/// Microseconds since this process first asked.
fn since_start() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// What ends the device waits of one of a rank's streams (its own, or one
/// it was given) on the ranks whose bits it is given: a GPU backend's
/// abort word. Held by the group state, which outlives it, so it says when
/// it is gone.
pub(crate) trait Stop: Send + Sync {
    /// Ends the waits on the ranks whose bits are set in `ranks`.
    fn stop(&self, ranks: crate::status::RankMask);
    /// Whether what it stops still exists.
    fn alive(&self) -> bool;
    /// Its stream's [`crate::backend::Backend::launch_counts`].
    fn launch_counts(&self) -> (u64, u64);
}

/// A registered [`Stop`].
pub(crate) type Stopper = Arc<dyn Stop>;

/// Why a rank left its group: the group's operations can no longer
/// complete. Kept by every process's group state and in the group's store
/// ([`crate::comm`]), so that peers' waits fail fast naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Down {
    /// The rank.
    pub(crate) rank: usize,
    /// True for a failure (an error or a panic), false for an exit.
    pub(crate) failed: bool,
    /// What happened, said after the rank's number ("failed: …").
    pub(crate) cause: String,
    /// The kind of the rank's error, where it failed with one.
    pub(crate) kind: Option<crate::ErrorKind>,
}

impl Down {
    /// The ranks whose device waits its peers must end: every one after a
    /// failure (the group is broken, and a peer stopped by it may never
    /// send what a third rank waits for), only its own after an exit.
    /// The abort words have a bit for each rank of the largest domain (a
    /// kernel's group has at most a domain's): the exit of a rank past
    /// them, of a group that spans domains, where no kernel runs, ends none
    /// (its domain's own departure ends the waits on it there), rather than
    /// another rank's.
    pub(crate) fn stopped_ranks(&self) -> crate::status::RankMask {
        use crate::status::RankMask;
        match self.failed {
            true => RankMask::MAX,
            false => u32::try_from(self.rank)
                .ok()
                .filter(|&r| (r as usize) < crate::layout::MAX_DOMAIN_SIZE)
                .and_then(|r| RankMask::checked_shl(1, r))
                .unwrap_or(0),
        }
    }

    /// The error a peer `rank` gets for a group operation that this
    /// departure keeps from completing.
    pub(crate) fn error(&self, rank: usize, group: &GroupName) -> Error {
        Error::PeerFailed {
            rank,
            group: group.clone(),
            peer: self.rank,
            cause: self.cause.clone(),
            cause_kind: self.kind,
        }
    }
}

impl Group {
    /// The ledger that this group's calls are recorded in: the shared one
    /// where there is one, else this process's.
    pub(crate) fn ledger(&self) -> &crate::ledger::Ledger {
        self.shared_ledger
            .get()
            .and_then(Option::as_ref)
            .unwrap_or(&self.ledger)
    }

    /// Settles the group's shared ledger with what `make` returns, unless
    /// a rank of this process did first (concurrent callers wait for the
    /// first): one attempt per state, so that its ranks never record in
    /// two ledgers.
    pub(crate) fn settle_ledger(&self, make: impl FnOnce() -> Option<crate::ledger::Ledger>) {
        self.shared_ledger.get_or_init(make);
    }

    /// Counts progress and wakes every dozing rank thread. Returns the new
    /// count.
    fn bump(&self) -> u64 {
        // SeqCst pairs with `doze`: either the dozer sees the new count, or
        // this sees the dozer and rings under the bell's lock.
        let g = self.progress.fetch_add(1, Ordering::SeqCst) + 1;
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _bell = self.bell.lock().unwrap_or_else(|p| p.into_inner());
            self.ring.notify_all();
        }
        g
    }

    /// Sleeps until the progress count moves past `seen`, or `at_most`.
    /// A blocked rank that only polled would take the cores its peers need
    /// to make what it waits for (a test runs up to 8 ranks, and tests run
    /// side by side on a 2-core machine). Memory the host writes, which no
    /// bump announces, is seen after `at_most`.
    fn doze(&self, seen: u64, at_most: Duration) {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let bell = self.bell.lock().unwrap_or_else(|p| p.into_inner());
        if self.progress.load(Ordering::SeqCst) == seen {
            drop(self.ring.wait_timeout(bell, at_most));
        } else {
            drop(bell);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Records that `d.rank` left the group (the first record of a rank
    /// stands): its peers' blocked waits and later group operations fail.
    /// False when the rank had a record already.
    pub(crate) fn record_down(&self, d: Down) -> bool {
        let mut down = self.down.lock().unwrap_or_else(|p| p.into_inner());
        let first = down.iter().all(|x| x.rank != d.rank);
        if first {
            if let Some(s) = self.status.get(d.rank) {
                s.store(FINISHED, Ordering::Release);
            }
            down.push(d.clone());
            self.any_down.store(true, Ordering::Release);
            // Wakes the hang check of peers' launches.
            self.bump();
        }
        drop(down);
        if first {
            let stoppers: Vec<Stopper> = self
                .stoppers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter(|(r, _)| *r != d.rank)
                .map(|(_, s)| s.clone())
                .collect();
            for s in stoppers {
                s.stop(d.stopped_ranks());
            }
        }
        first
    }

    /// What ends the device waits of this process's ranks' streams, those
    /// still alive.
    pub(crate) fn live_stoppers(&self) -> Vec<Stopper> {
        self.stoppers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, s)| s.alive())
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Starts the store's watch for this group's state ([`crate::Comm`]'s
    /// join), unless a rank of this process did: true for the first.
    pub(crate) fn claim_watch(&self) -> bool {
        let mut w = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        let first = *w == WatchState::Unclaimed;
        if first {
            *w = WatchState::Running;
        }
        first
    }

    /// Runs `look` unless the watch was closed: held while it runs, so that
    /// closing waits for a look in progress. False once closed.
    pub(crate) fn watch_look(&self, look: impl FnOnce()) -> bool {
        let w = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        if *w == WatchState::Closed {
            return false;
        }
        look();
        true
    }

    /// Ends the store's watch (a rank of this state leaves): no look runs
    /// after this returns, so nothing the watch held briefly (the store, a
    /// backend) is last dropped on its thread.
    pub(crate) fn close_watch(&self) {
        *self.watch.lock().unwrap_or_else(|p| p.into_inner()) = WatchState::Closed;
    }

    /// Registers what ends the device waits of one of `rank`'s streams
    /// when a peer leaves: each stream's kernels read their own backend's
    /// abort word (a stream the user gave, through `Comm::with_cuda_stream`,
    /// too). Those no longer alive are forgotten here; a peer already gone
    /// ends the new one's waits at once.
    pub(crate) fn on_down(&self, rank: usize, stop: Stopper) {
        {
            let mut stoppers = self.stoppers.lock().unwrap_or_else(|p| p.into_inner());
            stoppers.retain(|(_, s)| s.alive());
            stoppers.push((rank, stop.clone()));
        }
        if let Some(d) = self.peer_down(rank) {
            stop.stop(d.stopped_ranks());
        }
    }

    /// Keeps `rank`'s last word (see [`crate::store::Store::last_word`])
    /// until the rank says its own ([`Group::release_last_word`]), and
    /// watches through it for the end of the store's host, rank `host`.
    pub(crate) fn hold_last_word(
        &self,
        rank: usize,
        word: crate::store::LastWord,
        host: Option<usize>,
    ) {
        self.links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(HostLink { rank, word, host });
        self.any_link.store(true, Ordering::Release);
    }

    /// Takes `rank`'s last word back: it has said its own.
    pub(crate) fn release_last_word(&self, rank: usize) {
        if !self.any_link.load(Ordering::Acquire) {
            return;
        }
        let gone: Vec<HostLink> = {
            let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            let (gone, kept) = std::mem::take(&mut *links)
                .into_iter()
                .partition(|l| l.rank == rank);
            *links = kept;
            gone
        };
        // Dropped outside the lock: each release is a round trip.
        drop(gone);
    }

    /// Whether this process holds a last word for the group (its ranks
    /// joined over a TCP store that another process hosts).
    pub(crate) fn holds_last_word(&self) -> bool {
        self.any_link.load(Ordering::Acquire)
    }

    /// Whether a last word is held whose host's rank is not yet known
    /// (it joined after this rank): [`Group::learn_host`] asks the store.
    pub(crate) fn host_unknown(&self) -> bool {
        self.any_link.load(Ordering::Acquire)
            && self
                .links
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .any(|l| l.host.is_none())
    }

    /// The store's host is rank `host`.
    pub(crate) fn learn_host(&self, host: usize) {
        for l in self
            .links
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter_mut()
        {
            l.host.get_or_insert(host);
        }
    }

    /// Records the store host's end, if a last word's connection says it
    /// came without its rank's own word reaching this process: it exited
    /// (closed the store), or its process died. At most once a millisecond.
    fn look_for_host_end(&self) {
        if !self.any_link.load(Ordering::Acquire) {
            return;
        }
        let now = since_start();
        let seen = self.links_seen.load(Ordering::Relaxed);
        if now.saturating_sub(seen) < 1000
            || self
                .links_seen
                .compare_exchange(seen, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let (host, end) = {
            let links = self.links.lock().unwrap_or_else(|p| p.into_inner());
            match links
                .iter()
                .find_map(|l| Some((l.host, l.word.host_end()?)))
            {
                Some(x) => x,
                None => return,
            }
        };
        // A host whose rank is unknown (one outside the group) is named by
        // nobody: its peers' store calls fail on their own.
        let Some(rank) = host else { return };
        self.record_down(match end {
            crate::store::HostEnd::Left => Down {
                rank,
                failed: false,
                cause: "exited (it hosted the group's store, and closed it)".into(),
                kind: None,
            },
            crate::store::HostEnd::Vanished => Down {
                rank,
                failed: true,
                cause: "ended without leaving the group: its process, which hosted the \
                        group's store, is gone (killed, or aborted without unwinding)"
                    .into(),
                kind: None,
            },
        });
    }

    /// The first rank other than `me` that failed, or else the first that
    /// exited, if any has: why `me`'s group operations cannot complete.
    pub(crate) fn peer_down(&self, me: usize) -> Option<Down> {
        self.look_for_host_end();
        if !self.any_down.load(Ordering::Acquire) {
            return None;
        }
        let down = self.down.lock().unwrap_or_else(|p| p.into_inner());
        let mut peers = down.iter().filter(|d| d.rank != me);
        let first = peers.clone().next().cloned();
        peers.find(|d| d.failed).cloned().or(first)
    }

    /// The first rank other than `me` that failed (not one that exited).
    pub(crate) fn peer_failed(&self, me: usize) -> Option<Down> {
        self.peer_down(me).filter(|d| d.failed)
    }
}

const ON_HOST: u8 = 0;
const IN_LAUNCH: u8 = 1;
const FINISHED: u8 = 2;

impl Group {
    /// Whether every rank is in a launch or done: only then can a stall be
    /// a deadlock, since a rank busy on the host may still reach its launch.
    fn all_settled(&self, world: usize) -> bool {
        self.status[..world]
            .iter()
            .all(|s| s.load(Ordering::Acquire) != ON_HOST)
    }

    /// Whether every rank is done, or in a launch whose every thread it has
    /// resumed since progress count `g` without any progressing. Time alone
    /// does not prove a deadlock: a rank that entered its launch but whose
    /// OS thread has not run since (a loaded machine can stall a thread for
    /// seconds) has not yet sent what its peers wait for.
    fn all_quiet(&self, world: usize, g: u64) -> bool {
        (0..world).all(|r| match self.status[r].load(Ordering::Acquire) {
            FINISHED => true,
            IN_LAUNCH => self.quiet[r].load(Ordering::Acquire) == g + 1,
            _ => false,
        })
    }
}

/// Marks a rank's work over when dropped (also by unwinding), so peers
/// still waiting on it are diagnosed as hung without waiting for the
/// kernel timeout.
pub(crate) struct FinishGuard(pub(crate) Arc<Group>, pub(crate) usize);

impl Drop for FinishGuard {
    fn drop(&mut self) {
        if let Some(s) = self.0.status.get(self.1) {
            s.store(FINISHED, Ordering::Release);
        }
    }
}

/// Counts a rank as in a launch while alive.
struct InLaunch<'a>(&'a Group, usize);

impl<'a> InLaunch<'a> {
    fn new(g: &'a Group, rank: usize) -> Self {
        if let Some(s) = g.status.get(rank) {
            s.store(IN_LAUNCH, Ordering::Release);
        }
        InLaunch(g, rank)
    }
}

impl Drop for InLaunch<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.0.status.get(self.1) {
            s.store(ON_HOST, Ordering::Release);
        }
    }
}

/// A group of ranks in this process, as the emulator knows it: the key
/// prefix every store key of the group starts with, and the group's state.
#[derive(Clone)]
pub(crate) struct GroupKey {
    pub(crate) prefix: Arc<str>,
    pub(crate) state: Arc<Group>,
}

impl GroupKey {
    /// The group of ranks that joined `store` under `prefix`: the same
    /// state for every rank of it, and fresh state for any other group.
    pub(crate) fn of(store: &Arc<dyn crate::store::Store>, prefix: Arc<str>) -> GroupKey {
        // Keyed by the store's address, and holding a weak reference to it:
        // a weak reference keeps the address from being reused, so a later
        // store at the same address (the next test's, once this one is
        // freed) cannot inherit this group's counts, which would make its
        // ranks look settled and a busy rank's peers look hung. Entries of
        // freed stores go on the next lookup.
        type Groups = Mutex<
            HashMap<(usize, Arc<str>), (std::sync::Weak<dyn crate::store::Store>, Arc<Group>)>,
        >;
        static GROUPS: OnceLock<Groups> = OnceLock::new();
        let mut map = GROUPS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.retain(|_, (store, _)| store.strong_count() > 0);
        let addr = Arc::as_ptr(store) as *const () as usize;
        let state = map
            .entry((addr, prefix.clone()))
            .or_insert_with(|| (Arc::downgrade(store), Arc::default()))
            .1
            .clone();
        GroupKey { prefix, state }
    }
}

/// How long no rank may make progress, while every rank is in a launch or
/// done, before a launch is declared hung. (While some rank is elsewhere,
/// the kernel timeout applies instead.)
pub(crate) fn stall(kernel_timeout: Duration) -> Duration {
    kernel_timeout.min(Duration::from_secs(2))
}

/// What a simulated thread hands the scheduler when it yields.
enum Event {
    Barrier(&'static Location<'static>),
    /// (payload, source lane, intrinsic, place).
    Shfl(u64, u32, &'static str, &'static Location<'static>),
    Ballot(bool, &'static Location<'static>),
    /// A wait loop whose condition failed (the thread's `waiting` says which).
    Blocked,
    Preempted,
}

/// A block's shared arrays, by (call site, bytes).
type SharedMap = RefCell<HashMap<(u64, usize), Box<[AtomicU64]>>>;

/// A wait loop's description and place. The description lives on the
/// waiting thread's stack (`wait_for`) or in its `turn` (`wait_turn`).
type Wait = (*const dyn Fn() -> String, &'static Location<'static>);

/// The panic payload of a fault raised by a simulated thread.
struct Fault(String);

/// The panic payload of a failure that ends only its thread (the others
/// go on, as on a GPU, where the thread exits): the failing thread's
/// launch, block and thread complete the error.
enum ThreadEnd {
    /// A failed `kernel_assert!`: its message and `file:line:column`.
    Assert(&'static str, String),
    /// A receive took rank `.0`'s data of another call.
    Mismatch(usize),
    /// The thread ended itself (`exit_thread`): done, not failed.
    Exit,
}

struct Launch {
    name: &'static str,
    /// Where a thread's signal wait that gave up records it (the rank's
    /// status, reported at the next synchronisation, as on a GPU); alive
    /// for the whole launch (see `run`).
    record: *const dyn Fn(StatusRecord),
    rank: u32,
    timeout_ns: u64,
    epoch: Instant,
    grid: [u32; 3],
    block: [u32; 3],
    stall: Duration,
    world: usize,
    group: Arc<Group>,
    /// The group `rank` counts in, for errors.
    group_name: GroupName,
}

struct Thread {
    idx: [[u32; 3]; 4],
    linear_block: u32,
    linear_thread: u32,
    launch: *const Launch,
    shared: *const SharedMap,
    yielder: Cell<*const Yielder<u64, Event>>,
    ops: Cell<u32>,
    /// The wait loop this thread is in, if any: what it waits for and where.
    waiting: Cell<Option<Wait>>,
    /// The description `waiting` points to when a wait written in the DSL
    /// (`wait_turn`) registered it: owned here, since that wait's frames
    /// come and go between its turns.
    turn: RefCell<Option<Box<dyn Fn() -> String>>>,
    /// Set when a wait loop of this thread ended since its last resume.
    left_wait: Cell<bool>,
}

impl Thread {
    fn launch(&self) -> &Launch {
        // SAFETY: the Launch outlives every Thread of it (both owned by `run`).
        unsafe { &*self.launch }
    }

    fn suspend(&self, e: Event) -> u64 {
        let y = self.yielder.get();
        // SAFETY: set when the coroutine started; the Yielder lives on that
        // coroutine's stack, which is the stack we are running on now.
        unsafe { &*y }.suspend(e)
    }

    /// The thread as a [`Error::KernelFault`]'s message places it (after
    /// the kernel and rank, which the error names).
    fn place(&self) -> String {
        format!("block {}, thread {}", self.linear_block, self.linear_thread)
    }
}

impl KernelThread for Thread {
    fn indices(&self) -> [[u32; 3]; 4] {
        self.idx
    }
    fn sync_threads(&self, loc: &'static Location<'static>) {
        self.suspend(Event::Barrier(loc));
    }
    fn shfl(
        &self,
        bits: u64,
        src_lane: u32,
        what: &'static str,
        loc: &'static Location<'static>,
    ) -> u64 {
        self.suspend(Event::Shfl(bits, src_lane, what, loc))
    }
    fn ballot(&self, pred: bool, loc: &'static Location<'static>) -> u32 {
        self.suspend(Event::Ballot(pred, loc)) as u32
    }
    fn shared(&self, site: u64, bytes: usize) -> u64 {
        // SAFETY: the block's map outlives its threads; only this OS thread uses it.
        let mut map = unsafe { &*self.shared }.borrow_mut();
        let words = map.entry((site, bytes)).or_insert_with(|| {
            (0..bytes.div_ceil(8).max(1))
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        words.as_ptr() as u64
    }
    fn begin_wait(&self, what: &dyn Fn() -> String, loc: &'static Location<'static>) {
        let what: *const (dyn Fn() -> String + '_) = what;
        // SAFETY: only the lifetime is erased: `what` outlives the wait loop
        // (the WaitGuard calling `end_wait` is dropped first), and the
        // scheduler only calls it while this thread is suspended inside that
        // loop.
        let what: *const dyn Fn() -> String = unsafe { std::mem::transmute(what) };
        self.waiting.set(Some((what, loc)));
    }
    fn end_wait(&self) {
        self.waiting.set(None);
        self.turn.borrow_mut().take();
        self.left_wait.set(true);
    }
    fn wait_turn(&self, what: Box<dyn Fn() -> String>, loc: &'static Location<'static>) {
        // Kept in `turn` until the next turn replaces it or `end_wait`
        // clears it; the scheduler reads `waiting` only while this thread
        // is suspended, so never between the two stores.
        let what: *const dyn Fn() -> String = &**self.turn.borrow_mut().insert(what);
        self.waiting.set(Some((what, loc)));
        self.suspend(Event::Blocked);
    }
    fn exit(&self) -> ! {
        std::panic::resume_unwind(Box::new(ThreadEnd::Exit))
    }
    fn spin(&self) {
        // Only wait loops spin (`wait_for`, which registered the wait), so
        // this is no progress; other busy loops are preempted by `tick`.
        self.suspend(Event::Blocked);
    }
    fn tick(&self) {
        let n = self.ops.get().wrapping_add(1);
        self.ops.set(n);
        if n.is_multiple_of(PREEMPT_EVERY) {
            self.suspend(Event::Preempted);
        }
    }
    fn globaltimer(&self) -> u64 {
        self.launch().epoch.elapsed().as_nanos() as u64
    }
    fn timeout_ns(&self) -> u64 {
        self.launch().timeout_ns
    }
    fn record(&self, rec: StatusRecord) {
        // SAFETY: `run` keeps the sink alive while any thread of the launch runs.
        let record = unsafe { &*self.launch().record };
        record(rec)
    }
    fn assert_failed(&self, message: &'static str, location: String) -> ! {
        std::panic::resume_unwind(Box::new(ThreadEnd::Assert(message, location)))
    }
    fn call_mismatch(&self, peer: usize) -> ! {
        std::panic::resume_unwind(Box::new(ThreadEnd::Mismatch(peer)))
    }
    fn fail(&self, message: String, loc: &'static Location<'static>) -> ! {
        std::panic::resume_unwind(Box::new(Fault(format!(
            "{}: {message} (at {loc})",
            self.place()
        ))))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    Ready(u64),
    Barrier(&'static Location<'static>),
    Collective(Collective),
    Blocked,
    Done,
}

#[derive(Clone, Copy, PartialEq)]
enum Collective {
    /// (payload, source lane, intrinsic, place).
    Shfl(u64, u32, &'static str, &'static Location<'static>),
    Ballot(bool, &'static Location<'static>),
}

fn dims(d: (u32, u32, u32)) -> [u32; 3] {
    [d.0, d.1, d.2]
}

fn unflatten(i: u32, d: [u32; 3]) -> [u32; 3] {
    [i % d[0], (i / d[0]) % d[1], i / (d[0] * d[1])]
}

/// Runs a launch to completion on the emulator.
/// `rank` of `world` in the group `group` runs kernel `name`, whose waits
/// may take `kernel_timeout`; a signal wait that gives up is passed to
/// `record`.
pub(crate) fn run(
    (rank, world, group_key, group_name): (usize, usize, &GroupKey, &GroupName),
    kernel_timeout: Duration,
    name: &'static str,
    cfg: &LaunchConfig,
    body: &dyn Fn(),
    record: &dyn Fn(StatusRecord),
) -> Result<()> {
    let (grid, block) = (dims(cfg.grid), dims(cfg.block));
    let record: *const (dyn Fn(StatusRecord) + '_) = record;
    // SAFETY: only the lifetime is erased: `launch` and every thread that
    // reads it are gone when this function returns, and `record` outlives it.
    let record: *const dyn Fn(StatusRecord) = unsafe { std::mem::transmute(record) };
    let launch = Launch {
        name,
        record,
        rank: rank as u32,
        timeout_ns: u64::try_from(kernel_timeout.as_nanos()).unwrap_or(u64::MAX),
        epoch: Instant::now(),
        grid,
        block,
        stall: stall(kernel_timeout),
        world,
        group: group_key.state.clone(),
        group_name: group_name.clone(),
    };
    // Entering a launch is progress: a peer that has waited longer than the
    // stall window while this rank was busy on the host must not take the
    // moment this rank arrives (and the group looks settled) for a deadlock.
    // (Before `InLaunch`, so that whoever sees this rank in its launch also
    // sees the progress.)
    launch.group.bump();
    let _in_launch = InLaunch::new(&launch.group, launch.rank as usize);
    let blocks = grid.iter().product::<u32>();
    let per_block = block.iter().product::<u32>();
    let live = window_threads(launch.world);
    let window = (live / per_block as usize).max(1) as u32;
    let mut stacks = take_stacks((per_block as usize * blocks as usize).min(live));
    let mut first = 0u32;
    let mut result = Ok(());
    while first < blocks && result.is_ok() {
        let last = (first + window).min(blocks);
        result = run_window(&launch, first..last, body, &mut stacks);
        first = last;
    }
    give_back_stacks(stacks);
    result
}

/// Stacks reused across launches, by every rank's OS thread: a group's rank
/// threads live for one run, and stacks kept per thread would be mapped and
/// unmapped again with every run (hundreds of thousands of system calls over
/// a test suite). Holds at most what 8 ranks' windows hold at once, as
/// per-thread pools did.
static STACK_POOL: std::sync::Mutex<Vec<DefaultStack>> = std::sync::Mutex::new(Vec::new());

/// Up to `n` pooled stacks (fewer when the pool has fewer; the rest are
/// mapped as needed).
fn take_stacks(n: usize) -> Vec<DefaultStack> {
    let mut pool = STACK_POOL.lock().unwrap_or_else(|p| p.into_inner());
    let keep = pool.len().saturating_sub(n);
    pool.split_off(keep)
}

/// Returns stacks to the pool, unmapping what is beyond its bound.
fn give_back_stacks(mut stacks: Vec<DefaultStack>) {
    let mut pool = STACK_POOL.lock().unwrap_or_else(|p| p.into_inner());
    let room = (crate::layout::MAX_WORLD_SIZE * WINDOW_THREADS).saturating_sub(pool.len());
    let keep = stacks.len().min(room);
    pool.extend(stacks.drain(..keep));
    drop(pool);
    // What is left is unmapped here, outside the lock.
    drop(stacks);
}

fn run_window(
    launch: &Launch,
    range: std::ops::Range<u32>,
    body: &dyn Fn(),
    stacks: &mut Vec<DefaultStack>,
) -> Result<()> {
    let (grid, block, stall, progress) = (
        launch.grid,
        launch.block,
        launch.stall,
        &launch.group.progress,
    );
    // Rounds in a row in which nothing anywhere progressed: after a few,
    // the rank thread dozes instead of polling.
    let mut idle_rounds = 0u32;
    let per_block = block.iter().product::<u32>() as usize;
    let shared: Vec<SharedMap> = range
        .clone()
        .map(|_| RefCell::new(HashMap::new()))
        .collect();
    let mut threads: Vec<Box<Thread>> = Vec::new();
    for (bi, b) in range.clone().enumerate() {
        for t in 0..per_block as u32 {
            threads.push(Box::new(Thread {
                idx: [unflatten(t, block), unflatten(b, grid), block, grid],
                linear_block: b,
                linear_thread: t,
                launch,
                shared: &shared[bi],
                yielder: Cell::new(std::ptr::null()),
                ops: Cell::new(0),
                waiting: Cell::new(None),
                turn: RefCell::new(None),
                left_wait: Cell::new(false),
            }));
        }
    }
    let mut cos = Vec::with_capacity(threads.len());
    for th in &threads {
        let stack = match stacks.pop() {
            Some(s) => s,
            None => DefaultStack::new(stack_bytes()).map_err(|e| Error::InvalidArgument {
                rank: launch.rank as usize,
                group: launch.group_name.clone(),
                message: format!(
                    "the emulator could not allocate a thread stack ({e}): every simulated \
                     thread alive has a stack mapping, and {} ranks of {} live threads each may \
                     pass the process's mappings (vm.max_map_count); launch smaller blocks",
                    launch.world,
                    threads.len()
                ),
            })?,
        };
        let th: *const Thread = &**th;
        // SAFETY: the closure borrows `body` and a Thread, both of which
        // outlive every coroutine: this function drives each coroutine to
        // completion or drops it (unwinding its stack) before returning.
        let co = unsafe {
            Coroutine::with_stack_unchecked(stack, move |y: &Yielder<u64, Event>, _: u64| {
                (*th).yielder.set(y);
                body();
            })
        };
        cos.push(Some(co));
    }
    let mut state = vec![State::Ready(0); threads.len()];
    let mut last_progress = Instant::now();
    let mut seen = progress.load(Ordering::Relaxed);
    // A hang is declared only after one more round of polling once it
    // looks like one: a peer may have signalled and then finished (which
    // settles the group) between this round's polls and its check, and
    // only a poll after that check is sure to see the signal.
    let mut suspect = false;
    // The first failed `kernel_assert!`: as on a GPU, it ends its own thread
    // only, and the others run on (a peer may be waiting for what they
    // send before they check the same thing); it is reported once every
    // thread is done, or the group has settled with nothing left to run
    // (`ASSERT_SETTLE`), or where a hang would be.
    let mut asserted: Option<Error> = None;
    let mut first_round = true;
    loop {
        // A failed peer breaks the group: the launch ends after its first
        // round (one atomic load a round while none has failed). Not
        // before it: a kernel that fails on its own (the same bad input on
        // every rank) reports its own failure.
        if !first_round {
            if let Some(d) = launch.group.peer_failed(launch.rank as usize) {
                return Err(
                    asserted.unwrap_or_else(|| d.error(launch.rank as usize, &launch.group_name))
                );
            }
        }
        first_round = false;
        let mut progressed = false;
        for i in 0..threads.len() {
            let input = match state[i] {
                State::Ready(v) => v,
                State::Blocked => 0,
                _ => continue,
            };
            let Some(co) = cos[i].as_mut() else { continue };
            let t: &dyn KernelThread = &*threads[i];
            // SAFETY: `threads[i]` lives until the end of this function, and
            // the pointer is cleared right after the resume.
            unsafe { set_current(Some(t as *const dyn KernelThread)) };
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| co.resume(input)));
            // SAFETY: clears the pointer set above.
            unsafe { set_current(None) };
            let was_blocked = matches!(state[i], State::Blocked);
            match r {
                Err(payload) if matches!(payload.downcast_ref(), Some(ThreadEnd::Exit)) => {
                    state[i] = State::Done;
                    cos[i] = None;
                    progressed = true;
                }
                Err(payload) => {
                    let e = fault(launch, &threads[i], payload);
                    if !matches!(e, Error::KernelAssert { .. } | Error::CallMismatch { .. }) {
                        // The first failure is the one reported, as a
                        // GPU's status record keeps the first.
                        return Err(asserted.unwrap_or(e));
                    }
                    asserted.get_or_insert(e);
                    state[i] = State::Done;
                    cos[i] = None;
                    progressed = true;
                }
                Ok(CoroutineResult::Return(())) => {
                    state[i] = State::Done;
                    if let Some(co) = cos[i].take() {
                        stacks.push(co.into_stack());
                    }
                    progressed = true;
                }
                Ok(CoroutineResult::Yield(e)) => {
                    let next = match e {
                        Event::Barrier(l) => State::Barrier(l),
                        Event::Shfl(v, src, w, l) => {
                            State::Collective(Collective::Shfl(v, src, w, l))
                        }
                        Event::Ballot(p, l) => State::Collective(Collective::Ballot(p, l)),
                        Event::Blocked => State::Blocked,
                        // A wait loop's own memory operations tick too: a
                        // blocked thread preempted while re-checking is
                        // still blocked, not progressing.
                        Event::Preempted if was_blocked => state[i],
                        Event::Preempted => State::Ready(0),
                    };
                    // A thread whose wait ended is progress even when it
                    // blocks again in the same resume (what it stored on
                    // the way may be what a dozing peer waits for).
                    let left = threads[i].left_wait.replace(false);
                    progressed |= left || !(was_blocked && matches!(next, State::Blocked));
                    state[i] = next;
                }
            }
        }
        progressed |= resolve_barriers(&mut state, per_block);
        progressed |= match resolve_warps(launch, &threads, &mut state, per_block) {
            Ok(p) => p,
            Err(e) => return Err(asserted.unwrap_or(e)),
        };
        if state.iter().all(|s| *s == State::Done) {
            return asserted.map_or(Ok(()), Err);
        }
        let now = Instant::now();
        if progressed {
            seen = launch.group.bump();
            last_progress = now;
            suspect = false;
            idle_rounds = 0;
        } else {
            let g = progress.load(Ordering::Relaxed);
            if g != seen {
                seen = g;
                last_progress = now;
                suspect = false;
                idle_rounds = 0;
            } else {
                // This rank resumed every thread and none progressed.
                launch.group.quiet[launch.rank as usize].store(g + 1, Ordering::Release);
                let idle = now - last_progress;
                let settled = launch.group.all_settled(launch.world)
                    && launch.group.all_quiet(launch.world, g);
                // After a failed assertion, the launch ends as soon as the
                // whole group has settled with nothing left to do (its
                // other threads ran what they could, and what they wait
                // for will not come): the assertion is its error.
                if settled && idle >= ASSERT_SETTLE {
                    if let Some(e) = asserted {
                        return Err(e);
                    }
                }
                // A peer that exited ends a blocked launch as soon as the
                // group settles (what it sent before it left has been
                // taken by now), not after the stall.
                // The report names what each blocked thread waits for, as
                // a hang's does, and says which rank left.
                let down = launch.group.peer_down(launch.rank as usize);
                if let Some(d) = &down {
                    if settled && idle >= DOWN_STALL {
                        if suspect {
                            return Err(asserted.unwrap_or_else(|| {
                                match hang(launch, &threads, &state, now - last_progress) {
                                    Error::KernelHang {
                                        kernel,
                                        rank,
                                        group,
                                        stalled,
                                        report,
                                    } => Error::KernelHang {
                                        kernel,
                                        rank,
                                        group,
                                        stalled,
                                        report: format!(
                                            "{report}\n  (rank {}{} {})",
                                            d.rank, launch.group_name, d.cause
                                        ),
                                    },
                                    other => other,
                                }
                            }));
                        }
                        suspect = true;
                        continue;
                    }
                }
                if idle >= stall && (settled || idle >= Duration::from_nanos(launch.timeout_ns)) {
                    if suspect {
                        return Err(asserted.unwrap_or_else(|| {
                            hang(launch, &threads, &state, now - last_progress)
                        }));
                    }
                    suspect = true;
                    continue;
                }
            }
            idle_rounds = idle_rounds.saturating_add(1);
            if idle_rounds <= POLL_ROUNDS {
                std::thread::yield_now();
            } else {
                // From 20 µs, doubling to 1 ms.
                let shift = (idle_rounds - POLL_ROUNDS).min(6);
                let at_most = Duration::from_micros(20 << shift).min(Duration::from_millis(1));
                launch.group.doze(seen, at_most);
            }
        }
    }
}

/// Rounds with no progress anywhere that a rank polls through (yielding its
/// core) before it dozes.
const POLL_ROUNDS: u32 = 16;

/// Releases every block whose live threads all wait at the barrier.
fn resolve_barriers(state: &mut [State], per_block: usize) -> bool {
    let mut any = false;
    for b in 0..state.len() / per_block {
        let s = &mut state[b * per_block..(b + 1) * per_block];
        let live = s.iter().filter(|x| **x != State::Done).count();
        let at = s.iter().filter(|x| matches!(x, State::Barrier(_))).count();
        if live > 0 && at == live {
            s.iter_mut()
                .filter(|x| matches!(x, State::Barrier(_)))
                .for_each(|x| *x = State::Ready(0));
            any = true;
        }
    }
    any
}

/// Completes every warp whose live lanes all reached the same collective.
fn resolve_warps(
    launch: &Launch,
    threads: &[Box<Thread>],
    state: &mut [State],
    per_block: usize,
) -> Result<bool> {
    let mut any = false;
    for b in 0..state.len() / per_block {
        for w0 in (0..per_block).step_by(32) {
            let base = b * per_block + w0;
            let lanes = (per_block - w0).min(32);
            let warp = &mut state[base..base + lanes];
            // The common case: nobody waits at a collective; allocate nothing.
            if !warp.iter().any(|s| matches!(s, State::Collective(_))) {
                continue;
            }
            let live: Vec<usize> = (0..lanes).filter(|&l| warp[l] != State::Done).collect();
            if live.is_empty()
                || !live
                    .iter()
                    .all(|&l| matches!(warp[l], State::Collective(_)))
            {
                continue;
            }
            let kinds: Vec<Collective> = live
                .iter()
                .map(|&l| match warp[l] {
                    State::Collective(c) => c,
                    _ => unreachable!("checked above"),
                })
                .collect();
            let results: Vec<u64> = match kinds[0] {
                Collective::Ballot(..) => {
                    if !kinds.iter().all(|k| matches!(k, Collective::Ballot(..))) {
                        return Err(divergent(launch, &threads[base], &kinds));
                    }
                    let mask = live.iter().zip(&kinds).fold(0u64, |m, (&l, k)| match k {
                        Collective::Ballot(true, _) => m | (1 << l),
                        _ => m,
                    });
                    vec![mask; live.len()]
                }
                Collective::Shfl(..) => {
                    // Every lane at the same kind of shuffle, as the GPU's
                    // `shfl.sync` needs of the lanes it names.
                    let first = match kinds[0] {
                        Collective::Shfl(_, _, w, _) => w,
                        Collective::Ballot(..) => unreachable!("matched above"),
                    };
                    if !kinds
                        .iter()
                        .all(|k| matches!(k, Collective::Shfl(_, _, w, _) if *w == first))
                    {
                        return Err(divergent(launch, &threads[base], &kinds));
                    }
                    let value = |k: &Collective| match *k {
                        Collective::Shfl(v, ..) => v,
                        Collective::Ballot(..) => unreachable!("checked above"),
                    };
                    let val =
                        |l: usize| live.iter().position(|&x| x == l).map(|p| value(&kinds[p]));
                    kinds
                        .iter()
                        .map(|k| match *k {
                            Collective::Shfl(v, src, ..) => val(src as usize).unwrap_or(v),
                            Collective::Ballot(..) => unreachable!("checked above"),
                        })
                        .collect()
                }
            };
            for (&l, r) in live.iter().zip(results) {
                warp[l] = State::Ready(r);
            }
            any = true;
        }
    }
    Ok(any)
}

fn divergent(launch: &Launch, t: &Thread, kinds: &[Collective]) -> Error {
    let locs: Vec<String> = kinds
        .iter()
        .map(|k| match k {
            Collective::Shfl(_, _, w, l) => format!("{w} at {l}"),
            Collective::Ballot(_, l) => format!("ballot at {l}"),
        })
        .collect();
    Error::KernelFault {
        kernel: launch.name.to_string(),
        rank: launch.rank as usize,
        group: launch.group_name.clone(),
        message: format!(
            "block {}: the lanes of one warp reached different collectives ({}); every lane must reach the same one",
            t.linear_block,
            locs.join(", ")
        ),
    }
}

fn fault(launch: &Launch, t: &Thread, payload: Box<dyn std::any::Any + Send>) -> Error {
    let payload = match payload.downcast::<ThreadEnd>() {
        Ok(end) => {
            let (kernel, rank) = (launch.name.to_string(), launch.rank as usize);
            let group = launch.group_name.clone();
            let (block, thread) = (t.linear_block, t.linear_thread);
            return match *end {
                ThreadEnd::Assert(message, location) => Error::KernelAssert {
                    kernel,
                    rank,
                    group,
                    block,
                    thread,
                    message: message.to_string(),
                    location,
                },
                ThreadEnd::Mismatch(peer) => Error::CallMismatch {
                    kernel,
                    rank,
                    group,
                    block,
                    thread,
                    peer,
                },
                // Taken as the thread's end before `fault` is called.
                ThreadEnd::Exit => unreachable!("an exit is no fault"),
            };
        }
        Err(p) => p,
    };
    let message = match payload.downcast::<Fault>() {
        Ok(f) => f.0,
        Err(p) => {
            let m = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a non-string panic".into());
            format!("{}: panicked: {m}", t.place())
        }
    };
    Error::KernelFault {
        kernel: launch.name.to_string(),
        rank: launch.rank as usize,
        group: launch.group_name.clone(),
        message,
    }
}

/// Groups the threads that cannot proceed by what they wait for.
fn hang(launch: &Launch, threads: &[Box<Thread>], state: &[State], stall: Duration) -> Error {
    let mut groups: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
    for (t, s) in threads.iter().zip(state) {
        let key = match *s {
            State::Blocked => match t.waiting.get() {
                // SAFETY: the thread is suspended inside its wait loop, whose
                // frame (`wait_for`, whose guard clears it on exit) or whose
                // `turn` (`wait_turn`, until `end_wait`) holds `what`.
                Some((what, loc)) => format!("{} at {loc}", unsafe { &*what }()),
                None => continue,
            },
            State::Barrier(loc) => {
                format!("sync_threads() at {loc}, waiting for the block's other threads")
            }
            State::Collective(Collective::Shfl(_, _, what, loc)) => {
                format!("{what} at {loc}, waiting for the warp's other lanes")
            }
            State::Collective(Collective::Ballot(_, loc)) => {
                format!("ballot at {loc}, waiting for the warp's other lanes")
            }
            State::Ready(_) | State::Done => continue,
        };
        groups
            .entry(key)
            .or_default()
            .push((t.linear_block, t.linear_thread));
    }
    let mut report = String::new();
    for (what, who) in &groups {
        let mut by_block: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for &(b, t) in who {
            by_block.entry(b).or_default().push(t);
        }
        let places: Vec<String> = by_block
            .iter()
            .map(|(b, ts)| {
                format!(
                    "block {b} thread{} {}",
                    if ts.len() > 1 { "s" } else { "" },
                    ranges(ts)
                )
            })
            .collect();
        report.push_str(&format!(
            "\n  rank {}{}, {}: {what}",
            launch.rank,
            launch.group_name,
            places.join("; ")
        ));
    }
    Error::KernelHang {
        kernel: launch.name.to_string(),
        rank: launch.rank as usize,
        group: launch.group_name.clone(),
        stalled: stall,
        report,
    }
}

/// `[0, 1, 2, 5]` as `0..=2, 5`.
fn ranges(v: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}..={}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{InProcessStore, Store};

    /// An exit stops its own rank's waits, and that of a rank past the
    /// abort word's 32 bits (a group that spans domains) none, with no
    /// overflowing shift; a failure stops every wait.
    #[test]
    fn an_exit_stops_its_rank_or_every_rank_past_the_word() {
        let down = |rank, failed| Down {
            rank,
            failed,
            cause: String::new(),
            kind: None,
        };
        assert_eq!(down(3, false).stopped_ranks(), 1 << 3);
        assert_eq!(down(31, false).stopped_ranks(), 1 << 31);
        assert_eq!(down(71, false).stopped_ranks(), 1 << 71);
        assert_eq!(down(72, false).stopped_ranks(), 0);
        assert_eq!(down(4095, false).stopped_ranks(), 0);
        assert_eq!(down(3, true).stopped_ranks(), u128::MAX);
    }

    /// A stall is a deadlock only once every rank in a launch has polled
    /// all its threads since the last progress: a rank whose OS thread has
    /// not run since it entered its launch (seen under load: 2 s late, while
    /// its peers declared a hang it was about to resolve) holds it off.
    #[test]
    fn a_rank_that_has_not_polled_since_progress_holds_off_a_hang() {
        let g = Group::default();
        for r in 0..3 {
            g.status[r].store(IN_LAUNCH, Ordering::Release);
        }
        let p = 7;
        g.quiet[0].store(p + 1, Ordering::Release);
        g.quiet[1].store(p + 1, Ordering::Release);
        assert!(g.all_settled(3));
        assert!(!g.all_quiet(3, p), "rank 2 has not polled since progress 7");
        g.quiet[2].store(p, Ordering::Release);
        assert!(!g.all_quiet(3, p), "rank 2 polled before progress 7 only");
        g.status[2].store(FINISHED, Ordering::Release);
        assert!(g.all_quiet(3, p), "a finished rank never progresses");
        g.status[1].store(ON_HOST, Ordering::Release);
        assert!(
            !g.all_settled(3) && !g.all_quiet(3, p),
            "rank 1 is on the host"
        );
    }

    /// A group on a new store never inherits a finished group's counts,
    /// even where the allocator hands the new store the old one's address
    /// (which, keyed by address alone, made every later group look settled).
    #[test]
    fn a_new_store_starts_a_new_group() {
        let prefix: Arc<str> = "default/1".into();
        for _ in 0..100 {
            let old: Arc<dyn Store> = Arc::new(InProcessStore::new());
            let a = GroupKey::of(&old, prefix.clone());
            let b = GroupKey::of(&old, prefix.clone());
            assert!(Arc::ptr_eq(&a.state, &b.state), "one group, one state");
            for r in 0..3 {
                a.state.status[r].store(FINISHED, Ordering::Release);
            }
            drop((a, b, old));
            let new: Arc<dyn Store> = Arc::new(InProcessStore::new());
            let c = GroupKey::of(&new, prefix.clone());
            assert!(!c.state.all_settled(2));
        }
    }
}
