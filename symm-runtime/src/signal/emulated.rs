//! The host signal operations on the CPU emulator: the very kernels of
//! [`super::kernels`] that a GPU launches, their CPU bodies run through the
//! DSL's emulated memory operations, so the protocol is written once.
//!
//! Each simulated thread of the operation is an OS thread (the calling one,
//! plus one per other peer of a barrier), not a coroutine of
//! [`crate::emulator::run`]. That keeps the host operations' semantics:
//! a wait is bounded by the operation's own timeout only, never by the
//! emulator's hang detection, and a rank inside a host operation does not
//! count as inside a launch for its peers' hang detection (a rank that is
//! busy on the host, then signals, is slow, not deadlocked; entering a
//! launch is not yet progress there, so a peer stalled for longer could be
//! declared hung in that window). A timeout is recorded, as in the device's
//! status word, for the next `synchronize`.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, Location};
use std::sync::Mutex;
use std::time::Instant;

use crate::backend::SignalCall;
use crate::dsl::thread::{with_thread, KernelThread};
use crate::dsl::SymmBuf;
use crate::error::{Error, Result};
use crate::signal::kernels::{signal_barrier, signal_put, signal_wait};
use crate::signal::{SignalOp, StatusRecord};

/// Where the threads of one operation record its first timeout.
type Sink = Mutex<Option<StatusRecord>>;

thread_local! {
    /// The sink of the emulated signal operation this OS thread is running.
    static SINK: Cell<Option<*const Sink>> = const { Cell::new(None) };
}

/// Runs `call` for `rank` as the signal kernel a GPU would launch (one
/// block: one thread for a put or a wait, one per rank for a barrier).
/// Returns the timeout the kernel recorded, if any.
pub(crate) fn run(rank: usize, call: &SignalCall<'_>) -> Result<Option<StatusRecord>> {
    // The kernels touch only the pads, the rank and the world size.
    // SAFETY: `pads_dev` is the host table of every rank's pad (the
    // emulator's device table), alive for the call; the kernels touch no
    // buffer (`ptrs` is never read with a length of 0).
    let buf = unsafe { SymmBuf::<u8>::__new(0, call.pads_dev, rank as u32, call.world as u32, 0) };
    let timeout_ns = u64::try_from(call.timeout.as_nanos()).unwrap_or(u64::MAX);
    let channel = call.channel as u32;
    let (name, threads): (&'static str, usize) = match call.op {
        SignalOp::Put { .. } => (signal_put::NAME, 1),
        SignalOp::Wait { .. } => (signal_wait::NAME, 1),
        SignalOp::Barrier => (signal_barrier::NAME, call.world.max(1)),
    };
    let body = || match call.op {
        SignalOp::Put { dst } => signal_put::cpu::<u8>(buf, dst as u32, channel, timeout_ns),
        SignalOp::Wait { src } => signal_wait::cpu::<u8>(buf, src as u32, channel, timeout_ns),
        SignalOp::Barrier => signal_barrier::cpu::<u8>(buf, channel, timeout_ns),
    };
    let sink: Sink = Mutex::new(None);
    let epoch = Instant::now();
    let thread = |t: usize| -> Result<()> {
        let me = OpThread {
            name,
            rank: rank as u32,
            thread: t as u32,
            threads: threads as u32,
            epoch,
            timeout_ns,
        };
        let previous = SINK.with(|s| s.replace(Some(&sink as *const Sink)));
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| with_thread(&me, body)));
        SINK.with(|s| s.set(previous));
        ran.map_err(|payload| Error::KernelFault {
            kernel: name.to_string(),
            rank,
            message: payload
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "a simulated thread panicked".into()),
        })
    };
    std::thread::scope(|s| {
        let others: Vec<_> = (1..threads).map(|t| s.spawn(move || thread(t))).collect();
        let mut result = thread(0);
        for h in others {
            let r = h
                .join()
                .unwrap_or_else(|_| unreachable!("panics are caught"));
            result = result.and(r);
        }
        result
    })?;
    Ok(sink.into_inner().unwrap_or_else(|p| p.into_inner()))
}

/// Whether this OS thread runs an emulated signal operation, so that a
/// timed-out `_within` operation records (as on a GPU) instead of failing.
pub(crate) fn recording() -> bool {
    SINK.with(|s| s.get().is_some())
}

/// Keeps `rec` unless another thread of the same operation recorded first
/// (the first failure wins, as in the device's status record).
pub(crate) fn record(rec: StatusRecord) {
    if let Some(sink) = SINK.with(Cell::get) {
        // SAFETY: `run` keeps the sink alive while the pointer is installed.
        let sink = unsafe { &*sink };
        sink.lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(rec);
    }
}

/// One simulated thread of a signal kernel: the kernels use only their
/// indices, the timer and pad memory.
struct OpThread {
    name: &'static str,
    rank: u32,
    thread: u32,
    threads: u32,
    epoch: Instant,
    timeout_ns: u64,
}

impl OpThread {
    fn unsupported(&self, what: &str) -> ! {
        panic!(
            "signal kernel `{}` on rank {}: {what} is not available to host signal operations",
            self.name, self.rank
        )
    }
}

impl KernelThread for OpThread {
    fn indices(&self) -> [[u32; 3]; 4] {
        [
            [self.thread, 0, 0],
            [0, 0, 0],
            [self.threads, 1, 1],
            [1, 1, 1],
        ]
    }
    fn rank(&self) -> u32 {
        self.rank
    }
    fn sync_threads(&self, _: &'static Location<'static>) {
        self.unsupported("sync_threads")
    }
    fn shfl(&self, _: u64, _: u32, what: &'static str, _: &'static Location<'static>) -> u64 {
        self.unsupported(what)
    }
    fn ballot(&self, _: bool, _: &'static Location<'static>) -> u32 {
        self.unsupported("ballot")
    }
    fn shared(&self, _: u64, _: usize) -> u64 {
        self.unsupported("shared memory")
    }
    fn begin_wait(&self, _: &dyn Fn() -> String, _: &'static Location<'static>) {}
    fn end_wait(&self) {}
    fn spin(&self) {
        std::thread::yield_now();
    }
    fn globaltimer(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    fn timeout_ns(&self) -> u64 {
        self.timeout_ns
    }
    fn fail(&self, message: String, loc: &'static Location<'static>) -> ! {
        panic!(
            "signal kernel `{}` on rank {}, thread {}: {message} (at {loc})",
            self.name, self.rank, self.thread
        )
    }
}
