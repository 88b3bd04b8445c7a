//! The kernel DSL: the types and intrinsics a `#[symm_kernel]` body uses.
//!
//! A kernel is a Rust function. rustc type-checks its body against the items
//! here; the macro translates it to CUDA C, which NVRTC compiles at run time
//! for the GPU at hand. On an emulated rank, `launch` runs the same body on
//! the CPU instead: one coroutine per simulated thread, every memory access
//! an atomic with a bounds check, block barriers and warp collectives
//! scheduled as on a GPU. A fault or a deadlock there is an error naming the
//! kernel, rank, block, thread and source line.
//!
//! ```ignore
//! use symm::dsl::*;
//! use symm::symm_kernel;
//!
//! #[symm_kernel]
//! fn scale<T: DslFloat>(x: &[T], y: &mut [T], a: T, n: u32) {
//!     let i = block_idx_x() * block_dim_x() + thread_idx_x();
//!     if i < n {
//!         y[i] = a * x[i];
//!     }
//! }
//! // scale::launch::<f32>(&comm, LaunchConfig::linear(blocks, 256), &x, &mut y, 2.0, n)?;
//! ```
//!
//! # Signatures
//! - Kernel parameters: `&[T]` and `&mut [T]` (launch passes any
//!   [`DeviceSlice`](crate::DeviceSlice): a `SymmBuffer`, a view, a
//!   `DeviceBuffer`, or cudarc's `CudaSlice`, `CudaView`, `CudaViewMut`), [`SymmBuf<T>`] (launch passes a `&SymmetricMemory`, whose
//!   element type is checked), and scalars: `u32`, `u64`, `usize`, `i32`,
//!   `i64`, `f32`, `f64`, `bool`, `bf16`, `f16`, `f8e4m3`, `f8e5m2` or a
//!   generic `T`.
//! - Generics: type parameters bounded by [`Scalar`] (or [`Num`],
//!   [`DslFloat`]) become C++ template parameters; const generics (`usize`,
//!   `u32`, `u64`, `i32`, `bool`) become template constants. Each
//!   instantiation is compiled once per device.
//! - `#[symm_kernel(device)]` marks a helper that kernels call; it may also
//!   take [`Remote`], [`Shared`], arrays, and return values.
//!
//! # Body
//! `let` / `let mut` (shadowing allowed), arithmetic, bitwise, comparison
//! and logical operators, compound assignment, `as` casts (Rust semantics:
//! float-to-int saturates), `if`/`else` (also as a value), `while`, `loop`
//! with `break`/`continue`, `for` over `a..b`, `a..=b` and
//! `(a..b).step_by(s)` (unrolled when the bounds are constants), early
//! `return`, blocks (also as values), calls to device helpers, register
//! arrays `[T; N]` and shared arrays (`let s = shared_array::<T, N>();`).
//! An unsuffixed literal whose type only later use decides (`let i = 0;`)
//! must be annotated (`let i: u32 = 0;`): the macro says so at its span.
//! So must an array of nothing but unsuffixed literals (or `if`/block
//! values); any other array takes the type of its first typed element
//! (`let v = [x[i], y[i]];`). Generic `T: Num` has the operators and their
//! compound assignments (`acc += x`), `T: DslInt` also the bitwise ones.
//! [`kernel_assert!`] checks a condition the kernel relies on (see below).
//! Not supported (each a compile error saying what to write instead):
//! `match`, closures, references, tuples, structs, fields, other macros
//! (`assert!` among them), `unsafe`, labels, `if let`, sub-slicing, names
//! other than locals, parameters and const generics, and standard-library
//! paths (`std::cmp::min(a, b)`: the error names the DSL's `min(a, b)`).
//!
//! # Intrinsics
//! Thread geometry ([`thread_idx_x`], [`block_idx_x`], [`block_dim_x`],
//! [`grid_dim_x`], y and z, [`lane_id`]), [`sync_threads`], [`shfl_xor`],
//! [`ballot`], [`fence`] with a [`Scope`], [`globaltimer`],
//! [`grid_dependency_wait`] and [`launch_dependents`] (programmatic
//! dependent launch, see [`LaunchConfig::pdl`](crate::LaunchConfig::pdl)), [`min`], [`max`],
//! [`abs`], [`fma`], [`exp`], [`vector_lag`], `sqrt`, `to_bits` / `from_bits`, `T::from_f32`,
//! `to_f32`, `wrapping_add/sub/mul`. On slices and [`Remote`] buffers:
//! indexing, `load`/`store` with a [`LoadOrder`]/[`StoreOrder`] and a
//! [`Scope`], `atomic_add`/`exch`/`cas`/`max`/`min` with a [`RmwOrder`], and
//! 16-byte `load_vec::<N>`/`store_vec` (also `_volatile`); receives of
//! data that marks its own arrival: sentinel (`load_vec_ready`,
//! `gather_ready`, elements of 1 to 8 bytes) and LL (`load_tagged`,
//! `load_tagged2`, `gather_tagged2`, `gather_tagged2_checked`, and 8-byte
//! data with `store_tagged64`,
//! `load_tagged64`, `gather_tagged64`). On [`SymmBuf`]:
//! `peer(r)`, `local()`, `pad(r)`, `rank()`, `world_size()`, `len()`,
//! [`ring_peer(step)`](SymmBuf::ring_peer), `put_signal(dst, channel)` and
//! `wait_signal(src, channel)`. Orderings and
//! scopes must be written as constants (`LoadOrder::Acquire`).
//!
//! # Assertions
//! `kernel_assert!(cond, "message")` (or `kernel_assert!(cond)`, whose
//! message is the condition as written) stops the thread that finds `cond`
//! false and reports the kernel, rank, block, thread, message and source
//! line as [`Error::KernelAssert`](crate::Error::KernelAssert): at the next
//! synchronisation on the GPU, as the launch's error on the emulator.
//!
//! # Semantics on the GPU
//! Integer arithmetic wraps (Rust would panic on overflow in debug builds);
//! there are no bounds checks (the emulator has them); kernels are compiled
//! with `--fmad=false`, so `a * b + c` rounds twice exactly as in Rust, and
//! f32/f64/bf16/f16/f8e4m3/f8e5m2 results match the CPU body bit for bit.
//! An in-kernel signal wait that exceeds `CommOptions::kernel_timeout`
//! records the rank, block, peer and channel and ends the thread;
//! `synchronize` reports it.
//! Known gap: a literal passed straight to a *generic* device helper whose
//! other argument fixes the type (`helper(x, 1)`) can fail C++ template
//! deduction; give the literal a suffix.

