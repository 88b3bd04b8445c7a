//! The driver floor: the CUDA devices through cudarc (memory, mappings,
//! streams, the table of loaded functions), the device headers' assembly
//! into the prelude, and descriptor passing between processes. It knows no
//! DSL, no group and no kernel.

pub mod cuda;
pub mod cuda_prelude;
pub(crate) mod ipc;
