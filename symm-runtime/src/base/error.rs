//! The one error type of the runtime.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::jit::JitError;
use crate::status::{
    kernel_named, AssertFailed, CallMismatch, DeviceRecord, OutOfBounds, SignalKind, StatusRecord,
};
use crate::store::StoreError;

/// The group whose rank an error names: a subgroup's label
/// ([`Comm::group_label`](crate::Comm::group_label)), or none for a group
/// not made by a split, whose rank numbers need no qualifying. Displayed
/// after the rank (`rank 1 of group symm.split0[2,3]`), so that an error
/// of a tensor-parallel group is not read as one of the whole group's rank.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupName(Option<Arc<str>>);

impl GroupName {
    /// No qualifier: the rank of a group not made by a split.
    pub const NONE: GroupName = GroupName(None);

    /// The subgroup labelled `label`.
    pub fn of(label: impl Into<Arc<str>>) -> GroupName {
        GroupName(Some(label.into()))
    }

    /// The subgroup's label, if the rank is a subgroup's.
    pub fn label(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// The qualifier as it follows a rank in a message: ` of group <label>`
/// (with its leading space), or nothing.
impl fmt::Display for GroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(l) => write!(f, " of group {l}"),
            None => Ok(()),
        }
    }
}

/// Result alias used across symm.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `Some($f(group))` for the variants that qualify their rank with a group
/// (`group` bound by reference or by mutable reference, as `$e` is).
macro_rules! with_group {
    ($e:expr, $g:ident => $f:expr) => {
        match $e {
            Error::Driver { group: $g, .. }
            | Error::Store { group: $g, .. }
            | Error::RendezvousTimeout { group: $g, .. }
            | Error::JoinTimeout { group: $g, .. }
            | Error::RendezvousMismatch { group: $g, .. }
            | Error::AllocationMismatch { group: $g, .. }
            | Error::RendezvousPeerFailed { group: $g, .. }
            | Error::SignalTimeout { group: $g, .. }
            | Error::CallMismatch { group: $g, .. }
            | Error::InvalidArgument { group: $g, .. }
            | Error::Mismatch { group: $g, .. }
            | Error::Unsupported { group: $g, .. }
            | Error::Capacity { group: $g, .. }
            | Error::KernelFault { group: $g, .. }
            | Error::KernelAssert { group: $g, .. }
            | Error::KernelHang { group: $g, .. }
            | Error::PeerFailed { group: $g, .. }
            | Error::Nccl { group: $g, .. } => Some($f),
            _ => None,
        }
    };
}

