//! The pull form's buffers and launches ([`MoeMode::Pull`](super::MoeMode)):
//! a token crosses to a rank once however many of its slots that rank's
//! experts hold, each way.
//!
//! A step is, on each rank: the layout with pairs ranked within their
//! experts (into the symmetric `pos` and `counts`), [`moe_stage`] (the
//! indices and, in `T`, the rows into symmetric memory; in fp8
//! [`moe_pack_fp8`](super::moe_pack_fp8) stages the rows), [`moe_pull`]
//! (entry barrier; every rank's counts and verdict, the receiver's
//! layout, every token routed here read once from its sender and written
//! to each of its rows; exit barrier); the experts; then a copy of the
//! weights into symmetric memory (`Comm::copy`), [`moe_push`] (entry barrier; each
//! token sent back once by each rank that holds its slots, as a row or a
//! weighted sum; exit barrier) and [`moe_sum_ranks`] of what came back.
//!
//! Why two barriers a call are enough to reuse every buffer the next
//! step: a rank's push starts after its own pull ended, whose exit barrier
//! every peer passed only once its pull (which read this rank's stage,
//! indices, ranks and counts) ended; a peer's push writes this rank's
//! `single` and `part` only after the push's entry barrier, which this
//! rank reaches after its previous sum (stream order), and reads its
//! weights, which it staged after its pull; and the next step's staging
//! runs after this rank's push, whose exit barrier every peer passed only
//! once its push (which read this rank's weights) ended. Dispatches back
//! to back with no combine between them, and combines back to back, are
//! safe the same way: each barrier kernel's exit follows every peer's
//! reads of what the next call rewrites.

use std::sync::Arc;

use symm::dsl::{f8e4m3, Scalar};
use symm::{Comm, DeviceBuffer, LaunchConfig, Result, SymmBuffer, SymmetricMemory};

use crate::shared::grid::{fit_blocks, fixed_grid, with_pdl};
use crate::shared::staging::reserved_channels;

/// The owner of the pull form's signal channels.
pub const CHANNEL_OWNER: &str = "symm_kernels::moe";

/// Most blocks of [`moe_pull`] and [`moe_push`] (fewer where ranks share a
/// GPU).
const MAX_BLOCKS: usize = 128;

/// The pull form's channel on `comm`'s group (and the next, for the
/// calls' identities), reserved on first use: every plan reserves it
/// first, whatever its mode, so that every rank reserves at the same point.
pub(super) fn channel(comm: &Comm) -> Result<u32> {
    struct Moe;
    reserved_channels::<Moe, 2>(comm, CHANNEL_OWNER)
}

/// Threads of a [`moe_pull`] or [`moe_push`] block on a GPU: 1024, which
/// holds a thread an expert (the pull's scans), the identity barriers'
/// (whole warps of handshakes, then a checker a rank, at most 64), a batch
/// of 32 tokens' 32 slots (the pull), and a row of 7168 bf16 elements in
/// one vector a thread.
pub(super) const THREADS: u32 = 1024;

/// Threads of an fp8 [`moe_pull`] block on a GPU: its 4 tokens' 16-byte
/// vectors of e4m3 in flight hold a register a byte, more than 1024
/// threads' share of an SM's (the launch failed on an H200).
pub(super) const FP8_THREADS: u32 = 512;

/// The barrier kernels' block: [`THREADS`] on a GPU ([`FP8_THREADS`] for
/// an fp8 pull); on the emulator, where each thread is a CPU thread, the
/// fewest whole warps that hold a thread an expert and the barriers' (the
/// kernels take any such block: smaller ones only batch fewer tokens and
/// loop more).
pub(super) fn block(comm: &Comm, experts: usize, fp8: bool) -> u32 {
    match comm.backend_kind() {
        symm::BackendKind::Emulator => {
            let world = comm.world_size();
            let barriers = world.div_ceil(32).max(1) * 32 + world;
            experts.max(barriers).next_multiple_of(32).min(1024) as u32
        }
        _ if fp8 => FP8_THREADS,
        _ => THREADS,
    }
}

