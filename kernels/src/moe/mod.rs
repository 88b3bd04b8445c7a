//! Expert parallelism: MoE dispatch and combine, with the routing decided
//! on the GPU and no host synchronisation (but in the copy-engine form).
//!
//! An [`Moe`] is planned once per group ([`Moe::new`], collective): it
//! agrees on its [`MoeConfig`] with every rank, allocates every buffer a
//! step needs (sized by `max_tokens` and the receive capacity), loads its
//! kernels, and runs an empty step, so that every agreement and every
//! collective's first call (their own allocations) is behind it: nothing
//! allocates or waits on the store afterwards, and a step, from the first,
//! may be captured in a CUDA graph and replayed with new routings (the
//! token counts are the graph's), except in the copy-engine form. Experts
//! are spread in order, `num_experts / world` to a rank (rank `d` holds
//! experts `d × local ..`).
//!
//! A step is [`Moe::dispatch`], the experts' own work on
//! [`Moe::received`] (expert-major rows, each expert's first row a
//! multiple of [`MoeConfig::align`], its row count in
//! [`Moe::layout`]), then [`Moe::combine`]. The rows travel in one of three
//! forms ([`MoeMode`]); the received rows, the layout and the combined
//! rows are the same bits in all:
//!
//! - **the pull form** ([`MoeMode::Pull`], the default; `pull.rs` has how
//!   its buffers are reused safely). Dispatch lays the routing out on
//!   the device ([`layout`]: each (token, slot) pair's rank within its
//!   expert, stable, by pair), stages the tokens' indices and rows in
//!   symmetric memory once a token ([`moe_stage`]; [`moe_pack_fp8`] in
//!   fp8), and each receiver then reads every token routed to its experts
//!   once from its sender and writes it to each of its rows
//!   ([`moe_pull`], a barrier kernel, which also checks every rank's
//!   step). Combine stages the weights, and each expert's rank sends each
//!   token back once ([`moe_push`], a barrier kernel): the row itself
//!   where the rank holds one of the token's slots, else the weighted sum
//!   of its slots in f32; the token's rank adds the ranks' parts
//!   ([`moe_sum_ranks`]). A token crosses to a rank once however many of
//!   its experts are there.
//! - **the all-to-all form** ([`MoeMode::AllToAll`]), composed of the
//!   collectives: the layout gives each pair its row in a send buffer,
//!   `moe_pack` copies each routed row there (once a slot), the counts and
//!   rows go by the collectives' all-to-alls (the rows' split sizes read
//!   on the device), and `moe_rows` and `moe_move` put the received rows
//!   in expert-major order; combine moves the experts' rows back, sends
//!   them by an all-to-all, and [`moe_sum`] adds them.
//! - **the copy-engine form** ([`MoeMode::CopyEngine`], for prefill): the
//!   pull form's steps with the rows moved in bulk by the copy engines.
//!   Each rank packs its rows by destination ([`moe_dests`],
//!   [`moe_spread`]), a barrier kernel gives each rank every sender's
//!   count ([`moe_counts`]), which the host reads, and one
//!   `cuMemcpyAsync` a sender brings its rows; [`moe_pull`] then writes
//!   them expert-major from local memory. Combine: [`moe_push`] sums each
//!   token's slots here in f32, packed by the token's rank, whose copy
//!   engines bring them back for [`moe_sum_ranks`]. No row crosses
//!   between GPUs by the SMs (they read only peers' indices, counts and
//!   weights); each dispatch waits for the device once, so no CUDA graph
//!   holds a step.
//!
//! In all, an expert's rows are by source rank, then in the order of the
//! source's pairs, and a token's combined row is, for each rank in order
//! that holds any of its slots, the sum of that rank's slots weighted by
//! `topk_weights` in slot order, then the ranks' sums added, in f32,
//! rounded once: the bits depend on the routing, the values and the
//! experts' placement (so the world size) alone, never on arrival order.
//! (A world-1 step adds in slot order; a step over ranks may round a
//! token whose experts span ranks once differently.)
//!
//! With [`MoeConfig::with_fp8`] the rows travel in fp8 (e4m3), each group
//! of elements (a row, or 128) scaled by its largest magnitude over 448
//! (`moe_pack_fp8`), and arrive in [`Moe::received_fp8`] with their scales
//! in [`Moe::received_scales`], laid out as the rows; combine stays in `T`.

mod device;
pub use device::*;
mod pull;
pub use pull::{PullArgs, PushArgs, CHANNEL_OWNER};

use std::sync::Arc;

use symm::dsl::f8e4m3;
use symm::{Comm, DType, DeviceBuffer, DeviceSlice, Result, SymmBuffer, SymmetricMemory};

use crate::collectives::{all_to_all, all_to_all_v, CopyElem};
use crate::shared::agree::{agree, agree_or_alone, Agreement, Problem};
use crate::shared::key::{call_digest, CallKey};
use pull::{launch_pull, launch_push, CeBuffers, PullBuffers};

/// Most experts an [`Moe`] spreads over its group (the layout kernels'
/// shared tables hold a count an expert).
pub const MAX_EXPERTS: usize = 1024;

/// Most blocks of [`moe_layout`] (so of the counts [`moe_layout_scan`]
/// adds up an expert).
pub const LAYOUT_BLOCKS: usize = 64;

/// The `u32`s of a [`layout`] scratch buffer for `experts` experts.
pub fn layout_scratch(experts: usize) -> usize {
    LAYOUT_BLOCKS * experts + LAYOUT_BLOCKS
}

/// The routing's layout on the sending rank, three kernels: gives each
/// (token, slot) pair `p` of `idx` (`pairs` of them) routed to an expert
/// its row of the send buffer, `pos[p]`, sorted by expert (so by
/// destination rank, then its local expert) and, within an expert, by
/// pair, a stable order that does not depend on any timing; pairs whose
/// index is not an expert get `u32::MAX`. `counts[e]` gets expert `e`'s
/// pairs, `splits[d]` the elements sent to rank `d` (`local` experts a
/// rank, `hidden` elements a row) and `scale_splits[d]` their fp8 scales
/// (`scales` a row). An index out of range, or `poison`, makes every
/// split `u32::MAX`, so the all-to-all that follows fails on every rank.
/// `scratch` holds [`layout_scratch`]`(experts)` elements. Where `within`,
/// `pos[p]` is the pair's rank among its expert's pairs instead (its row
/// less its expert's first row: the pull form's), and where the pairs fit
/// one [`moe_layout`] block, that kernel alone runs (`splits` and
/// `scale_splits` are not written). Returns the [`moe_layout`] blocks
/// that ran: block `b`'s flag (1 where it found an index out of range) is
/// `scratch[blocks × experts + b]` (with `within` and one block,
/// `poison` is not applied: the flags are the verdict).
///
/// Errors: at most [`MAX_EXPERTS`] experts, `local` experts a rank
/// dividing them, and buffers that hold what the call needs
/// (`InvalidArgument`).
#[allow(clippy::too_many_arguments)]
pub fn layout(
    comm: &Comm,
    idx: &(impl DeviceSlice<i32> + ?Sized),
    pairs: usize,
    (experts, local, hidden, scales): (usize, usize, usize, usize),
    poison: bool,
    within: bool,
    scratch: &mut (impl DeviceSlice<u32> + ?Sized),
    pos: &mut (impl DeviceSlice<u32> + ?Sized),
    (splits, scale_splits, counts): (
        &mut (impl DeviceSlice<u64> + ?Sized),
        &mut (impl DeviceSlice<u64> + ?Sized),
        &mut (impl DeviceSlice<u32> + ?Sized),
    ),
) -> Result<usize> {
    let ranks = experts.checked_div(local).unwrap_or(0);
    let problem = if experts == 0 || experts > MAX_EXPERTS || ranks * local != experts {
        Some(format!(
            "{experts} experts, {local} a rank: at most {MAX_EXPERTS}, a whole number of ranks"
        ))
    } else {
        [
            ("idx", idx.len(), pairs),
            ("pos", pos.len(), pairs),
            ("scratch", scratch.len(), layout_scratch(experts)),
            ("splits", splits.len(), ranks),
            ("scale_splits", scale_splits.len(), ranks),
            ("counts", counts.len(), experts),
        ]
        .into_iter()
        .find(|&(_, have, need)| have < need)
        .map(|(name, have, need)| format!("{name} holds {have} elements, the layout needs {need}"))
    };
    if let Some(p) = problem {
        return Err(crate::shared::checks::invalid(
            comm,
            format!("moe layout: {p}"),
        ));
    }
    // A thread a pair of a chunk, as many as the per-warp counts allow
    // (warps × experts at most 8192: 32 KiB of shared memory), and no
    // more than the pairs need; a block's span whole chunks, at most
    // LAYOUT_BLOCKS blocks.
    let warps = (8192 / experts.max(1))
        .min(32)
        .min(pairs.div_ceil(32))
        .max(1);
    let threads = warps * 32;
    let per_block = pairs
        .div_ceil(LAYOUT_BLOCKS)
        .next_multiple_of(threads)
        .max(threads);
    let blocks = pairs.div_ceil(per_block).max(1);
    let (e, pb) = (experts as u32, per_block as u32);
    let direct = within && blocks == 1;
    moe_layout::launch(
        comm,
        symm::LaunchConfig::linear(blocks as u32, threads as u32),
        idx,
        pairs as u32,
        e,
        pb,
        pos,
        scratch,
        direct,
        counts,
    )?;
    if direct {
        return Ok(blocks);
    }
    moe_layout_scan::launch(
        comm,
        symm::LaunchConfig::linear(1, (experts.next_multiple_of(32) as u32).clamp(32, 1024)),
        scratch,
        blocks as u32,
        e,
        local as u32,
        hidden as u32,
        scales as u32,
        poison as u32,
        within as u32,
        splits,
        scale_splits,
        counts,
    )?;
    if pairs > 0 {
        moe_layout_place::launch(
            comm,
            symm::LaunchConfig::linear(pairs.div_ceil(THREADS as usize).min(1024) as u32, THREADS),
            idx,
            pairs as u32,
            e,
            pb,
            scratch,
            pos,
        )?;
    }
    Ok(blocks)
}