pub(crate) mod device_fn;
// The CPU's side of the DSL: how the emulator runs a kernel's threads, and
// the host memory they share. Crate-private: `use symm::dsl::*` never sees
// them.
pub(crate) mod emulator;
pub(crate) mod hostmem;
mod intrinsics;
pub(crate) mod memory;
#[doc(hidden)]
pub mod methods;
mod protocol;
mod scalar;
pub(crate) mod support;
pub mod sync;
pub(crate) mod thread;

pub use crate::fp8::{f8e4m3, f8e5m2};
pub use crate::status::AssertSite;
pub use device_fn::DeviceFn;
pub use half::{bf16, f16};
pub use intrinsics::*;
#[doc(hidden)]
pub use memory::__shared_array_at;
pub use protocol::signal_slot;
#[doc(hidden)]
pub use thread::assert_failed as __assert_failed;

/// Checks a condition a kernel relies on: `kernel_assert!(cond, "message")`,
/// or `kernel_assert!(cond)`, whose message is `cond` as written.
///
/// A statement of a `#[symm_kernel]` body or device function. The thread
/// that finds `cond` false records the failure (the first failure of a
/// launch wins, as with signal timeouts) and stops; the kernel, rank, block,
/// thread, message and `file:line:column` are reported as
/// [`Error::KernelAssert`](crate::Error::KernelAssert), in the same words
/// on both backends. On the GPU the thread ends with `exit` (not `trap`,
/// which would lose the CUDA context), in `launch` and `launch_unchecked`
/// alike, and the next synchronisation reports it; only an index into a
/// host-side table of messages is recorded, and a passing assertion costs a
/// compare and a branch. On the emulator the launch fails with it at once.
/// Ranks waiting on the stopped thread then report a timeout (GPU) or a
/// hang (emulator) rather than wait forever.
///
/// The message must be a string literal: it is kept on the host, so there
/// are no format arguments. Outside a kernel (host code) the macro behaves
/// as `assert!`.
///
/// ```ignore
/// #[symm_kernel]
/// fn reduce_scatter<const W: usize>(buf: SymmBuf<f32>, out: &mut [f32], n: u32) {
///     kernel_assert!(W as u32 == buf.world_size(), "launched for another world size");
///     kernel_assert!(n as u64 * (W as u64) <= buf.len() as u64);
///     // ...
/// }
/// ```
#[doc(inline)]
pub use crate::__kernel_assert as kernel_assert;
pub use crate::dtype::Element;
pub use memory::{shared_array, DslIndex, Remote, Shared, Slice, SliceMut, SymmBuf};
pub use scalar::{AtomicAdd, AtomicMinMax, AtomicScalar, DslFloat, DslInt, Num, Scalar};
pub use sync::*;

/// `kernel_assert!` for host code and name resolution: inside
/// `#[symm_kernel]` functions the macro translates each one itself (checking
/// its form, numbering it for the device, rewriting its condition as the
/// rest of the body). Exported under this hidden name so that the DSL's
/// glob import brings in only [`kernel_assert`].
#[doc(hidden)]
#[macro_export]
macro_rules! __kernel_assert {
    ($cond:expr $(,)?) => {
        if !$cond {
            $crate::dsl::__assert_failed(
                ::core::stringify!($cond),
                ::core::file!(),
                ::core::line!(),
                ::core::column!(),
            )
        }
    };
    ($cond:expr, $message:literal $(,)?) => {
        if !$cond {
            $crate::dsl::__assert_failed(
                $message,
                ::core::file!(),
                ::core::line!(),
                ::core::column!(),
            )
        }
    };
}

/// Memory ordering of a load. On the GPU: `ld.relaxed.<scope>`,
/// `ld.acquire.<scope>` or `ld.volatile`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadOrder {
    /// No ordering; still a single, untorn access at the given scope.
    Relaxed,
    /// Later accesses of this thread cannot move before the load.
    Acquire,
    /// Always reads memory, never a cached value; no ordering.
    Volatile,
}

/// Memory ordering of a store. On the GPU: `st.relaxed.<scope>`,
/// `st.release.<scope>` or `st.volatile`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOrder {
    /// No ordering; still a single, untorn access at the given scope.
    Relaxed,
    /// Earlier accesses of this thread cannot move after the store.
    Release,
    /// Always writes memory; no ordering.
    Volatile,
}

/// Memory ordering of an atomic read-modify-write (`atom.<order>.<scope>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmwOrder {
    /// No ordering.
    Relaxed,
    /// Acquire on the read.
    Acquire,
    /// Release on the write.
    Release,
    /// Both.
    AcqRel,
}

/// Which threads an ordering or fence is guaranteed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Threads of the same block (`.cta`).
    Block,
    /// Threads of the same GPU (`.gpu`).
    Gpu,
    /// Every GPU and the host (`.sys`); what peer memory needs.
    System,
}