/// What [`moe_pull`] takes besides its rows and their output (one
/// launch's arguments, for `MoeElem`'s launches and the fp8 one).
#[doc(hidden)]
pub struct PullArgs<'a> {
    pub(super) scales: &'a SymmetricMemory,
    pub(super) counts: &'a SymmetricMemory,
    pub(super) idx: &'a SymmetricMemory,
    pub(super) pos: &'a SymmetricMemory,
    /// The copy-engine form's packing places (read only where `ce`).
    pub(super) dpos: &'a SymmetricMemory,
    pub(super) out_scales: &'a mut DeviceBuffer<f32>,
    pub(super) layout: &'a mut DeviceBuffer<u32>,
    pub(super) item_rows: &'a mut DeviceBuffer<u32>,
    pub(super) ntoks: &'a mut DeviceBuffer<u32>,
    pub(super) scratch: &'a DeviceBuffer<u32>,
    pub(super) lblocks: u32,
    /// tokens, max_tokens, poison, experts, local, top_k, align,
    /// out_rows, capacity, row_len, groups.
    pub(super) nums: [u32; 11],
    pub(super) vec: bool,
    pub(super) ce: bool,
    pub(super) ch: u32,
    pub(super) sig: u32,
}

/// What [`moe_push`] takes besides the experts' rows.
#[doc(hidden)]
pub struct PushArgs<'a> {
    pub(super) single: &'a SymmetricMemory,
    pub(super) part: &'a SymmetricMemory,
    pub(super) wts: &'a SymmetricMemory,
    pub(super) counts: &'a SymmetricMemory,
    /// The copy-engine form's packing places (read only where `ce`).
    pub(super) dpos: &'a SymmetricMemory,
    pub(super) item_rows: &'a DeviceBuffer<u32>,
    pub(super) ntoks: &'a DeviceBuffer<u32>,
    /// poison, experts, max_tokens, top_k, hidden.
    pub(super) nums: [u32; 5],
    pub(super) vec: bool,
    pub(super) ce: bool,
    pub(super) ch: u32,
    pub(super) sig: u32,
}

/// [`moe_pull`] of rows of `$r` in `$v`-element vectors.
macro_rules! launch_pull {
    ($r:ty, $v:expr, $comm:expr, $cfg:expr, $rows:expr, $out:expr, $a:expr) => {{
        let a: &mut $crate::moe::pull::PullArgs<'_> = $a;
        let n = a.nums;
        $crate::moe::device::moe_pull::launch::<$r, { $v }>(
            $comm,
            $cfg,
            $rows,
            a.scales,
            a.counts,
            a.idx,
            a.pos,
            a.dpos,
            $out,
            &mut *a.out_scales,
            &mut *a.layout,
            &mut *a.item_rows,
            &mut *a.ntoks,
            a.scratch,
            a.lblocks,
            n[0],
            n[1],
            n[2],
            n[3],
            n[4],
            n[5],
            n[6],
            n[7],
            n[8],
            n[9],
            n[10],
            a.vec,
            a.ce,
            a.ch,
            a.sig,
        )
    }};
}
pub(super) use launch_pull;

/// [`moe_push`] of rows of `$t` in `$v`-element vectors.
macro_rules! launch_push {
    ($t:ty, $v:expr, $comm:expr, $cfg:expr, $y:expr, $a:expr) => {{
        let a: &$crate::moe::pull::PushArgs<'_> = $a;
        let n = a.nums;
        $crate::moe::device::moe_push::launch::<$t, { $v }>(
            $comm,
            $cfg,
            $y,
            a.single,
            a.part,
            a.wts,
            a.counts,
            a.dpos,
            a.item_rows,
            a.ntoks,
            n[0],
            n[1],
            n[2],
            n[3],
            n[4],
            a.vec,
            a.ce,
            a.ch,
            a.sig,
        )
    }};
}
pub(super) use launch_push;

