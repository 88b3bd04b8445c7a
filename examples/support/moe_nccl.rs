//! MoE dispatch and combine with NCCL moving the rows, the baseline of
//! `bench_moe` and `moe_layer`: symm's own layout, pack, expert-major and
//! sum kernels (public), the counts and rows by grouped
//! `ncclSend`/`ncclRecv`, whose sizes the host must know, so each dispatch
//! reads its split sizes back (a host synchronisation: no CUDA graph).
//! What an NCCL-based MoE layer without device-side sizes does.

use symm::cudarc::nccl::{result as nccl, sys as nccl_sys};
use symm::kernels::moe::{
    copy_first, layout, layout_scratch, moe_pack, moe_rows, move_rows, rows_grid, sum_rows,
    MoeConfig,
};
use symm::{bf16, Comm, DeviceBuffer, LaunchConfig, Result};

use super::bench::{other, Nccl};

/// A row exchange's parts, one a peer: (send offset, count, receive
/// offset, count), in elements.
pub(crate) type Parts = Vec<(usize, usize, usize, usize)>;

/// The plan of an NCCL-moved MoE step in bf16: its buffers, sized for
/// `cfg.max_tokens` tokens, as `Moe`'s.
pub(crate) struct NcclMoe {
    nc: Nccl,
    cfg: MoeConfig,
    local: usize,
    pos: DeviceBuffer<u32>,
    /// The last dispatch's indices, for the sum (by rank, then slot).
    idx: DeviceBuffer<i32>,
    scratch: DeviceBuffer<u32>,
    pub(crate) splits: DeviceBuffer<u64>,
    scale_splits: DeviceBuffer<u64>,
    counts: DeviceBuffer<u32>,
    recv_counts: DeviceBuffer<u32>,
    pub(crate) send: DeviceBuffer<bf16>,
    pub(crate) raw: DeviceBuffer<bf16>,
    /// The expert-major layout, as `Moe::layout`'s.
    pub(crate) layout: DeviceBuffer<u32>,
    row_dst: DeviceBuffer<u32>,
    /// The received rows, expert-major, as `Moe::received`'s.
    pub(crate) received: DeviceBuffer<bf16>,
    out_rows: usize,
    /// The last dispatch's exchange, and its tokens.
    parts: Parts,
    tokens: usize,
}

impl NcclMoe {
    pub(crate) fn new(c: &Comm, cfg: MoeConfig) -> Result<NcclMoe> {
        let world = c.world_size();
        let local = cfg.num_experts / world;
        let pairs = cfg.max_tokens * cfg.top_k;
        let capacity = world * cfg.max_tokens * cfg.top_k.min(local);
        let out_rows = capacity + local * (cfg.align - 1);
        let h = cfg.hidden;
        Ok(NcclMoe {
            nc: Nccl::new(c)?,
            local,
            pos: c.device_buffer(pairs)?,
            idx: c.device_buffer(pairs)?,
            scratch: c.device_buffer(layout_scratch(cfg.num_experts))?,
            splits: c.device_buffer(world)?,
            scale_splits: c.device_buffer(world)?,
            counts: c.device_buffer(world * local)?,
            recv_counts: c.device_buffer(world * local)?,
            send: c.device_buffer(pairs * h)?,
            raw: c.device_buffer(capacity * h)?,
            layout: c.device_buffer(2 * local + 2)?,
            row_dst: c.device_buffer(capacity)?,
            received: c.device_buffer(out_rows * h)?,
            out_rows,
            parts: Vec::new(),
            tokens: 0,
            cfg,
        })
    }

    /// Rows of the expert-major layout (the experts' output holds as many).
    pub(crate) fn received_rows(&self) -> usize {
        self.out_rows
    }

