//! Ranks and groups: [`Comm`], and the entry points that create one per rank.

use std::collections::HashMap;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::CudaStream;

use crate::backend::{Backend, BackendKind, CudaBackend, HostBackend, Sharing};
use crate::error::{Error, ErrorKind, GroupName, Result};
use crate::layout::{MAX_DOMAIN_SIZE, MAX_GROUP_SIZE, MAX_WORLD_SIZE};
use crate::placement::Placement;
use crate::store::Store;
use crate::topology::Topology;

/// Options shared by every rank of a group. Build with
/// `CommOptions::default().with_timeout(..)`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CommOptions {
    /// How long a rendezvous, and joining the group (GPU ranks), waits for
    /// the other ranks before failing with an error that names the missing
    /// ones.
    pub timeout: Duration,
    /// Namespace for this group's keys in the store, so several groups can
    /// share one store.
    pub group: String,
    /// How long a signal wait inside a `#[symm_kernel]` may spin before the
    /// kernel records a timeout (reported by the next `synchronize`).
    pub kernel_timeout: Duration,
    /// Whether symm's built-in kernels use programmatic dependent launch
    /// ([`LaunchConfig::pdl`](crate::LaunchConfig::pdl)), so back-to-back
    /// calls overlap one kernel's launch with the previous one's tail. On by
    /// default; off is for comparison and for tools that mishandle it.
    pub pdl: bool,
    /// Whether [`Comm::check_call`] compares the ranks' calls on the host
    /// (on by default). Off leaves ranks that make different
    /// calls to the kernels' own checks, or to their timeouts where the
    /// calls use different kernels: for testing those.
    pub check_calls: bool,
    /// Simulated nodes: the group's ranks split into this many NVLink
    /// domains of consecutive ranks (as torchrun numbers nodes), between
    /// which symm maps no memory, so that multi-node code runs on one
    /// machine. `None` reads [`NODES_VAR`](crate::NODES_VAR) (`SYMM_NODES`),
    /// else 1. A subgroup keeps its ranks' domains and ignores this.
    pub nodes: Option<usize>,
}

impl Default for CommOptions {
    fn default() -> Self {
        CommOptions {
            timeout: Duration::from_secs(60),
            group: "symm".into(),
            kernel_timeout: Duration::from_secs(10),
            pdl: true,
            check_calls: true,
            nodes: None,
        }
    }
}

impl CommOptions {
    /// Sets [`timeout`](Self::timeout).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`nodes`](Self::nodes).
    pub fn with_nodes(mut self, nodes: usize) -> Self {
        self.nodes = Some(nodes);
        self
    }

    /// The simulated nodes: [`nodes`](Self::nodes), else `SYMM_NODES`,
    /// else 1; an error for 0, or for more nodes than ranks.
    fn simulated_nodes(&self, rank: usize, world: usize) -> Result<usize> {
        let nodes = match self.nodes {
            Some(n) => n,
            None => match std::env::var(crate::NODES_VAR) {
                Ok(v) => v.trim().parse().map_err(|_| Error::InvalidArgument {
                    rank,
                    group: GroupName::NONE,
                    message: format!("{}={v:?} is not a number of nodes", crate::NODES_VAR),
                })?,
                Err(_) => 1,
            },
        };
        if nodes == 0 || nodes > world {
            return Err(Error::InvalidArgument {
                rank,
                group: GroupName::NONE,
                message: format!(
                    "{nodes} simulated nodes for {world} ranks: give 1 to {world} \
                     (CommOptions::nodes or {})",
                    crate::NODES_VAR
                ),
            });
        }
        Ok(nodes)
    }

    /// Sets [`pdl`](Self::pdl).
    pub fn with_pdl(mut self, pdl: bool) -> Self {
        self.pdl = pdl;
        self
    }

    /// Sets [`check_calls`](Self::check_calls).
    pub fn with_check_calls(mut self, on: bool) -> Self {
        self.check_calls = on;
        self
    }

    /// Sets [`kernel_timeout`](Self::kernel_timeout).
    pub fn with_kernel_timeout(mut self, timeout: Duration) -> Self {
        self.kernel_timeout = timeout;
        self
    }

    /// Sets [`group`](Self::group).
    pub fn with_group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }
}

/// State shared by every handle to one rank (clones and stream variants).
struct RankState {
    /// Tells the group when this rank leaves it (see [`Departure`]). First,
    /// so it drops first: freeing the rank's memory (its extensions) may
    /// wait on kernels of peers that wait on this rank.
    departure: Departure,
    /// See [`Comm::extension`].
    extensions: Mutex<HashMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>>>,
    /// Held by whoever makes an extension of the type.
    making: Mutex<HashMap<std::any::TypeId, Arc<Mutex<()>>>>,
    next_alloc: AtomicU64,
    /// See [`Comm::kernel_failed`].
    kernel_failed: AtomicBool,
    /// How many times this rank has split the group ([`Comm::split`]).
    splits: AtomicU64,
    /// Which ranks of the group share a device.
    placement: Placement,
    /// The rank across its groups: shared with its subgroups' states
    /// ([`Comm::split`]), whose memory each may use, as their streams are
    /// the ones every free of the rank's memory waits for.
    home: Arc<Home>,
    /// See [`Comm::group_label`].
    label: Arc<str>,
    /// See [`Comm::group_name`].
    name: GroupName,
    /// See [`Comm::topology`].
    topology: Topology,
    /// This group's domain and rail subgroups ([`Comm::domain`],
    /// [`Comm::rails`]), made together at the first ask; the domain is
    /// `None` where it is this group itself.
    tiers: Mutex<Option<(Option<Comm>, Comm)>>,
}

/// What a rank's state and its subgroups' share (see `RankState::home`).
struct Home;

/// Whose memory it is: the rank's state in one group (`id`, which a
/// clone or a stream variant of the rank shares) and the rank across its
/// groups (`home`, which its subgroups share too), as a launch checks it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The rank state of the group (a [`Comm`] and its clones).
    pub id: usize,
    /// The rank, whichever of its groups.
    pub home: usize,
}

/// One rank of a group: its rank, the world size, its device and stream, and
/// the group's store. User code is written per rank (SPMD) against a `Comm`.
#[derive(Clone)]
pub struct Comm {
    rank: usize,
    world_size: usize,
    /// The group's store as [`Comm::store`] hands it out: its waits also
    /// fail when a rank of the group fails or exits ([`Watched`]).
    store: Arc<dyn Store>,
    /// The store itself (what the emulator's group state is keyed by).
    raw_store: Arc<dyn Store>,
    options: Arc<CommOptions>,
    pub(crate) backend: Arc<dyn Backend>,
    state: Arc<RankState>,
    /// The group in this process: `<group>/<generation>`, which every store
    /// key of the group starts with, and the emulator's state of it.
    group: crate::emulator::GroupKey,
    /// Whether this handle maps memory across the group's simulated
    /// domains: the emulator's stand-in for NCCL between them
    /// ([`Comm::__emulated_network`]).
    network: bool,
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("device", &self.backend.label())
            .finish()
    }
}

impl Comm {
    /// A rank on CUDA device `ordinal`. Every rank of the group must pass the
    /// same `world_size`, store and options. Collective: it waits (at most
    /// `options.timeout`, then [`Error::JoinTimeout`]) for every rank to
    /// join, so that each learns which ranks share a GPU (and, on a store
    /// other processes can reach, which share a call ledger:
    /// [`Comm::check_call`]).
    pub fn cuda(
        rank: usize,
        world_size: usize,
        ordinal: usize,
        store: Arc<dyn Store>,
        options: CommOptions,
    ) -> Result<Comm> {
        check_world(rank, world_size)?;
        let backend = Arc::new(CudaBackend::new(rank, ordinal, Sharing::InProcess)?);
        Comm::with_backend(rank, world_size, store, options, backend)
    }