/// Everything that can go wrong in symm. Each variant names the rank (and,
/// for device-side failures, the block, peer and channel) that caused it,
/// and a subgroup's rank with its group (`rank 1 of group symm.split0[1,3]`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No usable CUDA driver or device.
    #[error("CUDA is not available: {0}")]
    CudaUnavailable(String),

    /// The launcher's environment does not say where this process belongs
    /// (see [`LaunchEnv`](crate::LaunchEnv)).
    #[error("bootstrap: {0}")]
    Bootstrap(String),

    /// A CUDA driver call failed.
    #[error("rank {rank}{group} on {device}: {op} failed: {source}")]
    Driver {
        /// Rank whose call failed.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// Device label, for example `cuda:1`.
        device: String,
        /// The driver entry point that failed.
        op: &'static str,
        /// The driver's error code.
        source: cudarc::driver::DriverError,
    },

    /// Run-time compilation failed.
    #[error(transparent)]
    Jit(#[from] JitError),

    /// The group's store failed or timed out.
    #[error("rank {rank}{group}: store: {source}")]
    Store {
        /// Rank that saw the failure.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// What the store reported.
        source: StoreError,
    },

    /// Some ranks never arrived at a rendezvous.
    #[error(
        "rank {rank}{group}: rendezvous of allocation #{alloc} timed out after {timeout:?}; \
         missing ranks {missing:?} (did every rank call rendezvous on its matching allocation?)"
    )]
    RendezvousTimeout {
        /// Rank that timed out.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// Collective allocation sequence number.
        alloc: u64,
        /// How long it waited.
        timeout: Duration,
        /// Ranks that never published their half.
        missing: Vec<usize>,
    },

    /// Some ranks never joined the group ([`Comm::cuda`](crate::Comm::cuda),
    /// [`Comm::from_env`](crate::Comm::from_env) and [`run`](crate::run)
    /// wait for every rank, to learn which ranks share a GPU).
    #[error(
        "rank {rank}{group}: joining the group timed out after {timeout:?}; missing ranks {missing:?} \
         (did every rank create its Comm with the same store, group and world size?)"
    )]
    JoinTimeout {
        /// Rank that timed out.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// How long it waited.
        timeout: Duration,
        /// Ranks that never published their part of the join (their
        /// device, or their entry for the group's call ledger).
        missing: Vec<usize>,
    },

    /// Ranks disagree about an allocation. Every rank reports the same text.
    #[error("rendezvous of allocation #{alloc} failed: {detail}")]
    RendezvousMismatch {
        /// Collective allocation sequence number.
        alloc: u64,
        /// The group whose ranks `detail` names (none: a group not made
        /// by a split); `detail` qualifies them with it.
        group: GroupName,
        /// Which property differs, with every rank's value.
        detail: String,
    },

    /// Ranks placed a pool tensor differently: their sequences of pool
    /// allocations and frees differ. Found at the tensor's first
    /// collective use; every rank reports the same text.
    #[error("rank {rank}{group}: pool allocations differ across ranks: {detail}")]
    AllocationMismatch {
        /// The reporting rank.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// Every rank's placement of the tensor, or which ranks never used it.
        detail: String,
    },

    /// A peer failed while mapping memory during rendezvous.
    #[error("rendezvous of allocation #{alloc} failed on rank {failed_rank}{group}: {detail}")]
    RendezvousPeerFailed {
        /// Collective allocation sequence number.
        alloc: u64,
        /// The rank that failed.
        failed_rank: usize,
        /// The group `failed_rank` counts in (none: a group not made by a
        /// split).
        group: GroupName,
        /// Its error.
        detail: String,
    },

    /// A device-side signal operation gave up waiting.
    #[error(
        "signal timeout: rank {rank}{group}, block {block}, thread {thread}: {} did not complete \
         within {timeout_ms} ms",
        waited_for(.kind, .channel, .peer)
    )]
    SignalTimeout {
        /// Rank whose kernel timed out.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// Block that timed out.
        block: u32,
        /// Thread that timed out.
        thread: u32,
        /// The peer it was waiting on.
        peer: usize,
        /// Signal-pad channel ([`u32::MAX`]: a wait for the peer's data
        /// itself, LL packets or Lamport vectors, which takes no channel).
        channel: u32,
        /// Which operation.
        kind: SignalKind,
        /// The timeout that expired, in milliseconds.
        timeout_ms: u64,
    },

    /// A receive took a peer's data of another call: its tag agreed with
    /// the awaited one in the bits that say "this round" but not whole
    /// (`gather_tagged2_checked`, which the LL paths of the all-reduce and
    /// the collectives wait with). The ranks made different collective calls; the thread that
    /// found it recorded it and stopped, as for a failed `kernel_assert!`.
    #[error(
        "kernel `{kernel}` on rank {rank}{group}, block {block}, thread {thread}: rank {peer}'s data \
         belongs to another call: the ranks made different calls (buffer, offset, size, element \
         type or kernel differ); every rank must make the same collective calls in the same order"
    )]
    CallMismatch {
        /// The kernel.
        kernel: String,
        /// Rank whose kernel found the mismatch.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// Linear block index (x fastest).
        block: u32,
        /// Linear thread index in the block (x fastest).
        thread: u32,
        /// The peer whose data was of another call.
        peer: usize,
    },

    /// A caller passed something symm cannot use.
    #[error("rank {rank}{group}: invalid argument: {message}")]
    InvalidArgument {
        /// Rank that got the bad argument.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// What is wrong and what to do instead.
        message: String,
    },

    /// The ranks made different calls: another collective, size, element
    /// type, op or root, or one rank skipped a call its peers made (or
    /// did not make it within the group's timeout). Every rank reports it,
    /// or a [`Error::PeerFailed`] whose [`Error::root_kind`] it is.
    #[error("rank {rank}{group}: {message}")]
    Mismatch {
        /// The reporting rank.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// Every rank's call, or which ranks never made it.
        message: String,
    },

    /// Something symm does not support (here): a world size, a type on
    /// the NCCL route, a forced kernel that cannot run in place, a GPU
    /// feature an emulated rank lacks.
    #[error("rank {rank}{group}: {message}")]
    Unsupported {
        /// The reporting rank.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// What is unsupported, and what is.
        message: String,
    },

    /// A fixed resource is used up or a fixed limit passed: a group's
    /// signal channels, the memory a pool's segment allocator gives, a
    /// forced kernel's largest staging, the 2^32 - 1 elements a built-in's
    /// kernels index.
    #[error("rank {rank}{group}: {message}")]
    Capacity {
        /// The reporting rank.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// What is full, who holds it, and what to do.
        message: String,
    },

    /// A kernel failed: an index out of bounds (on the emulator, or on a
    /// GPU under a checked launch), or, on the emulator, another invalid
    /// operation (a misaligned access, a rank or pad slot out of range, an
    /// in-kernel wait that timed out, a panic in a simulated thread, the
    /// lanes of a warp at different collectives).
    #[error("kernel `{kernel}` on rank {rank}{group}, {message}")]
    KernelFault {
        /// The kernel.
        kernel: String,
        /// Rank whose launch failed.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// Which block (and thread), what happened, and the kernel source
        /// line: `block 3, thread 4: index 100 is out of bounds …`.
        message: String,
    },

    /// A `kernel_assert!` found its condition false. The thread that found it
    /// recorded it (the first failure of a launch wins, as with timeouts) and
    /// stopped: on the GPU the next synchronisation reports it, on the
    /// emulator the launch fails with it. Both word it alike.
    #[error(
        "kernel `{kernel}` on rank {rank}{group}, block {block}, thread {thread}: assertion failed: \
         {message} (at {location})"
    )]
    KernelAssert {
        /// The kernel.
        kernel: String,
        /// Rank whose kernel failed the assertion.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// Linear block index (x fastest).
        block: u32,
        /// Linear thread index in the block (x fastest).
        thread: u32,
        /// The assertion's message: its string literal, or its condition as
        /// written.
        message: String,
        /// `file:line:column` of the `kernel_assert!`.
        location: String,
    },

    /// No simulated thread of any rank made progress: a deadlock, reported
    /// instead of hanging.
    #[error(
        "kernel `{kernel}` on rank {rank}{group} made no progress for {stalled:?}; its simulated threads wait on:{report}"
    )]
    KernelHang {
        /// The kernel.
        kernel: String,
        /// Rank whose threads are listed.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// How long nothing moved.
        stalled: Duration,
        /// One line per group of blocked threads: where, what for, and the
        /// kernel source location.
        report: String,
    },

    /// A world size outside 1 to 8 was to become a const generic
    /// ([`with_world!`](crate::with_world)).
    #[error(transparent)]
    WorldSize(#[from] crate::layout::WorldSizeError),

    /// Another rank of the group failed (returned an error, panicked) or
    /// left it (exited), so this rank's group operation cannot complete.
    #[error(
        "rank {rank}{group}: rank {peer} {cause}; this group can no longer complete an operation"
    )]
    PeerFailed {
        /// Rank that saw it.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// The rank that failed or left.
        peer: usize,
        /// What happened to it ("failed: …", "panicked", "exited").
        cause: String,
        /// The kind of the peer's own error, where it failed with one
        /// ([`Error::root_kind`]).
        cause_kind: Option<ErrorKind>,
    },

    /// The NCCL route failed on this rank: a call or the communicator's
    /// creation returned an error, or the communicator was aborted (by its
    /// watchdog, after a call outlived the group's timeout or NCCL reported
    /// an asynchronous error). An aborted communicator fails every later
    /// call; make a new group to continue.
    #[error("rank {rank}{group}: NCCL: {message}")]
    Nccl {
        /// The rank.
        rank: usize,
        /// The group `rank` counts in (none: a group not made by a split).
        group: GroupName,
        /// What failed, in words.
        message: String,
    },

    /// A rank's closure panicked inside [`crate::run_local`] or [`crate::run`].
    #[error("rank {rank} panicked: {message}")]
    RankPanicked {
        /// The rank.
        rank: usize,
        /// The panic payload, when it was a string.
        message: String,
    },
}