    /// Grouped sends and receives of `parts`, in elements of `size` bytes.
    pub(crate) fn exchange(
        &self,
        c: &Comm,
        (src, dst): (u64, u64),
        parts: &[(usize, usize, usize, usize)],
        size: usize,
        dtype: nccl_sys::ncclDataType_t,
    ) -> Result<()> {
        let stream = Nccl::stream(c)?;
        let ok = |what: &str, r: std::result::Result<nccl::NcclStatus, nccl::NcclError>| {
            r.map(|_| ())
                .map_err(|e| other(c, format!("{what}: {e:?}")))
        };
        ok("ncclGroupStart", nccl::group_start())?;
        let mut first = Ok(());
        for (p, &(so, sn, ro, rn)) in parts.iter().enumerate() {
            // SAFETY: `src` and `dst` are this rank's device buffers, alive
            // until the step synchronises, and each span lies inside them
            // (`sizes` checks the rows' totals against the buffers; the
            // counts' spans are the counts buffers' own).
            let sent = unsafe {
                nccl::send(
                    (src + (so * size) as u64) as _,
                    sn,
                    dtype,
                    p as i32,
                    self.nc.comm,
                    stream,
                )
            };
            // SAFETY: as for the send.
            let got = unsafe {
                nccl::recv(
                    (dst + (ro * size) as u64) as _,
                    rn,
                    dtype,
                    p as i32,
                    self.nc.comm,
                    stream,
                )
            };
            first = first
                .and_then(|()| ok("ncclSend", sent))
                .and_then(|()| ok("ncclRecv", got));
        }
        // The group ends whatever failed in it.
        first.and(ok("ncclGroupEnd", nccl::group_end()))
    }

    /// The rows by `parts`, from `send` to `raw`, or (`back`) from `raw`
    /// to `send`.
    pub(crate) fn exchange_rows(
        &self,
        c: &Comm,
        parts: &[(usize, usize, usize, usize)],
        back: bool,
    ) -> Result<()> {
        let (send, raw) = (self.send.device_ptr(), self.raw.device_ptr());
        let ends = if back { (raw, send) } else { (send, raw) };
        self.exchange(c, ends, parts, 2, nccl_sys::ncclDataType_t::ncclBfloat16)
    }

    /// The routing's layout (symm's kernels).
    pub(crate) fn layout(
        &mut self,
        c: &Comm,
        idx: &DeviceBuffer<i32>,
        tokens: usize,
    ) -> Result<()> {
        let (local, h, k) = (self.local, self.cfg.hidden, self.cfg.top_k);
        if tokens > 0 {
            copy_first(c, idx, &mut self.idx, tokens * k)?;
        }
        layout(
            c,
            idx,
            tokens * k,
            (self.cfg.num_experts, local, h, 0),
            false,
            false,
            &mut self.scratch,
            &mut self.pos,
            (&mut self.splits, &mut self.scale_splits, &mut self.counts),
        )
        .map(|_| ())
    }

    /// The tokens' rows packed by destination (symm's kernel).
    pub(crate) fn pack(
        &mut self,
        c: &Comm,
        x: &DeviceBuffer<bf16>,
        idx: &DeviceBuffer<i32>,
        tokens: usize,
    ) -> Result<()> {
        if tokens == 0 {
            return Ok(());
        }
        let (h, k) = (self.cfg.hidden, self.cfg.top_k);
        let x = c.bind("x", x)?;
        let mut send = c.bind_mut("send", &mut self.send)?;
        let (x, mut send) = (x.bytes(), send.bytes_mut());
        moe_pack::launch(
            c,
            LaunchConfig {
                grid: (tokens as u32, k as u32, 1),
                ..LaunchConfig::linear(1, 256)
            },
            &x,
            idx,
            &self.pos,
            &mut send,
            k as u32,
            self.cfg.num_experts as u32,
            (2 * h) as u32,
            (2 * h) % 16 == 0,
        )
    }