    /// A simulated rank whose memory lives on the host (the CPU emulator).
    /// On an in-process store the ranks join without waiting for each
    /// other (one thread may create them in turn); on a store that other
    /// processes can reach ([`Store::in_process`] false), joining is
    /// collective, as for [`Comm::cuda`]: every rank's process learns which
    /// ranks share its call ledger ([`Comm::check_call`]), unless
    /// [`CommOptions::check_calls`] is off.
    pub fn emulated(
        rank: usize,
        world_size: usize,
        store: Arc<dyn Store>,
        options: CommOptions,
    ) -> Result<Comm> {
        check_world(rank, world_size)?;
        Comm::with_backend(
            rank,
            world_size,
            store,
            options,
            Arc::new(HostBackend::new(rank)),
        )
    }

    pub(crate) fn with_backend(
        rank: usize,
        world_size: usize,
        store: Arc<dyn Store>,
        options: CommOptions,
        backend: Arc<dyn Backend>,
    ) -> Result<Comm> {
        Comm::sharing_devices(rank, world_size, store, options, backend, 1, None)
    }

    /// [`Comm::with_backend`] for a group whose ranks share their devices
    /// with at least `min_share` ranks of another group (a subgroup's
    /// parent's), which its kernels' co-resident grids must leave room for;
    /// `parent` is a subgroup's rank's home and the subgroup's name.
    fn sharing_devices(
        rank: usize,
        world_size: usize,
        store: Arc<dyn Store>,
        options: CommOptions,
        backend: Arc<dyn Backend>,
        min_share: usize,
        parent: Option<(Arc<Home>, GroupName, Topology)>,
    ) -> Result<Comm> {
        let name = parent
            .as_ref()
            .map_or(GroupName::NONE, |(_, name, _)| name.clone());
        // Before the store, as a bad world size: a bad node count must not
        // join first.
        let nodes = match parent {
            Some(_) => 1,
            None => options.simulated_nodes(rank, world_size)?,
        };
        let store_err = |source| Error::Store {
            rank,
            group: name.clone(),
            source,
        };
        // The n-th rank `r` to join a group on this store belongs to its n-th
        // generation. Ranks of one group (each joining once) agree on n without
        // waiting for each other, and a later group on the same store never
        // sees an earlier group's keys.
        let generation = store
            .add(&format!("{}/join/{rank}", options.group), 1)
            .map_err(store_err)?;
        let prefix: Arc<str> = format!("{}/{generation}", options.group).into();
        if store.serves_others() {
            store
                .set(&host_key(&prefix), rank.to_string().as_bytes())
                .map_err(store_err)?;
        }
        // GPU ranks learn which of them share a device (and refuse two
        // processes on one) before anything can launch.
        let placement = match backend.device_id() {
            Some(mut id) => {
                // Compared at the join: ranks that disagree would build
                // different topologies.
                id.nodes = nodes as u32;
                crate::placement::join(rank, world_size, &*store, &prefix, options.timeout, &id)
                    .map_err(|e| e.in_group(&name))?
            }
            None => Placement::alone(world_size),
        }
        .with_min_share(min_share);
        let group = crate::emulator::GroupKey::of(&store, prefix);
        let watched: Arc<dyn Store> = Arc::new(Watched {
            inner: store.clone(),
            group: group.clone(),
            rank,
            world: world_size,
        });
        // A peer of this process that leaves ends this rank's device waits
        // on it at once (held weakly: the group state outlives the rank);
        // one of another process, once the store says so.
        group.state.on_down(rank, BackendStop::of(&backend));
        if backend.watches_store() && group.state.claim_watch() {
            watch_departures(&store, &group, rank, world_size);
        }
        // Should this process die without a word (killed), the store's
        // host says it for this rank; should the host die, the word's
        // connection says so.
        let last = down_record(
            true,
            None,
            b"ended without leaving the group: its process is gone (killed, or aborted \
              without unwinding)",
        );
        let word = store
            .last_word(
                &down_key(&group.prefix, rank),
                &last,
                &down_count_key(&group.prefix),
            )
            .unwrap_or_else(|e| {
                tracing::warn!(
                    rank,
                    "cannot leave a last word with the group's store ({e}): should this \
                     process be killed, its peers will wait for the group's timeout"
                );
                None
            });
        if let Some(word) = word {
            let host = store
                .try_get(&host_key(&group.prefix))
                .ok()
                .flatten()
                .and_then(|v| String::from_utf8(v).ok()?.parse().ok());
            group.state.hold_last_word(rank, word, host);
        }
        let departure = Departure {
            store: store.clone(),
            group: group.clone(),
            rank,
            backend: backend.clone(),
        };
        // Only where ranks of other processes can be: a group on an
        // in-process store shares one state, and stays joinable from one
        // thread, rank after rank, as an emulated group is.
        if !store.in_process() && options.check_calls {
            if let Err(e) = join_ledger(
                (rank, &name),
                world_size,
                &*watched,
                &group,
                options.timeout,
            ) {
                // Peers waiting in their own join hear of it now.
                departure.record(
                    true,
                    cause_kind(&e),
                    format!("failed to join: {}", clip(&e.to_string())),
                );
                return Err(e);
            }
        }
        let (home, label, topology): (_, Arc<str>, _) = match parent {
            Some((home, name, topology)) => {
                (home, name.label().unwrap_or_default().into(), topology)
            }
            None => (
                Arc::new(Home),
                options.group.as_str().into(),
                Topology::top_level(placement.domains(), nodes),
            ),
        };
        check_domains(rank, &name, &topology)?;
        Ok(Comm {
            rank,
            world_size,
            store: watched,
            raw_store: store,
            options: Arc::new(options),
            network: false,
            backend,
            state: Arc::new(RankState {
                extensions: Mutex::new(HashMap::new()),
                making: Mutex::new(HashMap::new()),
                next_alloc: AtomicU64::new(0),
                kernel_failed: AtomicBool::new(false),
                splits: AtomicU64::new(0),
                placement,
                departure,
                home,
                label,
                name,
                topology,
                tiers: Mutex::new(None),
            }),
            group,
        })
    }

