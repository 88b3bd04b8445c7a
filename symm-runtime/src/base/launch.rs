//! What every launch is made of: its grid, block and shared memory, and
//! (for CUDA C kernels) its parameters.

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
    ///
    /// Where ranks share a GPU, a kernel that cannot wait on peers (no
    /// `SymmBuf`), and every raw kernel, is launched without it: symm's
    /// barrier kernels let their dependents start as soon as they start,
    /// so such a kernel's waiting blocks could fill the GPU and leave no
    /// room for a peer's barrier kernel, which the first one waits on. A
    /// kernel that waits on peers keeps it, as its grid is sized for one
    /// early kernel beside it: it must call `grid_dependency_wait` before
    /// `launch_dependents`, as the built-in kernels do.
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

    /// This launch as it may go where the busiest GPU holds `share` of the
    /// group's ranks: without programmatic dependent launch where they
    /// share it, unless the kernel waits on peers (`peers`), whose grids
    /// are sized to fit beside the other ranks' with one early kernel each
    /// (see [`LaunchConfig::pdl`]).
    pub(crate) fn pdl_where_safe(self, peers: bool, share: usize) -> LaunchConfig {
        LaunchConfig {
            pdl: self.pdl && (peers || share <= 1),
            ..self
        }
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
    pub(crate) fn slot(self) -> [u8; 8] {
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

#[cfg(test)]
mod tests {
    use super::LaunchConfig;

    /// Programmatic dependent launch stays where every rank has its own
    /// GPU, and for kernels that wait on peers; it goes for the others
    /// where ranks share one, and is never added.
    #[test]
    fn pdl_only_where_safe() {
        let on = LaunchConfig {
            shared_mem: 512,
            ..LaunchConfig::linear(4, 64).with_pdl()
        };
        let off = LaunchConfig { pdl: false, ..on };
        assert_eq!(on.pdl_where_safe(false, 1), on);
        assert_eq!(on.pdl_where_safe(true, 2), on);
        assert_eq!(on.pdl_where_safe(false, 2), off);
        assert_eq!(on.pdl_where_safe(false, 8), off);
        assert_eq!(off.pdl_where_safe(true, 1), off);
    }
}
