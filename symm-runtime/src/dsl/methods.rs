//! Handle methods resolved by path. Each is defined once: with `method!`,
//! its Rust stub (an inherent method of the handle, what the emulator
//! runs) and, in a module of the method's name here, its CUDA C (what the
//! GPU runs); or, as the signal methods are, as a device function written
//! in the DSL, which gives both, with an inherent method that calls it.
//! A kernel's call `h.name(args)` of a method the macro's own
//! table does not list, on a handle (a slice or `SymmBuf` parameter, a
//! local bound to a handle, or a `Remote` from `peer`, `local` or `pad`),
//! is translated as a call of the device function
//! `::symm::dsl::methods::name` with the handle first, as a
//! `#[symm_kernel(device)]` function's call is. So adding a method
//! touches only this file; rustc reports a method that does not exist.
//!
//! The macro's table keeps the methods whose translation needs more than a
//! call: the result types that type literals (`buf.rank() + 1`), orderings
//! and scopes as template arguments, vector widths and bounds-checked
//! indices.

use super::memory::SymmBuf;
use super::protocol::{exit_thread, kernel_timeout_ns, signal_ok, signal_put, signal_take};
/// The flags are the protocol's own device functions.
pub use super::protocol::{signal_flag, wait_flag};
use super::scalar::Scalar;
use crate::symm_kernel;

