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
//! Everything lives in [`symm_runtime`], re-exported here.

pub use symm_runtime::*;

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
        Launching = "launching.md",
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
