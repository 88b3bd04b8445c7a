//! The hook through which DSL intrinsics reach the CPU emulator.
//!
//! On the GPU, `thread_idx_x()` is a register read. On the CPU it needs to
//! know which simulated thread is running; the emulator installs a
//! [`KernelThread`] for the current OS thread before running a kernel body.

use std::cell::Cell;

/// What a simulated GPU thread can ask of the emulator.
#[doc(hidden)]
pub trait KernelThread {
    /// `threadIdx`, `blockIdx`, `blockDim`, `gridDim`.
    fn indices(&self) -> [[u32; 3]; 4];
    /// This thread's rank.
    fn rank(&self) -> u32;
    /// Block barrier.
    fn sync_threads(&self);
    /// Butterfly shuffle of a 64-bit payload within the warp.
    fn shfl_xor(&self, bits: u64, lane_mask: u32) -> u64;
    /// Warp vote.
    fn ballot(&self, pred: bool) -> u32;
    /// Address of the block's shared array for call site `site`.
    fn shared(&self, site: u32, bytes: usize, align: usize) -> u64;
    /// Called inside spin loops, so other simulated threads can run.
    fn spin(&self, what: &dyn Fn() -> String);
    /// Nanoseconds of the simulated global timer.
    fn globaltimer(&self) -> u64;
    /// Timeout for in-kernel waits, in nanoseconds.
    fn timeout_ns(&self) -> u64;
    /// Stops this thread's kernel with an error (out of bounds, timeout).
    fn fail(&self, message: String) -> !;
}

thread_local! {
    static CURRENT: Cell<Option<*const dyn KernelThread>> = const { Cell::new(None) };
}

/// Runs `f` with `t` installed as the current simulated thread.
#[doc(hidden)]
pub fn with_thread<R>(t: &dyn KernelThread, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<*const dyn KernelThread>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    // SAFETY: only erases the lifetime for storage; the pointer is removed
    // (restored) before `t`'s borrow ends, by the guard below, even on unwind.
    let erased: *const dyn KernelThread =
        unsafe { std::mem::transmute::<&dyn KernelThread, &'static dyn KernelThread>(t) };
    let _restore = Restore(CURRENT.with(|c| c.replace(Some(erased))));
    f()
}

/// Calls `f` with the current simulated thread.
///
/// # Panics
/// Outside a kernel launched on the emulator, with a message saying so:
/// DSL intrinsics have no meaning in plain host code.
pub(crate) fn current<R>(what: &str, f: impl FnOnce(&dyn KernelThread) -> R) -> R {
    match CURRENT.with(|c| c.get()) {
        // SAFETY: `with_thread` keeps the pointee alive while it is installed.
        Some(p) => f(unsafe { &*p }),
        None => panic!(
            "symm::dsl::{what} was called outside a kernel; kernel bodies run through their `launch` \
             function, on a GPU or on the CPU emulator"
        ),
    }
}

/// Reports a fault from DSL code: through the emulator when one is running,
/// as a panic otherwise.
pub(crate) fn fault(message: String) -> ! {
    match CURRENT.with(|c| c.get()) {
        // SAFETY: as in `current`.
        Some(p) => unsafe { &*p }.fail(message),
        None => panic!("{message}"),
    }
}
