//! CUDA C kernels that are not `#[symm_kernel]`s, for tests and for code
//! ported from CUDA: compiled by the JIT engine and launched unchecked.

use std::sync::Arc;

use crate::backend::RawFunction;
use crate::comm::Comm;
use crate::error::Result;
use crate::launch::{KernelArg, LaunchConfig};

/// A `extern "C" __global__` kernel from CUDA C source, loaded on one rank's device.
pub struct RawKernel {
    name: String,
    f: RawFunction,
}

impl std::fmt::Debug for RawKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawKernel({} on cuda:{})", self.name, self.f.ordinal)
    }
}

impl Comm {
    /// Compiles `source` (cached in memory and on disk) and loads kernel `name`.
    pub fn raw_kernel(&self, name: &str, source: &str) -> Result<Arc<RawKernel>> {
        let f = self.backend.raw_function(name, source)?;
        Ok(Arc::new(RawKernel {
            name: name.to_owned(),
            f,
        }))
    }
}

impl RawKernel {
    /// Enqueues the kernel on `comm`'s stream.
    ///
    /// # Safety
    /// Nothing checks `args` against the kernel's C signature: the caller
    /// must pass exactly its parameters, in order, with matching sizes, and
    /// every pointer must be valid for what the kernel does with it. A
    /// `#[symm_kernel]` launcher is the checked alternative. Where ranks
    /// share a GPU, nothing checks that the grid fits beside theirs either:
    /// a kernel that waits on peers must keep to
    /// [`Comm::co_resident_blocks`]. Where ranks share a GPU it is launched
    /// without programmatic dependent launch (see [`LaunchConfig::pdl`]).
    pub unsafe fn launch(&self, comm: &Comm, cfg: LaunchConfig, args: &[KernelArg]) -> Result<()> {
        let mut slots: Vec<[u8; 8]> = args.iter().map(|a| a.slot()).collect();
        // (Whether it waits on peers is unknown: where ranks share a GPU it
        // goes without programmatic dependent launch, see
        // `LaunchConfig::pdl`.)
        let cfg = cfg.pdl_where_safe(false, comm.max_ranks_on_device());
        // SAFETY: the caller vouches for `args` (this function's contract).
        unsafe { comm.backend.launch_raw(&self.f, &cfg, &mut slots) }
    }
}