/// The grid of [`moe_rows`] for `experts` experts in all (a thread a
/// (rank, local expert) pair in each block) and at most `rows` received
/// rows (about 8 a thread).
pub fn rows_grid(experts: usize, rows: usize) -> symm::LaunchConfig {
    let threads = (experts.next_multiple_of(32) as u32).clamp(32, 1024);
    let blocks = rows.div_ceil(8 * threads as usize).clamp(1, 128) as u32;
    symm::LaunchConfig::linear(blocks, threads)
}

/// Threads of the copy kernels' blocks (a block a row).
const THREADS: u32 = 256;

/// Blocks of the kernels that walk the received rows: at most this many,
/// each taking every this-many-th row (the rows received are known only on
/// the device).
const MAX_ROW_BLOCKS: u32 = 1024;

/// What an [`Moe`] is planned for; every rank passes the same.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MoeConfig {
    /// Elements in a token's row.
    pub hidden: usize,
    /// Experts in all, spread in order over the ranks (a multiple of the
    /// world size, at most [`MAX_EXPERTS`]).
    pub num_experts: usize,
    /// Slots per token (`topk_idx` and `topk_weights` hold `top_k` per
    /// token).
    pub top_k: usize,
    /// Most tokens a rank dispatches in one step.
    pub max_tokens: usize,
    /// Each expert's rows in [`Moe::received`] start at a multiple of
    /// this (grouped GEMMs want 16 or 128); 1 packs them.
    pub align: usize,
    /// Rows a rank may receive in one step; `None` plans for the worst
    /// where each token's slots name distinct experts: every rank's every
    /// token in every slot it can send here (`world × max_tokens ×
    /// min(top_k, num_experts / world)`). A step whose routing sends a rank
    /// more (fewer planned rows, or an expert named twice by one token)
    /// fails on every rank, never writing past it.
    pub recv_capacity: Option<usize>,
    /// Dispatch in fp8 (e4m3) with these scales: the rows arrive in
    /// [`Moe::received_fp8`] and their scales in [`Moe::received_scales`]
    /// (combine stays in `T`). `None`: rows travel as `T`.
    pub fp8: Option<Fp8Scales>,
    /// How the rows travel.
    pub mode: MoeMode,
}

/// How an [`Moe`]'s rows travel between ranks; the rows, the layout and
/// the sums are the same bits either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MoeMode {
    /// Each receiver reads every token routed to its experts once from its
    /// sender's symmetric staging and writes it to each of its rows; each
    /// expert's rank sends each token back once, straight into the token's
    /// rank (its row, or the weighted sum of its slots' rows). A token
    /// crosses once per rank each way (not per slot), and nothing is
    /// copied on the way beyond the staging of each token (and, in the
    /// combine, of the weights). At most 64 ranks and 32 slots a token
    /// (and, in fp8, 512 experts).
    #[default]
    Pull,
    /// The collectives' all-to-alls, with the split sizes read on the
    /// device: rows packed per slot, exchanged, then moved to expert-major
    /// order (and back).
    AllToAll,
    /// The throughput form for prefill: the pull form's steps, with the
    /// rows moved by the GPU's copy engines in bulk instead of by the SMs.
    /// Each rank packs its tokens' rows by destination rank (a token once
    /// per rank, as the pull form sends it), the ranks gather how many
    /// rows each sends each, and each receiver copies every sender's rows
    /// for it in one `cuMemcpyAsync` a sender (the combine's f32 parts
    /// come back the same way). The counts are read on the host, so each
    /// dispatch waits for the device once and a step cannot be captured
    /// in a CUDA graph (use [`MoeMode::Pull`] there); it holds about
    /// twice the pull form's row memory. Its limits are the pull form's.
    CopyEngine,
}

/// How an fp8 dispatch scales its rows: each group of elements by its
/// largest magnitude over 448 (e4m3's largest finite value), so that every
/// element fits; a group of zeros (or of magnitudes so small that the
/// quotient is below f32's smallest normal) by that smallest normal, or 1
/// for zeros. At most 1024 scales a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Scales {
    /// One scale a row.
    PerToken,
    /// One scale for each 128 elements of a row (the hidden size a
    /// multiple of 128), as DeepSeek-V3's fp8 GEMMs take them.
    Per128,
}

impl Fp8Scales {
    /// Elements a scale covers, in rows of `hidden`.
    pub fn group(self, hidden: usize) -> usize {
        match self {
            Fp8Scales::PerToken => hidden,
            Fp8Scales::Per128 => 128,
        }
    }
}

impl MoeConfig {
    /// A plan for `hidden`-element rows, `num_experts` experts, `top_k`
    /// slots a token and at most `max_tokens` tokens a rank; rows packed
    /// (`align` 1) and the worst-case capacity.
    pub fn new(hidden: usize, num_experts: usize, top_k: usize, max_tokens: usize) -> MoeConfig {
        MoeConfig {
            hidden,
            num_experts,
            top_k,
            max_tokens,
            align: 1,
            recv_capacity: None,
            fp8: None,
            mode: MoeMode::default(),
        }
    }

    /// With each expert's rows starting at a multiple of `align`.
    pub fn with_align(mut self, align: usize) -> MoeConfig {
        self.align = align;
        self
    }

    /// With room for `rows` received rows a step.
    pub fn with_recv_capacity(mut self, rows: usize) -> MoeConfig {
        self.recv_capacity = Some(rows);
        self
    }

    /// With the rows travelling by `mode`.
    pub fn with_mode(mut self, mode: MoeMode) -> MoeConfig {
        self.mode = mode;
        self
    }

    /// Dispatching in fp8 (e4m3) with `scales`.
    pub fn with_fp8(mut self, scales: Fp8Scales) -> MoeConfig {
        self.fp8 = Some(scales);
        self
    }

    /// Scales in a row: `hidden / group` in fp8, 0 otherwise.
    pub(super) fn scales(&self) -> usize {
        self.fp8
            .map_or(0, |f| self.hidden / f.group(self.hidden).max(1))
    }
}

/// Loads every MoE kernel of `T` where ranks share the GPU (elsewhere
/// loading needs no idle device, and this does nothing).
fn preload<T: MoeElem>(comm: &Comm, fp8: bool) -> Result<()> {
    // At the largest blocks `layout` and `rows_grid` launch: a kernel that
    // cannot run them fails here, before the ranks agree.
    moe_layout::co_resident_grid(comm, 1024, 0)?;
    moe_layout_scan::co_resident_grid(comm, 1024, 0)?;
    moe_layout_place::co_resident_grid(comm, THREADS, 0)?;
    moe_rows::co_resident_grid(comm, 1024, 0)?;
    moe_pack::co_resident_grid(comm, THREADS, 0)?;
    moe_move::co_resident_grid(comm, THREADS, 0)?;
    T::__preload_sum(comm)?;
    // The pull form's (a plan of either form loads them: cheap, and the
    // mode is not yet agreed).
    moe_stage::co_resident_grid(comm, THREADS, 0)?;
    moe_counts::co_resident_grid(comm, 1024, 0)?;
    moe_dests::co_resident_grid(comm, 1024, 0)?;
    moe_spread::co_resident_grid(comm, THREADS, 0)?;
    T::__pull_limit(comm, pull::THREADS)?;
    T::__push_limit(comm, pull::THREADS)?;
    if fp8 {
        moe_pull::co_resident_grid::<f8e4m3, 16>(comm, pull::FP8_THREADS, 0)?;
    }
    Ok(())
}

/// The pull form's two calls whose barriers compare an identity.
#[derive(Clone, Copy)]
enum PullCall {
    Dispatch,
    Combine,
    /// The copy-engine form's exchange of counts ([`moe_counts`]).
    Counts,
}

impl PullCall {
    /// Every one, in the order of `Moe`'s `sigs`.
    const ALL: [PullCall; 3] = [PullCall::Dispatch, PullCall::Combine, PullCall::Counts];

    /// The call as its key names it.
    fn name(self) -> &'static str {
        match self {
            PullCall::Dispatch => "dispatch",
            PullCall::Combine => "combine",
            PullCall::Counts => "dispatch counts",
        }
    }
}

/// An [`Moe`] call, as the ranks agree on it.
#[derive(Hash)]
struct Key {
    call: &'static str,
    config: MoeConfig,
    dtype: DType,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.config;
        write!(
            f,
            "moe {} of {} (hidden {}, {} experts, top-{}, {} tokens, align {}, capacity {:?}, fp8 {:?}, {:?})",
            self.call,
            self.dtype,
            c.hidden,
            c.num_experts,
            c.top_k,
            c.max_tokens,
            c.align,
            c.recv_capacity,
            c.fp8,
            c.mode
        )
    }
}

impl CallKey for Key {
    const FAMILY: &'static str = "moe";
    fn name(&self) -> &'static str {
        self.call
    }
}

/// The bytes an [`Moe`] holds on each rank, by buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MoeMemory {
    /// The rows packed for sending (the all-to-all form, which also takes
    /// the experts' rows that come back there), or staged, a row a token
    /// (the pull form); symmetric.
    pub send: usize,
    /// An fp8 dispatch's rows and scales as received, in rank order (in
    /// `T` they land in `back`).
    pub received_raw: usize,
    /// The rows received, expert-major ([`Moe::received`], or in fp8
    /// [`Moe::received_fp8`] and its scales).
    pub received: usize,
    /// The expert rows on their way back (symmetric): in the all-to-all
    /// form, which also takes a dispatch's rows in `T` as they arrive; in
    /// the pull form, each token's row or f32 sum from each rank.
    pub back: usize,
    /// Counts, layouts and split sizes.
    pub small: usize,
}

impl MoeMemory {
    /// Every buffer together (the collectives' own staging, shared by all
    /// of a group's calls, is not counted).
    pub fn total(&self) -> usize {
        self.send + self.received_raw + self.received + self.back + self.small
    }
}