/// The pull form's fp8 staging: e4m3 rows and their scales (symmetric,
/// each with its rendezvous).
pub(super) type Fp8Stage = (
    SymmBuffer<f8e4m3>,
    Arc<SymmetricMemory>,
    SymmBuffer<f32>,
    Arc<SymmetricMemory>,
);

/// The copy-engine form's own buffers ([`MoeMode::CopyEngine`](super::MoeMode)):
/// each rank packs its rows by destination rank ([`moe_dests`],
/// [`moe_spread`](super::moe_spread)), the ranks exchange how many rows
/// each sends each ([`moe_counts`](super::moe_counts), read on the host), and each receiver's copy engines bring
/// its rows from every sender's packing, `max_tokens` rows a sender; the
/// experts' f32 parts come back the same way.
pub(super) struct CeBuffers<T: Scalar> {
    /// Each token's place among the tokens sent to each rank, `t × world +
    /// d` (symmetric: the receivers and the expert ranks read it).
    pub(super) dpos: SymmBuffer<u32>,
    pub(super) dpos_s: Arc<SymmetricMemory>,
    /// Tokens sent to each rank (symmetric: [`moe_counts`] reads them),
    /// and, as [`moe_counts`] gathers them, the tokens each rank sends
    /// this one, then those this one sends each.
    pub(super) sent: SymmBuffer<u32>,
    pub(super) sent_s: Arc<SymmetricMemory>,
    pub(super) sent_all: DeviceBuffer<u32>,
    /// The last dispatch's `sent_all`, read on the host, each at most
    /// `max_tokens` (the copies are sized by it).
    pub(super) sent_host: Vec<u32>,
    /// This rank's rows packed by destination, `max_tokens` rows a rank
    /// (symmetric: the receivers' copy engines read them), and the rows
    /// received, `max_tokens` from each sender (symmetric: [`moe_pull`]
    /// takes its rows so). In `T`, or in fp8 with their scales (then the
    /// `T` ones hold one element).
    pub(super) packed: SymmBuffer<T>,
    pub(super) packed_s: Arc<SymmetricMemory>,
    pub(super) recv: SymmBuffer<T>,
    pub(super) recv_s: Arc<SymmetricMemory>,
    /// In fp8: the packed rows and scales, and as received.
    pub(super) fp8: Option<(Fp8Stage, Fp8Stage)>,
    /// The experts' f32 parts received, `max_tokens` rows from each rank.
    pub(super) back: DeviceBuffer<f32>,
}

/// The pull form's own buffers of a plan.
pub(super) struct PullBuffers<T: Scalar> {
    /// This rank's tokens' rows (symmetric, `max_tokens` rows; in fp8 the
    /// e4m3 rows and scales stage in `fp8` instead, and this holds one).
    pub(super) stage: SymmBuffer<T>,
    pub(super) stage_s: Arc<SymmetricMemory>,
    /// This rank's top-k indices and each pair's rank within its expert
    /// (symmetric: the receivers read them).
    pub(super) idx: SymmBuffer<i32>,
    pub(super) idx_s: Arc<SymmetricMemory>,
    pub(super) pos: SymmBuffer<u32>,
    pub(super) pos_s: Arc<SymmetricMemory>,
    /// Each rank's tokens' slots' rows here, and each rank's tokens.
    pub(super) item_rows: DeviceBuffer<u32>,
    pub(super) ntoks: DeviceBuffer<u32>,
    /// This rank's weights, staged for its tokens' expert ranks
    /// (symmetric).
    pub(super) wts: SymmBuffer<f32>,
    pub(super) wts_s: Arc<SymmetricMemory>,
    /// What comes back, row `t × world + d` for token `t` and expert rank
    /// `d` (symmetric): the row itself where `d` holds one slot, in `T`,
    /// or `d`'s weighted sum of its slots in f32.
    pub(super) single: SymmBuffer<T>,
    pub(super) single_s: Arc<SymmetricMemory>,
    pub(super) part: SymmBuffer<f32>,
    pub(super) part_s: Arc<SymmetricMemory>,
    /// The fp8 staging: e4m3 rows and their scales (symmetric).
    pub(super) fp8: Option<Fp8Stage>,
    /// Stand-ins for the scales of a pull of `T` rows (symmetric, and
    /// local), which it never touches.
    pub(super) no_scales: SymmBuffer<f32>,
    pub(super) no_scales_s: Arc<SymmetricMemory>,
    pub(super) no_out_scales: DeviceBuffer<f32>,
    /// The grids of the barrier kernels, the same on every rank.
    pub(super) pull_cfg: LaunchConfig,
    pub(super) push_cfg: LaunchConfig,
    /// The copy-engine form's buffers, where the config asks for it.
    pub(super) ce: Option<CeBuffers<T>>,
}

