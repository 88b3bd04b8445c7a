//! The choice between symm's kernels and NCCL: a pure function of a
//! call's facts, so that it is tested on the CPU table by table and
//! explained in words.
//!
//! Every fact the choice reads is the same on every rank (the collective,
//! element type, op, sizes, world, the group's devices and its NCCL, all
//! agreed), so every rank takes the same backend with no exchange per
//! call. Where this rank's input lies (symmetric memory or not) is the one
//! fact that differs between ranks, and it decides only whether the symm
//! kernel reads the input in place or from the group's staging buffer,
//! never the backend: a rank whose backend differed from its peers' would
//! wait in NCCL forever.

use std::fmt;

use symm::DType;

use crate::collectives::{self, ReduceOp};

/// Why the rule refuses its settings or a call: the same on every rank,
/// so every rank fails alike.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// A setting ([`ENV_BACKEND`], [`ENV_MAX_SYMM_BYTES`] or a threshold
    /// list) is malformed; the message names it.
    #[error("{0}")]
    Setting(String),
    /// NCCL is forced ([`Prefer::Nccl`]), and it cannot run the call.
    #[error("{0}")]
    NcclRefused(String),
}

/// The collectives of [`Collectives`](super::Collectives).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// All-reduce by an op.
    AllReduce,
    /// All-gather.
    AllGather,
    /// Reduce-scatter by an op.
    ReduceScatter,
    /// Broadcast from a root.
    Broadcast,
    /// All-to-all with equal splits.
    AllToAll,
    /// All-to-all with split sizes on the host.
    AllToAllSingle,
    /// All-to-all with split sizes in device memory.
    AllToAllV,
    /// Several all-gathers in one call.
    AllGatherCoalesced,
    /// Several all-reduces in one call.
    AllReduceCoalesced,
    /// Point-to-point sends and receives (each its own call).
    SendRecv,
    /// Reduce by an op to a root.
    Reduce,
    /// Gather to a root.
    Gather,
    /// Scatter from a root.
    Scatter,
}

impl Collective {
    /// Every collective, for tests and tables.
    pub const ALL: [Collective; 13] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::AllToAll,
        Collective::AllToAllSingle,
        Collective::AllToAllV,
        Collective::AllGatherCoalesced,
        Collective::AllReduceCoalesced,
        Collective::SendRecv,
        Collective::Reduce,
        Collective::Gather,
        Collective::Scatter,
    ];

    /// Its name, as options and the environment spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Broadcast => "broadcast",
            Collective::AllToAll => "all_to_all",
            Collective::AllToAllSingle => "all_to_all_single",
            Collective::AllToAllV => "all_to_all_v",
            Collective::AllGatherCoalesced => "all_gather_coalesced",
            Collective::AllReduceCoalesced => "all_reduce_coalesced",
            Collective::SendRecv => "send_recv",
            Collective::Reduce => "reduce",
            Collective::Gather => "gather",
            Collective::Scatter => "scatter",
        }
    }

    fn index(self) -> usize {
        Collective::ALL
            .iter()
            .position(|&c| c == self)
            .unwrap_or_default()
    }

    /// The largest per-rank input (bytes) that runs on symm's kernels
    /// when NCCL can run it too, from the v20 tables (H100, NVLink 4, 2–4
    /// GPUs, `bench/results_v20_collectives_ll.md`): symm's LL kernels
    /// beat NCCL (plain or on registered windows) up to 64 KiB for the
    /// copies and the reduce-scatter; from 128 KiB to 1 MiB NCCL is ahead
    /// by up to 1.3×. The all-reduce's own kernels stay ahead of NCCL
    /// through 16 MiB, the largest size measured (0.4–0.9×, 2 and 4 GPUs,
    /// `bench/results_latest.md`). Larger messages are NCCL's, which then
    /// reads pool tensors from its registered windows.
    pub const fn default_max_symm_bytes(self) -> usize {
        match self {
            Collective::AllReduce | Collective::AllReduceCoalesced => 16 << 20,
            // The low-latency path's largest message: past it symm's
            // chunked copies trail NCCL's send/recv (bench/NOTES.md v35).
            Collective::SendRecv => crate::p2p::LL_MAX_BYTES,
            _ => 64 << 10,
        }
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which backend a group's calls take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Prefer {
    /// By the rule: symm up to each collective's threshold, NCCL above it
    /// where NCCL can run the call.
    #[default]
    Auto,
    /// symm's kernels for every call.
    Symm,
    /// NCCL for every call; a call NCCL cannot run is an error.
    Nccl,
}