/// Expert-parallel dispatch and combine for one group, planned up front
/// (see the [module](self)).
pub struct Moe<T: MoeElem> {
    config: MoeConfig,
    /// The group planned for: calls on another are refused.
    group: symm::GroupName,
    rank: usize,
    world: usize,
    local: usize,
    capacity: usize,
    out_rows: usize,
    send: SymmBuffer<T>,
    send_s: Arc<SymmetricMemory>,
    counts: SymmBuffer<u32>,
    counts_s: Arc<SymmetricMemory>,
    recv_counts: DeviceBuffer<u32>,
    pos: DeviceBuffer<u32>,
    /// The layout's counts per block and expert, and its blocks' flags.
    scratch: DeviceBuffer<u32>,
    /// An index buffer of the plan's own, for the layout of a failed step.
    no_idx: DeviceBuffer<i32>,
    splits: DeviceBuffer<u64>,
    /// The fp8 scales' split sizes (written, and unused, without fp8).
    scale_splits: DeviceBuffer<u64>,
    report: DeviceBuffer<u64>,
    report_back: DeviceBuffer<u64>,
    row_dst: DeviceBuffer<u32>,
    layout: DeviceBuffer<u32>,
    received: DeviceBuffer<T>,
    /// The experts' rows on their way back; in `T`, also where a
    /// dispatch's rows arrive (each use ends before the other begins: an
    /// all-to-all returns only once no peer reads its input).
    back: SymmBuffer<T>,
    back_s: Arc<SymmetricMemory>,
    /// The fp8 dispatch's buffers, where the config asks for it.
    fp8: Option<Fp8Buffers>,
    /// Tokens of the last dispatch (`None` before the first).
    tokens: Option<usize>,
    /// Split sizes no input holds: the all-to-alls of a step that one rank
    /// alone found a problem with run on them, so every rank fails it.
    poisoned: DeviceBuffer<u64>,
    /// The last dispatch's indices, for the all-to-all form's sum (the
    /// pull form stages its own).
    kept_idx: DeviceBuffer<i32>,
    /// The pull form's buffers, where the config asks for it.
    pull: Option<PullBuffers<T>>,
    /// The pull form's signal channel (reserved by every plan).
    ch: u32,
    /// The identities of the pull form's dispatch and combine (and the
    /// copy-engine form's exchange of counts) that its barriers compare:
    /// each call's key and the plan's `counts`.
    sigs: [u32; 3],
}

/// Whether rows of `row_bytes` at these addresses copy as 16-byte vectors:
/// every row, and so every buffer's first, starts on a 16-byte boundary.
fn vectors(row_bytes: usize, ptrs: &[u64]) -> bool {
    row_bytes.is_multiple_of(16) && ptrs.iter().all(|p| p.is_multiple_of(16))
}

/// [`moe_move`] of rows of `per_row` elements of `A` (`B`, the same
/// width) between `from` and `to` by `map` (`row_dst`, `layout` as
/// [`moe_rows`] writes them, local experts), as bytes, in 16-byte vectors
/// where the rows align: `forward`, received row `r` to row `row_dst[r]`,
/// else back. A block a row, up to 1024 blocks.
pub fn move_rows<A: symm::Element, B: symm::Element>(
    comm: &Comm,
    from: &(impl DeviceSlice<A> + ?Sized),
    to: &mut (impl DeviceSlice<B> + ?Sized),
    (row_dst, layout, local): (&DeviceBuffer<u32>, &DeviceBuffer<u32>, usize),
    per_row: usize,
    forward: bool,
) -> Result<()> {
    let grid = symm::LaunchConfig::linear((row_dst.len() as u32).clamp(1, MAX_ROW_BLOCKS), THREADS);
    let from = comm.bind("from", from)?;
    let mut to = comm.bind_mut("to", to)?;
    let (from, mut to) = (from.bytes(), to.bytes_mut());
    let row = per_row * std::mem::size_of::<A>();
    let vec = vectors(row, &[from.device_ptr(), to.device_ptr()]);
    moe_move::launch(
        comm,
        grid,
        &from,
        &mut to,
        row_dst,
        layout,
        local as u32,
        row as u32,
        forward,
        vec,
    )
}

/// Row types of an [`Moe`]: f32, bf16 and f16 (its combine sums them in
/// f32).
#[diagnostic::on_unimplemented(
    message = "symm's MoE layer does not take rows of `{Self}`",
    label = "not a row type of the MoE layer",
    note = "its combine sums in f32: rows are f32, bf16 or f16"
)]
pub trait MoeElem: CopyElem {
    /// Launches [`moe_sum`] at this type's 16-byte vector width, or, where
    /// `part` is the pull form's, [`moe_sum_ranks`] (`back` its single
    /// rows).
    #[doc(hidden)]
    fn __sum(
        comm: &Comm,
        grid: symm::LaunchConfig,
        back: &symm::BoundSlice<'_, Self>,
        part: Option<&symm::BoundSlice<'_, f32>>,
        out: &mut symm::BoundSlice<'_, Self>,
        args: &SumArgs<'_>,
    ) -> Result<()>;

    /// Launches [`moe_pack_fp8`] of this type's rows (`nums`: top_k,
    /// experts, hidden, group).
    #[doc(hidden)]
    fn __pack_fp8(
        comm: &Comm,
        grid: symm::LaunchConfig,
        x: &symm::BoundSlice<'_, Self>,
        idx_pos: (
            &(impl DeviceSlice<i32> + ?Sized),
            &(impl DeviceSlice<u32> + ?Sized),
        ),
        out: (
            &mut (impl DeviceSlice<f8e4m3> + ?Sized),
            &mut (impl DeviceSlice<f32> + ?Sized),
        ),
        nums: [u32; 4],
        once_vec: (bool, bool),
    ) -> Result<()>;

    /// Loads [`moe_sum`] and [`moe_sum_ranks`] of this type where ranks
    /// share the GPU.
    #[doc(hidden)]
    fn __preload_sum(comm: &Comm) -> Result<()>;

    /// Launches [`moe_pull`] of rows of this type (`rows` its staging,
    /// `out` the received rows).
    #[doc(hidden)]
    fn __pull(
        comm: &Comm,
        cfg: symm::LaunchConfig,
        rows: &SymmetricMemory,
        out: &mut DeviceBuffer<Self>,
        args: &mut PullArgs<'_>,
    ) -> Result<()>;

    /// Launches [`moe_push`] of this type's rows `y`.
    #[doc(hidden)]
    fn __push(
        comm: &Comm,
        cfg: symm::LaunchConfig,
        y: &symm::BoundSlice<'_, Self>,
        args: &PushArgs<'_>,
    ) -> Result<()>;

