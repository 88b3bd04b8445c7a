//! Expert parallelism: MoE dispatch and combine, with the routing decided
//! on the GPU and no host synchronisation.
//!
//! An [`Moe`] is planned once per group ([`Moe::new`], collective): it
//! agrees on its [`MoeConfig`] with every rank and allocates every buffer
//! a step needs, sized by `max_tokens` and the receive capacity, so that
//! nothing allocates afterwards and a step may be captured in a CUDA graph
//! and replayed with new routings. Experts are spread in order, `num_experts /
//! world` to a rank (rank `d` holds experts `d × local ..`).
//!
//! A step is [`Moe::dispatch`], the experts' own work on
//! [`Moe::received`] (expert-major rows, each expert's first row a
//! multiple of [`MoeConfig::align`], its row count in
//! [`Moe::layout`]), then [`Moe::combine`]:
//!
//! - **dispatch** lays the routing out on the device (`moe_layout`: every
//!   (token, slot) pair's row, sorted by expert then by pair), packs each
//!   routed row for its rank (`moe_pack`, which also checks every index),
//!   sends the per-expert counts and the rows with the collectives'
//!   all-to-alls (the rows' split sizes read on the device), and puts the
//!   received rows in expert-major order (`moe_rows`, `moe_move`): within
//!   an expert, by source rank, then in the order the source sent them;
//! - **combine** sends each expert row back to the rank it came from, and
//!   sums each token's rows weighted by its `topk_weights` in slot order
//!   in f32, rounding once (`moe_sum`): the result depends on the routing
//!   and the values alone, never on arrival order.
//!
//! A token reaches a rank once per slot routed there (two slots on one
//! rank's experts travel twice). This is the composed form: correct and
//! graph-safe, not yet the one-kernel low-latency form of #36.

mod device;
pub use device::*;

use std::sync::Arc;

use symm::{Comm, DType, DeviceBuffer, DeviceSlice, Result, SymmBuffer, SymmetricMemory};

use crate::collectives::{all_to_all, all_to_all_v, CopyElem};
use crate::shared::agree::{agree, Problem};
use crate::shared::key::CallKey;

/// Most experts an [`Moe`] spreads over its group (one layout thread
/// each).
pub const MAX_EXPERTS: usize = 1024;

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
}

/// Loads every MoE kernel of `T` where ranks share the GPU (elsewhere
/// loading needs no idle device, and this does nothing).
fn preload<T: CopyElem>(comm: &Comm) -> Result<()> {
    moe_layout::co_resident_grid(comm, 1024, 0)?;
    moe_rows::co_resident_grid(comm, 1024, 0)?;
    moe_pack::co_resident_grid::<T>(comm, THREADS, 0)?;
    moe_move::co_resident_grid::<T>(comm, THREADS, 0)?;
    moe_sum::co_resident_grid::<T>(comm, THREADS, 0)?;
    Ok(())
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
            "moe {} of {} (hidden {}, {} experts, top-{}, {} tokens, align {}, capacity {:?})",
            self.call,
            self.dtype,
            c.hidden,
            c.num_experts,
            c.top_k,
            c.max_tokens,
            c.align,
            c.recv_capacity
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
    /// The rows packed for sending (symmetric).
    pub send: usize,
    /// The rows received, in rank order.
    pub received_raw: usize,
    /// The rows received, expert-major ([`Moe::received`]).
    pub received: usize,
    /// The expert rows on their way back (symmetric).
    pub back: usize,
    /// The rows that came back, in send order.
    pub returned: usize,
    /// Counts, layouts and split sizes.
    pub small: usize,
}

impl MoeMemory {
    /// Every buffer together.
    pub fn total(&self) -> usize {
        self.send + self.received_raw + self.received + self.back + self.returned + self.small
    }
}

/// Expert-parallel dispatch and combine for one group, planned up front
/// (see the [module](self)).
pub struct Moe<T: CopyElem> {
    config: MoeConfig,
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
    splits: DeviceBuffer<u64>,
    report: DeviceBuffer<u64>,
    report_back: DeviceBuffer<u64>,
    raw: DeviceBuffer<T>,
    row_dst: DeviceBuffer<u32>,
    layout: DeviceBuffer<u32>,
    received: DeviceBuffer<T>,
    back: SymmBuffer<T>,
    back_s: Arc<SymmetricMemory>,
    returned: DeviceBuffer<T>,
    /// Tokens of the last dispatch (`None` before the first).
    tokens: Option<usize>,
}

