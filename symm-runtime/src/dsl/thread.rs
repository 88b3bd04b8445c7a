//! The hook through which DSL intrinsics reach the CPU emulator.
//!
//! On the GPU, `thread_idx_x()` is a register read. On the CPU it needs to
//! know which simulated thread is running; the emulator makes a
//! [`KernelThread`] current on the OS thread before resuming each simulated
//! thread.

use std::cell::Cell;
use std::panic::Location;

/// What a simulated GPU thread can ask of the emulator. `loc` arguments are
/// the kernel source locations that diagnostics name.
#[doc(hidden)]
pub trait KernelThread {
    /// `threadIdx`, `blockIdx`, `blockDim`, `gridDim`.
    fn indices(&self) -> [[u32; 3]; 4];
    /// Block barrier.
    fn sync_threads(&self, loc: &'static Location<'static>);
    /// Warp shuffle: every lane of the warp offers a 64-bit payload and
    /// gets the payload of lane `src_lane` (its own when that lane has
    /// exited). `what` names the intrinsic for diagnostics.
    fn shfl(
        &self,
        bits: u64,
        src_lane: u32,
        what: &'static str,
        loc: &'static Location<'static>,
    ) -> u64;
    /// Warp vote.
    fn ballot(&self, pred: bool, loc: &'static Location<'static>) -> u32;
    /// Address of the block's shared array of `bytes` for call site `site`.
    fn shared(&self, site: u64, bytes: usize) -> u64;
    /// Starts a wait loop: `what` (alive until the matching `end_wait`)
    /// describes it for hang reports.
    fn begin_wait(&self, what: &dyn Fn() -> String, loc: &'static Location<'static>);
    /// Ends the wait loop started by `begin_wait` or `wait_turn`.
    fn end_wait(&self);
    /// One failed turn of a wait loop written in the DSL (the signal
    /// protocol's): registers the loop as waiting on `what` at `loc`, as
    /// `begin_wait` does, until `end_wait`, and yields as `spin` does.
    fn wait_turn(&self, what: Box<dyn Fn() -> String>, loc: &'static Location<'static>);
    /// Ends this thread, as `exit` ends a GPU thread: it is done, and the
    /// block's other threads go on.
    fn exit(&self) -> !;
    /// Called in a wait loop whose condition failed, so other simulated
    /// threads can run.
    fn spin(&self);
    /// Called on every ordered memory operation, so that busy loops written
    /// with loads and atomics cannot starve other simulated threads.
    fn tick(&self) {}
    /// Nanoseconds of the simulated global timer.
    fn globaltimer(&self) -> u64;
    /// Timeout for in-kernel waits, in nanoseconds.
    fn timeout_ns(&self) -> u64;
    /// Stops this thread's kernel with an error (out of bounds, timeout).
    fn fail(&self, message: String, loc: &'static Location<'static>) -> !;
    /// Stops this thread's kernel: a `kernel_assert!` with `message` at
    /// `location` (`file:line:column`) found its condition false.
    fn assert_failed(&self, message: &'static str, location: String) -> !;
    /// Stops this thread's kernel: a receive took rank `peer`'s data of
    /// another call (`gather_tagged2_checked`), as a failed assertion stops
    /// it.
    fn call_mismatch(&self, peer: usize) -> !;
    /// Records a signal wait that gave up, as a GPU kernel records it in
    /// its status word: reported at the rank's next synchronisation (the
    /// thread goes on, or ends by `exit`, as the protocol says).
    fn record(&self, rec: crate::status::StatusRecord);
}

thread_local! {
    static CURRENT: Cell<Option<*const dyn KernelThread>> = const { Cell::new(None) };
}

/// Makes `t` the current simulated thread of this OS thread (or none).
///
/// # Safety
/// `t` must stay valid until it is replaced or cleared.
pub(crate) unsafe fn set_current(t: Option<*const dyn KernelThread>) {
    CURRENT.with(|c| c.set(t));
}

/// Calls `f` with the current simulated thread.
///
/// # Panics
/// Outside a kernel launched on the emulator, with a message saying so:
/// DSL intrinsics have no meaning in plain host code.
pub(crate) fn current<R>(what: &str, f: impl FnOnce(&dyn KernelThread) -> R) -> R {
    match CURRENT.with(|c| c.get()) {
        // SAFETY: whoever installed the pointer keeps it valid while installed.
        Some(p) => f(unsafe { &*p }),
        None => panic!(
            "symm::dsl::{what} was called outside a kernel; kernel bodies run through their `launch` \
             function, on a GPU or on the CPU emulator"
        ),
    }
}

/// Lets the emulator interleave busy loops; a no-op outside kernels.
pub(crate) fn tick() {
    if let Some(p) = CURRENT.with(|c| c.get()) {
        // SAFETY: as in `current`.
        unsafe { &*p }.tick()
    }
}

/// Reports a fault from DSL code: through the emulator when one is running,
/// as a panic otherwise.
#[track_caller]
pub(crate) fn fault(message: String) -> ! {
    let loc = Location::caller();
    match CURRENT.with(|c| c.get()) {
        // SAFETY: as in `current`.
        Some(p) => unsafe { &*p }.fail(message, loc),
        None => panic!("{message} (at {loc})"),
    }
}

/// A `kernel_assert!` with `message` at `file`, `line` and `column` found
/// its condition false: through the emulator when one is running (the
/// launch fails), as a panic otherwise (host code, where the macro behaves
/// as `assert!`). Cold: a passing assertion never calls it.
#[cold]
#[inline(never)]
pub fn assert_failed(message: &'static str, file: &'static str, line: u32, column: u32) -> ! {
    let location = format!("{file}:{line}:{column}");
    match CURRENT.with(|c| c.get()) {
        // SAFETY: as in `current`.
        Some(p) => unsafe { &*p }.assert_failed(message, location),
        None => panic!("assertion failed: {message} (at {location})"),
    }
}

/// Brackets a wait loop: `begin_wait` now, `end_wait` on drop (also when the
/// loop ends by a fault).
struct WaitGuard<'a>(&'a dyn KernelThread);

impl<'a> WaitGuard<'a> {
    pub(crate) fn new(
        t: &'a dyn KernelThread,
        what: &dyn Fn() -> String,
        loc: &'static Location<'static>,
    ) -> Self {
        t.begin_wait(what, loc);
        WaitGuard(t)
    }
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.end_wait();
    }
}

/// The busy-wait behind the DSL's receives (the signal protocol's waits are
/// DSL code, with `wait_turn`): polls `poll` on thread `t` until it gives a
/// value. After a first miss the thread is registered as waiting on `what`
/// at `loc` (hang reports list it) and yields to the scheduler after each
/// further miss; past the kernel timeout it fails with `on_timeout(limit)`.
pub(crate) fn wait_for<R>(
    t: &dyn KernelThread,
    what: &dyn Fn() -> String,
    loc: &'static Location<'static>,
    on_timeout: impl Fn(u64) -> String,
    mut poll: impl FnMut() -> Option<R>,
) -> R {
    if let Some(r) = poll() {
        return r;
    }
    let _wait = WaitGuard::new(t, what, loc);
    let start = t.globaltimer();
    let limit = t.timeout_ns();
    loop {
        if let Some(r) = poll() {
            return r;
        }
        if t.globaltimer().saturating_sub(start) > limit {
            t.fail(on_timeout(limit), loc);
        }
        t.spin();
    }
}