    /// The subgroup of the ranks that pass the same `color`, as MPI's
    /// `MPI_Comm_split` and NCCL's `ncclCommSplit`: its ranks are numbered
    /// by `key`, ties by their rank here. `None` joins no subgroup (the
    /// call returns `None`). Collective: every rank of this group calls it,
    /// and makes its splits in the same order.
    ///
    /// A subgroup is a group of its own: its own store namespace (under
    /// this group's), device stream (on a GPU) and failure record, and so
    /// its own allocations, rendezvous, staging, call counters and signal
    /// channels; memory from one group is not symmetric memory of another.
    /// Memory of this rank in any of its groups is still this rank's: any
    /// of them takes it as a kernel's `&[T]`/`&mut [T]` argument or a copy's
    /// side (a functional collective stages it where it needs symmetric
    /// memory). Freeing it waits for all the rank's streams, but a pool
    /// tensor's block is handed out again in its pool's stream order: so
    /// before dropping or rewriting memory that another group's work may
    /// still use, order the memory's group's stream after that work (pass
    /// that work's `Pending` to a call of the memory's group, or
    /// `synchronize`).
    /// On the emulator a rank may drive several subgroups from different
    /// threads at once. On GPUs not yet: kernels that wait for their peers,
    /// of two groups in flight at once, can hold every multiprocessor a
    /// peer's kernel needs, and grids are sized for one group at a time; so
    /// a rank runs one group's call at a time: each synchronised, or
    /// ordered on the device, before the next group's (a functional
    /// collective's `symm::functional::Pending` passed to another group's
    /// call orders it so). A subgroup's grids leave room for every rank of this
    /// group on its device ([`max_ranks_on_device`](Self::max_ranks_on_device)
    /// is at least this group's), so its members' kernels and those of
    /// the other subgroups' ranks on that device fit together.
    pub fn split(&self, color: Option<u32>, key: u32) -> Result<Option<Comm>> {
        let n = self.state.splits.fetch_add(1, Ordering::Relaxed);
        let store_err = |source| self.store_error(source);
        let entry = |r: usize| self.store_key(&format!("split/{n}/{r}"));
        let mine = match color {
            Some(c) => format!("{c} {key}"),
            None => "none".into(),
        };
        self.store
            .set(&entry(self.rank), mine.as_bytes())
            .map_err(store_err)?;
        let mut members = Vec::new();
        for r in 0..self.world_size {
            let v = self
                .store
                .get(&entry(r), self.options.timeout)
                .map_err(store_err)?;
            let v = String::from_utf8_lossy(&v);
            if v == "none" {
                continue;
            }
            let parsed = v
                .split_once(' ')
                .and_then(|(c, k)| Some((c.parse::<u32>().ok()?, k.parse::<u32>().ok()?)));
            let Some((c, k)) = parsed else {
                return Err(self.invalid(format!(
                    "split: rank {r} published {v:?}, not a color and a key (a rank that \
                     makes its splits in another order?)"
                )));
            };
            if Some(c) == color {
                members.push((k, r));
            }
        }
        let Some(color) = color else {
            return Ok(None);
        };
        members.sort_unstable();
        let Some(rank) = members.iter().position(|&(_, r)| r == self.rank) else {
            return Err(self.invalid(format!(
                "split: the store did not return this rank's own color {color}"
            )));
        };
        let options = (*self.options)
            .clone()
            .with_group(format!("{}/split/{n}/{color}", self.key_prefix()));
        let parents: Vec<usize> = members.iter().map(|&(_, r)| r).collect();
        let topology = self.state.topology.sub(&parents);
        let name = GroupName::of(format!(
            "{}.split{n}[{}]",
            self.group_label(),
            members
                .iter()
                .map(|(_, r)| r.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ));
        // Its kernels' grids leave room for every rank of this group on the
        // same device, which may run its own group's kernels meanwhile.
        Comm::sharing_devices(
            rank,
            members.len(),
            self.raw_store.clone(),
            options,
            self.backend.fork(rank, name.clone())?,
            self.max_ranks_on_device(),
            Some((self.state.home.clone(), name, topology)),
        )
        .map(Some)
    }

    /// This group as a `rows × (world / rows)` mesh, rank `r` at row
    /// `r / cols` and column `r % cols`: this rank's row group (the `cols`
    /// consecutive ranks of its row, numbered by column; tensor
    /// parallelism) and column group (the `rows` ranks of its column,
    /// numbered by row; data parallelism), made by two [`split`](Self::split)s.
    /// Collective, as `split`.
    pub fn mesh(&self, rows: usize) -> Result<(Comm, Comm)> {
        if rows == 0 || !self.world_size.is_multiple_of(rows) {
            return Err(self.invalid(format!(
                "a mesh of {rows} rows needs a world size that they divide, not {}",
                self.world_size
            )));
        }
        let cols = self.world_size / rows;
        let (row, col) = (self.rank / cols, self.rank % cols);
        let row_group = self.split(Some(row as u32), col as u32)?;
        let col_group = self.split(Some(col as u32), row as u32)?;
        match (row_group, col_group) {
            (Some(r), Some(c)) => Ok((r, c)),
            _ => unreachable!("every rank passes a color"),
        }
    }

    /// Prefix of this group's store keys.
    pub(crate) fn key_prefix(&self) -> &str {
        &self.group.prefix
    }

    /// A store key of this group's own: `suffix` under the prefix that
    /// every key of the group starts with, so that a library exchanging
    /// through the store never meets another group's keys on a shared store.
    pub fn store_key(&self, suffix: &str) -> String {
        format!("{}/{suffix}", self.key_prefix())
    }

    /// Identifies the group in this process (the emulator keeps per-group
    /// state under it).
    pub(crate) fn group_key(&self) -> &crate::emulator::GroupKey {
        &self.group
    }

    /// Which ranks of the group share a device.
    pub(crate) fn placement(&self) -> &Placement {
        &self.state.placement
    }

    /// What a launch on this rank needs to know of the group.
    pub(crate) fn launch_ctx(&self) -> crate::backend::LaunchCtx<'_> {
        crate::backend::LaunchCtx {
            rank: self.rank,
            world: self.world_size,
            kernel_timeout: self.options.kernel_timeout,
            placement: &self.state.placement,
            group: &self.group,
            name: self.group_name(),
        }
    }

    /// This rank's index, in `0..world_size`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks in the group.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Where this rank runs.
    pub fn backend_kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// How many ranks of this group run on this rank's device, itself
    /// included: 1 unless ranks share a GPU (`Ranks::Cuda(vec![0, 0])`).
    pub fn ranks_on_device(&self) -> usize {
        self.state.placement.ranks_on_device(self.rank)
    }

    /// The most ranks of this group on any one device (1 when every rank
    /// has its own GPU). The same on every rank.
    pub fn max_ranks_on_device(&self) -> usize {
        self.state.placement.share()
    }

    /// The most ranks of this group itself on one device: 1 where each of
    /// its ranks has a GPU of its own, though a parent's ranks may share
    /// them ([`max_ranks_on_device`](Self::max_ranks_on_device) counts
    /// those). What NCCL asks: one rank of a communicator per GPU.
    pub fn group_ranks_on_device(&self) -> usize {
        self.state.placement.own_share()
    }

    /// The largest grid that every rank of the group may launch of a kernel
    /// that waits on peers, where one multiprocessor holds `blocks_per_sm`
    /// of its blocks (a kernel module's `co_resident_grid` asks the driver
    /// for that figure), so that the kernels of ranks sharing a GPU are all
    /// resident at once: `blocks_per_sm × multiprocessors / (2 × ranks on
    /// the busiest GPU)`, the 2 because a rank's next kernel may become
    /// resident early (programmatic dependent launch). `None` when no rank
    /// shares its GPU: then any grid works. The same on every rank.
    pub fn co_resident_blocks(&self, blocks_per_sm: u32) -> Option<u32> {
        self.state.placement.co_resident_blocks(blocks_per_sm)
    }

    /// Where ranks share a GPU, the most blocks that the built-in kernels
    /// that wait on peers take: `multiprocessors / (4 × ranks on the
    /// busiest GPU)`, at least one, so that half the multiprocessors stay
    /// free of waiting blocks for other streams' kernels that a waiting
    /// one may depend on. A block of NCCL's (on the rails of a group that
    /// spans domains) needs most of a multiprocessor, so blocks spread one
    /// per multiprocessor keep it out: measured on 2 H200s, 4 ranks as 2
    /// domains sharing a GPU each, a domain's kernel waited past its
    /// timeout on a peer queued behind such an NCCL kernel (1 run in 6).
    /// `None` when no rank shares its GPU. The same on every rank.
    pub fn spread_blocks(&self) -> Option<u32> {
        self.state.placement.spread_blocks()
    }

    /// Human-readable device, for example `cuda:1 (NVIDIA H200, sm_90)`.
    pub fn device(&self) -> String {
        self.backend.label()
    }

    /// The group's store. Its waits also end, with an error naming the
    /// rank, as soon as a rank of the group fails or exits (see
    /// [`abort`](Self::abort)).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Tells every rank of the group that this one has failed with `cause`
    /// (its error): their pending and later group operations fail fast
    /// ([`Error::PeerFailed`]) instead of waiting for it until a timeout.
    /// [`run`](crate::run) does this for a rank that returns an error or
    /// panics, and a rank's `Comm` says it exited when its last handle
    /// drops (panicked, when dropped by a panic). The first word a rank
    /// says stands. Best effort: a store that cannot take the record leaves
    /// the peers to their timeouts. The peers' errors carry no kind of the
    /// cause: for a symm [`Error`], use [`abort_with`](Self::abort_with),
    /// so that their [`Error::root_kind`] is the cause's.
    pub fn abort(&self, cause: &dyn fmt::Display) {
        self.abort_as(None, cause);
    }

