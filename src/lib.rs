#![warn(missing_docs)]
//! # symm
//!
//! Custom GPU communication kernels over symmetric memory, in Rust.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! // One thread per GPU; each runs this closure as its rank.
//! let sums = symm::run_local(&[0, 1], |comm| {
//!     let buf = comm.alloc::<f32>(1024)?;
//!     buf.copy_from_host(&vec![comm.rank() as f32; 1024])?;
//!     let smem = buf.rendezvous()?; // collective; cached per allocation
//!     let ch = symm::signal::Channel::request(comm)?; // requested, not numbered
//!     smem.barrier(&ch, Duration::from_secs(5))?;
//!     comm.synchronize()?;
//!     let peer = smem.peer_buffer::<f32>((comm.rank() + 1) % comm.world_size())?;
//!     Ok(peer.read(0, 1)?[0])
//! })?;
//! # Ok::<(), symm::RunError>(())
//! ```
//!
//! Start from [`prelude`] (`use symm::prelude::*`): the concepts a
//! program uses. Everything else lives in [`symm_runtime`], re-exported
//! here, and in [`kernels`].

pub use symm_runtime::*;

/// The concepts most programs use, in one import: groups and ranks
/// ([`Comm`], [`run`], [`run_local`], [`Ranks`]), memory ([`SymmBuffer`],
/// [`SymmetricMemory`], [`DeviceBuffer`], [`DeviceSlice`], the pool
/// [`SymmPool`]), kernels ([`symm_kernel`], [`LaunchConfig`], signal
/// [`Channel`](prelude::Channel)s), element types, errors, and the
/// built-in collectives ([`all_reduce`](prelude::all_reduce),
/// [`Collectives`](prelude::Collectives) with
/// [`ReduceOp`](prelude::ReduceOp)).
///
/// ```
/// use symm::prelude::*;
///
/// let sums = run(Ranks::Emulator(2), CommOptions::default(), |comm: &Comm| {
///     let buf = comm.alloc::<f32>(4)?;
///     buf.copy_from_host(&[comm.rank() as f32 + 1.0; 4])?;
///     all_reduce_in_place(comm, &buf, 4)?;
///     Ok(buf.to_host()?[0])
/// })?;
/// assert_eq!(sums, vec![3.0, 3.0]);
/// # Ok::<(), RunError>(())
/// ```
pub mod prelude {
    pub use symm_kernels::all_reduce::{all_reduce, all_reduce_in_place};
    pub use symm_kernels::collectives::ReduceOp;
    pub use symm_kernels::functional::Collectives;
    pub use symm_runtime::signal::Channel;
    pub use symm_runtime::{
        bf16, f16, f8e4m3, f8e5m2, run, run_local, symm_kernel, Comm, CommOptions, DType,
        DeviceBuffer, DeviceSlice, Element, Error, ErrorKind, LaunchConfig, PoolTensor, Ranks,
        Result, RunError, SymmBuffer, SymmPool, SymmView, SymmetricMemory,
    };
}

/// The built-in kernels.
pub use symm_kernels as kernels;

/// Functional collectives: one entry point per collective for tensors
/// anywhere, async results, and the choice between symm's kernels and NCCL.
pub use symm_kernels::functional;

/// Every chapter of the book (`book/src`) as a doctest, so each Rust block
/// in it compiles, and runs unless marked `no_run`.
#[cfg(doctest)]
mod book {
    macro_rules! chapters {
        ($($name:ident = $file:literal),* $(,)?) => {$(
            #[doc = include_str!(concat!("../book/src/", $file))]
            #[allow(dead_code)]
            struct $name;
        )*};
    }
    chapters! {
        Introduction = "introduction.md",
        GettingStarted = "getting-started.md",
        Concepts = "concepts.md",
        FirstKernel = "first-kernel.md",
        TutorialAllReduce = "tutorial-all-reduce.md",
        Collectives = "collectives.md",
        CustomCollectives = "custom-collectives.md",
        TpDecode = "tp-decode.md",
        ExpertParallelism = "expert-parallelism.md",
        Launching = "launching.md",
        AcrossNodes = "across-nodes.md",
        Memory = "memory.md",
        CudaGraphs = "cuda-graphs.md",
        Debugging = "debugging.md",
        Performance = "performance.md",
        DslReference = "dsl-reference.md",
        ErrorsReference = "errors-reference.md",
    }

    /// The README's Rust blocks.
    #[doc = include_str!("../README.md")]
    #[allow(dead_code)]
    struct Readme;
}