    /// Loads [`moe_pull`] of this type; its co-resident grid of blocks
    /// of `threads` where ranks share the GPU.
    #[doc(hidden)]
    fn __pull_limit(comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Loads [`moe_push`] of this type; its co-resident grid.
    #[doc(hidden)]
    fn __push_limit(comm: &Comm, threads: u32) -> Result<Option<u32>>;
}

macro_rules! moe_elem {
    ($($t:ty),* $(,)?) => {$(
        impl MoeElem for $t {
            fn __sum(
                comm: &Comm,
                grid: symm::LaunchConfig,
                back: &symm::BoundSlice<'_, Self>,
                part: Option<&symm::BoundSlice<'_, f32>>,
                out: &mut symm::BoundSlice<'_, Self>,
                a: &SumArgs<'_>,
            ) -> Result<()> {
                const V: usize = 16 / std::mem::size_of::<$t>();
                let n = a.nums;
                match part {
                    None => moe_sum::launch::<$t, V>(
                        comm, grid, back, a.pos, a.idx, a.weights, out, n[0], n[1], n[2], n[3],
                        a.vec,
                    ),
                    Some(part) => moe_sum_ranks::launch::<$t, V>(
                        comm, grid, back, part, a.idx, a.weights, a.dpos, out, n[0], n[1], n[2],
                        n[3], n[4], a.vec, a.ce,
                    ),
                }
            }

            fn __pack_fp8(
                comm: &Comm,
                grid: symm::LaunchConfig,
                x: &symm::BoundSlice<'_, Self>,
                (idx, pos): (
                    &(impl DeviceSlice<i32> + ?Sized),
                    &(impl DeviceSlice<u32> + ?Sized),
                ),
                (send, scales): (
                    &mut (impl DeviceSlice<f8e4m3> + ?Sized),
                    &mut (impl DeviceSlice<f32> + ?Sized),
                ),
                n: [u32; 4],
                (once, vec): (bool, bool),
            ) -> Result<()> {
                moe_pack_fp8::launch::<$t, { 16 / std::mem::size_of::<$t>() }>(
                    comm, grid, x, idx, pos, send, scales, n[0], n[1], n[2], n[3], once, vec,
                )
            }

            fn __preload_sum(comm: &Comm) -> Result<()> {
                const V: usize = 16 / std::mem::size_of::<$t>();
                moe_pack_fp8::co_resident_grid::<$t, V>(comm, PACK_FP8_THREADS, 0)?;
                moe_sum::co_resident_grid::<$t, V>(comm, THREADS, 0)?;
                moe_sum_ranks::co_resident_grid::<$t, V>(comm, THREADS, 0).map(|_| ())
            }

            fn __pull(
                comm: &Comm,
                cfg: symm::LaunchConfig,
                rows: &SymmetricMemory,
                out: &mut DeviceBuffer<Self>,
                args: &mut PullArgs<'_>,
            ) -> Result<()> {
                launch_pull!($t, 16 / std::mem::size_of::<$t>(), comm, cfg, rows, out, args)
            }

            fn __push(
                comm: &Comm,
                cfg: symm::LaunchConfig,
                y: &symm::BoundSlice<'_, Self>,
                args: &PushArgs<'_>,
            ) -> Result<()> {
                launch_push!($t, 16 / std::mem::size_of::<$t>(), comm, cfg, y, args)
            }

            fn __pull_limit(comm: &Comm, threads: u32) -> Result<Option<u32>> {
                moe_pull::co_resident_grid::<$t, { 16 / std::mem::size_of::<$t>() }>(
                    comm, threads, 0,
                )
            }

            fn __push_limit(comm: &Comm, threads: u32) -> Result<Option<u32>> {
                moe_push::co_resident_grid::<$t, { 16 / std::mem::size_of::<$t>() }>(
                    comm, threads, 0,
                )
            }
        }
    )*};
}
crate::shared::elem::wide_float_types!(moe_elem);

/// Threads of a [`moe_pack_fp8`] block: 16 elements each, in f32, a
/// pass (a row of 7168 in two); 512 asked for more registers than an SM
/// holds (the launch failed on an H200).
const PACK_FP8_THREADS: u32 = 256;

/// [`moe_pack_fp8`] of `tokens` tokens in groups of `group` elements,
/// into each slot's row (`pos`) or, where `once`, the token's own row; in
/// 16-byte vectors where the sizes and buffers allow.
fn pack_fp8<T: MoeElem>(
    comm: &Comm,
    (tokens, group): (usize, usize),
    (x, idx, pos): (
        &(impl DeviceSlice<T> + ?Sized),
        &(impl DeviceSlice<i32> + ?Sized),
        &(impl DeviceSlice<u32> + ?Sized),
    ),
    (send, scales): (
        &mut (impl DeviceSlice<f8e4m3> + ?Sized),
        &mut (impl DeviceSlice<f32> + ?Sized),
    ),
    c: &MoeConfig,
    once: bool,
) -> Result<()> {
    let xb = comm.bind("x", x)?;
    let mut sb = comm.bind_mut("send", send)?;
    let vec = c.hidden.is_multiple_of(16)
        && (group == 128 || group == c.hidden)
        && vectors(0, &[xb.device_ptr(), sb.device_ptr()]);
    T::__pack_fp8(
        comm,
        symm::LaunchConfig::linear(tokens as u32, PACK_FP8_THREADS),
        &xb,
        (idx, pos),
        (&mut sb, scales),
        [
            c.top_k as u32,
            c.num_experts as u32,
            c.hidden as u32,
            group as u32,
        ],
        (once, vec),
    )
}

/// The first `n` elements of `from` into `to`, on the comm's stream
/// ([`Comm::copy`]: stream-ordered, graph-capturable, by the copy
/// engines): the pull form's weights staged for the expert ranks, and the
/// all-to-all form's indices kept for its sum (and the NCCL baseline's, in
/// `examples/support/moe_nccl.rs`).
#[doc(hidden)]
pub fn copy_first<T: symm::Element>(
    comm: &Comm,
    from: &(impl DeviceSlice<T> + ?Sized),
    to: &mut (impl DeviceSlice<T> + ?Sized),
    n: usize,
) -> Result<()> {
    let from = comm.bind("from", from)?;
    let mut to = comm.bind_mut("to", to)?;
    let short = || crate::shared::checks::invalid(comm, format!("moe: a copy of {n} elements"));
    let src = from.sub(0..n).ok_or_else(short)?;
    let mut dst = to.sub_mut(0..n).ok_or_else(short)?;
    comm.copy(&src, &mut dst)
}

/// What [`moe_sum`] and [`moe_sum_ranks`] take besides their rows.
#[doc(hidden)]
pub struct SumArgs<'a> {
    pos: &'a symm::BoundSlice<'a, u32>,
    idx: &'a symm::BoundSlice<'a, i32>,
    weights: &'a symm::BoundSlice<'a, f32>,
    /// The copy-engine form's packing places (read only where `ce`).
    dpos: &'a symm::BoundSlice<'a, u32>,
    /// top_k, hidden, local, world, max_tokens.
    nums: [u32; 5],
    vec: bool,
    ce: bool,
}

/// [`moe_sum`] of `tokens` tokens (their `top_k` indices `idx`, each
/// pair's row of `back` in `pos`, `local` experts a rank), in 16-byte
/// vectors where `hidden` and the buffers allow.
#[allow(clippy::too_many_arguments)]
pub fn sum_rows<T: MoeElem>(
    comm: &Comm,
    tokens: usize,
    back: &(impl DeviceSlice<T> + ?Sized),
    pos: &(impl DeviceSlice<u32> + ?Sized),
    idx: &(impl DeviceSlice<i32> + ?Sized),
    weights: &(impl DeviceSlice<f32> + ?Sized),
    out: &mut (impl DeviceSlice<T> + ?Sized),
    (top_k, hidden, local): (usize, usize, usize),
) -> Result<()> {
    let none: Option<&DeviceBuffer<f32>> = None;
    sum_any(
        comm,
        tokens,
        (back, none),
        (pos, idx, weights),
        out,
        (top_k, hidden, local),
        (pos, 0, false),
    )
}

/// [`moe_sum`] (`part` `None`) or the pull form's [`moe_sum_ranks`] of
/// `back`'s single rows and `part`'s sums (where `ce`, the copy-engine
/// form's, all in `part`, placed by `dpos` in `max_tokens` rows a rank),
/// a block a token and span of the row (one position a thread).
#[allow(clippy::too_many_arguments)]
fn sum_any<T: MoeElem>(
    comm: &Comm,
    tokens: usize,
    (back, part): (
        &(impl DeviceSlice<T> + ?Sized),
        Option<&(impl DeviceSlice<f32> + ?Sized)>,
    ),
    (pos, idx, weights): (
        &(impl DeviceSlice<u32> + ?Sized),
        &(impl DeviceSlice<i32> + ?Sized),
        &(impl DeviceSlice<f32> + ?Sized),
    ),
    out: &mut (impl DeviceSlice<T> + ?Sized),
    (top_k, hidden, local): (usize, usize, usize),
    (dpos, max_tokens, ce): (&(impl DeviceSlice<u32> + ?Sized), usize, bool),
) -> Result<()> {
    let back = comm.bind("back", back)?;
    let dpos = comm.bind("dpos", dpos)?;
    let part = part.map(|p| comm.bind("part", p)).transpose()?;
    let (pos, idx, weights) = (
        comm.bind("pos", pos)?,
        comm.bind("idx", idx)?,
        comm.bind("weights", weights)?,
    );
    let mut out = comm.bind_mut("out", out)?;
    let v = 16 / std::mem::size_of::<T>();
    let mut ptrs = vec![back.device_ptr(), out.device_ptr()];
    ptrs.extend(part.as_ref().map(|p| p.device_ptr()));
    let vec = hidden.is_multiple_of(v) && vectors(0, &ptrs);
    let spans = hidden.div_ceil(v * THREADS as usize).min(u16::MAX as usize) as u32;
    let grid = symm::LaunchConfig {
        grid: (tokens as u32, spans, 1),
        ..symm::LaunchConfig::linear(1, THREADS)
    };
    let world = comm.world_size();
    let args = SumArgs {
        pos: &pos,
        idx: &idx,
        weights: &weights,
        dpos: &dpos,
        nums: [
            top_k as u32,
            hidden as u32,
            local as u32,
            world as u32,
            max_tokens as u32,
        ],
        vec,
        ce,
    };
    T::__sum(comm, grid, &back, part.as_ref(), &mut out, &args)
}

/// The copy-engine form's copies into this rank's `dst` from every rank
/// `d`'s `src` (symmetric), from element `from` there (in `E`):
/// `part(d)` gives where in `dst` and how many elements; peers first,
/// each a `cuMemcpyAsync` on `comm`'s stream (at once on the emulator).
fn fetch<E: symm::Element>(
    comm: &Comm,
    src: &SymmetricMemory,
    dst: &mut (impl DeviceSlice<E> + ?Sized),
    rank: usize,
    from: usize,
    part: impl Fn(usize) -> (usize, usize),
) -> Result<()> {
    let world = comm.world_size();
    let mut dst = comm.bind_mut("dst", dst)?;
    for k in 1..=world {
        let d = (rank + k) % world;
        let (at, len) = part(d);
        if len == 0 {
            continue;
        }
        let mut to = dst.sub_mut(at..at + len).ok_or_else(|| {
            crate::shared::checks::invalid(
                comm,
                format!("moe: a copy of {len} elements from rank {d} to {at}.. past the buffer"),
            )
        })?;
        src.copy_from_peer_on(comm, d, from, &mut to)?;
    }
    Ok(())
}

/// The problem with an argument `name` of a `call` that holds `have`
/// elements where it needs `need`, if it does.
fn short(call: &str, name: &str, have: usize, need: usize) -> Option<Problem> {
    (have < need).then(|| {
        Problem::from(format!(
            "moe {call}: {name} holds {have} elements, the step needs {need}"
        ))
    })
}

/// A split size past every input (the all-to-all's own check refuses
/// sizes of 2^32 - 1 or more).
const POISON: u64 = 0xFFFF_FFFF;

/// What an fp8 dispatch sends and receives: the rows in e4m3 and their
/// scales, each as the `T` rows are (packed, received in rank order, then
/// expert-major), and the scales' split sizes and report.
struct Fp8Buffers {
    send: SymmBuffer<f8e4m3>,
    send_s: Arc<SymmetricMemory>,
    scales: SymmBuffer<f32>,
    scales_s: Arc<SymmetricMemory>,
    report: DeviceBuffer<u64>,
    scale_report: DeviceBuffer<u64>,
    raw: DeviceBuffer<f8e4m3>,
    raw_scales: DeviceBuffer<f32>,
    received: DeviceBuffer<f8e4m3>,
    received_scales: DeviceBuffer<f32>,
}