/// What kind of failure an [`Error`] is, for callers that handle some
/// kinds (retry after a timeout, fall back where unsupported) and report
/// the rest. Match on this rather than on the message, whose wording may
/// change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument is wrong on some rank ([`Error::InvalidArgument`]).
    InvalidArgument,
    /// The ranks disagree: different calls, allocations or placements
    /// ([`Error::Mismatch`], [`Error::CallMismatch`],
    /// [`Error::RendezvousMismatch`], [`Error::AllocationMismatch`], and a
    /// [`Error::KernelAssert`] whose message contains
    /// [`MISMATCH_ASSERT`]: a kernel's own check that its peers are in the
    /// same call).
    Mismatch,
    /// Not supported here ([`Error::Unsupported`], [`Error::WorldSize`]).
    Unsupported,
    /// A fixed resource is used up or a fixed limit passed, such as the
    /// 2^32 - 1 elements a built-in's kernels index ([`Error::Capacity`], and a store's
    /// limits: [`StoreError::TooLarge`], [`StoreError::OverLimit`],
    /// [`StoreError::Full`]).
    Capacity,
    /// A wait gave up: a signal, a rendezvous, a join or a store wait.
    Timeout,
    /// Another rank failed or left, so the group cannot go on
    /// ([`Error::PeerFailed`], [`Error::RendezvousPeerFailed`]).
    PeerFailed,
    /// A kernel failed: an assertion, an index out of bounds, a hang on
    /// the emulator.
    Kernel,
    /// A rank's closure panicked ([`Error::RankPanicked`]).
    Panicked,
    /// The machine or its software: no CUDA, a driver call, NVRTC, NCCL,
    /// the launcher's environment, a broken store.
    Environment,
}