    /// [`Comm::abort`] for this rank's error `err`: the peers' errors then
    /// also carry its kind ([`Error::root_kind`]).
    pub fn abort_with(&self, err: &Error) {
        self.abort_as(cause_kind(err), err);
    }

    /// [`Comm::abort`] with the kind the peers' errors carry.
    pub(crate) fn abort_as(&self, kind: Option<crate::ErrorKind>, cause: &dyn fmt::Display) {
        self.state
            .departure
            .record(true, kind, format!("failed: {}", clip(&cause.to_string())));
    }

    /// The error of this rank's failed store operation `source`:
    /// [`Error::PeerFailed`] when a rank of the group has left (what the
    /// store waited for will never come), else [`Error::Store`].
    pub fn store_error(&self, source: crate::store::StoreError) -> Error {
        // A host that died breaks this call's connection a moment before
        // its last-word connection says why: give that a moment (only where
        // there is such a connection to tell).
        if matches!(source, crate::store::StoreError::Unavailable(_))
            && self.group.state.holds_last_word()
        {
            let until = std::time::Instant::now() + Duration::from_millis(100);
            while self.peer_down().is_none() && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        match self.peer_down() {
            Some(d) => d.error(self.rank, self.group_name()),
            None => Error::Store {
                rank: self.rank,
                group: self.group_name().clone(),
                source,
            },
        }
    }

    /// Why this rank's group operations cannot complete: a peer that
    /// failed or exited, if any.
    pub(crate) fn peer_down(&self) -> Option<crate::emulator::Down> {
        peer_down(&*self.raw_store, &self.group, self.rank, self.world_size)
    }

    /// A watch on the group's departures for a thread that must not keep
    /// this rank alive (a watchdog): unlike a `Comm` clone, it does not
    /// delay the rank's exit record.
    pub fn watch(&self) -> GroupWatch {
        GroupWatch {
            store: self.raw_store.clone(),
            group: self.group.clone(),
            rank: self.rank,
            name: self.group_name().clone(),
            world: self.world_size,
        }
    }

    /// The group's options.
    pub fn options(&self) -> &CommOptions {
        &self.options
    }

    /// The CUDA stream this handle enqueues on, or `None` on the emulator.
    pub fn cuda_stream(&self) -> Option<Arc<CudaStream>> {
        self.backend.cuda_stream().cloned()
    }

    /// The same rank, enqueueing on the caller's `stream` instead of symm's
    /// own. Allocations and rendezvous caches are shared with `self`. The
    /// rank keeps the stream (its memory waits for it before a free) until
    /// the rank is dropped; a stream that another rank on the same GPU
    /// already uses is an error.
    pub fn with_cuda_stream(&self, stream: Arc<CudaStream>) -> Result<Comm> {
        let backend = self.backend.with_cuda_stream(stream)?;
        // Its kernels read its own abort word: a departing peer must end
        // their waits too.
        self.group
            .state
            .on_down(self.rank, BackendStop::of(&backend));
        Ok(Comm {
            backend,
            ..self.clone()
        })
    }

    /// Numbers this rank's next call on signal channel `ch` of the group
    /// and checks it against the calls of the same number that the other
    /// ranks made there: `digest` must be the same on every rank
    /// for the same call, and differ between calls that must not pair up
    /// (a digest of the call's kind, sizes, types and buffers). A call
    /// whose digest differs from a peer's is a desynchronised group (one
    /// rank skipped a call, or made its calls in another order): this
    /// returns the error, naming both ranks and `describe()` (this rank's
    /// call), and aborts the rank with it ([`abort_with`](Self::abort_with)), so the peer's
    /// call, already waiting for this rank in a kernel, fails at once too
    /// instead of at the kernel timeout; the group cannot continue (make
    /// a new one). Built-in collectives call it before each launch; a
    /// kernel with a channel of its own may too.
    /// Calls on one channel must be made in one order on each rank (one
    /// stream). Ranks in other processes on the same host are compared
    /// too, through a ledger that the host's processes map when they join
    /// (where that cannot be made, a warning says so; between hosts, and
    /// in replayed CUDA graphs, the kernels' own identity checks are what
    /// catch them).
    pub fn check_call(
        &self,
        ch: u32,
        digest: u32,
        describe: impl FnOnce() -> String,
    ) -> Result<()> {
        if !self.options.check_calls {
            return Ok(());
        }
        let parted =
            self.group
                .state
                .ledger()
                .record(self.rank, self.world_size, ch as usize, digest);
        let Err(p) = parted else { return Ok(()) };
        let err = Error::Mismatch {
            rank: self.rank,
            group: self.group_name().clone(),
            message: format!(
                "the ranks made different calls: ranks {} and {} differ in call {} on signal \
                 channel {ch} (every rank must make the same collective calls in the same \
                 order); rank {}'s is {}",
                p.peer.min(self.rank),
                p.peer.max(self.rank),
                p.number,
                self.rank,
                describe(),
            ),
        };
        self.abort_with(&err);
        Err(err)
    }

    /// Waits for everything enqueued on this handle's stream, and reports
    /// the first failure a kernel recorded since the last call (a signal
    /// timeout, an index out of bounds, a failed `kernel_assert!`).
    pub fn synchronize(&self) -> Result<()> {
        let r = self
            .backend
            .synchronize_watching(&|| self.peer_down().map(|d| d.stopped_ranks()));
        self.note_kernel_result(r)
    }

    /// Whether a kernel of this rank has reported a failure (a timeout in
    /// the kernel, a failed `kernel_assert!`, a call mismatch, or a fault
    /// or hang on the emulator). A wait that gave up
    /// may leave a peer's late data in staging that the next call would read
    /// as fresh, and call counters out of step with the peers', so the
    /// built-in all-reduce refuses to run on this rank afterwards (its peers
    /// then time out naming it). Make a new group to continue.
    pub fn kernel_failed(&self) -> bool {
        self.state.kernel_failed.load(Ordering::Acquire)
    }

    /// Passes `r` through, remembering a kernel failure for
    /// [`kernel_failed`](Self::kernel_failed).
    pub(crate) fn note_kernel_result(&self, r: Result<()>) -> Result<()> {
        if let Err(
            Error::SignalTimeout { .. }
            | Error::KernelFault { .. }
            | Error::KernelAssert { .. }
            | Error::CallMismatch { .. }
            | Error::KernelHang { .. }
            | Error::PeerFailed { .. },
        ) = &r
        {
            self.state.kernel_failed.store(true, Ordering::Release);
        }
        // A wait the host stopped knows only whom it waited on: the
        // group's record says why that rank (or the first to fail) left.
        if let Err(Error::PeerFailed { .. }) = &r {
            if let Some(d) = self.peer_down() {
                return Err(d.error(self.rank, self.group_name()));
            }
        }
        r
    }

    /// Free and total memory of this rank's device, in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.backend.mem_info()
    }