/// How a [`Collectives`](super::Collectives) chooses, as options (which
/// every rank must set alike: the choice is part of what the ranks agree
/// on, so a difference fails the call on every rank).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    prefer: Prefer,
    max_symm_bytes: [usize; Collective::ALL.len()],
    min_hier_bytes: [usize; Collective::ALL.len()],
    reorder_min_bytes: usize,
    copy_engine_min_bytes: Option<usize>,
    own_stream: bool,
    deterministic: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prefer: Prefer::Auto,
            max_symm_bytes: Collective::ALL.map(Collective::default_max_symm_bytes),
            min_hier_bytes: [0; Collective::ALL.len()],
            reorder_min_bytes: REORDER_MIN_BYTES,
            copy_engine_min_bytes: None,
            own_stream: false,
            deterministic: false,
        }
    }
}

/// The environment variable that forces a backend: `symm`, `nccl` or
/// `auto`.
pub const ENV_BACKEND: &str = "SYMM_FUNCTIONAL_BACKEND";

/// The environment variable that turns the deterministic mode on
/// ([`Options::with_deterministic`]): `1`, `true` or `on` (`0`, `false`,
/// `off` or empty: off).
pub const ENV_DETERMINISTIC: &str = "SYMM_DETERMINISTIC";

/// The environment variable that sets thresholds: a comma-separated list of
/// `collective=size` (a size in bytes, with an optional `K`, `M` or `G`
/// suffix, or `never`: symm's kernels at every size), and `*=size` for
/// every collective.
pub const ENV_MAX_SYMM_BYTES: &str = "SYMM_FUNCTIONAL_MAX_SYMM_BYTES";

/// The environment variable that sets [`Options::with_copy_engine_min_bytes`]:
/// a size (`4M`), or `never`.
pub const ENV_COPY_ENGINE_MIN_BYTES: &str = "SYMM_FUNCTIONAL_COPY_ENGINE_MIN_BYTES";

/// The environment variable that sets, on a group that spans NVLink
/// domains, the smallest message each collective takes hierarchically
/// ([`Options::with_min_hier_bytes`]), in [`ENV_MAX_SYMM_BYTES`]'s list
/// form; `reorder=size` sets [`Options::with_reorder_min_bytes`]. What
/// [`Calibration::setting`](super::Calibration::setting) prints.
pub const ENV_MIN_HIER_BYTES: &str = "SYMM_FUNCTIONAL_MIN_HIER_BYTES";