/// What a plan's pull form is sized by: rows of `hidden` elements, `top_k`
/// slots a token, at most `max_tokens` tokens a rank, and, in fp8,
/// `Some(scales)` a row.
pub(super) struct PullSizes {
    pub(super) hidden: usize,
    pub(super) top_k: usize,
    pub(super) max_tokens: usize,
    pub(super) fp8: Option<usize>,
    /// The copy-engine form's (no `T` staging or single rows then).
    pub(super) ce: bool,
}

/// A barrier kernel's block and its co-resident grid where ranks share a
/// GPU (`None`: any).
pub(super) type Fitted = (u32, Option<u32>);

impl<T: Scalar> PullBuffers<T> {
    /// Allocates the pull form's buffers of a plan of `c` (collective:
    /// every rank at the same point) and fits its barrier kernels' grids
    /// (`pull` and `push`: each one's block, from [`block`], and its
    /// co-resident grid).
    pub(super) fn new(
        comm: &Comm,
        c: &PullSizes,
        (pull, push): (Fitted, Fitted),
    ) -> Result<PullBuffers<T>> {
        let world = comm.world_size();
        let pairs = c.max_tokens * c.top_k;
        let stage = comm.alloc::<T>(if c.fp8.is_some() || c.ce {
            1
        } else {
            c.max_tokens * c.hidden
        })?;
        let stage_s = stage.rendezvous()?;
        let idx = comm.alloc::<i32>(pairs)?;
        let idx_s = idx.rendezvous()?;
        let pos = comm.alloc::<u32>(pairs)?;
        let pos_s = pos.rendezvous()?;
        let fp8 = match c.fp8 {
            None => None,
            Some(per_row) => {
                let rows = comm.alloc::<f8e4m3>(c.max_tokens * c.hidden)?;
                let rows_s = rows.rendezvous()?;
                let scales = comm.alloc::<f32>(c.max_tokens * per_row)?;
                let scales_s = scales.rendezvous()?;
                Some((rows, rows_s, scales, scales_s))
            }
        };
        let no_scales = comm.alloc::<f32>(1)?;
        let no_scales_s = no_scales.rendezvous()?;
        let wts = comm.alloc::<f32>(pairs)?;
        let wts_s = wts.rendezvous()?;
        let back = c.max_tokens * world * c.hidden;
        let single = comm.alloc::<T>(if c.ce { 1 } else { back })?;
        let single_s = single.rendezvous()?;
        let part = comm.alloc::<f32>(back)?;
        let part_s = part.rendezvous()?;
        let grid = |name: &str, (threads, limit): Fitted| -> Result<LaunchConfig> {
            let blocks = fit_blocks(
                comm,
                name,
                fixed_grid(comm, (world * c.max_tokens).clamp(1, MAX_BLOCKS) as u32),
                [Ok(limit)],
            )?;
            Ok(with_pdl(comm, LaunchConfig::linear(blocks, threads)))
        };
        let pull_cfg = grid("moe pull", pull)?;
        let push_cfg = grid("moe push", push)?;
        let ce = match c.ce {
            true => Some(CeBuffers::new(comm, c)?),
            false => None,
        };
        Ok(PullBuffers {
            stage,
            stage_s,
            idx,
            idx_s,
            pos,
            pos_s,
            item_rows: comm.device_buffer(world * pairs)?,
            ntoks: comm.device_buffer(world)?,
            wts,
            wts_s,
            single,
            single_s,
            part,
            part_s,
            fp8,
            no_scales,
            no_scales_s,
            no_out_scales: comm.device_buffer(1)?,
            pull_cfg,
            push_cfg,
            ce,
        })
    }