    /// Per-rank state of type `E` that lives as long as this rank's `Comm`
    /// (shared by its clones): built-in kernels keep scratch buffers here.
    /// `make` runs when there is none yet, or when `keep` rejects the current
    /// one (to grow it), and gets the rejected one (to keep it alive, say, for
    /// CUDA graphs captured while it was current). `E` must not hold a
    /// `Comm`, which would keep itself alive.
    pub fn extension<E: std::any::Any + Send + Sync>(
        &self,
        keep: impl Fn(&E) -> bool,
        make: impl FnOnce(Option<Arc<E>>) -> Result<E>,
    ) -> Result<Arc<E>> {
        let id = std::any::TypeId::of::<E>();
        let current = || -> Option<Arc<E>> {
            let map = self
                .state
                .extensions
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            map.get(&id).cloned().and_then(|a| a.downcast::<E>().ok())
        };
        if let Some(e) = current().filter(|e| keep(e)) {
            return Ok(e);
        }
        // One maker at a time per type: two handles of this rank must not
        // both make one, and the second replace the first (whose users would
        // then hold state the rank has forgotten). Per type, not one lock for
        // all, because a maker may need another type's extension.
        let gate = self
            .state
            .making
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id)
            .or_default()
            .clone();
        let _gate = gate.lock().unwrap_or_else(|p| p.into_inner());
        let current = current();
        if let Some(e) = current.as_ref().filter(|e| keep(e)) {
            return Ok(e.clone());
        }
        let e = Arc::new(make(current)?);
        self.state
            .extensions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, e.clone());
        Ok(e)
    }

    /// The id of this rank's next symmetric allocation: allocations pair up
    /// across ranks by it.
    pub(crate) fn next_alloc_id(&self) -> u64 {
        self.state.next_alloc.fetch_add(1, Ordering::Relaxed)
    }

    /// Identifies this rank's state, shared by its clones and stream variants.
    pub(crate) fn owner_id(&self) -> usize {
        Arc::as_ptr(&self.state) as *const () as usize
    }

    /// Whose memory this rank allocates.
    pub(crate) fn owner(&self) -> Owner {
        Owner {
            id: self.owner_id(),
            home: Arc::as_ptr(&self.state.home) as usize,
        }
    }

    /// This group as errors name it: the group's name
    /// ([`CommOptions::group`]) and, for a subgroup, `.split<n>` (its
    /// parent's n-th [`split`](Self::split)) and its parent's ranks in it,
    /// in this group's rank order: `symm.split1[0,2]` is the second split
    /// of group `symm`, made of its ranks 0 and 2.
    pub fn group_label(&self) -> &str {
        &self.state.label
    }

    /// The group's NVLink domains: which ranks can map each other's
    /// memory ([`Topology`]).
    pub fn topology(&self) -> &Topology {
        &self.state.topology
    }

    /// The subgroup of this rank's NVLink domain (this group itself where
    /// it has one domain), on which symmetric memory and kernels work.
    ///
    /// Collective the first time it or [`rails`](Self::rails) is asked
    /// for: every rank of the group asks at the same point (the two
    /// subgroups are made together, by two [`split`](Self::split)s).
    pub fn domain(&self) -> Result<Comm> {
        Ok(self.tiers()?.0)
    }

    /// The subgroup of the ranks with this rank's index in their domain,
    /// one per domain (a rail, as NCCL's hierarchical algorithms cross
    /// domains), numbered by domain. Collective the first time, as
    /// [`domain`](Self::domain).
    pub fn rails(&self) -> Result<Comm> {
        Ok(self.tiers()?.1)
    }

    /// (domain, rails), made at the first ask.
    fn tiers(&self) -> Result<(Comm, Comm)> {
        let mut tiers = self.state.tiers.lock().unwrap_or_else(|p| p.into_inner());
        if tiers.is_none() {
            let t = &self.state.topology;
            let domain = match t.spans_domains() {
                true => self.split(Some(t.domain_of(self.rank) as u32), 0)?,
                false => None,
            };
            let rails = self
                .split(
                    Some(t.local_rank(self.rank) as u32),
                    t.domain_of(self.rank) as u32,
                )?
                .ok_or_else(|| self.invalid("rails: the split returned no group"))?;
            *tiers = Some((domain, rails));
        }
        let (domain, rails) = tiers.as_ref().expect("made above");
        Ok((
            domain.clone().unwrap_or_else(|| self.clone()),
            rails.clone(),
        ))
    }

    /// This rank of an emulated group whose domains are all simulated, as
    /// a handle that maps memory across them: what stands in for NCCL
    /// between the domains on the emulator (`symm::functional`'s
    /// hierarchical collectives run their inter-domain leg on it), where
    /// every rank's memory is host memory. `None` on GPUs, whose domains
    /// NCCL crosses, and for a group larger than [`MAX_WORLD_SIZE`] (how
    /// far the stand-in is tested). For tests of multi-node code only.
    #[doc(hidden)]
    pub fn __emulated_network(&self) -> Option<Comm> {
        // (The stand-in is checked, in tests, up to 8 ranks.)
        let fits = self.world_size <= MAX_WORLD_SIZE;
        (fits && self.backend.kind() == crate::BackendKind::Emulator).then(|| Comm {
            network: true,
            ..self.clone()
        })
    }

    /// Whether this handle is [`__emulated_network`](Self::__emulated_network)'s.
    #[doc(hidden)]
    pub fn __is_emulated_network(&self) -> bool {
        self.network
    }

    /// An error unless the group lies in one NVLink domain: what symmetric
    /// memory and kernels need (`what` names the refused operation).
    pub(crate) fn one_domain(&self, what: impl FnOnce() -> String) -> Result<()> {
        let t = &self.state.topology;
        if !t.spans_domains() || self.network {
            return Ok(());
        }
        let what = what();
        Err(self.error(
            ErrorKind::Unsupported,
            format!(
                "{what}: this group spans NVLink domains ({t}), and symm maps memory only \
                 within one; use comm.domain() for symmetric memory and kernels, and \
                 symm::functional for collectives across domains (NCCL between them)"
            ),
        ))
    }

    /// Whether `other` is this rank in this group (a clone of this handle,
    /// or one on another stream): the group whose symmetric memory this
    /// rank's allocations are, as opposed to a subgroup's or the parent's.
    pub fn same_group(&self, other: &Comm) -> bool {
        self.owner_id() == other.owner_id()
    }

    /// Whether this group is a subgroup ([`split`](Self::split)), whose
    /// ranks errors qualify with its [`group_label`](Self::group_label).
    pub fn is_subgroup(&self) -> bool {
        self.state.name.label().is_some()
    }

    /// The group as errors qualify its ranks: a subgroup's label, none for
    /// a group not made by a split.
    pub fn group_name(&self) -> &GroupName {
        &self.state.name
    }

    /// This rank with its group's label, even a top-level group's
    /// (`rank 1 of group symm`, `rank 1 of group symm.split1[0,2]`): how
    /// an error names memory of another group's rank.
    pub fn describe_rank(&self) -> String {
        format!("rank {} of group {}", self.rank, self.group_label())
    }

    /// The argument-check error of `kind` ([`Error::with_kind`]) on this
    /// rank of this group: [`Error::Mismatch`], [`Error::Unsupported`] or
    /// [`Error::Capacity`], and [`Error::InvalidArgument`] for any other
    /// kind.
    pub fn error(&self, kind: ErrorKind, message: impl Into<String>) -> Error {
        Error::with_kind(kind, self.rank, self.group_name().clone(), message.into())
    }

    /// [`Error::Driver`] on this rank of this group, for a failed driver
    /// call `op` that the caller made through cudarc (a stream, a graph).
    pub fn driver_error(&self, op: &'static str, source: cudarc::driver::DriverError) -> Error {
        Error::Driver {
            rank: self.rank,
            group: self.group_name().clone(),
            device: self.device(),
            op,
            source,
        }
    }

    pub(crate) fn invalid(&self, message: impl Into<String>) -> Error {
        self.error(ErrorKind::InvalidArgument, message)
    }

    /// [`Error::Capacity`] on this rank: a fixed resource is used up.
    pub(crate) fn capacity(&self, message: impl Into<String>) -> Error {
        self.error(ErrorKind::Capacity, message)
    }
}

/// Store keys of the group's departures (see [`Departure`]): a counter
/// that says whether there are any, and one record per rank.
fn down_count_key(prefix: &str) -> String {
    format!("{prefix}/down")
}