impl<T: MoeElem> Moe<T> {
    /// Plans `config` on every rank of `comm`'s group (collective: every
    /// rank, at the same point of its allocations); a config that differs
    /// between ranks, or does not fit, is the same error on every rank.
    pub fn new(comm: &Comm, config: MoeConfig) -> Result<Moe<T>> {
        // First, before any check that could fail on one rank alone.
        let ch = pull::channel(comm)?;
        let world = comm.world_size();
        let c = &config;
        // The copy-engine form is the pull form's steps.
        let pulls = c.mode != MoeMode::AllToAll;
        let problem = if c.hidden == 0 || c.top_k == 0 || c.max_tokens == 0 || c.align == 0 {
            Some(Problem::from(
                "moe: hidden, top_k, max_tokens and align must be at least 1",
            ))
        } else if c.top_k > u16::MAX as usize {
            // A pack block a (token, slot): the grid's y holds at most 65535.
            Some(Problem::from(format!(
                "moe: top_k {}: at most {}",
                c.top_k,
                u16::MAX
            )))
        } else if c.fp8 == Some(Fp8Scales::Per128) && !c.hidden.is_multiple_of(128) {
            Some(Problem::from(format!(
                "moe: fp8 scales per 128 elements need a hidden size that is a multiple of 128, not {}",
                c.hidden
            )))
        } else if c.scales() > MAX_EXPERTS {
            Some(Problem::from(format!(
                "moe: {} fp8 scales a row; at most {MAX_EXPERTS}",
                c.scales()
            )))
        } else if c.num_experts == 0
            || !c.num_experts.is_multiple_of(world)
            || c.num_experts > MAX_EXPERTS
        {
            Some(Problem::from(format!(
                "moe: {} experts do not spread evenly over {world} ranks (a multiple of the world size, at most {MAX_EXPERTS})",
                c.num_experts
            )))
        } else if pulls && (c.top_k > 32 || world > 64) {
            Some(Problem::from(format!(
                "moe: the pull and copy-engine forms take at most 32 slots a token and 64 ranks, not top-{} on {world}",
                c.top_k
            )))
        } else if pulls && c.fp8.is_some() && c.num_experts > pull::FP8_THREADS as usize {
            Some(Problem::from(format!(
                "moe: the pull and copy-engine forms in fp8 take at most {} experts, not {} (its block holds a thread an expert)",
                pull::FP8_THREADS,
                c.num_experts
            )))
        } else {
            None
        };
        let local = if problem.is_none() {
            c.num_experts / world
        } else {
            1
        };
        // Checked, so that absurd sizes are a problem, never a wrap.
        let sizes = || -> Option<(usize, usize, usize)> {
            let worst = world
                .checked_mul(c.max_tokens)?
                .checked_mul(c.top_k.min(local))?;
            let capacity = c.recv_capacity.unwrap_or(worst).max(1);
            let pad = local.checked_mul(c.align.max(1) - 1)?;
            let out_rows = capacity.checked_add(pad)?;
            let pairs = c.max_tokens.checked_mul(c.top_k)?;
            for r in [pairs, out_rows] {
                if r.checked_mul(c.hidden)? > u32::MAX as usize || c.align > u32::MAX as usize {
                    return None;
                }
            }
            // The pull form's rows back (a token and rank each) and its
            // map (a pair of each rank each).
            let back = c.max_tokens.checked_mul(world)?;
            if pulls
                && (back.checked_mul(c.hidden)? > u32::MAX as usize
                    || pairs.checked_mul(world)? > u32::MAX as usize)
            {
                return None;
            }
            Some((capacity, out_rows, pairs))
        };
        let (capacity, out_rows, pairs) = sizes().unwrap_or((1, 1, 1));
        let problem = problem.or_else(|| {
            sizes().is_none().then(|| {
                Problem::capacity(format!(
                    "moe: {} tokens of top-{}, rows of {} elements, capacity {:?} and align {}: \
                     past the 2^32 - 1 elements its kernels index",
                    c.max_tokens, c.top_k, c.hidden, c.recv_capacity, c.align
                ))
            })
        });
        // Every kernel loaded now, before the ranks agree (so before any
        // rank can wait on a peer): where ranks share a GPU, a kernel's
        // first load waits for the device to be idle, which a rank spinning
        // on a peer that is itself loading would keep it from being.
        let problem = problem.or_else(|| {
            preload::<T>(comm, config.fp8.is_some())
                .err()
                .map(|e| Problem::from(&e))
        });
        let key = Key {
            call: "plan",
            config: config.clone(),
            dtype: T::DTYPE,
        };
        agree(comm, &key, problem)?;
        // In fp8 the rows travel as e4m3: `received` holds one element.
        // `send` also takes the rows that come back (the all-to-all form).
        // What only the all-to-all form uses holds one element in the pull
        // form (`all` 0), which has its own (`PullBuffers`).
        let there = if c.fp8.is_some() { 0 } else { c.hidden };
        let all = usize::from(!pulls);
        let send = comm.alloc::<T>((all * pairs * c.hidden).max(1))?;
        let send_s = send.rendezvous()?;
        let fp8 = match c.fp8 {
            None => None,
            Some(_) => {
                let sc = c.scales();
                let send = comm.alloc::<f8e4m3>((all * pairs * c.hidden).max(1))?;
                let send_s = send.rendezvous()?;
                let scales = comm.alloc::<f32>((all * pairs * sc).max(1))?;
                let scales_s = scales.rendezvous()?;
                Some(Fp8Buffers {
                    send,
                    send_s,
                    scales,
                    scales_s,
                    report: comm.device_buffer(2 * world)?,
                    scale_report: comm.device_buffer(2 * world)?,
                    raw: comm.device_buffer((all * capacity * c.hidden).max(1))?,
                    raw_scales: comm.device_buffer((all * capacity * sc).max(1))?,
                    received: comm.device_buffer(out_rows * c.hidden)?,
                    received_scales: comm.device_buffer(out_rows * sc)?,
                })
            }
        };
        // The pull form's words past the counts: each rank's tokens, and
        // whether its dispatch and its combine failed.
        let counts = comm.alloc::<u32>(world * local + 3)?;
        let counts_s = counts.rendezvous()?;
        let sigs = PullCall::ALL.map(|call| {
            let key = Key {
                call: call.name(),
                config: config.clone(),
                dtype: T::DTYPE,
            };
            call_digest(key.hash64(), &counts_s)
        });
        let back = comm.alloc::<T>((all * capacity * c.hidden).max(1))?;
        let back_s = back.rendezvous()?;
        let pull = if pulls {
            let fp8 = c.fp8.is_some();
            let threads = pull::block(comm, c.num_experts, fp8);
            let limit = if fp8 {
                moe_pull::co_resident_grid::<f8e4m3, 16>(comm, threads, 0)?
            } else {
                T::__pull_limit(comm, threads)?
            };
            let push = pull::block(comm, 0, false);
            let sizes = pull::PullSizes {
                hidden: c.hidden,
                top_k: c.top_k,
                max_tokens: c.max_tokens,
                fp8: c.fp8.map(|_| c.scales()),
                ce: c.mode == MoeMode::CopyEngine,
            };
            let fitted = ((threads, limit), (push, T::__push_limit(comm, push)?));
            Some(PullBuffers::new(comm, &sizes, fitted)?)
        } else {
            None
        };
        let mut moe = Moe {
            world,
            local,
            capacity,
            out_rows,
            send,
            send_s,
            counts,
            counts_s,
            recv_counts: comm.device_buffer(world * local)?,
            pos: comm.device_buffer((all * pairs).max(1))?,
            scratch: comm.device_buffer(layout_scratch(c.num_experts))?,
            no_idx: comm.device_buffer(1)?,
            splits: comm.device_buffer(world)?,
            scale_splits: comm.device_buffer(world)?,
            report: comm.device_buffer(2 * world)?,
            report_back: comm.device_buffer(2 * world)?,
            row_dst: comm.device_buffer((all * capacity).max(1))?,
            layout: comm.device_buffer(2 * local + 2)?,
            received: comm.device_buffer((out_rows * there).max(1))?,
            back,
            back_s,
            fp8,
            tokens: None,
            poisoned: comm.device_buffer_from(&vec![POISON; world])?,
            group: comm.group_name().clone(),
            rank: comm.rank(),
            config,
            kept_idx: comm.device_buffer((all * pairs).max(1))?,
            pull,
            ch,
            sigs,
        };
        moe.warm_up(comm)?;
        Ok(moe)
    }

    /// The plan.
    pub fn config(&self) -> &MoeConfig {
        &self.config
    }

    /// Experts on each rank (`num_experts / world`).
    pub fn local_experts(&self) -> usize {
        self.local
    }

    /// Rows [`Moe::received`] holds: the receive capacity and every
    /// expert's alignment padding.
    pub fn received_rows(&self) -> usize {
        self.out_rows
    }

    /// What the plan holds on this rank.
    pub fn memory(&self) -> MoeMemory {
        let e = std::mem::size_of::<T>();
        let mut m = MoeMemory {
            send: self.send.len() * e,
            received_raw: 0,
            received: self.received.len() * e,
            back: self.back.len() * e,
            small: 4 * (self.counts.len() + self.recv_counts.len() + self.pos.len())
                + 4 * self.kept_idx.len()
                + 4 * self.scratch.len()
                + 4 * (self.row_dst.len() + self.layout.len())
                + 8 * (self.splits.len() + self.scale_splits.len())
                + 8 * (self.report.len() + self.report_back.len()),
        };
        if let Some(f) = &self.fp8 {
            // e4m3 is a byte; each scale an f32.
            m.send += f.send.len() + 4 * f.scales.len();
            m.received_raw += f.raw.len() + 4 * f.raw_scales.len();
            m.received += f.received.len() + 4 * f.received_scales.len();
            m.small += 8 * (f.report.len() + f.scale_report.len());
        }
        if let Some(p) = &self.pull {
            let (staged, raw, back, small) = p.memory();
            m.send += staged;
            m.received_raw += raw;
            m.back += back;
            m.small += small;
        }
        m
    }

    /// The last dispatch's rows, expert-major: expert `l` (this rank's
    /// `l`-th) has `layout[l]` rows from row `layout[local + l]`, each
    /// `hidden` elements; rows between experts (alignment) and past the
    /// last hold stale values. In fp8 the rows are in
    /// [`Moe::received_fp8`], and this holds one element.
    pub fn received(&self) -> &DeviceBuffer<T> {
        &self.received
    }