    /// The bytes these buffers hold: (staged or packed rows and scales,
    /// rows received before their layout, what comes back, the rest).
    pub(super) fn memory(&self) -> (usize, usize, usize, usize) {
        let mut staged = self.stage.len() * std::mem::size_of::<T>();
        if let Some((rows, _, scales, _)) = &self.fp8 {
            staged += rows.len() + 4 * scales.len();
        }
        let back = self.single.len() * std::mem::size_of::<T>() + 4 * self.part.len();
        let mut small = 4 * (self.idx.len() + self.pos.len() + self.wts.len())
            + 4 * (self.item_rows.len() + self.ntoks.len())
            + 4 * (self.no_scales.len() + self.no_out_scales.len());
        let (mut back, mut received_raw) = (back, 0);
        if let Some(ce) = &self.ce {
            let e = std::mem::size_of::<T>();
            staged += ce.packed.len() * e;
            received_raw += ce.recv.len() * e;
            if let Some((packed, recv)) = &ce.fp8 {
                staged += packed.0.len() + 4 * packed.2.len();
                received_raw += recv.0.len() + 4 * recv.2.len();
            }
            back += 4 * ce.back.len();
            small += 4 * (ce.dpos.len() + ce.sent.len() + ce.sent_all.len());
        }
        (staged, received_raw, back, small)
    }
}

impl<T: Scalar> CeBuffers<T> {
    /// Allocates the copy-engine form's buffers of a plan of `c`
    /// (collective).
    fn new(comm: &Comm, c: &PullSizes) -> Result<CeBuffers<T>> {
        let world = comm.world_size();
        let rows = world * c.max_tokens;
        let dpos = comm.alloc::<u32>(rows)?;
        let dpos_s = dpos.rendezvous()?;
        let sent = comm.alloc::<u32>(world)?;
        let sent_s = sent.rendezvous()?;
        let in_t = if c.fp8.is_some() { 1 } else { rows * c.hidden };
        let packed = comm.alloc::<T>(in_t)?;
        let packed_s = packed.rendezvous()?;
        let recv = comm.alloc::<T>(in_t)?;
        let recv_s = recv.rendezvous()?;
        let fp8 = match c.fp8 {
            None => None,
            Some(per_row) => {
                // e4m3 rows and f32 scales: packed, then received.
                let stage = || -> Result<Fp8Stage> {
                    let r = comm.alloc::<f8e4m3>(rows * c.hidden)?;
                    let r_s = r.rendezvous()?;
                    let s = comm.alloc::<f32>(rows * per_row)?;
                    let s_s = s.rendezvous()?;
                    Ok((r, r_s, s, s_s))
                };
                Some((stage()?, stage()?))
            }
        };
        Ok(CeBuffers {
            dpos,
            dpos_s,
            sent,
            sent_s,
            sent_all: comm.device_buffer(2 * world)?,
            sent_host: vec![0; 2 * world],
            packed,
            packed_s,
            recv,
            recv_s,
            fp8,
            back: comm.device_buffer(rows * c.hidden)?,
        })
    }
}