    /// The counts by NCCL, then the row exchange's parts read back on the
    /// host.
    pub(crate) fn sizes(&mut self, c: &Comm) -> Result<Parts> {
        let (world, local, h) = (c.world_size(), self.local, self.cfg.hidden);
        let counts: Parts = (0..world)
            .map(|p| (p * local, local, p * local, local))
            .collect();
        self.exchange(
            c,
            (self.counts.device_ptr(), self.recv_counts.device_ptr()),
            &counts,
            4,
            nccl_sys::ncclDataType_t::ncclUint32,
        )?;
        let sends = self.splits.read(0, world)?;
        let got = self.recv_counts.read(0, world * local)?;
        let recvs: Vec<usize> = (0..world)
            .map(|p| {
                got[p * local..(p + 1) * local]
                    .iter()
                    .map(|&n| n as usize)
                    .sum::<usize>()
                    * h
            })
            .collect();
        let mut parts = Vec::with_capacity(world);
        let (mut so, mut ro) = (0, 0);
        for p in 0..world {
            parts.push((so, sends[p] as usize, ro, recvs[p]));
            so += sends[p] as usize;
            ro += recvs[p];
        }
        // What NCCL is told to move stays inside the buffers (a bad index
        // poisons the splits; a routing past the plan overflows `raw`).
        if so > self.send.len() || ro > self.raw.len() {
            return Err(other(
                c,
                format!(
                    "moe (NCCL): sends {so} and receives {ro} elements; the buffers hold {} and {}",
                    self.send.len(),
                    self.raw.len()
                ),
            ));
        }
        Ok(parts)
    }

    /// The received rows' expert-major layout (symm's kernel).
    pub(crate) fn rows(&mut self, c: &Comm) -> Result<()> {
        let (world, local) = (c.world_size(), self.local);
        moe_rows::launch(
            c,
            rows_grid(self.cfg.num_experts, self.row_dst.len()),
            &self.recv_counts,
            world as u32,
            local as u32,
            self.cfg.align as u32,
            self.out_rows as u32,
            &mut self.layout,
            &mut self.row_dst,
        )
    }

    /// The received rows to the expert-major layout.
    pub(crate) fn move_there(&mut self, c: &Comm) -> Result<()> {
        let map = (&self.row_dst, &self.layout, self.local);
        move_rows(c, &self.raw, &mut self.received, map, self.cfg.hidden, true)
    }

    /// The experts' rows `y` (expert-major) back to the received order.
    pub(crate) fn move_back(&mut self, c: &Comm, y: &DeviceBuffer<bf16>) -> Result<()> {
        let map = (&self.row_dst, &self.layout, self.local);
        move_rows(c, y, &mut self.raw, map, self.cfg.hidden, false)
    }

    /// The combined rows (symm's kernel).
    pub(crate) fn sum(
        &mut self,
        c: &Comm,
        w: &DeviceBuffer<f32>,
        out: &mut DeviceBuffer<bf16>,
        tokens: usize,
    ) -> Result<()> {
        if tokens == 0 {
            return Ok(());
        }
        sum_rows(
            c,
            tokens,
            &self.send,
            &self.pos,
            &self.idx,
            w,
            out,
            (self.cfg.top_k, self.cfg.hidden, self.local),
        )
    }

    /// Dispatch: `tokens` rows of `x` to their experts' ranks, landing
    /// expert-major in `received` (`layout`).
    pub(crate) fn dispatch(
        &mut self,
        c: &Comm,
        x: &DeviceBuffer<bf16>,
        idx: &DeviceBuffer<i32>,
        tokens: usize,
    ) -> Result<()> {
        self.layout(c, idx, tokens)?;
        self.pack(c, x, idx, tokens)?;
        let parts = self.sizes(c)?;
        self.exchange_rows(c, &parts, false)?;
        self.rows(c)?;
        self.move_there(c)?;
        self.parts = parts;
        self.tokens = tokens;
        Ok(())
    }

    /// Combine: the experts' rows `y` back to their tokens' ranks, each
    /// token the weighted sum of its slots' rows in `out`.
    pub(crate) fn combine(
        &mut self,
        c: &Comm,
        y: &DeviceBuffer<bf16>,
        w: &DeviceBuffer<f32>,
        out: &mut DeviceBuffer<bf16>,
    ) -> Result<()> {
        self.move_back(c, y)?;
        // Each rank's rows back to it, into the send layout.
        let back: Parts = self
            .parts
            .iter()
            .map(|&(so, sn, ro, rn)| (ro, rn, so, sn))
            .collect();
        self.exchange_rows(c, &back, true)?;
        self.sum(c, w, out, self.tokens)
    }
}