/// Gives the ranks of each host one call ledger ([`Comm::check_call`])
/// where they do not all share this process's group state (ranks of other
/// processes, or of another store connection here): the host's lowest
/// rank makes it in a memfd and serves the file (same user only, see
/// [`crate::ipc`]) until every other rank on the host has mapped it or
/// holds it through that rank's state. Ranks that all share one state keep
/// the heap ledger. Each state settles its ledger once, before any of its
/// ranks can call: one that cannot be shared (no memfd; a fetch that
/// fails) leaves that state its own, with a warning, and the kernels' own
/// identity checks still hold. Ranks on other hosts are compared by those
/// checks only.
fn join_ledger(
    (rank, name): (usize, &GroupName),
    world: usize,
    store: &dyn Store,
    group: &crate::emulator::GroupKey,
    timeout: Duration,
) -> Result<()> {
    let prefix = &group.prefix;
    let key = |what: &str, r: usize| format!("{prefix}/ledger/{what}/{r}");
    let fail = |source: crate::store::StoreError| match source {
        crate::store::StoreError::Timeout { missing, .. } => {
            Error::join_timeout(rank, name.clone(), timeout, &missing)
        }
        source => match peer_down(store, group, rank, world) {
            Some(d) => d.error(rank, name),
            None => Error::Store {
                rank,
                group: name.clone(),
                source,
            },
        },
    };
    // Which host each rank runs on, and which group state it records in
    // (this process's, told apart from another process's by the process
    // token).
    let state = &group.state;
    let holder = crate::placement::process_token() ^ (Arc::as_ptr(state) as u64);
    let mut mine = crate::placement::host_token().to_le_bytes().to_vec();
    mine.extend_from_slice(&holder.to_le_bytes());
    store.set(&key("holder", rank), &mine).map_err(fail)?;
    let keys: Vec<String> = (0..world).map(|r| key("holder", r)).collect();
    store.wait(&keys, timeout).map_err(fail)?;
    let mut ranks = Vec::with_capacity(world);
    for k in &keys {
        let v = store.try_get(k).map_err(fail)?.unwrap_or_default();
        let word = |i: usize| {
            v.get(i * 8..i * 8 + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        };
        ranks.push((word(0), word(1)));
    }
    let here: Vec<usize> = (0..world)
        .filter(|&r| ranks[r].0 == ranks[rank].0)
        .collect();
    if here.iter().all(|&r| ranks[r].1 == holder) {
        return Ok(());
    }
    let leader = here[0];
    if rank == leader {
        let mut server = None;
        state.settle_ledger(|| {
            match crate::ledger::Ledger::create_shared()
                .and_then(|(ledger, fd)| Ok((ledger, crate::ipc::FdServer::serve(fd)?)))
            {
                Ok((ledger, s)) => {
                    server = Some(s);
                    Some(ledger)
                }
                Err(e) => {
                    tracing::warn!(
                        "symm: cannot share the call ledger with the group's other processes \
                         ({e}): ranks of different processes that make different calls on \
                         kernels that share no signal will fail only at the kernel timeout"
                    );
                    None
                }
            }
        });
        let path = server
            .as_ref()
            .map_or(Vec::new(), |s| s.path().as_os_str().as_bytes().to_vec());
        store.set(&key("at", leader), &path).map_err(fail)?;
        if server.is_some() {
            // Served until every other rank on the host holds it (then
            // dropped: the mappings outlive the file's descriptors).
            let mapped: Vec<String> = here[1..].iter().map(|&r| key("mapped", r)).collect();
            store.wait(&mapped, timeout).map_err(fail)?;
        }
        return Ok(());
    }
    let path = store.get(&key("at", leader), timeout).map_err(fail)?;
    // The first rank of this state to get here maps it (or fails to, for
    // all of them): a state's ranks never record in two ledgers.
    state.settle_ledger(|| {
        if path.is_empty() {
            return None;
        }
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(&path));
        crate::ipc::fetch_fd(path, timeout)
            .and_then(|fd| crate::ledger::Ledger::open_shared(&fd))
            .map_err(|e| {
                tracing::warn!(
                    rank,
                    "symm: cannot map the group's shared call ledger ({e}): the calls of this \
                     process's ranks are compared among themselves only"
                )
            })
            .ok()
    });
    store.set(&key("mapped", rank), b"1").map_err(fail)?;
    Ok(())
}