/// What a `kernel_assert!` message says to report its failure as
/// [`ErrorKind::Mismatch`]: a kernel that finds its peers in another call
/// (their identity words differ from its own) says so with it.
pub const MISMATCH_ASSERT: &str = "the ranks made different calls";

impl ErrorKind {
    /// Every kind, in the order of [`ErrorKind::code`] (a new kind goes at
    /// the end, so that the codes of the others stay).
    const ALL: [ErrorKind; 9] = [
        ErrorKind::InvalidArgument,
        ErrorKind::Mismatch,
        ErrorKind::Unsupported,
        ErrorKind::Capacity,
        ErrorKind::Timeout,
        ErrorKind::PeerFailed,
        ErrorKind::Kernel,
        ErrorKind::Panicked,
        ErrorKind::Environment,
    ];

    /// A byte that names the kind in records that cross processes (a
    /// departure in the group's store, an agreement's entry), never 0.
    pub fn code(self) -> u8 {
        ErrorKind::ALL
            .iter()
            .position(|&k| k == self)
            .map_or(0, |i| i as u8 + 1)
    }

    /// The kind of [`ErrorKind::code`]'s byte; `None` for 0 or unknown.
    pub fn from_code(code: u8) -> Option<ErrorKind> {
        ErrorKind::ALL
            .get(usize::from(code).checked_sub(1)?)
            .copied()
    }
}

impl Error {
    /// The kind of failure at its origin: for [`Error::PeerFailed`], the
    /// kind of the error the failed peer had, where it said one
    /// ([`Comm::abort_with`](crate::Comm::abort_with), which
    /// [`run`](crate::run) uses); else [`Error::kind`]. Ranks whose
    /// different calls a check found (the host's ledger, the agreement, a
    /// kernel's identity check) then all report [`ErrorKind::Mismatch`]
    /// here, the rank that found it and the peers it stopped alike.
    pub fn root_kind(&self) -> ErrorKind {
        match self {
            Error::PeerFailed {
                cause_kind: Some(k),
                ..
            } => *k,
            e => e.kind(),
        }
    }

    /// The error of `kind` on `rank` of `group` with `message`, for the kinds an
    /// argument check finds: [`Error::Mismatch`], [`Error::Unsupported`],
    /// [`Error::Capacity`], else [`Error::InvalidArgument`]. The inverse of
    /// [`Error::kind`] there, so that a problem that crossed ranks as a
    /// kind and a text (the kernels' agreement) is the same error again.
    pub fn with_kind(kind: ErrorKind, rank: usize, group: GroupName, message: String) -> Error {
        match kind {
            ErrorKind::Mismatch => Error::Mismatch {
                rank,
                group,
                message,
            },
            ErrorKind::Unsupported => Error::Unsupported {
                rank,
                group,
                message,
            },
            ErrorKind::Capacity => Error::Capacity {
                rank,
                group,
                message,
            },
            _ => Error::InvalidArgument {
                rank,
                group,
                message,
            },
        }
    }