impl Options {
    /// The defaults, then [`ENV_BACKEND`], [`ENV_MAX_SYMM_BYTES`],
    /// [`ENV_COPY_ENGINE_MIN_BYTES`], [`ENV_MIN_HIER_BYTES`] and
    /// [`ENV_DETERMINISTIC`] where set. A
    /// malformed value is an error naming the variable.
    pub fn from_env() -> Result<Options, RuleError> {
        let backend = std::env::var(ENV_BACKEND).ok();
        let thresholds = std::env::var(ENV_MAX_SYMM_BYTES).ok();
        let mut o = Options::from_vars(backend.as_deref(), thresholds.as_deref())?;
        if let Ok(v) = std::env::var(ENV_COPY_ENGINE_MIN_BYTES) {
            o.copy_engine_min_bytes = Some(parse_size(v.trim()).map_err(|e| {
                RuleError::Setting(format!("{ENV_COPY_ENGINE_MIN_BYTES}={v}: {e}"))
            })?);
        }
        if let Ok(v) = std::env::var(ENV_MIN_HIER_BYTES) {
            o.apply_hier_thresholds(&v)
                .map_err(|e| RuleError::Setting(format!("{ENV_MIN_HIER_BYTES}={v}: {e}")))?;
        }
        if let Ok(v) = std::env::var(ENV_DETERMINISTIC) {
            o.deterministic = match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "on" => true,
                "" | "0" | "false" | "off" => false,
                other => {
                    return Err(RuleError::Setting(format!(
                        "{ENV_DETERMINISTIC}={other}: expected 1, true, on, 0, false or off"
                    )))
                }
            };
        }
        Ok(o)
    }

    /// [`from_env`](Self::from_env) with the two variables' values given.
    pub fn from_vars(
        backend: Option<&str>,
        thresholds: Option<&str>,
    ) -> Result<Options, RuleError> {
        let mut o = Options::default();
        if let Some(v) = backend {
            o.prefer = match v.trim().to_ascii_lowercase().as_str() {
                "" | "auto" => Prefer::Auto,
                "symm" => Prefer::Symm,
                "nccl" => Prefer::Nccl,
                other => {
                    return Err(RuleError::Setting(format!(
                        "{ENV_BACKEND}={other}: expected symm, nccl or auto"
                    )))
                }
            };
        }
        if let Some(v) = thresholds {
            o.apply_thresholds(v)
                .map_err(|e| RuleError::Setting(format!("{ENV_MAX_SYMM_BYTES}={v}: {e}")))?;
        }
        Ok(o)
    }

    /// Whether calls run on a communication stream of their own, which
    /// the user's stream overlaps at the cost of an event fork and join
    /// per call (measured on an H100: 0.9–1.7 µs of host time, and 0.8–1.1
    /// µs per call in a CUDA graph of back-to-back calls, whose kernels
    /// then lose programmatic dependent launch), or on the user's stream
    /// itself (the default: no overlap, and within 0.5 µs of calling the
    /// kernels directly; what latency-bound calls, as a decode step's,
    /// want).
    pub fn with_own_stream(mut self, own: bool) -> Self {
        self.own_stream = own;
        self
    }

    /// The backend preferred ([`with_backend`](Self::with_backend)).
    pub fn prefer(&self) -> Prefer {
        self.prefer
    }

    /// Whether calls run on a communication stream of their own.
    pub fn own_stream(&self) -> bool {
        self.own_stream
    }

    /// The deterministic mode: every reduction (all-reduce, reduce-scatter
    /// and their coalesced and in-place forms, by every op) runs on symm's
    /// kernels, whatever its size (up to their 2^32 - 1 elements), never
    /// on NCCL (whose reduction order depends on its algorithm, channels
    /// and message size). Then each output element is a fixed function of
    /// the ranks' elements at that position: their f32 values combined in
    /// rank order 0, 1, …, from −0 for a sum, rounded once to the element
    /// type (avg: divided by the world size first), whatever the message's
    /// size, offset, kernel path and grid, and whether the call ran
    /// coalesced, in place, or as a reduce-scatter followed by an
    /// all-gather; the fused all-reduce + RMSNorm's f32 sum is that sum
    /// before rounding (its new residual rounds the sum plus the old
    /// residual once). Forcing NCCL as well is an error at the first
    /// reduction. The same on every rank, as every option.
    pub fn with_deterministic(mut self, on: bool) -> Self {
        self.deterministic = on;
        self
    }

    /// Whether the deterministic mode is on.
    pub fn deterministic(&self) -> bool {
        self.deterministic
    }

    /// Forces a backend (or lets the rule choose again).
    pub fn with_backend(mut self, prefer: Prefer) -> Self {
        self.prefer = prefer;
        self
    }

    /// Sets the largest per-rank input that `collective` runs on symm's
    /// kernels when NCCL could run it.
    pub fn with_max_symm_bytes(mut self, collective: Collective, bytes: usize) -> Self {
        self.max_symm_bytes[collective.index()] = bytes;
        self
    }

    /// The forced backend, if any.
    pub fn backend(&self) -> Prefer {
        self.prefer
    }

    /// The threshold of `collective`.
    pub fn max_symm_bytes(&self, collective: Collective) -> usize {
        self.max_symm_bytes[collective.index()]
    }

    /// On a group that spans NVLink domains, the smallest message (bytes
    /// of this rank's input, as [`CallFacts::bytes`] counts them: the
    /// reduce-scatter's chunk, and for the coalesced all-reduce its packed
    /// ranges) that `collective` runs hierarchically: smaller ones take flat NCCL over
    /// the whole group. By default 0 (hierarchical at every size); a
    /// [`Calibration`](super::Calibration) measures this machine's
    /// crossovers. Only the collectives with hierarchical forms read it
    /// (the all-reduce, coalesced too, all-gather, reduce-scatter,
    /// broadcast and all-to-all); the exact form of a reduction ignores it.
    pub fn with_min_hier_bytes(mut self, collective: Collective, bytes: usize) -> Self {
        self.min_hier_bytes[collective.index()] = bytes;
        self
    }

    /// The smallest message `collective` takes hierarchically.
    pub fn min_hier_bytes(&self, collective: Collective) -> usize {
        self.min_hier_bytes[collective.index()]
    }

    /// The whole message's size (the all-gather's output, the
    /// reduce-scatter's input) from which the hierarchical all-gather and
    /// reduce-scatter send only each rank's share across domains
    /// (default [`REORDER_MIN_BYTES`]).
    pub fn with_reorder_min_bytes(mut self, bytes: usize) -> Self {
        self.reorder_min_bytes = bytes;
        self
    }

    /// The size from which the all-gather and reduce-scatter reorder.
    pub fn reorder_min_bytes(&self) -> usize {
        self.reorder_min_bytes
    }

    /// The smallest all-gather and all-to-all (bytes sent to each peer,
    /// [`CallFacts::bytes_per_peer`]) that run on symm's copy engines
    /// ([`CollectivePath::CopyEngine`](crate::collectives::CollectivePath::CopyEngine):
    /// one-block barriers around `cuMemcpyAsync` from each peer), ahead of
    /// the symm-or-NCCL threshold: the SMs then stay with the compute that
    /// the calls overlap. By default [`COPY_ENGINE_MIN_BYTES`] where calls
    /// run on their own stream ([`with_own_stream`](Self::with_own_stream),
    /// whose purpose is that overlap), and never otherwise; `usize::MAX`
    /// turns it off. Only the rule's own choice ([`Prefer::Auto`]) takes
    /// it: forced symm runs each call's own dispatch.
    pub fn with_copy_engine_min_bytes(mut self, bytes: usize) -> Self {
        self.copy_engine_min_bytes = Some(bytes);
        self
    }

    /// The smallest all-gather and all-to-all on the copy engines, as
    /// [`with_copy_engine_min_bytes`](Self::with_copy_engine_min_bytes)
    /// set it or by default.
    pub fn copy_engine_min_bytes(&self) -> usize {
        self.copy_engine_min_bytes.unwrap_or(match self.own_stream {
            true => COPY_ENGINE_MIN_BYTES,
            false => usize::MAX,
        })
    }

    /// Applies a `collective=size,...` list.
    pub fn apply_thresholds(&mut self, list: &str) -> Result<(), RuleError> {
        for (target, bytes) in parse_list(list, false).map_err(RuleError::Setting)? {
            match target {
                Target::One(c) => self.max_symm_bytes[c.index()] = bytes,
                _ => self.max_symm_bytes = [bytes; Collective::ALL.len()],
            }
        }
        Ok(())
    }

    /// Applies a `collective=size,...` list to the smallest hierarchical
    /// messages ([`ENV_MIN_HIER_BYTES`]'s form, where `reorder=size` sets
    /// [`with_reorder_min_bytes`](Self::with_reorder_min_bytes)).
    pub fn apply_hier_thresholds(&mut self, list: &str) -> Result<(), RuleError> {
        for (target, bytes) in parse_list(list, true).map_err(RuleError::Setting)? {
            match target {
                Target::One(c) => self.min_hier_bytes[c.index()] = bytes,
                Target::All => self.min_hier_bytes = [bytes; Collective::ALL.len()],
                Target::Reorder => self.reorder_min_bytes = bytes,
            }
        }
        Ok(())
    }
}