/// Watches the group's store for ranks of other processes that left the
/// group, and ends this process's kernels' waits on them (the abort word
/// each stream's kernels read). Without it, only a rank's own
/// [`Comm::synchronize`] watches: a kernel whose host waits elsewhere (a
/// stream the user gave, synchronised by another library; a CUDA graph
/// another library replays) would wait for a dead peer until the kernel
/// timeout. One thread per group state, until the first of its ranks
/// leaves or every stream it stops is gone. It looks while launches are
/// not known to have completed ([`Watch::tick`]), and holds the store
/// and the streams only weakly and only during a look, which a leaving
/// rank waits for ([`crate::emulator::Group::close_watch`]).
fn watch_departures(
    store: &Arc<dyn Store>,
    group: &crate::emulator::GroupKey,
    me: usize,
    world: usize,
) {
    let store = Arc::downgrade(store);
    let prefix = group.prefix.clone();
    let weak = Arc::downgrade(&group.state);
    let spawned = std::thread::Builder::new()
        .name("symm-departures".into())
        .spawn(move || {
            let mut watch = Watch::default();
            loop {
                std::thread::sleep(crate::backend::WATCH_EVERY);
                let Some(state) = weak.upgrade() else { return };
                let mut going = true;
                let open = state.watch_look(|| {
                    let Some(store) = store.upgrade() else {
                        going = false;
                        return;
                    };
                    let stops = state.live_stoppers();
                    going = watch.tick(&*store, &prefix, &stops, me, world, Instant::now());
                });
                if !open || !going {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(
            rank = me,
            "symm: cannot start the thread that watches for ranks of other processes \
             leaving ({e}): a kernel waiting for one ends at its timeout unless this rank \
             synchronises through symm"
        );
    }
}

/// What the store watch ([`watch_departures`]) remembers between looks.
#[derive(Default)]
struct Watch {
    /// Launches of every watched stream at the last look, and when that
    /// total last changed.
    launched: u64,
    changed: Option<Instant>,
    /// When the store was last read.
    read: Option<Instant>,
    /// The group's departure count as last read, and the ranks whose waits
    /// those departures end.
    departures: i64,
    stopped: crate::status::RankMask,
}

impl Watch {
    /// How often the store is read while launches follow each other, and
    /// once none has come for [`Watch::BUSY_FOR`].
    const EVERY: Duration = crate::backend::WATCH_EVERY;
    const SLOWLY: Duration = Duration::from_millis(250);
    const BUSY_FOR: Duration = Duration::from_secs(1);

    /// One look at `stops` (this process's live streams of the group) at
    /// `now`: reads the store when some launch is not known to have
    /// completed (every 20 ms within a second of the last launch, then every
    /// 250 ms), and stops every stream's waits on every rank that left
    /// (all ranks after a failure). False once no stream is left.
    fn tick(
        &mut self,
        store: &dyn Store,
        prefix: &str,
        stops: &[crate::emulator::Stopper],
        me: usize,
        world: usize,
        now: Instant,
    ) -> bool {
        if stops.is_empty() {
            return false;
        }
        let (mut launched, mut pending) = (0u64, false);
        for s in stops {
            let (l, done) = s.launch_counts();
            launched = launched.wrapping_add(l);
            pending |= l > done;
        }
        if launched != self.launched || self.changed.is_none() {
            self.launched = launched;
            self.changed = Some(now);
        }
        if !pending {
            return true;
        }
        let recent = self
            .changed
            .is_some_and(|t| now.duration_since(t) < Self::BUSY_FOR);
        let every = if recent { Self::EVERY } else { Self::SLOWLY };
        if self.read.is_some_and(|t| now.duration_since(t) < every) {
            return true;
        }
        self.read = Some(now);
        // One read a look: the departures are read again only when their
        // count moved (each departure's record is written before its count).
        let count = store
            .try_get(&down_count_key(prefix))
            .ok()
            .flatten()
            .and_then(|v| std::str::from_utf8(&v).ok()?.trim().parse::<i64>().ok())
            .unwrap_or(0);
        if count != self.departures {
            self.departures = count;
            for d in stored_downs(store, prefix, me, world) {
                self.stopped |= d.stopped_ranks();
            }
        }
        // Every look, so that a stream registered later is stopped too
        // (stopping twice changes nothing).
        if self.stopped != 0 {
            for s in stops {
                s.stop(self.stopped);
            }
        }
        true
    }
}

/// The kind a departure for `err` records: its root kind, but none for a
/// peer's failure without a kind of its own (it adds none).
fn cause_kind(err: &Error) -> Option<crate::ErrorKind> {
    Some(err.root_kind()).filter(|&k| k != crate::ErrorKind::PeerFailed)
}

/// A departure as the group's store holds it ([`stored_down`] reads it):
/// the failed flag byte, the error's kind (`ErrorKind::code`, 0 for none),
/// then the cause.
fn down_record(failed: bool, kind: Option<crate::ErrorKind>, cause: &[u8]) -> Vec<u8> {
    let mut v = vec![u8::from(failed), kind.map_or(0, crate::ErrorKind::code)];
    v.extend_from_slice(cause);
    v
}

/// Rank `r`'s departure as the group's store holds it ([`down_record`]),
/// if it left.
fn stored_down(store: &dyn Store, prefix: &str, r: usize) -> Option<crate::emulator::Down> {
    let v = store.try_get(&down_key(prefix, r)).ok()??;
    Some(crate::emulator::Down {
        rank: r,
        failed: v.first() == Some(&1),
        kind: v.get(1).copied().and_then(crate::ErrorKind::from_code),
        cause: String::from_utf8_lossy(v.get(2..).unwrap_or_default()).into_owned(),
    })
}

/// The departures the group's store holds of every rank but `me`, in rank
/// order ([`stored_down`]).
fn stored_downs<'a>(
    store: &'a dyn Store,
    prefix: &'a str,
    me: usize,
    world: usize,
) -> impl Iterator<Item = crate::emulator::Down> + 'a {
    (0..world)
        .filter(move |&r| r != me)
        .filter_map(move |r| stored_down(store, prefix, r))
}

fn down_key(prefix: &str, rank: usize) -> String {
    format!("{prefix}/down/{rank}")
}

/// The rank whose process serves the group's store to the others.
fn host_key(prefix: &str) -> String {
    format!("{prefix}/store-host")
}

/// The longest cause a departure record keeps: errors stay O(world) long.
const MAX_CAUSE: usize = 240;

/// `s` cut to [`MAX_CAUSE`] bytes (on a character boundary).
fn clip(s: &str) -> String {
    if s.len() <= MAX_CAUSE {
        return s.to_string();
    }
    let mut end = MAX_CAUSE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A rank's word to its group that it has left: kept in this process's
/// group state (the same for every rank of the group in the process), and
/// in the group's store for ranks in other processes. Said once, by
/// [`Comm::abort`] or when the rank's state drops.
struct Departure {
    store: Arc<dyn Store>,
    group: crate::emulator::GroupKey,
    rank: usize,
    /// The rank's own stream, drained before a clean exit is told.
    backend: Arc<dyn Backend>,
}

impl Departure {
    fn record(&self, failed: bool, kind: Option<crate::ErrorKind>, cause: String) {
        let d = crate::emulator::Down {
            rank: self.rank,
            failed,
            cause,
            kind,
        };
        if self.group.state.record_down(d.clone()) {
            let prefix = &self.group.prefix;
            let v = down_record(failed, kind, d.cause.as_bytes());
            // Best effort: a broken store cannot carry the word, and the
            // peers then meet their timeouts.
            if self.store.set(&down_key(prefix, self.rank), &v).is_ok() {
                let _ = self.store.add(&down_count_key(prefix), 1);
            }
        }
        // Its own word said (after it, in the store), the last word the
        // host keeps for a killed process goes.
        self.group.state.release_last_word(self.rank);
    }
}

impl Drop for Departure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.record(true, Some(crate::ErrorKind::Panicked), "panicked".into());
        } else {
            // A rank that leaves right after a launch (no synchronize) has
            // kernels still queued, which its peers' kernels wait on: they
            // run first, then the peers hear of the exit (a kernel waiting on
            // a peer that will never come ends at the abort word or its
            // timeout, so this is bounded). Its error, if any, was its own.
            let _ = self.backend.synchronize();
            self.record(false, None, "exited (its Comm was dropped)".into());
        }
        // After the last wait of the rank's own: the store watch holds
        // nothing past this (its looks are over), so the store and the
        // streams drop here, on the rank's thread.
        self.group.state.close_watch();
    }
}

/// A backend's device waits, as the group state stops them when a peer
/// leaves (held weakly: the group state outlives the backend).
struct BackendStop(std::sync::Weak<dyn Backend>);

impl BackendStop {
    fn of(backend: &Arc<dyn Backend>) -> crate::emulator::Stopper {
        Arc::new(BackendStop(Arc::downgrade(backend)))
    }
}

impl crate::emulator::Stop for BackendStop {
    fn stop(&self, ranks: crate::status::RankMask) {
        if let Some(b) = self.0.upgrade() {
            b.abort_waits(ranks);
        }
    }

    fn alive(&self) -> bool {
        self.0.strong_count() > 0
    }

    fn launch_counts(&self) -> (u64, u64) {
        self.0.upgrade().map_or((0, 0), |b| b.launch_counts())
    }
}

/// What [`Comm::watch`] gives: whether a rank of the group has failed or
/// exited, asked without holding the rank.
#[derive(Clone)]
pub struct GroupWatch {
    store: Arc<dyn Store>,
    group: crate::emulator::GroupKey,
    rank: usize,
    /// The group `rank` counts in, for errors.
    name: GroupName,
    world: usize,
}

impl GroupWatch {
    /// [`Error::PeerFailed`] naming the first peer that failed (else the
    /// first that exited), if one has; one store read while none has.
    pub fn check(&self) -> Result<()> {
        match peer_down(&*self.store, &self.group, self.rank, self.world) {
            Some(d) => Err(d.error(self.rank, &self.name)),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for GroupWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupWatch")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .finish()
    }
}

/// Why `me`'s group operations cannot complete: the first peer that
/// failed, else the first that exited, in this process's record or else
/// in the store's (one read while nobody has left).
fn peer_down(
    store: &dyn Store,
    group: &crate::emulator::GroupKey,
    me: usize,
    world: usize,
) -> Option<crate::emulator::Down> {
    if group.state.host_unknown() {
        if let Ok(Some(v)) = store.try_get(&host_key(&group.prefix)) {
            if let Some(host) = std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()) {
                group.state.learn_host(host);
            }
        }
    }
    if let Some(d) = group.state.peer_down(me) {
        return Some(d);
    }
    store.try_get(&down_count_key(&group.prefix)).ok()??;
    let mut exited = None;
    for d in stored_downs(store, &group.prefix, me, world) {
        if d.failed {
            return Some(d);
        }
        exited.get_or_insert(d);
    }
    exited
}

/// The group's store as its ranks use it: a wait also ends, at most
/// [`WATCH_SLICE`] after it happens, when a rank of the group has failed
/// or exited ([`StoreError::Unavailable`](crate::store::StoreError::Unavailable),
/// naming the rank and its cause), instead of at its timeout.
struct Watched {
    inner: Arc<dyn Store>,
    group: crate::emulator::GroupKey,
    rank: usize,
    world: usize,
}

/// How often a store wait looks for departed ranks.
const WATCH_SLICE: Duration = Duration::from_millis(20);

