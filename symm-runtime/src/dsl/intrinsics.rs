//! Free-function intrinsics. Each doc line ends with its CUDA translation.

use super::scalar::{Num, Scalar};
use super::thread::current;
use super::Scope;

macro_rules! index_fns {
    ($($name:ident, $slot:expr, $axis:expr, $cuda:literal);* $(;)?) => {$(
        #[doc = concat!("`", $cuda, "`.")]
        pub fn $name() -> u32 {
            current(stringify!($name), |t| t.indices()[$slot][$axis])
        }
    )*};
}

index_fns! {
    thread_idx_x, 0, 0, "threadIdx.x"; thread_idx_y, 0, 1, "threadIdx.y"; thread_idx_z, 0, 2, "threadIdx.z";
    block_idx_x, 1, 0, "blockIdx.x"; block_idx_y, 1, 1, "blockIdx.y"; block_idx_z, 1, 2, "blockIdx.z";
    block_dim_x, 2, 0, "blockDim.x"; block_dim_y, 2, 1, "blockDim.y"; block_dim_z, 2, 2, "blockDim.z";
    grid_dim_x, 3, 0, "gridDim.x"; grid_dim_y, 3, 1, "gridDim.y"; grid_dim_z, 3, 2, "gridDim.z";
}

/// Lane of this thread in its warp, `0..32`. `%laneid`.
pub fn lane_id() -> u32 {
    // Warps are cut from the linear thread index (x fastest), as on the GPU.
    current("lane_id", |t| {
        let [tid, _, dim, _] = t.indices();
        (tid[0] + dim[0] * (tid[1] + dim[1] * tid[2])) % 32
    })
}

/// Barrier for every thread of the block. `__syncthreads()`.
#[track_caller]
pub fn sync_threads() {
    let loc = std::panic::Location::caller();
    current("sync_threads", |t| t.sync_threads(loc))
}

/// The value of `v` held by lane `lane_id() ^ lane_mask`, across the full
/// warp. `shfl.sync.bfly`.
#[track_caller]
pub fn shfl_xor<T: Scalar>(v: T, lane_mask: u32) -> T {
    let loc = std::panic::Location::caller();
    T::__from_bits64(current("shfl_xor", |t| {
        t.shfl_xor(v.__to_bits64(), lane_mask, loc)
    }))
}

/// Bit `i` set when lane `i`'s `pred` is true. `vote.sync.ballot`.
#[track_caller]
pub fn ballot(pred: bool) -> u32 {
    let loc = std::panic::Location::caller();
    current("ballot", |t| t.ballot(pred, loc))
}

/// Orders this thread's memory accesses for observers in `scope`.
/// `fence.acq_rel.{cta,gpu,sys}`.
pub fn fence(scope: Scope) {
    let _ = scope;
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Waits until the kernel launched before this one on the stream has
/// finished and its writes are visible. Call it before touching memory that
/// kernel may use, in every kernel launched with
/// [`LaunchConfig::pdl`](crate::LaunchConfig::pdl); it returns at once
/// otherwise. The emulator runs launches in stream order, so there it only
/// checks it is called from a kernel. `griddepcontrol.wait` (sm_90+).
pub fn grid_dependency_wait() {
    current("grid_dependency_wait", |_| ())
}

/// Lets the next kernel on the stream, if launched with
/// [`LaunchConfig::pdl`](crate::LaunchConfig::pdl), start launching now
/// rather than when this one exits; it still waits in
/// [`grid_dependency_wait`] for this one to finish.
/// `griddepcontrol.launch_dependents` (sm_90+).
pub fn launch_dependents() {
    current("launch_dependents", |_| ())
}

/// Nanoseconds of the GPU's global timer, for timeouts. `%globaltimer`.
pub fn globaltimer() -> u64 {
    current("globaltimer", |t| t.globaltimer())
}

/// Smaller of two (IEEE minNum for floats). `symm_min`.
pub fn min<T: Num>(a: T, b: T) -> T {
    a.min(b)
}

/// Larger of two (IEEE maxNum for floats). `symm_max`.
pub fn max<T: Num>(a: T, b: T) -> T {
    a.max(b)
}

/// Absolute value. `symm_abs`.
pub fn abs<T: Num>(a: T) -> T {
    a.abs()
}

/// `a * b + c` with one rounding for floats. `symm_fma`.
pub fn fma<T: Num>(a: T, b: T, c: T) -> T {
    a.fma(b, c)
}

/// Index of the signal-pad slot through which rank `peer` signals on
/// `channel` from block `block` (see [`crate::layout`]). Pure arithmetic.
pub fn signal_slot(channel: u32, block: u32, peer: u32) -> u32 {
    use crate::layout::{MAX_WORLD_SIZE, SIGNAL_BLOCKS};
    (channel * SIGNAL_BLOCKS as u32 + block) * MAX_WORLD_SIZE as u32 + peer
}