impl<T: CopyElem> Moe<T> {
    /// Plans `config` on every rank of `comm`'s group (collective: every
    /// rank, at the same point of its allocations); a config that differs
    /// between ranks, or does not fit, is the same error on every rank.
    pub fn new(comm: &Comm, config: MoeConfig) -> Result<Moe<T>> {
        let world = comm.world_size();
        let c = &config;
        let problem = if c.hidden == 0 || c.top_k == 0 || c.max_tokens == 0 || c.align == 0 {
            Some(Problem::from(
                "moe: hidden, top_k, max_tokens and align must be at least 1",
            ))
        } else if c.num_experts == 0
            || !c.num_experts.is_multiple_of(world)
            || c.num_experts > MAX_EXPERTS
        {
            Some(Problem::from(format!(
                "moe: {} experts do not spread evenly over {world} ranks (a multiple of the world size, at most {MAX_EXPERTS})",
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
        let worst = world * c.max_tokens * c.top_k.min(local);
        let capacity = c.recv_capacity.unwrap_or(worst).max(1);
        let out_rows = capacity + local * (c.align.max(1) - 1);
        let pairs = c.max_tokens * c.top_k;
        let problem = problem.or_else(|| {
            let rows = [pairs, capacity, out_rows];
            let too_big = rows.iter().any(|&r| {
                r.checked_mul(c.hidden)
                    .is_none_or(|e| e > u32::MAX as usize)
            });
            too_big.then(|| {
                Problem::capacity(format!(
                    "moe: {} rows of {} elements pass the 2^32 - 1 elements its kernels index",
                    rows.iter().max().unwrap_or(&0),
                    c.hidden
                ))
            })
        });
        // Every kernel loaded now, before the ranks agree (so before any
        // rank can wait on a peer): where ranks share a GPU, a kernel's
        // first load waits for the device to be idle, which a rank spinning
        // on a peer that is itself loading would keep it from being.
        if problem.is_none() {
            preload::<T>(comm)?;
        }
        let key = Key {
            call: "plan",
            config: config.clone(),
            dtype: T::DTYPE,
        };
        agree(comm, &key, problem)?;
        let send = comm.alloc::<T>(pairs * c.hidden)?;
        let send_s = send.rendezvous()?;
        let counts = comm.alloc::<u32>(world * local)?;
        let counts_s = counts.rendezvous()?;
        let back = comm.alloc::<T>(capacity * c.hidden)?;
        let back_s = back.rendezvous()?;
        Ok(Moe {
            world,
            local,
            capacity,
            out_rows,
            send,
            send_s,
            counts,
            counts_s,
            recv_counts: comm.device_buffer(world * local)?,
            pos: comm.device_buffer(pairs)?,
            splits: comm.device_buffer(world)?,
            report: comm.device_buffer(2 * world)?,
            report_back: comm.device_buffer(2 * world)?,
            raw: comm.device_buffer(capacity * c.hidden)?,
            row_dst: comm.device_buffer(capacity)?,
            layout: comm.device_buffer(2 * local + 2)?,
            received: comm.device_buffer(out_rows * c.hidden)?,
            back,
            back_s,
            returned: comm.device_buffer(pairs * c.hidden)?,
            tokens: None,
            config,
        })
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
        let h = self.config.hidden;
        MoeMemory {
            send: self.send.len() * e,
            received_raw: self.capacity * h * e,
            received: self.out_rows * h * e,
            back: self.capacity * h * e,
            returned: self.returned.len() * e,
            small: 4 * (self.counts.len() + self.recv_counts.len() + self.pos.len())
                + 4 * (self.row_dst.len() + self.layout.len())
                + 8 * (self.splits.len() + self.report.len() + self.report_back.len()),
        }
    }

    /// The last dispatch's rows, expert-major: expert `l` (this rank's
    /// `l`-th) has `layout[l]` rows from row `layout[local + l]`, each
    /// `hidden` elements; rows between experts (alignment) and past the
    /// last hold stale values.
    pub fn received(&self) -> &DeviceBuffer<T> {
        &self.received
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
    /// dispatch different numbers of tokens. An index that is neither `-1`
    /// nor an expert fails the call (a `KernelAssert` naming the token as
    /// its block); a routing that sends a rank more rows than the plan's
    /// capacity fails it on every rank.
    pub fn dispatch(
        &mut self,
        comm: &Comm,
        x: &(impl DeviceSlice<T> + ?Sized),
        topk_idx: &(impl DeviceSlice<i32> + ?Sized),
        tokens: usize,
    ) -> Result<()> {
        let c = &self.config;
        let (hidden, top_k) = (c.hidden, c.top_k);
        let problem = if tokens > c.max_tokens {
            Some(Problem::from(format!(
                "moe dispatch of {tokens} tokens: the plan holds at most {}",
                c.max_tokens
            )))
        } else if x.len() < tokens * hidden {
            Some(Problem::from(format!(
                "moe dispatch: x holds {} elements, {tokens} tokens of {hidden} need {}",
                x.len(),
                tokens * hidden
            )))
        } else if topk_idx.len() < tokens * top_k {
            Some(Problem::from(format!(
                "moe dispatch: topk_idx holds {} indices, {tokens} tokens of top-{top_k} need {}",
                topk_idx.len(),
                tokens * top_k
            )))
        } else {
            None
        };
        self.agree(comm, "dispatch", problem)?;
        let pairs = (tokens * top_k) as u32;
        let threads = (c.num_experts.next_multiple_of(32) as u32).clamp(32, 1024);
        moe_layout::launch(
            comm,
            symm::LaunchConfig::linear(1, threads),
            topk_idx,
            pairs,
            c.num_experts as u32,
            self.local as u32,
            hidden as u32,
            &mut self.pos,
            &mut self.splits,
            &mut self.counts,
        )?;
        if tokens > 0 {
            moe_pack::launch::<T>(
                comm,
                symm::LaunchConfig::linear(tokens as u32, THREADS),
                x,
                topk_idx,
                &self.pos,
                &mut self.send,
                top_k as u32,
                c.num_experts as u32,
                hidden as u32,
            )?;
        }
        all_to_all::<u32>(comm, &self.counts_s, &mut self.recv_counts, self.local)?;
        all_to_all_v::<T>(
            comm,
            &self.send_s,
            &mut self.raw,
            &self.splits,
            &mut self.report,
        )?;
        let lthreads = (self.local.next_multiple_of(32) as u32).clamp(32, 1024);
        moe_rows::launch(
            comm,
            symm::LaunchConfig::linear(1, lthreads),
            &self.recv_counts,
            self.world as u32,
            self.local as u32,
            c.align as u32,
            self.out_rows as u32,
            &mut self.layout,
            &mut self.row_dst,
        )?;
        moe_move::launch::<T>(
            comm,
            self.row_grid(),
            &self.raw,
            &mut self.received,
            &self.row_dst,
            &self.layout,
            self.local as u32,
            hidden as u32,
            true,
        )?;
        self.tokens = Some(tokens);
        Ok(())
    }

    /// Brings the experts' outputs `y` (laid out as [`Moe::received`]:
    /// the same rows, each `hidden` elements) back to the ranks their
    /// tokens came from, and writes each token of the last dispatch, in
    /// `out`, the sum over its slots of `topk_weights` (`top_k` a token,
    /// f32) times its expert's row, in slot order, in f32 rounded once: the
    /// same bits whatever the arrival order. Tokens routed nowhere get
    /// zeros.
    pub fn combine(
        &mut self,
        comm: &Comm,
        y: &(impl DeviceSlice<T> + ?Sized),
        topk_weights: &(impl DeviceSlice<f32> + ?Sized),
        out: &mut (impl DeviceSlice<T> + ?Sized),
    ) -> Result<()> {
        let c = &self.config;
        let (hidden, top_k) = (c.hidden, c.top_k);
        let tokens = self.tokens.unwrap_or(0);
        let problem = if self.tokens.is_none() {
            Some(Problem::from("moe combine before any dispatch"))
        } else if y.len() < self.out_rows * hidden {
            Some(Problem::from(format!(
                "moe combine: y holds {} elements, the received layout {}",
                y.len(),
                self.out_rows * hidden
            )))
        } else if topk_weights.len() < tokens * top_k {
            Some(Problem::from(format!(
                "moe combine: topk_weights holds {} weights, {tokens} tokens of top-{top_k} need {}",
                topk_weights.len(),
                tokens * top_k
            )))
        } else if out.len() < tokens * hidden {
            Some(Problem::from(format!(
                "moe combine: out holds {} elements, {tokens} tokens of {hidden} need {}",
                out.len(),
                tokens * hidden
            )))
        } else {
            None
        };
        self.agree(comm, "combine", problem)?;
        moe_move::launch::<T>(
            comm,
            self.row_grid(),
            y,
            &mut self.back,
            &self.row_dst,
            &self.layout,
            self.local as u32,
            hidden as u32,
            false,
        )?;
        // What came from each rank goes back to it: the dispatch's report
        // (sizes received, then offsets) gives the splits.
        let world = self.world;
        let bound = comm.bind("report", &self.report)?;
        let sizes = bound.sub(0..world).ok_or_else(|| {
            crate::shared::checks::invalid(comm, "moe: the report's sizes".into())
        })?;
        all_to_all_v::<T>(
            comm,
            &self.back_s,
            &mut self.returned,
            &sizes,
            &mut self.report_back,
        )?;
        if tokens > 0 {
            moe_sum::launch::<T>(
                comm,
                symm::LaunchConfig::linear(tokens as u32, THREADS),
                &self.returned,
                &self.pos,
                topk_weights,
                out,
                top_k as u32,
                hidden as u32,
            )?;
        }
        Ok(())
    }

    /// Agrees on a call with every rank (its config and element type), with
    /// this rank's `problem`, if any.
    fn agree(&self, comm: &Comm, call: &'static str, problem: Option<Problem>) -> Result<()> {
        let key = Key {
            call,
            config: self.config.clone(),
            dtype: T::DTYPE,
        };
        agree(comm, &key, problem).map(|_| ())
    }

    /// The grid of the kernels that walk the received rows.
    fn row_grid(&self) -> symm::LaunchConfig {
        symm::LaunchConfig::linear((self.capacity as u32).clamp(1, MAX_ROW_BLOCKS), THREADS)
    }
}
