//! The kernel DSL: the types and intrinsics a `#[symm_kernel]` body uses.
//!
//! A kernel body is Rust, type-checked by rustc against these items, and
//! translated by the macro to CUDA C. On the CPU the same items run for real
//! (memory through atomics, with bounds checks), which is what the emulator
//! executes. Every item's doc says what it becomes on the GPU.
//!
//! ```ignore
//! use symm::dsl::*;
//! ```

mod intrinsics;
pub(crate) mod memory;
mod scalar;
pub(crate) mod support;
pub(crate) mod thread;

pub use half::{bf16, f16};
pub use intrinsics::*;
#[doc(hidden)]
pub use memory::__shared_array_at;
pub use memory::{shared_array, DslIndex, Remote, Shared, Slice, SliceMut, SymmBuf};
pub use scalar::{AtomicAdd, AtomicMinMax, AtomicScalar, DslFloat, DslInt, Num, Scalar};

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