/// Defines a handle method: `impl[generics] Handle { pub fn name(&self,
/// args) -> ret { stub } }`, then `cuda: "..."`, its C++ definition, named
/// `f_<name>` and taking the kernel context, then the handle, then the
/// arguments. A C++ overload per handle type, if more than one has the
/// method, goes in the same definition.
///
/// The definition takes on a device function's obligations (see
/// [`DeviceFn::new`](crate::dsl::DeviceFn::new)): the C++ computes what
/// the stub computes, bit for bit, and touches only memory the handle
/// owns. The name must not be one of the macro's table (a test in
/// `symm-macros` checks).
macro_rules! method {
    (
        $(#[$attr:meta])*
        impl[$($gen:tt)*] $handle:ty {
            pub fn $name:ident(&$self:ident $(, $arg:ident : $ty:ty)* $(,)?) $(-> $ret:ty)? $body:block
        }
        cuda: $cuda:expr;
    ) => {
        impl<$($gen)*> $handle {
            $(#[$attr])*
            pub fn $name(&$self $(, $arg: $ty)*) $(-> $ret)? $body
        }

        #[doc(hidden)]
        pub mod $name {
            /// The method's CUDA C.
            pub static DEVICE: $crate::dsl::DeviceFn = $crate::dsl::DeviceFn {
                name: stringify!($name),
                source: $cuda,
                deps: &[],
                file: file!(),
                line: line!(),
                asserts: &[],
            };
        }
    };
}

method! {
    /// The rank `step` places after this one in ring order, `(rank + step)
    /// mod world_size`, for ring algorithms (`ring_peer(1)` is the next
    /// rank, `ring_peer(world_size - 1)` the previous one). Any `step` is
    /// taken modulo the world size first, so the sum cannot wrap.
    impl[T: Scalar] SymmBuf<T> {
        pub fn ring_peer(&self, step: u32) -> u32 {
            let world = self.world_size();
            (self.rank() + step % world) % world
        }
    }
    cuda: "template<typename T> __device__ __forceinline__ __attribute__((unused)) symm_u32 \
           f_ring_peer(const symm_kctx&, symm_buf<T> b, symm_u32 step) { \
           return (b.rank + step % b.world) % b.world; }\n";
}

// The signal methods: device functions of the protocol (`super::protocol`),
// written in the DSL, so the GPU and the emulator run the same source. Each
// inherent method is what a kernel's Rust body calls; the function of the
// same name here (the flags' re-exported) is what the macro's translation
// calls.

impl<T: Scalar> SymmBuf<T> {
    /// Signals rank `dst` on `channel` from this block: a system-scope
    /// release, after the slot is free. Past the kernel's timeout it
    /// records a timeout naming rank, block, peer and channel, and ends the
    /// thread (`synchronize` reports it).
    #[track_caller]
    pub fn put_signal(&self, dst: u32, channel: u32) {
        put_signal(*self, dst, channel)
    }

    /// Waits for rank `src`'s signal on `channel` to this block, consuming
    /// it: a system-scope acquire. Times out as
    /// [`put_signal`](Self::put_signal) does.
    #[track_caller]
    pub fn wait_signal(&self, src: u32, channel: u32) {
        wait_signal(*self, src, channel)
    }

    /// [`put_signal`](Self::put_signal) with an explicit timeout: returns
    /// `false` after recording a timeout (reported at the rank's next
    /// synchronisation, as [`crate::Error::SignalTimeout`]) instead of ending
    /// the thread, or, in a checked launch, after recording a bad `dst` or
    /// `channel`. The record's kind ([`crate::signal::SignalKind`]) is a
    /// barrier's put when `barrier` is set, else a put. The host signal
    /// operations are kernels built on these.
    #[doc(hidden)]
    #[track_caller]
    pub fn put_signal_within(
        &self,
        dst: u32,
        channel: u32,
        timeout_ns: u64,
        barrier: bool,
    ) -> bool {
        put_signal_within(*self, dst, channel, timeout_ns, barrier)
    }

    /// [`wait_signal`](Self::wait_signal) with an explicit timeout (see
    /// [`put_signal_within`](Self::put_signal_within)); a barrier's wait when
    /// `barrier` is set.
    #[doc(hidden)]
    #[track_caller]
    pub fn wait_signal_within(
        &self,
        src: u32,
        channel: u32,
        timeout_ns: u64,
        barrier: bool,
    ) -> bool {
        wait_signal_within(*self, src, channel, timeout_ns, barrier)
    }

    /// Stores `value` into rank `dst`'s flag for this rank on `channel`
    /// (this block's slot), with system-scope release: everything this
    /// thread (and, after `sync_threads`, its block) did before is visible to
    /// a `wait_flag` that sees it. No read-modify-write.
    #[track_caller]
    pub fn signal_flag(&self, dst: u32, channel: u32, value: u32) {
        signal_flag(*self, dst, channel, value)
    }

    /// Waits until this rank's flag from rank `src` on `channel` (this
    /// block's slot) has reached `value` (wrapping comparison, so epoch
    /// counters may wrap), with system-scope acquire. Times out like
    /// `wait_signal`.
    #[track_caller]
    pub fn wait_flag(&self, src: u32, channel: u32, value: u32) {
        wait_flag(*self, src, channel, value)
    }
}

/// `buf.put_signal(dst, channel)`.
#[symm_kernel(device)]
#[track_caller]
pub fn put_signal<T: Scalar>(buf: SymmBuf<T>, dst: u32, channel: u32) {
    // A bad `dst` or `channel` is recorded (checked launches) and the
    // thread goes on; only a timeout ends it.
    if signal_ok(1u32, buf.world_size(), dst, channel)
        && !signal_put(buf, dst, channel, kernel_timeout_ns(), 1u32, false)
    {
        exit_thread();
    }
}

/// `buf.wait_signal(src, channel)`.
#[symm_kernel(device)]
#[track_caller]
pub fn wait_signal<T: Scalar>(buf: SymmBuf<T>, src: u32, channel: u32) {
    if signal_ok(2u32, buf.world_size(), src, channel)
        && !signal_take(buf, src, channel, kernel_timeout_ns(), 2u32, false)
    {
        exit_thread();
    }
}

/// `buf.put_signal_within(dst, channel, timeout_ns, barrier)`.
#[symm_kernel(device)]
#[track_caller]
pub fn put_signal_within<T: Scalar>(
    buf: SymmBuf<T>,
    dst: u32,
    channel: u32,
    timeout_ns: u64,
    barrier: bool,
) -> bool {
    if !signal_ok(1u32, buf.world_size(), dst, channel) {
        return false;
    }
    let mut kind = 1u32;
    if barrier {
        kind = 3u32;
    }
    signal_put(buf, dst, channel, timeout_ns, kind, true)
}

/// `buf.wait_signal_within(src, channel, timeout_ns, barrier)`.
#[symm_kernel(device)]
#[track_caller]
pub fn wait_signal_within<T: Scalar>(
    buf: SymmBuf<T>,
    src: u32,
    channel: u32,
    timeout_ns: u64,
    barrier: bool,
) -> bool {
    if !signal_ok(2u32, buf.world_size(), src, channel) {
        return false;
    }
    let mut kind = 2u32;
    if barrier {
        kind = 4u32;
    }
    signal_take(buf, src, channel, timeout_ns, kind, true)
}