/// What an item of a threshold list sets.
enum Target {
    /// `*`: every collective.
    All,
    One(Collective),
    /// `reorder` ([`Options::with_reorder_min_bytes`]).
    Reorder,
}

/// A `collective=size,...` list's items in order, or the problem in
/// words. `reorder`: whether the list may name `reorder`.
fn parse_list(list: &str, reorder: bool) -> Result<Vec<(Target, usize)>, String> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, size) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}` is not collective=size"))?;
        let bytes = parse_size(size.trim())?;
        let target = match name.trim() {
            "*" => Target::All,
            "reorder" if reorder => Target::Reorder,
            name => Target::One(
                Collective::ALL
                    .into_iter()
                    .find(|c| c.name() == name)
                    .ok_or_else(|| {
                        format!(
                            "no collective `{name}` (expected one of {}{} or *)",
                            Collective::ALL.map(Collective::name).join(", "),
                            if reorder { ", reorder" } else { "" }
                        )
                    })?,
            ),
        };
        out.push((target, bytes));
    }
    Ok(out)
}

/// Bytes from `123`, `64K`, `1M` or `2G` (binary units), or `never`
/// (`usize::MAX`: no message reaches it).
fn parse_size(s: &str) -> Result<usize, String> {
    if s.eq_ignore_ascii_case("never") {
        return Ok(usize::MAX);
    }
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    digits
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|v| v.checked_mul(1usize << shift))
        .ok_or_else(|| format!("`{s}` is not a size (bytes, a number with K, M or G, or never)"))
}

/// The default of [`Options::reorder_min_bytes`]: the whole message's
/// size (the all-gather's output, the reduce-scatter's input) from which
/// the all-gather and reduce-scatter send only each rank's share across
/// domains, at the cost of a reordering copy on the device (`hier.rs`).
/// Not measured: the 2-GPU machines lent so far hold one NVLink domain
/// each, so the two forms are compared only on simulated nodes of one
/// GPU per node, where both send the same bytes. A
/// [`Calibration`](super::Calibration) measures it where domains hold
/// two or more GPUs.
pub const REORDER_MIN_BYTES: usize = 1 << 20;

/// The default of [`Options::copy_engine_min_bytes`] where calls run on
/// their own stream: bytes sent to each peer from which the all-gather and
/// all-to-all take the copy engines. Measured on 2 H200s only, beside a
/// bf16 GEMM of 8192³ (`bench/NOTES.md` v41): on the copy engines the GEMM
/// ran within 2% of its time alone at every size, where symm's SM kernel
/// slowed it by 2.5–3.3% at 8 MiB a peer and by 70% at 128 MiB (NCCL by
/// up to 7%). At 8 MiB a peer both were done within 5% of the SM kernel's
/// time (the all-gather sooner, the all-to-all later), and sooner from 32
/// MiB; below, the copies' fixed cost (two one-block barriers and a copy
/// per peer, one after another) outweighs what they leave to the compute.
/// NCCL's own default (`NCCL_SYM_CE_THRESHOLD`) is 8 MiB too.
pub const COPY_ENGINE_MIN_BYTES: usize = 8 << 20;

/// Where this rank's input lies, as the rule and its explanation see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// A tensor of a symm pool, in segment `segment`.
    Pool {
        /// The segment's index in its pool.
        segment: usize,
    },
    /// A symmetric allocation of its own ([`symm::SymmBuffer`] or a view).
    Symmetric,
    /// Device memory that no peer can read ([`symm::DeviceBuffer`], cudarc
    /// memory, the output of a plain buffer's earlier call).
    Plain,
}

impl Placed {
    /// Every kind, for tests.
    pub const ALL: [Placed; 3] = [
        Placed::Pool { segment: 0 },
        Placed::Symmetric,
        Placed::Plain,
    ];

    /// Whether peers can read it where it is.
    pub fn is_symmetric(self) -> bool {
        !matches!(self, Placed::Plain)
    }
}

/// What the rule knows of the group: the same on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupFacts {
    /// Ranks in the group.
    pub world: usize,
    /// Why NCCL cannot run this group's calls (the emulator, ranks
    /// sharing a GPU, no libnccl on some rank), or `None` where it can.
    pub no_nccl: Option<String>,
    /// Whether NCCL takes fp8 (NCCL 2.24 or later on compute capability
    /// 9.0 or later, on every rank).
    pub nccl_fp8: bool,
    /// Whether the group spans NVLink domains
    /// ([`Topology::spans_domains`](symm::Topology::spans_domains)), which
    /// symm's kernels cannot cross: every call then takes NCCL (the
    /// all-reduce, all-gather, reduce-scatter and broadcast, with
    /// [`Prefer::Auto`], hierarchically where they can: NCCL between the
    /// domains only).
    pub spans_domains: bool,
    /// Whether NCCL's place across those domains is taken by symm's
    /// kernels (the emulator, whose domains are simulated: for tests); the
    /// rule refuses what it would refuse NCCL.
    pub stand_in: bool,
}

/// One call, as the rule sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallFacts {
    /// The collective.
    pub collective: Collective,
    /// The element type.
    pub dtype: DType,
    /// The op of a reduction.
    pub op: Option<ReduceOp>,
    /// Bytes of this rank's input (every rank's, for the equal-size
    /// collectives; the largest a split call may send, for the others).
    pub bytes: usize,
    /// Bytes sent to each peer (the symm kernels' own LL-or-pull choice).
    pub bytes_per_peer: usize,
    /// A shape NCCL cannot express, and why (a reduce-scatter whose `n` is
    /// not a multiple of the world size, splits in device memory).
    pub nccl_shape: Option<&'static str>,
    /// Where this rank's input lies.
    pub placed: Placed,
}

impl CallFacts {
    /// The reduction's op, where the element type has no such op (avg of
    /// integers): what every rank publishes in the agreement.
    pub(crate) fn op_problem(&self) -> Option<crate::shared::agree::Problem> {
        collectives::dtype_op_problem(self.dtype, self.op?)
    }
}

/// The backend a call takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// symm's kernel, reading the input in place or from the group's
    /// staging buffer.
    Symm {
        /// The kernel family ("LL", "pull", the all-reduce's own path).
        kernel: &'static str,
        /// Whether the input is first copied into the staging buffer.
        staged: bool,
    },
    /// NCCL, on the group's communicator.
    Nccl,
}

/// A call's route and the reason for it, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The route.
    pub route: Route,
    /// Why, as one line ("8 KiB ≤ 64 KiB threshold, input in pool segment 3").
    pub reason: String,
}

impl Choice {
    /// Whether it runs on symm's kernels.
    pub fn is_symm(&self) -> bool {
        matches!(self.route, Route::Symm { .. })
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.route {
            Route::Symm { kernel, .. } => write!(f, "symm {kernel} kernel: {}", self.reason),
            Route::Nccl => write!(f, "NCCL: {}", self.reason),
        }
    }
}

/// Sizes in the explanations: bytes, KiB, MiB, as exact as they are.
pub fn size_name(b: usize) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// Why NCCL cannot run this call (with this group), or `None` if it can.
fn nccl_refuses<'a>(group: &'a GroupFacts, call: &CallFacts) -> Option<&'a str> {
    if let Some(why) = &group.no_nccl {
        return Some(why);
    }
    if let Some(why) = call.nccl_shape {
        return Some(why);
    }
    if matches!(
        call.collective,
        Collective::Reduce | Collective::Gather | Collective::Scatter
    ) {
        // Measured (tests/functional.rs, root_calls_on_nccl, 1 and 2 H200s).
        return Some(
            "on NCCL 2.28, a 4 MiB ncclReduce from a registered pool segment hung (1 and 2 \
             ranks), and a gather by send and receive from one delivered zeros (2 ranks); \
             symm's kernels run every call to or from a root",
        );
    }
    call.op
        .and_then(|op| nccl_op_refusal(group, op, call.dtype))
}

/// Why NCCL cannot reduce by `op` in `dtype` on `group`, which it may
/// still copy: a reduction across NVLink domains then takes its exact
/// form (an all-to-all, symm's fold, an all-gather).
pub(crate) fn nccl_op_refusal(
    group: &GroupFacts,
    op: ReduceOp,
    dtype: DType,
) -> Option<&'static str> {
    if matches!(op, ReduceOp::Min | ReduceOp::Max) && dtype.is_float() {
        return Some(
            "NCCL's min and max do not carry NaNs and signed zeros as symm's do \
             (IEEE 754-2019 minimum and maximum)",
        );
    }
    if op == ReduceOp::Avg && dtype == DType::F64 && group.world == 1 {
        // Measured on NCCL 2.28 (tests/functional.rs, numeric_types_on_nccl).
        return Some(
            "NCCL 2.28's f64 average on one rank leaves the last element of an odd count \
             unwritten",
        );
    }
    if matches!(dtype, DType::F8E4M3 | DType::F8E5M2) && !group.nccl_fp8 {
        return Some("this NCCL or GPU reduces no fp8 (NCCL 2.24+ on sm_90+)");
    }
    None
}

/// The symm kernel family that runs the call.
fn symm_kernel(group: &GroupFacts, call: &CallFacts) -> &'static str {
    match (call.collective, call.op) {
        (Collective::AllReduce, Some(ReduceOp::Sum))
            if !collectives::combines_natively(call.dtype) =>
        {
            crate::all_reduce::AllReducePath::choose_for(group.world, call.bytes, false).name()
        }
        (
            Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::Broadcast
            | Collective::AllToAll,
            _,
        ) if group.world > symm::layout::MAX_WORLD_SIZE => collectives::CollectivePath::Pull.name(),
        (
            Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::Broadcast
            | Collective::AllToAll,
            _,
        ) => collectives::CollectivePath::choose(call.bytes_per_peer).name(),
        (Collective::AllReduceCoalesced, _) => "coalesced one-shot",
        (Collective::SendRecv, _) => "point-to-point",
        _ => "pull",
    }
}

/// Which branch of the rule a call takes.
enum Branch<'a> {
    /// The group spans NVLink domains: NCCL, which crosses them.
    Domains,
    /// The group spans NVLink domains, and this is why NCCL cannot run.
    DomainsRefused(String),
    SymmForced,
    Deterministic,
    NcclForced,
    NcclRefused(&'a str),
    SplitsDiffer,
    /// The all-gather or all-to-all on the copy engines.
    CopyEngine,
    Small,
    Large,
    Fallback(&'a str),
}

fn branch<'a>(options: &Options, group: &'a GroupFacts, call: &CallFacts) -> Branch<'a> {
    let refusal = nccl_refuses(group, call);
    let reduces = call.op.is_some();
    if group.spans_domains {
        let across = "this group spans NVLink domains, which symm's kernels do not cross \
                      (NCCL does; or run symm's collectives on comm.domain())";
        return match (options.prefer, refusal) {
            (Prefer::Symm, _) => Branch::DomainsRefused(format!("symm is forced, but {across}")),
            (_, _) if options.deterministic && reduces => Branch::DomainsRefused(format!(
                "the deterministic mode keeps reductions on symm's kernels, but {across}"
            )),
            (_, Some(why)) => Branch::DomainsRefused(format!(
                "{across}, and NCCL cannot run this call here: {why}"
            )),
            (_, None) => Branch::Domains,
        };
    }
    match (options.prefer, refusal) {
        (Prefer::Symm, _) => Branch::SymmForced,
        (Prefer::Nccl, _) if options.deterministic && reduces => Branch::NcclRefused(
            "the deterministic mode keeps every reduction on symm's kernels (NCCL's order \
             of summation depends on its algorithm and the message's size)",
        ),
        (Prefer::Auto, _) if options.deterministic && reduces => Branch::Deterministic,
        (Prefer::Nccl, None) => Branch::NcclForced,
        (Prefer::Nccl, Some(why)) => Branch::NcclRefused(why),
        (Prefer::Auto, _) if call.collective == Collective::AllToAllSingle => Branch::SplitsDiffer,
        (Prefer::Auto, _)
            if matches!(
                call.collective,
                Collective::AllGather | Collective::AllToAll
            ) && call.bytes_per_peer >= options.copy_engine_min_bytes() =>
        {
            Branch::CopyEngine
        }
        (Prefer::Auto, _) if call.bytes <= options.max_symm_bytes(call.collective) => Branch::Small,
        (Prefer::Auto, None) => Branch::Large,
        (Prefer::Auto, Some(why)) => Branch::Fallback(why),
    }
}

/// The route of `call` on `group` under `options` (what every call
/// computes: no text is made unless it fails), or the error (the same on
/// every rank) where the options force NCCL and NCCL cannot run the call.
pub fn route(options: &Options, group: &GroupFacts, call: &CallFacts) -> Result<Route, RuleError> {
    let symm = || Route::Symm {
        kernel: symm_kernel(group, call),
        staged: !call.placed.is_symmetric(),
    };
    match branch(options, group, call) {
        Branch::CopyEngine => Ok(Route::Symm {
            kernel: collectives::CollectivePath::CopyEngine.name(),
            staged: !call.placed.is_symmetric(),
        }),
        Branch::Domains if group.stand_in => Ok(symm()),
        Branch::NcclForced | Branch::Large | Branch::Domains => Ok(Route::Nccl),
        Branch::NcclRefused(why) => Err(RuleError::NcclRefused(format!(
            "NCCL is forced, but it cannot run this {} of {}: {why}",
            call.collective,
            size_name(call.bytes)
        ))),
        Branch::DomainsRefused(why) => Err(RuleError::NcclRefused(format!(
            "this {} of {} cannot run: {why}",
            call.collective,
            size_name(call.bytes)
        ))),
        _ => Ok(symm()),
    }
}

/// [`route`], with the reason in words.
pub fn choose(
    options: &Options,
    group: &GroupFacts,
    call: &CallFacts,
) -> Result<Choice, RuleError> {
    let route = route(options, group, call)?;
    let size = size_name(call.bytes);
    let limit = size_name(options.max_symm_bytes(call.collective));
    let place = match call.placed {
        Placed::Pool { segment } => format!("input in pool segment {segment}"),
        Placed::Symmetric => "input in symmetric memory".into(),
        Placed::Plain => "input staged into the group's symmetric buffer".into(),
    };
    let reason = match branch(options, group, call) {
        Branch::Domains if group.stand_in => format!(
            "{size}, the group spans NVLink domains, which NCCL crosses (symm's kernels stand \
             in for it on the emulator)"
        ),
        Branch::Domains => format!("{size}, the group spans NVLink domains, which NCCL crosses"),
        Branch::DomainsRefused(_) => unreachable!("`route` failed"),
        Branch::SymmForced => format!("symm forced, {size}, {place}"),
        Branch::Deterministic => format!(
            "{size}, deterministic mode: reductions stay on symm's kernels (rank-order \
             sums), {place}"
        ),
        Branch::NcclForced => format!("NCCL forced, {size}"),
        Branch::NcclRefused(_) => unreachable!("`route` failed"),
        Branch::SplitsDiffer => format!(
            "{size} here, but the ranks' splits differ, so no size chooses alike on every \
             rank (force NCCL to take it); {place}"
        ),
        Branch::CopyEngine => format!(
            "{size} ≥ {} copy-engine threshold (calls on their own stream overlap compute, \
             which keeps the SMs), {place}",
            size_name(options.copy_engine_min_bytes())
        ),
        Branch::Small => format!("{size} ≤ {limit} threshold, {place}"),
        Branch::Large => format!("{size} > {limit} threshold"),
        Branch::Fallback(why) => {
            format!("{size} > {limit} threshold, but NCCL cannot run it ({why}); {place}")
        }
    };
    Ok(Choice { route, reason })
}
