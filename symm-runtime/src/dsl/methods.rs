//! Handle methods resolved by path. Each is defined once, with `method!`:
//! its Rust stub (an inherent method of the handle, what the emulator
//! runs) and, in a module of the method's name here, its CUDA C (what the
//! GPU runs). A kernel's call `h.name(args)` of a method the macro's own
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
use super::scalar::Scalar;

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
