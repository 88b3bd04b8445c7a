//! The LL form of the collectives: packets pushed into every receiver's
//! stage, on a fixed grid, with no barrier.

use std::sync::Arc;

use symm::{BoundSlice, Comm, LaunchConfig, Result, SymmetricMemory};

use super::call::{fitted, threads};
use super::elem::{Ch, CopyElem, LlCall, ReduceOp};
use super::LL_BLOCKS;
use crate::shared::elem::wide_packet;
use crate::shared::grid::fixed_grid;
use crate::shared::staging::grow;

/// What an LL kernel does besides moving data: the op of [`reduce_ll`],
/// or the copy's `kind` (0 all-gather, 1 broadcast, 2 all-to-all), its
/// `root` (the reduction's chunk) and `flag` (in place or skip for a copy,
/// scatter for a reduction).
///
/// [`reduce_ll`]: super::reduce_ll
pub(super) struct LlArgs {
    pub op: ReduceOp,
    pub kind: u32,
    pub root: u32,
    pub flag: u32,
}

impl LlArgs {
    /// A copy's: `kind`, `root`, `flag`.
    pub fn copy(kind: u32, root: u32, flag: u32) -> LlArgs {
        LlArgs {
            op: ReduceOp::Sum,
            kind,
            root,
            flag,
        }
    }
}

/// The LL stage: `2 × world` regions (parity, sender) of at least
/// `packets` data packets and `32 × blocks` slots (a header goes where the
/// sender's packet `32 × block` would), zeroed (no stale bits read as a
/// packet); grown as [`grow`] does. One for every LL call of the rank,
/// whatever its kind, type and op, so that ranks making different calls
/// meet at the same slots and fail alike. Returns the area and its packets
/// per region.
fn ll_stage(comm: &Comm, blocks: u32, packets: usize) -> Result<(Arc<SymmetricMemory>, u32)> {
    struct LlStage;
    let words = 2 * packets.max(32 * blocks as usize);
    let (smem, per_region) = grow::<u64, LlStage>(comm, words, 2 * comm.world_size(), 0)?;
    Ok((smem, (per_region / 2) as u32))
}

/// The LL grid for `packets` packets per peer: [`LL_BLOCKS`] blocks
/// (fewer on the emulator), the same for every LL call of a group (the
/// stage's per-block epochs stay in step), of one thread per packet, from
/// 64 to [`threads`] (the threads per block may change from call to call:
/// fewer make a small call's blocks cheaper to start and end). Where ranks
/// share a GPU, at most one block per multiprocessor for each rank
/// ([`Comm::co_resident_blocks`] of 1), which any kernel that launches at
/// all fits, so every rank's blocks are resident at once without asking
/// the driver about each kernel.
fn ll_grid<T: CopyElem>(comm: &Comm, packets: usize) -> Result<LaunchConfig> {
    let blocks = fixed_grid(comm, LL_BLOCKS);
    let mut cfg = fitted::<T>(comm, blocks, || Ok(comm.co_resident_blocks(1)))?;
    let per_block = packets.div_ceil(cfg.grid.0 as usize).next_multiple_of(32);
    cfg.block.0 = (per_block as u32).clamp(64, threads::<T>());
    Ok(cfg)
}

/// Runs an LL kernel, `launch` ([`CopyElem::__copy_ll`] or
/// [`ReduceElem::__reduce_ll`](super::ReduceElem::__reduce_ll)), on the
/// LL grid and stage for `per_peer` elements sent to each peer.
///
/// # Safety
///
/// As `launch`'s: the caller checked `n` against every rank's input and
/// this rank's part against `out`, as for the pull kernel of the same
/// call; the stage is sized here for the headers and `per_peer`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn run_ll<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut BoundSlice<'_, T>,
    n: usize,
    per_peer: usize,
    args: LlArgs,
    ch: Ch,
    launch: unsafe fn(&Comm, LaunchConfig, LlCall<'_, '_, T>) -> Result<()>,
) -> Result<()> {
    let packets = per_peer.div_ceil(wide_packet::<T>());
    let cfg = ll_grid::<T>(comm, packets)?;
    let (stage, cap) = ll_stage(comm, cfg.grid.0, packets)?;
    // The LL calls count on a channel of their own (the third of the
    // family's), which no pull kernel touches: where the stage and a pulled
    // input share a pool segment, and so a signal pad, the pulls would
    // otherwise advance the LL blocks' epochs and skip the ones that clear
    // the stage (`ll_clear`).
    let ch = Ch {
        index: ch.index + 2,
        sig: ch.sig,
    };
    let call = LlCall {
        input,
        stage: &stage,
        out,
        op: args.op,
        kind: args.kind,
        n: n as u32,
        root: args.root,
        flag: args.flag,
        cap,
        ch,
    };
    // SAFETY: the caller's promise, and the stage holds `cap` packets per
    // region: the headers' slots and `per_peer`'s packets. Every rank's
    // stage has the same size (each grows it in the same call, the first
    // of a larger agreed shape), so the pushes into peers' stages, which
    // happen before any tag or header is checked, stay in bounds too.
    unsafe { launch(comm, cfg, call) }
}
