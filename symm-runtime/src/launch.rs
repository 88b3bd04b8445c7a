//! Launching CUDA C kernels through the JIT engine.
//!
//! This is the low-level path that `#[symm_kernel]` launchers build on; it
//! also serves tests that need a hand-written kernel.

use std::sync::Arc;

use cudarc::driver::CudaFunction;

use crate::backend::CudaBackend;
use crate::comm::Comm;
use crate::error::Result;

/// Grid, block and dynamic shared memory of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem: u32,
    /// Programmatic dependent launch (sm_90 and later; ignored before): the
    /// kernel may start while the previous kernel on the stream is still
    /// finishing, which hides most of the launch latency of back-to-back
    /// kernels. The kernel must call
    /// [`grid_dependency_wait`](crate::dsl::grid_dependency_wait) before it
    /// touches memory the previous kernel may write or read.
    pub pdl: bool,
}

impl LaunchConfig {
    /// A one-dimensional launch of `grid` blocks of `block` threads.
    pub fn linear(grid: u32, block: u32) -> LaunchConfig {
        LaunchConfig {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_mem: 0,
            pdl: false,
        }
    }

    /// The same launch with programmatic dependent launch turned on (see
    /// [`LaunchConfig::pdl`]).
    pub fn with_pdl(self) -> LaunchConfig {
        LaunchConfig { pdl: true, ..self }
    }
}

/// One kernel parameter. Pointers are device addresses (`u64`).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum KernelArg {
    /// `unsigned int`.
    U32(u32),
    /// `int`.
    I32(i32),
    /// `unsigned long long`, or a pointer.
    U64(u64),
    /// `long long`.
    I64(i64),
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
}

impl KernelArg {
    fn slot(self) -> [u8; 8] {
        let mut s = [0u8; 8];
        match self {
            KernelArg::U32(v) => s[..4].copy_from_slice(&v.to_le_bytes()),
            KernelArg::I32(v) => s[..4].copy_from_slice(&v.to_le_bytes()),
            KernelArg::F32(v) => s[..4].copy_from_slice(&v.to_le_bytes()),
            KernelArg::U64(v) => s = v.to_le_bytes(),
            KernelArg::I64(v) => s = v.to_le_bytes(),
            KernelArg::F64(v) => s = v.to_le_bytes(),
        }
        s
    }
}

/// A `extern "C" __global__` kernel from CUDA C source, loaded on one rank's device.
pub struct RawKernel {
    name: String,
    f: CudaFunction,
    ordinal: usize,
}

impl std::fmt::Debug for RawKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawKernel({} on cuda:{})", self.name, self.ordinal)
    }
}

fn cuda(comm: &Comm) -> Result<&CudaBackend> {
    comm.backend
        .as_any()
        .downcast_ref::<CudaBackend>()
        .ok_or_else(|| comm.invalid("CUDA C kernels need a GPU rank; on the emulator, write the kernel with #[symm_kernel]"))
}

impl Comm {
    /// Compiles `source` (cached in memory and on disk) and loads kernel `name`.
    pub fn raw_kernel(&self, name: &str, source: &str) -> Result<Arc<RawKernel>> {
        let b = cuda(self)?;
        let f = b.dev.function(self.rank(), name, source, name)?;
        Ok(Arc::new(RawKernel {
            name: name.to_owned(),
            f,
            ordinal: b.dev.ordinal,
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
    /// [`Comm::co_resident_blocks`].
    pub unsafe fn launch(&self, comm: &Comm, cfg: LaunchConfig, args: &[KernelArg]) -> Result<()> {
        let b = cuda(comm)?;
        if b.dev.ordinal != self.ordinal {
            return Err(comm.invalid(format!(
                "{self:?} was loaded for another device than {}",
                comm.device()
            )));
        }
        let mut slots: Vec<[u8; 8]> = args.iter().map(|a| a.slot()).collect();
        b.dev
            .launch(&self.f, &b.stream, &cfg, &mut slots)
            .map_err(|e| b.dev.error(comm.rank(), e))
    }
}
