//! Grid sizing, shared by every family: vector grids, the fixed grids of
//! the kernels whose per-block epochs must stay in step, and the limit a
//! GPU that ranks share puts on them.

use symm::{Comm, LaunchConfig, Result};

use super::checks::invalid;

/// Blocks of the fixed-grid kernels on the emulator.
const EMULATED_BLOCKS: u32 = 4;

/// `threads` per block for elements of `T`: at most 256 for one-byte
/// types, whose 16-element vectors (one per rank in flight) need more
/// registers than a 512-thread block may have on sm_90 (the push kernel
/// failed to launch with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES on an H100;
/// the reductions take 141 to 167 registers per thread for one-byte types
/// on sm_80 and sm_90). The block count, which the per-block epochs
/// depend on, is unchanged.
pub(crate) fn threads_for<T>(threads: u32) -> u32 {
    if std::mem::size_of::<T>() == 1 {
        threads.min(256)
    } else {
        threads
    }
}

/// Blocks of `threads` for one 16-byte vector of `T` per thread over
/// `elems` elements: at least one, at most `max_blocks`. The same `elems`
/// gives the same count on every rank.
pub(crate) fn vector_blocks<T>(elems: u64, threads: u32, max_blocks: u32) -> u32 {
    elems
        .div_ceil(super::elem::vector::<T>() as u64)
        .div_ceil(u64::from(threads))
        .clamp(1, u64::from(max_blocks)) as u32
}

/// The fixed grid of the LL, push and Lamport kernels: `blocks` on a GPU,
/// and `EMULATED_BLOCKS` on the emulator, where every thread is a CPU
/// thread (the kernels work with any fixed grid; fewer blocks only mean
/// more grid-stride steps per thread, which tests those loops harder).
pub(crate) fn fixed_grid(comm: &Comm, blocks: u32) -> u32 {
    match comm.backend_kind() {
        symm::BackendKind::Emulator => EMULATED_BLOCKS,
        _ => blocks,
    }
}

/// `blocks` on a GPU, at most `EMULATED_BLOCKS` on the emulator: a vector
/// grid there also steps through its grid-stride loops (the pull copies'
/// interleaved form needs four vectors a thread in each part, which a
/// full grid reaches only past megabytes), and runs fewer CPU threads.
pub(crate) fn emulated_at_most(comm: &Comm, blocks: u32) -> u32 {
    match comm.backend_kind() {
        symm::BackendKind::Emulator => blocks.min(EMULATED_BLOCKS),
        _ => blocks,
    }
}

/// `blocks`, or fewer where ranks share a GPU: at most each of `limits`
/// (the largest co-resident grids the driver reports for the kernels the
/// call's family launches; `None` for any), since blocks wait for their
/// peers' and all must be resident at once, and at most
/// [`Comm::spread_blocks`] (half the GPU left to other streams). The
/// result is the same on every rank. An error names `kernel` where not
/// even one block fits.
pub(crate) fn fit_blocks(
    comm: &Comm,
    kernel: &str,
    blocks: u32,
    limits: impl IntoIterator<Item = Result<Option<u32>>>,
) -> Result<u32> {
    // The common case, with no host work: no rank shares its GPU.
    if comm.max_ranks_on_device() == 1 {
        return Ok(blocks);
    }
    let mut fitted = blocks.min(comm.spread_blocks().unwrap_or(u32::MAX));
    for limit in limits {
        if let Some(l) = limit? {
            fitted = fitted.min(l);
        }
    }
    if fitted == 0 {
        return Err(invalid(
            comm,
            format!(
                "the {kernel} kernel cannot run on a GPU that {} ranks share: not even one \
                 block per rank fits with the others' (run fewer ranks per GPU)",
                comm.max_ranks_on_device()
            ),
        ));
    }
    Ok(fitted)
}

/// `cfg` with programmatic dependent launch, unless the comm turned it off.
pub(crate) fn with_pdl(comm: &Comm, cfg: LaunchConfig) -> LaunchConfig {
    if comm.options().pdl {
        cfg.with_pdl()
    } else {
        cfg
    }
}