    /// The label of the subgroup ([`Comm::group_label`](crate::Comm::group_label))
    /// whose ranks the error names; `None` for a group not made by a split,
    /// and for errors that name no rank.
    pub fn group_label(&self) -> Option<&str> {
        with_group!(self, group => group).and_then(GroupName::label)
    }

    /// The error with its rank qualified as `group`'s: what a layer that
    /// knows the group (a subgroup's backend) does to an error of one that
    /// does not (the driver's).
    pub(crate) fn in_group(mut self, group: &GroupName) -> Error {
        if let Some(g) = with_group!(&mut self, g => g) {
            g.clone_from(group);
        }
        self
    }

    /// The text of an argument check's error (the kinds
    /// [`with_kind`](Self::with_kind) makes), without the rank and kind
    /// that its `Display` puts first; `None` for other errors.
    pub fn message(&self) -> Option<&str> {
        match self {
            Error::InvalidArgument { message, .. }
            | Error::Mismatch { message, .. }
            | Error::Unsupported { message, .. }
            | Error::Capacity { message, .. } => Some(message),
            _ => None,
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            Error::Mismatch { .. }
            | Error::CallMismatch { .. }
            | Error::RendezvousMismatch { .. }
            | Error::AllocationMismatch { .. } => ErrorKind::Mismatch,
            Error::Unsupported { .. } | Error::WorldSize(_) => ErrorKind::Unsupported,
            Error::Capacity { .. } => ErrorKind::Capacity,
            Error::SignalTimeout { .. }
            | Error::RendezvousTimeout { .. }
            | Error::JoinTimeout { .. } => ErrorKind::Timeout,
            Error::Store { source, .. } => match source {
                StoreError::Timeout { .. } => ErrorKind::Timeout,
                StoreError::TooLarge { .. }
                | StoreError::OverLimit { .. }
                | StoreError::Full { .. } => ErrorKind::Capacity,
                _ => ErrorKind::Environment,
            },
            Error::PeerFailed { .. } | Error::RendezvousPeerFailed { .. } => ErrorKind::PeerFailed,
            Error::KernelAssert { message, .. } if message.contains(MISMATCH_ASSERT) => {
                ErrorKind::Mismatch
            }
            Error::KernelFault { .. } | Error::KernelAssert { .. } | Error::KernelHang { .. } => {
                ErrorKind::Kernel
            }
            Error::RankPanicked { .. } => ErrorKind::Panicked,
            Error::CudaUnavailable(_)
            | Error::Bootstrap(_)
            | Error::Driver { .. }
            | Error::Jit(_)
            | Error::Nccl { .. } => ErrorKind::Environment,
        }
    }

    /// [`Error::JoinTimeout`] for a join's wait on the store keys
    /// `missing`, each ending in the rank that never wrote it.
    pub(crate) fn join_timeout(
        rank: usize,
        group: GroupName,
        timeout: Duration,
        missing: &[String],
    ) -> Error {
        Error::JoinTimeout {
            rank,
            group,
            timeout,
            missing: missing_ranks(missing),
        }
    }
}

/// The ranks of store keys that each end in the rank that never wrote
/// them (what a timed-out wait on them reports missing).
pub(crate) fn missing_ranks(missing: &[String]) -> Vec<usize> {
    missing
        .iter()
        .filter_map(|k| k.rsplit('/').next()?.parse().ok())
        .collect()
}

// What each device record reports. Here rather than in `status`, which
// stays below `Error` (the driver's layers report records without knowing
// the error type).

impl StatusRecord {
    pub(crate) fn into_error(self, group: &GroupName) -> Error {
        Error::SignalTimeout {
            rank: self.rank,
            group: group.clone(),
            block: self.block,
            thread: self.thread,
            peer: self.peer,
            channel: self.channel,
            kind: self.kind,
            timeout_ms: self.timeout_ms,
        }
    }
}