    /// An fp8 dispatch's rows, laid out as [`Moe::received`] (its rows
    /// stay unused then): each element `f8e4m3`, worth itself times its
    /// group's scale in [`Moe::received_scales`]. `None` where the config
    /// has no fp8.
    pub fn received_fp8(&self) -> Option<&DeviceBuffer<f8e4m3>> {
        self.fp8.as_ref().map(|f| &f.received)
    }

    /// An fp8 dispatch's scales: row `r`'s `hidden / group` scales (f32)
    /// from `r × hidden / group`, rows as in [`Moe::received_fp8`].
    pub fn received_scales(&self) -> Option<&DeviceBuffer<f32>> {
        self.fp8.as_ref().map(|f| &f.received_scales)
    }

    /// The last dispatch's layout on the device, `2 × local + 2` words:
    /// each local expert's row count, then its first row, then the rows
    /// received in all, then the rows in use (alignment included).
    pub fn layout(&self) -> &DeviceBuffer<u32> {
        &self.layout
    }

    /// Sends each of this rank's first `tokens` rows of `x` (`hidden`
    /// elements each) to the ranks of the experts `topk_idx` names for it
    /// (`top_k` a token, `-1` for none); the rows this rank receives land
    /// in [`Moe::received`], laid out by [`Moe::layout`]. Ranks may
    /// dispatch different numbers of tokens.
    ///
    /// In fp8 the rows land in [`Moe::received_fp8`] instead.
    ///
    /// Errors: an argument problem (more tokens than planned, a short or
    /// foreign buffer) is this rank's error, and its part of the step
    /// still runs, marked failed (the pull form; on split sizes that no
    /// input holds in the all-to-all form), so the step fails on every rank
    /// instead of its peers waiting for it; keep making the step's calls
    /// (the combine too) or leave the group, as after any failed
    /// collective, after which the group takes no more calls. On a GPU the
    /// device's failures surface at the next synchronisation: an index
    /// that is neither `-1` nor an expert (a `KernelAssert` whose block is
    /// the token, on its rank; its peers' step fails too; on the emulator
    /// the launch fails at once), and a routing that sends a rank more
    /// rows than the plan's capacity (on every rank: the pull's check of
    /// every rank's counts, or the all-to-all's). A failed pull leaves an
    /// empty layout.
    ///
    /// In the copy-engine form ([`MoeMode::CopyEngine`]) the call waits for
    /// the device once (the counts are read on the host), so device
    /// failures of the step so far surface here; made while `comm`'s
    /// stream captures a CUDA graph, it (and the combine) is an argument
    /// problem: refused on every rank where every rank captures.
    pub fn dispatch(
        &mut self,
        comm: &Comm,
        x: &(impl DeviceSlice<T> + ?Sized),
        topk_idx: &(impl DeviceSlice<i32> + ?Sized),
        tokens: usize,
    ) -> Result<()> {
        // A dispatch that fails leaves no layout for a combine to use.
        self.tokens = None;
        self.planned_group(comm)?;
        let c = &self.config;
        let (hidden, top_k) = (c.hidden, c.top_k);
        let problem = if tokens > c.max_tokens {
            Some(Problem::from(format!(
                "moe dispatch of {tokens} tokens: the plan holds at most {}",
                c.max_tokens
            )))
        } else {
            short("dispatch", "x", x.len(), tokens * hidden)
                .or_else(|| short("dispatch", "topk_idx", topk_idx.len(), tokens * top_k))
        };
        // Memory of another device or group is this rank's problem, found
        // before the agreement (a launch that failed after it would leave
        // the peers waiting).
        let problem = problem.or_else(|| {
            comm.check_memory("x", x, false)
                .and_then(|()| comm.check_memory("topk_idx", topk_idx, false))
                .err()
                .map(|e| Problem::from(&e))
        });
        let problem = problem.or_else(|| self.uncapturable(comm, "dispatch"));
        if let Agreement::Alone(e) = self.agree(comm, "dispatch", problem)? {
            self.fail_dispatch(comm);
            return Err(e);
        }
        if self.pull.is_some() {
            self.dispatch_pull(comm, x, topk_idx, tokens)?;
            self.tokens = Some(tokens);
            return Ok(());
        }
        let c = &self.config;
        let scales = c.scales();
        layout(
            comm,
            topk_idx,
            tokens * top_k,
            (c.num_experts, self.local, hidden, scales),
            false,
            false,
            &mut self.scratch,
            &mut self.pos,
            (&mut self.splits, &mut self.scale_splits, &mut self.counts),
        )?;
        if tokens > 0 {
            // The indices, for the combine's sum (by rank, then slot).
            let n = tokens * top_k;
            copy_first(comm, topk_idx, &mut self.kept_idx, n)?;
        }
        let grid = symm::LaunchConfig::linear(tokens as u32, THREADS);
        match &mut self.fp8 {
            None if tokens > 0 => {
                // A block a (token, slot): a decode step's few tokens still
                // fill the GPU.
                let grid = symm::LaunchConfig {
                    grid: (tokens as u32, top_k as u32, 1),
                    ..grid
                };
                let x = comm.bind("x", x)?;
                let mut send = comm.bind_mut("send", &mut self.send)?;
                let (x, mut send) = (x.bytes(), send.bytes_mut());
                let row = hidden * std::mem::size_of::<T>();
                let vec = vectors(row, &[x.device_ptr(), send.device_ptr()]);
                moe_pack::launch(
                    comm,
                    grid,
                    &x,
                    topk_idx,
                    &self.pos,
                    &mut send,
                    top_k as u32,
                    c.num_experts as u32,
                    row as u32,
                    vec,
                )?
            }
            Some(f) if tokens > 0 => pack_fp8::<T>(
                comm,
                (tokens, hidden / scales.max(1)),
                (x, topk_idx, &self.pos),
                (&mut f.send, &mut f.scales),
                c,
                false,
            )?,
            _ => {}
        }
        all_to_all::<u32>(comm, &self.counts_s, &mut self.recv_counts, self.local)?;
        match &mut self.fp8 {
            None => all_to_all_v::<T>(
                comm,
                &self.send_s,
                &mut self.back,
                &self.splits,
                &mut self.report,
            )?,
            Some(f) => {
                all_to_all_v::<f8e4m3>(comm, &f.send_s, &mut f.raw, &self.splits, &mut f.report)?;
                all_to_all_v::<f32>(
                    comm,
                    &f.scales_s,
                    &mut f.raw_scales,
                    &self.scale_splits,
                    &mut f.scale_report,
                )?;
            }
        }
        moe_rows::launch(
            comm,
            rows_grid(c.num_experts, self.capacity),
            &self.recv_counts,
            self.world as u32,
            self.local as u32,
            c.align as u32,
            self.out_rows as u32,
            &mut self.layout,
            &mut self.row_dst,
        )?;
        let map = (&self.row_dst, &self.layout, self.local);
        match &mut self.fp8 {
            None => move_rows(comm, &self.back, &mut self.received, map, hidden, true)?,
            Some(f) => {
                move_rows(comm, &f.raw, &mut f.received, map, hidden, true)?;
                move_rows(
                    comm,
                    &f.raw_scales,
                    &mut f.received_scales,
                    map,
                    scales,
                    true,
                )?;
            }
        }
        self.tokens = Some(tokens);
        Ok(())
    }

    /// Brings the experts' outputs `y` (laid out as [`Moe::received`]:
    /// the same rows, each `hidden` elements) back to the ranks their
    /// tokens came from, and writes each token of the last dispatch, in
    /// `out`, the sum over its slots of `topk_weights` (`top_k` a token,
    /// f32) times its expert's row, each rank's slots in slot order, then
    /// the ranks in order, in f32 rounded once (the [module](self)'s
    /// order): the same bits whatever the arrival order. Tokens routed
    /// nowhere get zeros.
    ///
    /// Errors: as [`Moe::dispatch`]'s (a combine with no dispatch before
    /// it, or whose dispatch failed, is an argument problem).
    pub fn combine(
        &mut self,
        comm: &Comm,
        y: &(impl DeviceSlice<T> + ?Sized),
        topk_weights: &(impl DeviceSlice<f32> + ?Sized),
        out: &mut (impl DeviceSlice<T> + ?Sized),
    ) -> Result<()> {
        self.combine_checked(comm, y, topk_weights, out, true)
    }

