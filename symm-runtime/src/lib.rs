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

mod backend;
mod bootstrap;
mod comm;
pub mod cuda;
pub mod cuda_prelude;
pub mod dsl;

/// What generated code calls. Named after the version: the macro writes
/// the same name from its own version, so mismatched crates fail to build.
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private_0_1_0;
mod dtype;
mod emulator;
mod error;
mod hostmem;
mod ipc;
pub mod jit;
mod launch;
pub mod layout;
mod memory;
mod placement;
mod raw;
mod run;
pub mod signal;
mod status;
pub mod store;

pub use backend::BackendKind;
pub use bootstrap::{Handles, LaunchEnv, Launcher, StoreSpec};
pub use comm::{Comm, CommOptions};
pub use cuda::{cuda_available, cuda_device_count, prepare_shared_gpus};
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use launch::{KernelArg, LaunchConfig};
pub use memory::buffer::{DeviceBuffer, DeviceSlice, SymmBuffer, SymmView};
pub use memory::symmetric::{PeerBuffer, SymmetricMemory};
pub use raw::RawKernel;
pub use run::{run, run_local, Ranks, RunError};
pub use store::{FileStore, InProcessStore, Store, StoreError, TcpStore};

/// Re-exported so users can name the f16 and bf16 element types.
pub use half::{bf16, f16};

/// Re-exported so users can pass their own streams and capture graphs.
pub use cudarc;

/// The kernel macro (see [`dsl`]).
pub use symm_macros::symm_kernel;

/// A test that compiles kernels with NVRTC (see [`jit::require_nvrtc`]).
pub use symm_macros::check_kernels;

// Lets `::symm::` paths in expansions resolve inside this crate too.
extern crate self as symm;
