#![warn(missing_docs)]
//! Runtime of symm: devices, symmetric allocation, rendezvous and its
//! per-allocation cache, signal operations, the JIT engine and launch.
//!
//! Most users depend on the `symm` facade crate, which re-exports this one.
//!
//! The model is SPMD: code is written per rank against a [`Comm`]. Ranks come
//! from [`run_local`] (one thread per local GPU), [`run`] (GPUs or the CPU
//! emulator), [`Comm::from_env`] (one process per GPU, under torchrun,
//! `symm-run`, `mpirun` or `srun`), or [`Comm::cuda`] / [`Comm::emulated`]
//! with a shared [`Store`].

// The floors, bottom up; each folder's files use only files below them
// (tests/module_graph.rs). ARCHITECTURE.md names what each holds.
/// What generated code calls. Named after the version: the macro writes
/// the same name from its own version, so mismatched crates fail to build.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private_0_1_0;
mod base;
mod driver;
pub mod dsl;
mod group;
mod memory;
mod raw;
pub mod signal;

// Every floor's modules under their own names at the root: the crate's
// paths (`crate::error::Error`) and its users' (`symm_runtime::jit`) do
// not name the floor.
use base::{dtype, error, fp8, launch, ledger, status};
pub use base::{jit, layout, store};
use driver::ipc;
pub use driver::{cuda, cuda_prelude};
use dsl::{emulator, hostmem};
use group::{backend, bootstrap, comm, placement, run, topology};
use signal::stage;

pub use backend::BackendKind;
pub use bootstrap::{Handles, LaunchEnv, Launcher, StoreSpec};
pub use comm::{Comm, CommOptions, GroupWatch};
pub use cuda::{cuda_available, cuda_device_count, prepare_shared_gpus};
pub use dtype::{compare_bits, BitMismatch, DType, Element};
pub use error::{Error, ErrorKind, GroupName, Result, MISMATCH_ASSERT};
pub use launch::{KernelArg, LaunchConfig};
pub use layout::WorldSizeError;
pub use memory::buffer::{DeviceBuffer, SymmBuffer, SymmView};
pub use memory::interop::{CudaRef, CudaRefMut};
pub use memory::pool::{
    DeviceSegments, FnSegments, HookId, PoolGuard, PoolStats, PoolTensor, SegmentAllocator,
    SegmentEvent, SegmentInfo, SymmPool,
};
pub use memory::slice::{BoundSlice, DeviceSlice};
pub use memory::symmetric::{PeerBuffer, SymmetricMemory};
pub use raw::RawKernel;
pub use run::{run, run_local, Ranks, RunError};
pub use stage::Stage;
pub use store::{FileStore, InProcessStore, Store, StoreError, TcpStore};
pub use topology::{Topology, NODES_VAR};

/// Re-exported so users can name the f16 and bf16 element types.
pub use half::{bf16, f16};

pub use fp8::{f8e4m3, f8e5m2};

/// Re-exported so users can pass their own streams and capture graphs.
pub use cudarc;

/// The kernel macro (see [`dsl`]).
pub use symm_macros::symm_kernel;

/// Runs `body` with the run-time world size `world` (any integer) as the
/// const `W: usize`, so that a kernel unrolled over the world size
/// (`k::launch::<W>(..)`) can be launched for the group at hand: one arm per
/// size `1..=`[`MAX_WORLD_SIZE`](layout::MAX_WORLD_SIZE), each its own
/// instantiation. Evaluates to `Ok(body)`, or to
/// `Err(`[`WorldSizeError`](layout::WorldSizeError)`)` for any other size
/// (never a panic); `?` turns that into [`Error::WorldSize`].
///
/// ```
/// # use symm_runtime as symm;
/// // What a kernel generic over the world size would get.
/// fn peers<const W: usize>() -> [usize; W] {
///     std::array::from_fn(|r| r)
/// }
///
/// let world: u32 = 3; // from the command line, say
/// let got = symm::with_world!(world, W => peers::<W>().len());
/// assert_eq!(got, Ok(3));
/// let err = symm::with_world!(-1i32, W => W).unwrap_err();
/// assert!(err.to_string().starts_with("world size -1 is not supported"));
/// assert!(symm::with_world!(9usize, W => W).is_err());
/// ```
#[macro_export]
macro_rules! with_world {
    ($world:expr, $w:ident => $body:expr $(,)?) => {
        match $crate::layout::__world_size($world) {
            1 => ::core::result::Result::Ok({
                const $w: usize = 1;
                $body
            }),
            2 => ::core::result::Result::Ok({
                const $w: usize = 2;
                $body
            }),
            3 => ::core::result::Result::Ok({
                const $w: usize = 3;
                $body
            }),
            4 => ::core::result::Result::Ok({
                const $w: usize = 4;
                $body
            }),
            5 => ::core::result::Result::Ok({
                const $w: usize = 5;
                $body
            }),
            6 => ::core::result::Result::Ok({
                const $w: usize = 6;
                $body
            }),
            7 => ::core::result::Result::Ok({
                const $w: usize = 7;
                $body
            }),
            8 => ::core::result::Result::Ok({
                const $w: usize = 8;
                $body
            }),
            world => ::core::result::Result::Err($crate::layout::WorldSizeError { world }),
        }
    };
}

/// A test that compiles kernels with NVRTC (see [`jit::require_nvrtc`]).
pub use symm_macros::check_kernels;

// Lets `::symm::` paths in expansions resolve inside this crate too.
extern crate self as symm;