    /// [`Moe::combine`], with `y`'s length checked against the received
    /// layout's rows only where `check_y` (the plan's own empty step
    /// passes a stand-in, which no row of an empty step reads).
    fn combine_checked(
        &mut self,
        comm: &Comm,
        y: &(impl DeviceSlice<T> + ?Sized),
        topk_weights: &(impl DeviceSlice<f32> + ?Sized),
        out: &mut (impl DeviceSlice<T> + ?Sized),
        check_y: bool,
    ) -> Result<()> {
        self.planned_group(comm)?;
        let c = &self.config;
        let (hidden, top_k) = (c.hidden, c.top_k);
        let tokens = self.tokens.unwrap_or(0);
        let problem = if self.tokens.is_none() {
            Some(Problem::from("moe combine before any dispatch"))
        } else {
            let y_need = if check_y { self.out_rows * hidden } else { 0 };
            short("combine", "y", y.len(), y_need)
                .or_else(|| {
                    short(
                        "combine",
                        "topk_weights",
                        topk_weights.len(),
                        tokens * top_k,
                    )
                })
                .or_else(|| short("combine", "out", out.len(), tokens * hidden))
        };
        let problem = problem.or_else(|| {
            comm.check_memory("y", y, false)
                .and_then(|()| comm.check_memory("topk_weights", topk_weights, false))
                .and_then(|()| comm.check_memory("out", &*out, true))
                .err()
                .map(|e| Problem::from(&e))
        });
        let problem = problem.or_else(|| self.uncapturable(comm, "combine"));
        if let Agreement::Alone(e) = self.agree(comm, "combine", problem)? {
            if self.pull.is_some() {
                // This rank's push, failed: every rank's fails alike (the
                // plan's own rows stand in for `y`, which it never reads).
                let (sig, _) = self.pull_sig(comm, PullCall::Combine);
                let _ = self.push(comm, &self.received, true, sig);
                return Err(e);
            }
            // This rank's part of the call, on split sizes that no input
            // holds: the all-to-all fails on every rank, not only here.
            let _ = all_to_all_v::<T>(
                comm,
                &self.back_s,
                &mut self.send,
                &self.poisoned,
                &mut self.report_back,
            );
            return Err(e);
        }
        if self.pull.is_some() {
            let (sig, checked) = self.pull_sig(comm, PullCall::Combine);
            checked?;
            let mut staged = Ok(());
            if let (Some(p), true) = (&mut self.pull, tokens > 0) {
                let n = tokens * top_k;
                staged = copy_first(comm, topk_weights, &mut p.wts, n);
            }
            if let Err(e) = staged {
                // The push still launches (its peers would wait for it),
                // marked failed.
                let _ = self.push(comm, &self.received, true, sig);
                return Err(e);
            }
            self.push(comm, y, false, sig)?;
            if let (Some(p), true) = (&mut self.pull, tokens > 0) {
                let max = c.max_tokens;
                let sizes = (top_k, hidden, self.local);
                let sources = (&p.ntoks, &p.idx, topk_weights);
                match &mut p.ce {
                    // The copy engines bring each expert rank's parts of
                    // this rank's tokens (its push's exit barrier ended
                    // every rank's writes of them), then they are added.
                    Some(ce) => {
                        let (rank, world) = (self.rank, self.world);
                        let sent = |d: usize| ce.sent_host[world + d] as usize;
                        fetch(
                            comm,
                            &p.part_s,
                            &mut ce.back,
                            rank,
                            rank * max * hidden,
                            |d| (d * max * hidden, sent(d) * hidden),
                        )?;
                        let parts = (&p.single, Some(&ce.back));
                        let ce_at = (&ce.dpos, max, true);
                        sum_any(comm, tokens, parts, sources, out, sizes, ce_at)?;
                    }
                    None => {
                        let parts = (&p.single, Some(&p.part));
                        let ce_at = (&p.pos, max, false);
                        sum_any(comm, tokens, parts, sources, out, sizes, ce_at)?;
                    }
                }
            }
            return Ok(());
        }
        let map = (&self.row_dst, &self.layout, self.local);
        move_rows(comm, y, &mut self.back, map, hidden, false)?;
        // What came from each rank goes back to it: the dispatch's report
        // (sizes received, then offsets) gives the splits.
        let world = self.world;
        let report = match &self.fp8 {
            Some(f) => &f.report,
            None => &self.report,
        };
        let bound = comm.bind("report", report)?;
        let sizes = bound.sub(0..world).ok_or_else(|| {
            crate::shared::checks::invalid(comm, "moe: the report's sizes".into())
        })?;
        all_to_all_v::<T>(
            comm,
            &self.back_s,
            &mut self.send,
            &sizes,
            &mut self.report_back,
        )?;
        if tokens > 0 {
            sum_rows(
                comm,
                tokens,
                &self.send,
                &self.pos,
                &self.kept_idx,
                topk_weights,
                out,
                (top_k, hidden, self.local),
            )?;
        }
        Ok(())
    }

    /// The problem with a `call` of the copy-engine form while `comm`'s
    /// stream captures a CUDA graph: its dispatch reads the counts on the
    /// host, and its combine copies as many rows as that dispatch found.
    fn uncapturable(&self, comm: &Comm, call: &str) -> Option<Problem> {
        let stream = comm.cuda_stream();
        (self.config.mode == MoeMode::CopyEngine
            && crate::shared::checks::capturing(stream.as_deref()))
        .then(|| {
            Problem::from(format!(
                "moe {call}: the copy-engine form (MoeMode::CopyEngine) reads each step's row \
                 counts on the host, which a CUDA graph's capture cannot; capture a plan of \
                 MoeMode::Pull instead"
            ))
        })
    }

    /// Agrees on a call with every rank (its config and element type), with
    /// this rank's `problem`, if any: an `Err` every rank returns alike, or
    /// [`Agreement::Alone`] where this rank alone has a problem on a call
    /// agreed before (its peers go on into the step).
    fn agree(
        &self,
        comm: &Comm,
        call: &'static str,
        problem: Option<Problem>,
    ) -> Result<Agreement> {
        let key = Key {
            call,
            config: self.config.clone(),
            dtype: T::DTYPE,
        };
        agree_or_alone(comm, &key, problem)
    }

    /// The identity of the pull form's `call` ([`moe_pull`] or
    /// [`moe_push`]) that its barriers compare (the call's key and the
    /// plan's `counts`), and the host's check of it against its peers'.
    fn pull_sig(&self, comm: &Comm, call: PullCall) -> (u32, Result<()>) {
        let sig = self.sigs[call as usize];
        let checked = comm.check_call(self.ch, sig, || {
            let key = Key {
                call: call.name(),
                config: self.config.clone(),
                dtype: T::DTYPE,
            };
            format!("{key}, plan allocation #{}", self.counts_s.alloc_id())
        });
        (sig, checked)
    }

    /// The pull form's dispatch, agreed: the layout with pairs ranked
    /// within their experts, the staging, then [`moe_pull`].
    fn dispatch_pull(
        &mut self,
        comm: &Comm,
        x: &(impl DeviceSlice<T> + ?Sized),
        topk_idx: &(impl DeviceSlice<i32> + ?Sized),
        tokens: usize,
    ) -> Result<()> {
        let (sig, checked) = self.pull_sig(comm, PullCall::Dispatch);
        checked?;
        // A launch that fails here still leaves the pull to launch (its
        // peers would wait for it), marked failed.
        let staged = self.stage(comm, x, topk_idx, tokens);
        // The copy-engine form's counts are gathered on every rank, failed
        // or not (its peers wait for it there); its rows only where staged.
        let fetched = self.fetch_rows(comm, staged.is_ok());
        let staged = staged.and_then(|l| fetched.map(|()| l));
        match staged {
            Ok(lblocks) => self.pull_rows(comm, (tokens, lblocks), false, sig),
            Err(e) => {
                let _ = self.pull_rows(comm, (0, 0), true, sig);
                Err(e)
            }
        }
    }

    /// The copy-engine form's gather of every rank's counts of tokens sent
    /// to each rank and, where `copy`, their read on the host (the device's
    /// one wait of a step) and the copies of every sender's rows for this
    /// rank: nothing in the other forms.
    fn fetch_rows(&mut self, comm: &Comm, copy: bool) -> Result<()> {
        if self.pull.as_ref().is_none_or(|p| p.ce.is_none()) {
            return Ok(());
        }
        let (sig, checked) = self.pull_sig(comm, PullCall::Counts);
        checked?;
        let Moe {
            config: c,
            pull,
            rank,
            world,
            counts_s,
            ch,
            ..
        } = self;
        let Some(ce) = pull.as_mut().and_then(|p| p.ce.as_mut()) else {
            return Ok(());
        };
        let (rank, world, max, h) = (*rank, *world, c.max_tokens, c.hidden);
        ce.sent_host.fill(0);
        let threads = pull::block(comm, 0, false);
        moe_counts::launch(
            comm,
            crate::shared::grid::with_pdl(comm, symm::LaunchConfig::linear(1, threads)),
            counts_s,
            &ce.sent_s,
            &mut ce.sent_all,
            *ch,
            sig,
        )?;
        if !copy {
            return Ok(());
        }
        // The counts are `comm`'s stream's work (`sent_all` reads on its
        // plan's handle's stream, which may be another); this also
        // reports a failure of this rank's step so far.
        comm.synchronize()?;
        let got = ce.sent_all.read(0, 2 * world)?;
        // Never more rows than a sender holds, whatever a failed sender
        // published.
        for (h, &g) in ce.sent_host.iter_mut().zip(&got) {
            *h = g.min(max as u32);
        }
        let n: Vec<usize> = ce.sent_host[..world].iter().map(|&g| g as usize).collect();
        match &mut ce.fp8 {
            None => fetch(
                comm,
                &ce.packed_s,
                &mut ce.recv,
                rank,
                rank * max * h,
                |d| (d * max * h, n[d] * h),
            ),
            Some((packed, recv)) => {
                fetch(comm, &packed.1, &mut recv.0, rank, rank * max * h, |d| {
                    (d * max * h, n[d] * h)
                })?;
                let g = c.scales();
                fetch(comm, &packed.3, &mut recv.2, rank, rank * max * g, |d| {
                    (d * max * g, n[d] * g)
                })
            }
        }
    }