impl OutOfBounds {
    /// The error, worded as the emulator words an index out of bounds.
    pub(crate) fn into_error(self, group: &GroupName) -> Error {
        let (sites, kernel) = kernel_named(self.kernel);
        let place = match sites
            .as_ref()
            .and_then(|s| s.functions.get(self.function as usize))
        {
            Some(f) if self.function == 0 => format!("{}:{}", f.file, f.line + self.line),
            Some(f) => format!(
                "{}:{}, in device function `{}`",
                f.file,
                f.line + self.line,
                f.name
            ),
            None => format!(
                "line {} of function {} of a kernel this process never compiled",
                self.line, self.function
            ),
        };
        let index = if self.negative {
            (self.index as i64).to_string()
        } else {
            self.index.to_string()
        };
        Error::KernelFault {
            message: format!(
                "block {}, thread {}: index {index} is out of bounds for length {} (at {place})",
                self.block, self.thread, self.len
            ),
            kernel,
            rank: self.rank,
            group: group.clone(),
        }
    }
}

impl AssertFailed {
    /// The error, worded as the emulator words a failed `kernel_assert!`.
    pub(crate) fn into_error(self, group: &GroupName) -> Error {
        let (sites, kernel) = kernel_named(self.kernel);
        let site = sites.as_ref().and_then(|s| {
            let f = s.functions.get(self.function as usize)?;
            Some((f.file, f.asserts.get(self.assert as usize)?))
        });
        let (message, location) = match site {
            Some((file, a)) => (a.message.to_string(), a.location(file)),
            None => (
                format!(
                    "assertion {} of function {} (not in any kernel this process compiled)",
                    self.assert, self.function
                ),
                "an unknown place".to_string(),
            ),
        };
        Error::KernelAssert {
            kernel,
            rank: self.rank,
            group: group.clone(),
            block: self.block,
            thread: self.thread,
            message,
            location,
        }
    }
}

impl CallMismatch {
    /// The error, worded as the emulator words it.
    pub(crate) fn into_error(self, group: &GroupName) -> Error {
        Error::CallMismatch {
            kernel: kernel_named(self.kernel).1,
            rank: self.rank,
            group: group.clone(),
            block: self.block,
            thread: self.thread,
            peer: self.peer,
        }
    }
}

impl DeviceRecord {
    /// The error the record reports.
    pub(crate) fn into_error(self, group: &GroupName) -> Error {
        match self {
            DeviceRecord::Timeout(r) => r.into_error(group),
            DeviceRecord::OutOfBounds(r) => r.into_error(group),
            DeviceRecord::Assert(r) => r.into_error(group),
            DeviceRecord::Mismatch(r) => r.into_error(group),
            DeviceRecord::Aborted { rank, peer } => Error::PeerFailed {
                rank,
                group: group.clone(),
                peer,
                cause: "left the group (this rank's waits on it were stopped)".into(),
                cause_kind: None,
            },
        }
    }
}

/// What a timed-out wait waited for, and on whom: a signal on a channel,
/// or (channel `u32::MAX`) the peer's data in the call's staging.
fn waited_for(kind: &SignalKind, channel: &u32, peer: &usize) -> String {
    if *channel == u32::MAX && *kind == SignalKind::Wait {
        format!("waiting for peer {peer}'s data (its packets never arrived)")
    } else {
        format!("{kind} on channel {channel} with peer {peer}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timed-out wait for a peer's data (LL packets, Lamport vectors)
    /// says so, not "channel 4294967295"; a signal's names its channel.
    #[test]
    fn a_data_wait_timeout_names_no_channel() {
        let e = |channel| Error::SignalTimeout {
            rank: 0,
            block: 5,
            thread: 0,
            peer: 1,
            channel,
            kind: SignalKind::Wait,
            timeout_ms: 30000,
            group: GroupName::NONE,
        };
        assert_eq!(
            e(u32::MAX).to_string(),
            "signal timeout: rank 0, block 5, thread 0: waiting for peer 1's data (its packets \
             never arrived) did not complete within 30000 ms"
        );
        assert_eq!(
            e(2).to_string(),
            "signal timeout: rank 0, block 5, thread 0: wait_signal (peer never signalled) on \
             channel 2 with peer 1 did not complete within 30000 ms"
        );
    }
}