impl Store for Watched {
    fn in_process(&self) -> bool {
        self.inner.in_process()
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), crate::store::StoreError> {
        self.inner.set(key, value)
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, crate::store::StoreError> {
        self.inner.try_get(key)
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64, crate::store::StoreError> {
        self.inner.add(key, delta)
    }

    fn wait(&self, keys: &[String], timeout: Duration) -> Result<(), crate::store::StoreError> {
        let start = std::time::Instant::now();
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            match self.inner.wait(keys, left.min(WATCH_SLICE)) {
                Err(crate::store::StoreError::Timeout { missing, .. }) => {
                    // A failed rank ends every wait (the group cannot go
                    // on); one that exited cleanly only waits for its own
                    // keys (those ending in its rank, as the group's are),
                    // so waiting for the others' goes on.
                    let down =
                        peer_down(&*self.inner, &self.group, self.rank, self.world).filter(|d| {
                            d.failed
                                || missing.iter().any(|k| {
                                    k.rsplit('/').next() == Some(d.rank.to_string().as_str())
                                })
                        });
                    if let Some(d) = down {
                        return Err(crate::store::StoreError::Unavailable(format!(
                            "rank {} {}, so the keys it would set never come",
                            d.rank, d.cause
                        )));
                    }
                    if left <= WATCH_SLICE {
                        return Err(crate::store::StoreError::Timeout { timeout, missing });
                    }
                }
                r => return r,
            }
        }
    }
}

/// A group's size and rank, before its join: at most [`MAX_GROUP_SIZE`]
/// ranks (each domain's at most [`MAX_DOMAIN_SIZE`], which the join checks
/// once it knows the domains: [`check_domains`]).
pub(crate) fn check_world(rank: usize, world_size: usize) -> Result<()> {
    if world_size == 0 || world_size > MAX_GROUP_SIZE {
        return Err(Error::Unsupported {
            rank,
            group: GroupName::NONE,
            message: format!(
                "world size {world_size} is not supported; use 1 to {MAX_GROUP_SIZE} ranks, at \
                 most {MAX_DOMAIN_SIZE} in each NVLink domain"
            ),
        });
    }
    if rank >= world_size {
        return Err(Error::InvalidArgument {
            rank,
            group: GroupName::NONE,
            message: format!("rank {rank} is out of range for world size {world_size}"),
        });
    }
    Ok(())
}

/// An error (the same on every rank: they share the topology) where a
/// domain of `t` holds more ranks than a group that maps memory may.
fn check_domains(rank: usize, name: &GroupName, t: &Topology) -> Result<()> {
    match (0..t.domains()).find(|&d| t.ranks_of(d).len() > MAX_DOMAIN_SIZE) {
        None => Ok(()),
        Some(d) => Err(Error::Unsupported {
            rank,
            group: name.clone(),
            message: format!(
                "{} ranks share NVLink domain {d} ({t}); symm maps at most {MAX_DOMAIN_SIZE} \
                 ranks' memory in one domain. A group of more spans several: launch it \
                 across nodes, or split it into simulated ones (SYMM_NODES)",
                t.ranks_of(d).len()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A stream's stop as the watch sees it: its launch counts, and the
    /// rank sets it was stopped with.
    #[derive(Default)]
    struct FakeStop {
        launched: AtomicU64,
        synced: AtomicU64,
        stopped: Mutex<Vec<crate::status::RankMask>>,
    }

    impl crate::emulator::Stop for FakeStop {
        fn stop(&self, ranks: crate::status::RankMask) {
            self.stopped.lock().unwrap().push(ranks);
        }
        fn alive(&self) -> bool {
            true
        }
        fn launch_counts(&self) -> (u64, u64) {
            (
                self.launched.load(Ordering::SeqCst),
                self.synced.load(Ordering::SeqCst),
            )
        }
    }

    /// A store that counts its reads.
    struct Counted(crate::store::InProcessStore, AtomicUsize);

    impl Store for Counted {
        fn set(&self, key: &str, value: &[u8]) -> Result<(), crate::store::StoreError> {
            self.0.set(key, value)
        }
        fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, crate::store::StoreError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.try_get(key)
        }
        fn add(&self, key: &str, delta: i64) -> Result<i64, crate::store::StoreError> {
            self.0.add(key, delta)
        }
        fn wait(&self, keys: &[String], t: Duration) -> Result<(), crate::store::StoreError> {
            self.0.wait(keys, t)
        }
    }

    /// The store watch for ranks of other processes (`Watch::tick`) reads
    /// the store only while a launch is not known to have completed (every
    /// 20 ms within a second of the last launch, then every 250 ms), one
    /// read a look until the departure count moves; it stops every stream
    /// on every rank that left (one rank after an exit, all after a
    /// failure; two exits both), and ends with its streams.
    #[test]
    fn the_store_watch_stops_streams_on_every_departed_peer_and_reads_only_while_needed() {
        let store = Counted(crate::store::InProcessStore::new(), AtomicUsize::new(0));
        let prefix = "symm/1";
        let fake = Arc::new(FakeStop::default());
        let stops: Vec<crate::emulator::Stopper> = vec![fake.clone()];
        let reads = || store.1.load(Ordering::SeqCst);
        let stopped = || fake.stopped.lock().unwrap().clone();
        let mut w = Watch::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let depart = |r: usize, failed: bool| {
            let v = down_record(failed, None, b"gone");
            store.set(&down_key(prefix, r), &v).unwrap();
            store.add(&down_count_key(prefix), 1).unwrap();
        };
        // Nothing launched, or everything synchronised: no read.
        assert!(w.tick(&store, prefix, &stops, 0, 4, at(0)));
        fake.launched.store(3, Ordering::SeqCst);
        fake.synced.store(3, Ordering::SeqCst);
        assert!(w.tick(&store, prefix, &stops, 0, 4, at(20)));
        assert_eq!(reads(), 0, "read the store with nothing in flight");
        // A launch in flight: one read a look, at most every 20 ms.
        fake.launched.store(4, Ordering::SeqCst);
        assert!(w.tick(&store, prefix, &stops, 0, 4, at(40)));
        assert!(w.tick(&store, prefix, &stops, 0, 4, at(45)));
        assert_eq!(reads(), 1);
        // Ranks 2 and 3 exit: both ranks' waits end.
        depart(2, false);
        depart(3, false);
        assert!(w.tick(&store, prefix, &stops, 0, 4, at(60)));
        assert_eq!(stopped().last(), Some(&((1 << 2) | (1 << 3))));
        // No launch for over a second: every 250 ms only.
        let before = reads();
        assert!(w.tick(&store, prefix, &stops, 0, 4, at(1100)));
        assert!(w.tick(&store, prefix, &stops, 0, 4, at(1200)));
        assert_eq!(reads(), before + 1, "read again within 250 ms of quiet");
        // Rank 1 fails: every wait ends.
        depart(1, true);
        assert!(w.tick(&store, prefix, &stops, 0, 4, at(1400)));
        assert_eq!(stopped().last(), Some(&u128::MAX));
        // With no stream left, the watch ends.
        assert!(!w.tick(&store, prefix, &[], 0, 4, at(1500)));
    }

    /// Handles of one rank that ask for an extension at once share the one
    /// that is made, once: none is made twice and lost.
    #[test]
    fn an_extension_is_made_once_for_concurrent_askers() {
        struct Slow(usize);
        let comm = Comm::emulated(
            0,
            1,
            Arc::new(crate::store::InProcessStore::new()),
            CommOptions::default(),
        )
        .expect("an emulated rank");
        let made = AtomicUsize::new(0);
        let got: Vec<Arc<Slow>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    let (comm, made) = (comm.clone(), &made);
                    s.spawn(move || {
                        comm.extension::<Slow>(
                            |_| true,
                            |_| {
                                std::thread::sleep(Duration::from_millis(20));
                                Ok(Slow(made.fetch_add(1, Ordering::SeqCst)))
                            },
                        )
                        .expect("made")
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("joined")).collect()
        });
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(got.iter().all(|e| Arc::ptr_eq(e, &got[0]) && e.0 == 0));
    }
}