    /// The pull form's layout and staging of this rank's step: the
    /// [`moe_layout`] blocks that ran.
    fn stage(
        &mut self,
        comm: &Comm,
        x: &(impl DeviceSlice<T> + ?Sized),
        topk_idx: &(impl DeviceSlice<i32> + ?Sized),
        tokens: usize,
    ) -> Result<usize> {
        let c = &self.config;
        let (hidden, top_k, experts) = (c.hidden, c.top_k, c.num_experts);
        let scales = c.scales();
        let Some(p) = &mut self.pull else {
            return Err(crate::shared::checks::invalid(
                comm,
                "moe: a pull dispatch of a plan of the all-to-all form".into(),
            ));
        };
        let lblocks = layout(
            comm,
            topk_idx,
            tokens * top_k,
            (experts, self.local, hidden, scales),
            false,
            true,
            &mut self.scratch,
            &mut p.pos,
            (&mut self.splits, &mut self.scale_splits, &mut self.counts),
        )?;
        let world = self.world;
        if tokens > 0 {
            let grid = symm::LaunchConfig::linear(tokens as u32, THREADS);
            // (The copy-engine form packs `x` itself, below.)
            let rows = c.fp8.is_none() && p.ce.is_none();
            {
                let xb = comm.bind("x", x)?;
                let mut stage = comm.bind_mut("stage", &mut p.stage)?;
                let (xb, mut sb) = (xb.bytes(), stage.bytes_mut());
                let row = hidden * std::mem::size_of::<T>();
                let vec = rows && vectors(row, &[xb.device_ptr(), sb.device_ptr()]);
                moe_stage::launch(
                    comm,
                    grid,
                    &xb,
                    topk_idx,
                    &mut sb,
                    &mut p.idx,
                    top_k as u32,
                    experts as u32,
                    row as u32,
                    rows,
                    vec,
                )?;
            }
            if let Some((f8, _, sc, _)) = &mut p.fp8 {
                pack_fp8::<T>(
                    comm,
                    (tokens, hidden / scales.max(1)),
                    (x, topk_idx, &p.pos),
                    (f8, sc),
                    c,
                    true,
                )?;
            }
        }
        if let Some(ce) = &mut p.ce {
            // Every rank's counts are published, of no tokens too.
            let threads = pull::block(comm, 0, false);
            moe_dests::launch(
                comm,
                symm::LaunchConfig::linear(world as u32, threads),
                topk_idx,
                &mut ce.dpos,
                &mut ce.sent,
                tokens as u32,
                top_k as u32,
                self.local as u32,
                world as u32,
            )?;
            if tokens > 0 {
                let grid = symm::LaunchConfig::linear(tokens as u32, THREADS);
                let spread = |from: &symm::BoundSlice<'_, u8>,
                              to: &mut symm::BoundSlice<'_, u8>,
                              row: usize| {
                    let vec = vectors(row, &[from.device_ptr(), to.device_ptr()]);
                    let (w, m) = (world as u32, c.max_tokens as u32);
                    moe_spread::launch(comm, grid, from, &ce.dpos, to, w, m, row as u32, vec)
                };
                match (&mut ce.fp8, &p.fp8) {
                    (Some((packed, _)), Some((f8, _, sc, _))) => {
                        let (f8, sc) = (comm.bind("stage", f8)?, comm.bind("scales", sc)?);
                        let mut rows = comm.bind_mut("packed", &mut packed.0)?;
                        spread(&f8.bytes(), &mut rows.bytes_mut(), hidden)?;
                        let mut to = comm.bind_mut("packed scales", &mut packed.2)?;
                        spread(&sc.bytes(), &mut to.bytes_mut(), 4 * c.scales())?;
                    }
                    _ => {
                        let xb = comm.bind("x", x)?;
                        let mut to = comm.bind_mut("packed", &mut ce.packed)?;
                        let row = hidden * std::mem::size_of::<T>();
                        spread(&xb.bytes(), &mut to.bytes_mut(), row)?;
                    }
                }
            }
        }
        Ok(lblocks)
    }

    /// [`moe_pull`] of this rank's step of `tokens` tokens, whose layout
    /// ran `lblocks` [`moe_layout`] blocks (`poison`: its step failed
    /// here, so every rank's fails).
    fn pull_rows(
        &mut self,
        comm: &Comm,
        (tokens, lblocks): (usize, usize),
        poison: bool,
        sig: u32,
    ) -> Result<()> {
        let Moe {
            config: c,
            pull,
            fp8,
            counts_s,
            layout,
            scratch,
            received,
            local,
            capacity,
            out_rows,
            ch,
            ..
        } = self;
        let Some(p) = pull else {
            return Err(crate::shared::checks::invalid(
                comm,
                "moe: a pull of a plan of the all-to-all form".into(),
            ));
        };
        let groups = if c.fp8.is_some() { c.scales() } else { 0 };
        let nums = [
            tokens as u32,
            c.max_tokens as u32,
            u32::from(poison),
            c.num_experts as u32,
            *local as u32,
            c.top_k as u32,
            c.align as u32,
            *out_rows as u32,
            *capacity as u32,
            c.hidden as u32,
            groups as u32,
        ];
        let cfg = p.pull_cfg;
        // Stand-ins for the scales, which an fp8 pull replaces, and for
        // the packing places, which only the copy-engine form reads.
        let mut a = PullArgs {
            scales: &p.no_scales_s,
            counts: counts_s,
            idx: &p.idx_s,
            pos: &p.pos_s,
            dpos: p.ce.as_ref().map_or(&p.pos_s, |ce| &ce.dpos_s),
            out_scales: &mut p.no_out_scales,
            layout,
            item_rows: &mut p.item_rows,
            ntoks: &mut p.ntoks,
            scratch,
            lblocks: lblocks as u32,
            nums,
            vec: false,
            ce: p.ce.is_some(),
            ch: *ch,
            sig,
        };
        match (fp8, &p.fp8) {
            (Some(f), Some((_, rows_s, _, scales_s))) => {
                // The copy-engine form's rows are those its copies brought.
                let (rows_s, scales_s) = match &p.ce {
                    Some(CeBuffers {
                        fp8: Some((_, recv)),
                        ..
                    }) => (&recv.1, &recv.3),
                    _ => (rows_s, scales_s),
                };
                a.vec = vectors(
                    c.hidden,
                    &[rows_s.buffer_ptrs()[rows_s.rank()], f.received.device_ptr()],
                );
                a.scales = scales_s;
                a.out_scales = &mut f.received_scales;
                launch_pull!(f8e4m3, 16, comm, cfg, rows_s, &mut f.received, &mut a)
            }
            _ => {
                let (rows_s, rows) = match &p.ce {
                    Some(ce) => (&ce.recv_s, ce.recv.device_ptr()),
                    None => (&p.stage_s, p.stage.device_ptr()),
                };
                a.vec = vectors(
                    c.hidden * std::mem::size_of::<T>(),
                    &[rows, received.device_ptr()],
                );
                T::__pull(comm, cfg, rows_s, received, &mut a)
            }
        }
    }

    /// [`moe_push`] of the experts' rows `y` back to their tokens' ranks
    /// (`poison`: this rank's combine failed, so every rank's fails).
    fn push(
        &self,
        comm: &Comm,
        y: &(impl DeviceSlice<T> + ?Sized),
        poison: bool,
        sig: u32,
    ) -> Result<()> {
        let Some(p) = &self.pull else {
            return Err(crate::shared::checks::invalid(
                comm,
                "moe: a push of a plan of the all-to-all form".into(),
            ));
        };
        let c = &self.config;
        let y = comm.bind("y", y)?;
        let vec = vectors(
            c.hidden * std::mem::size_of::<T>(),
            &[y.device_ptr(), p.single.device_ptr(), p.part.device_ptr()],
        );
        let args = PushArgs {
            single: &p.single_s,
            part: &p.part_s,
            wts: &p.wts_s,
            counts: &self.counts_s,
            dpos: p.ce.as_ref().map_or(&p.pos_s, |ce| &ce.dpos_s),
            item_rows: &p.item_rows,
            ntoks: &p.ntoks,
            nums: [
                u32::from(poison),
                c.num_experts as u32,
                c.max_tokens as u32,
                c.top_k as u32,
                c.hidden as u32,
            ],
            vec,
            ce: p.ce.is_some(),
            ch: self.ch,
            sig,
        };
        T::__push(comm, p.push_cfg, &y, &args)
    }

    /// This rank's part of a dispatch it alone found a problem with: the
    /// step's collective calls, the all-to-alls of rows on split sizes that
    /// no input holds, so the step fails on every rank (at its kernels'
    /// check) instead of its peers waiting for it. Their own errors are
    /// this rank's to drop: it returns its problem.
    fn fail_dispatch(&mut self, comm: &Comm) {
        if self.pull.is_some() {
            // The pull, failed: every rank's fails alike, at once (after
            // the copy-engine form's gather, where its peers wait first).
            let (sig, _) = self.pull_sig(comm, PullCall::Dispatch);
            let _ = self.fetch_rows(comm, false);
            let _ = self.pull_rows(comm, (0, 0), true, sig);
            return;
        }
        // No pairs, and poisoned splits: the peers get zero counts from
        // this rank, and every rank's all-to-all of rows fails its check.
        let c = &self.config;
        // The plan's own index buffer, not the caller's, whose problem
        // (memory of another device or group) may be why this runs.
        let _ = layout(
            comm,
            &self.no_idx,
            0,
            (c.num_experts, self.local, c.hidden, c.scales()),
            true,
            false,
            &mut self.scratch,
            &mut self.pos,
            (&mut self.splits, &mut self.scale_splits, &mut self.counts),
        );
        let _ = all_to_all::<u32>(comm, &self.counts_s, &mut self.recv_counts, self.local);
        match &mut self.fp8 {
            None => {
                let _ = all_to_all_v::<T>(
                    comm,
                    &self.send_s,
                    &mut self.back,
                    &self.splits,
                    &mut self.report,
                );
            }
            Some(f) => {
                let _ = all_to_all_v::<f8e4m3>(
                    comm,
                    &f.send_s,
                    &mut f.raw,
                    &self.splits,
                    &mut f.report,
                );
                let _ = all_to_all_v::<f32>(
                    comm,
                    &f.scales_s,
                    &mut f.raw_scales,
                    &self.scale_splits,
                    &mut f.scale_report,
                );
            }
        }
    }

    /// Refuses a call on another group than the plan's.
    fn planned_group(&self, comm: &Comm) -> Result<()> {
        if comm.group_name() != &self.group
            || comm.rank() != self.rank
            || comm.world_size() != self.world
        {
            return Err(crate::shared::checks::invalid(
                comm,
                format!(
                    "moe: planned on rank {} of {} ranks{}, called on rank {} of {}{}",
                    self.rank,
                    self.world,
                    self.group,
                    comm.rank(),
                    comm.world_size(),
                    comm.group_name()
                ),
            ));
        }
        Ok(())
    }

    /// The plan's own empty step (no tokens on any rank): every agreement
    /// and every collective's first call (their allocations and exchanges)
    /// made now, so that no later step allocates or waits on the store,
    /// and the first may be captured in a CUDA graph.
    fn warm_up(&mut self, comm: &Comm) -> Result<()> {
        let x = comm.device_buffer::<T>(1)?;
        let idx = comm.device_buffer::<i32>(1)?;
        let w = comm.device_buffer::<f32>(1)?;
        let mut out = comm.device_buffer::<T>(1)?;
        self.dispatch(comm, &x, &idx, 0)?;
        self.combine_checked(comm, &x, &w, &mut out, false)?;
        self.tokens = None;
        Ok(())
    }
}
