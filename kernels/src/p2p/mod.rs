//! Point-to-point: [`P2p::send`], [`P2p::recv`] and the batched
//! [`P2p::send_recv`] (PyTorch's `batch_isend_irecv`), on symm's kernels.
//!
//! A [`P2p`] is made collectively ([`P2p::new`]: every rank of the group,
//! at the same point of its allocations), since it allocates the family's
//! stages; after that, sends and receives are between two ranks only. A
//! message takes one of two paths, by its bytes alone (both ends know
//! them):
//!
//! - up to [`LL_MAX_BYTES`], the **low-latency** path: one kernel on each
//!   side; the sender pushes every 4 bytes with the message's epoch as one
//!   8-byte packet straight into the receiver's LL stage, which the
//!   receiver polls. Two regions per sender (by the epoch's parity), so a
//!   send waits only until the pair's message two before was received;
//! - longer, in **chunks** of at most [`P2p::chunk_bytes`]: the sender
//!   copies a chunk into its own stage's region for the receiver and
//!   signals, the receiver copies it out and acknowledges, and the
//!   sender's next chunk to that receiver waits for the acknowledgement.
//!
//! So a send returns without waiting for its receive unless its pair is
//! two low-latency messages or one chunk ahead, and a longer message's
//! chunks take turns with their receive: two ranks that exchange more than
//! that (a message longer than a chunk, or three low-latency messages
//! each way before either receives) by separate calls must send and
//! receive in opposite orders, or use [`P2p::send_recv`], as with NCCL;
//! otherwise their sends wait for each other until the kernel timeout,
//! which names them. A pair's messages are
//! received in the order they were sent. Epochs and acknowledgements live
//! on the device, so the calls may be captured in a CUDA graph and
//! replayed.
//!
//! Every chunk carries a digest of the message (element type, length,
//! chunk, sender and receiver), which the receiver checks: a receive that
//! does not match its send, where both take the same path, fails with a
//! `KernelAssert` of kind [`Mismatch`](symm::ErrorKind::Mismatch) on the
//! receiver; where their lengths put them on different paths (one up to
//! [`LL_MAX_BYTES`], one past it), the receiver waits for what never
//! comes until the kernel timeout, which names the sender.
//!
//! Calls run in order on one stream, as a group's collectives do: the
//! stages are per group, shared by every `P2p` of it (and the group's
//! `symm::functional::Collectives`), so two streams or threads must not
//! run a group's point-to-point calls at once.

mod device;
pub use device::*;

use std::sync::Arc;

use symm::{BoundSlice, Comm, DeviceSlice, Element, Result, SymmetricMemory};

use crate::shared::checks::invalid;
use crate::shared::grid::{fit_blocks, fixed_grid, with_pdl};

/// Bytes of a region's chunk by default: 1 MiB, so that a stage of a
/// world of 8 is 8 MiB per rank.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;

/// Bytes of a region's header: 4 per block, for at most 64 blocks.
const HEADER: usize = 256;

/// Blocks of every point-to-point kernel on a GPU (fewer where ranks share
/// it): the same for every call of a group, since a block's
/// acknowledgements are awaited by the same block of the next send.
const BLOCKS: u32 = 16;

/// Threads per block.
const THREADS: u32 = 256;

/// The largest message that takes the low-latency path: pushed as 8-byte
/// packets (4 data bytes and the message's epoch) straight into the
/// receiver's LL stage, in one kernel on each side, with no signal.
pub const LL_MAX_BYTES: usize = 64 << 10;

/// Blocks of the low-latency kernels: the same for every call of a group
/// (a block's flag is awaited by the same block of a later send).
const LL_BLOCKS: u32 = 8;

/// Packets of an LL region: the blocks' headers, then a word per 4 bytes.
const LL_REGION: usize = LL_BLOCKS as usize + LL_MAX_BYTES / 4;

/// The group's stages, kept in the rank's extensions (memory only, no
/// `Comm`).
struct Stage {
    smem: Arc<SymmetricMemory>,
    /// Bytes of a region's data part (what `with_chunk` was given).
    room: usize,
    /// Blocks of the chunked kernels, fixed when the stage was primed.
    blocks: u32,
    /// Blocks of the low-latency kernels: the per-block epochs and the
    /// regions' layout hold for this grid only.
    ll_blocks: u32,
    /// The LL stage: per sender, two regions (by the epoch's parity) of
    /// [`LL_REGION`] packets, then the epoch counters (per block, a word
    /// per peer, for sends, then for receives), zeroed before any peer
    /// saw it.
    ll: Arc<SymmetricMemory>,
}

/// Point-to-point calls of one group (see the [module docs](self)).
#[derive(Clone)]
pub struct P2p {
    comm: Comm,
    stage: Arc<Stage>,
}

/// One operation of a batch ([`P2p::send_recv`]).
pub enum P2pOp<'a, T: Element> {
    /// Send all of `input` to rank `peer`.
    Send {
        /// What to send.
        input: &'a dyn DeviceSlice<T>,
        /// The receiver.
        peer: usize,
    },
    /// Receive from rank `peer` into all of `out`.
    Recv {
        /// Where the message lands: exactly as long as the message.
        out: &'a mut dyn DeviceSlice<T>,
        /// The sender.
        peer: usize,
    },
}

/// One kernel's worth of a message: low-latency whole, or chunk `k`.
#[derive(Clone, Copy)]
enum Piece {
    Ll,
    Chunk(usize),
}

impl P2p {
    /// The group's point-to-point calls, on `comm`'s stream, with the
    /// default chunk size. Collective (every rank, in the same order as
    /// its allocations) the first time on a group; later ones share the
    /// stages.
    pub fn new(comm: &Comm) -> Result<P2p> {
        P2p::with_chunk(comm, DEFAULT_CHUNK_BYTES)
    }

    /// [`new`](Self::new) with a stage region of `chunk_bytes` per
    /// receiver (a multiple of 16, at least 256), the same on every rank.
    /// A group's first call makes the stage; a later one with another size
    /// is an error.
    pub fn with_chunk(comm: &Comm, chunk_bytes: usize) -> Result<P2p> {
        let least = BLOCKS as usize * 16;
        let world = comm.world_size();
        // Every peer's region of the stage lies at a u32 byte offset, with
        // room to spare (a domain of more than 8 ranks has less per peer).
        let most = u32::MAX as usize / (2 * world).max(16) / 16 * 16;
        if chunk_bytes < least || !chunk_bytes.is_multiple_of(16) || chunk_bytes > most {
            return Err(invalid(
                comm,
                format!(
                    "p2p chunks of {chunk_bytes} bytes: give a multiple of 16 bytes, from \
                     {least} to {most}"
                ),
            ));
        }
        let fit = |blocks| {
            // Every block waits for its peer's, so where ranks share a GPU,
            // one block per multiprocessor each, as the LL collectives take.
            fit_blocks(
                comm,
                "point-to-point",
                blocks,
                std::iter::once(Ok(comm.co_resident_blocks(1))),
            )
        };
        let blocks = fit(fixed_grid(comm, BLOCKS))?;
        let ll_blocks = fit(fixed_grid(comm, LL_BLOCKS))?;
        let stage = comm.extension(
            |_: &Stage| true,
            |_| {
                // Their own allocations (never a pool's): their pads are
                // the family's alone, so channels 0 and 1 need no
                // reserving.
                let buf = comm.alloc_unpooled::<u8>(world * (HEADER + chunk_bytes))?;
                let ll = comm.alloc_unpooled::<u64>(
                    world * 2 * LL_REGION + 2 * LL_BLOCKS as usize * world,
                )?;
                // Zeros before any peer maps it: no packet carries epoch 0,
                // and every counter starts there.
                ll.fill_bytes(0)?;
                let smem = buf.rendezvous()?;
                // SAFETY: the prime kernel touches only the stage's pads
                // (a put per peer on channel 1, block by block).
                unsafe {
                    p2p_prime::launch_unchecked(
                        comm,
                        // A thread per peer (of a domain of up to 72).
                        symm::LaunchConfig::linear(blocks, (world as u32).div_ceil(32) * 32),
                        &smem,
                    )?;
                }
                Ok(Stage {
                    smem,
                    room: chunk_bytes,
                    blocks,
                    ll_blocks,
                    ll: ll.rendezvous()?,
                })
            },
        )?;
        if stage.room != chunk_bytes {
            return Err(invalid(
                comm,
                format!(
                    "the group's p2p stage has regions of {} bytes, and this asks for \
                     {chunk_bytes}: every P2p of a group (and its Collectives, which make one \
                     with {DEFAULT_CHUNK_BYTES}) shares one stage",
                    stage.room
                ),
            ));
        }
        if (stage.blocks, stage.ll_blocks) != (blocks, ll_blocks) {
            return Err(invalid(
                comm,
                format!(
                    "the group's p2p stage was made for grids of {} and {} blocks, and this \
                     handle's comm fits {blocks} and {ll_blocks}: make every P2p of a group \
                     from its ranks on the same devices",
                    stage.blocks, stage.ll_blocks
                ),
            ));
        }
        Ok(P2p {
            comm: comm.clone(),
            stage,
        })
    }

    /// Bytes of a chunk: the most one kernel moves, and the most a send
    /// moves before it waits for its receive. Every block has a slot of
    /// its own in the stage (a multiple of 16 bytes), so a chunk is the
    /// room given to [`with_chunk`](Self::with_chunk) rounded down to
    /// whole slots.
    pub fn chunk_bytes(&self) -> usize {
        self.slot() * self.stage.blocks as usize
    }

    /// Bytes of a block's slot.
    fn slot(&self) -> usize {
        self.stage.room / self.stage.blocks as usize / 16 * 16
    }

    /// The group this serves, on the stream its calls run on.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// Sends all of `input` to rank `dst` (which receives it with
    /// [`recv`](Self::recv) of the same length and element type).
    pub fn send<T: Element>(&self, input: &impl DeviceSlice<T>, dst: usize) -> Result<()> {
        self.send_recv(&mut [P2pOp::Send { input, peer: dst }])
    }

    /// Receives from rank `src` into all of `out`.
    pub fn recv<T: Element>(&self, out: &mut impl DeviceSlice<T>, src: usize) -> Result<()> {
        self.send_recv(&mut [P2pOp::Recv { out, peer: src }])
    }

    /// Checks every operation of `ops` (its peer, its length) before any
    /// is enqueued.
    pub(crate) fn check_ops<T: Element>(&self, ops: &[(usize, bool, usize)]) -> Result<()> {
        check_ops::<T>(&self.comm, ops)
    }

    /// Every operation of `ops`, by rounds: per peer, the pieces of the
    /// messages to it (each low-latency message one piece, each longer one
    /// a piece per chunk, in the order of `ops`) form one queue, and so do
    /// those from it; round `r` enqueues the `r`-th piece of every send
    /// queue, then of every receive queue. A piece's send waits only for
    /// its pair's piece one or two before, whose receive its peer enqueued
    /// in an earlier round, so two ranks whose batches hold each other's
    /// messages, any number and length of them, never wait for each
    /// other's sends.
    pub fn send_recv<T: Element>(&self, ops: &mut [P2pOp<'_, T>]) -> Result<()> {
        let plan: Vec<(usize, bool, usize)> = ops
            .iter()
            .map(|op| match op {
                P2pOp::Send { input, peer } => (*peer, true, input.len()),
                P2pOp::Recv { out, peer } => (*peer, false, out.len()),
            })
            .collect();
        self.check_ops::<T>(&plan)?;
        let world = self.comm.world_size();
        let size = std::mem::size_of::<T>();
        let chunk = self.chunk_bytes();
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        for op in ops.iter_mut() {
            match op {
                P2pOp::Send { input, peer } => {
                    sends.push((*peer, self.comm.bind("input", *input)?))
                }
                P2pOp::Recv { out, peer } => recvs.push((*peer, self.comm.bind_mut("out", *out)?)),
            }
        }
        // Per peer, its queue of (operation, piece).
        let pieces = |total: usize| -> Vec<Piece> {
            if total <= LL_MAX_BYTES {
                vec![Piece::Ll]
            } else {
                (0..total.div_ceil(chunk)).map(Piece::Chunk).collect()
            }
        };
        let queues = |list: &[(usize, BoundSlice<'_, T>)]| {
            let mut q: Vec<Vec<(usize, Piece)>> = vec![Vec::new(); world];
            for (i, (peer, b)) in list.iter().enumerate() {
                q[*peer].extend(pieces(b.len() * size).into_iter().map(|p| (i, p)));
            }
            q
        };
        let (sq, rq) = (queues(&sends), queues(&recvs));
        let rounds = sq.iter().chain(&rq).map(Vec::len).max().unwrap_or(0);
        for r in 0..rounds {
            for q in &sq {
                if let Some(&(i, piece)) = q.get(r) {
                    let (peer, b) = &sends[i];
                    self.send_piece(b, *peer, piece)?;
                }
            }
            for q in &rq {
                if let Some(&(i, piece)) = q.get(r) {
                    let (peer, b) = &mut recvs[i];
                    self.recv_piece(b, *peer, piece)?;
                }
            }
        }
        Ok(())
    }

    /// The digest of chunk `k` of a `total`-byte message of `T` from `src`
    /// to `dst`, as both sides compute it.
    fn sig<T: Element>(&self, src: usize, dst: usize, k: usize, total: usize) -> u32 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let name = T::DTYPE.to_string();
        let words = [total as u64, k as u64, src as u64, dst as u64];
        for w in name.bytes().map(u64::from).chain(words) {
            h ^= w;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        (h ^ (h >> 32)) as u32
    }

    /// The byte range of chunk `k` of a `total`-byte message.
    fn span(&self, k: usize, total: usize) -> std::ops::Range<usize> {
        let chunk = self.chunk_bytes();
        let lo = (k * chunk).min(total);
        lo..(lo + chunk).min(total)
    }

    fn cfg(&self) -> symm::LaunchConfig {
        with_pdl(
            &self.comm,
            symm::LaunchConfig::linear(self.stage.blocks, THREADS),
        )
    }

    fn ll_cfg(&self) -> symm::LaunchConfig {
        with_pdl(
            &self.comm,
            symm::LaunchConfig::linear(self.stage.ll_blocks, THREADS),
        )
    }

    /// Where the LL counters start, and where a peer's counters of sends
    /// (`send`) or receives start, in packets of the LL stage.
    fn ll_counters(&self, send: bool) -> usize {
        let world = self.comm.world_size();
        world * 2 * LL_REGION + if send { 0 } else { LL_BLOCKS as usize * world }
    }

    fn send_piece<T: Element>(
        &self,
        b: &BoundSlice<'_, T>,
        dst: usize,
        piece: Piece,
    ) -> Result<()> {
        let total = b.len() * std::mem::size_of::<T>();
        let me = self.comm.rank();
        match piece {
            Piece::Ll => {
                // SAFETY: `b` is bound for this rank, and the kernel reads
                // its `total` bytes only; it writes rank `dst`'s LL stage
                // in this rank's two regions (`me × 2 × LL_REGION`, each
                // LL_REGION packets: at most LL_BLOCKS headers and
                // LL_MAX_BYTES / 4 words, and `total <= LL_MAX_BYTES`) and
                // its own counter of block b for `dst` (b < ll_blocks <=
                // LL_BLOCKS), all inside the stage, whose size every rank
                // shares.
                unsafe {
                    p2p_send_ll::launch_unchecked(
                        &self.comm,
                        self.ll_cfg(),
                        &self.stage.ll,
                        &b.bytes(),
                        dst as u32,
                        (me * 2 * LL_REGION) as u32,
                        LL_REGION as u32,
                        self.ll_counters(true) as u32,
                        total as u32,
                        self.sig::<T>(me, dst, 0, total),
                    )
                }
            }
            Piece::Chunk(k) => {
                let span = self.span(k, total);
                // Element boundaries do not matter to a byte copy: the
                // chunk is bytes `span` of the message.
                let bytes = b.bytes();
                let part = bytes
                    .sub(span.clone())
                    .ok_or_else(|| invalid(&self.comm, "a chunk outside its message".into()))?;
                let at = dst * (HEADER + self.stage.room);
                debug_assert!(at.is_multiple_of(16) && self.slot().is_multiple_of(16));
                // SAFETY: `part` is bound for this rank (checked by
                // `bind`), and the kernel reads its `span.len()` bytes
                // only; it writes this rank's stage at region `dst` (`at`,
                // 16-byte aligned: `room` is a multiple of 16), whose
                // header holds 64 blocks' words and whose data `blocks`
                // slots of `slot` bytes (a multiple of 16), each block at
                // most one slot (`span.len() <= chunk_bytes`, so a block's
                // range, the span over the blocks rounded up to 16, is at
                // most a slot). `tests/p2p.rs` runs every path and
                // alignment on the emulator, which checks every index.
                unsafe {
                    p2p_send::launch_unchecked(
                        &self.comm,
                        self.cfg(),
                        &self.stage.smem,
                        &part,
                        dst as u32,
                        at as u32,
                        self.slot() as u32,
                        span.len() as u32,
                        u32::from(part.device_ptr().is_multiple_of(16)),
                        self.sig::<T>(me, dst, k, total),
                    )
                }
            }
        }
    }

    fn recv_piece<T: Element>(
        &self,
        b: &mut BoundSlice<'_, T>,
        src: usize,
        piece: Piece,
    ) -> Result<()> {
        let total = b.len() * std::mem::size_of::<T>();
        let me = self.comm.rank();
        match piece {
            Piece::Ll => {
                // SAFETY: `b` is bound for this rank and writable, and the
                // kernel writes its `total` bytes only; it reads this
                // rank's LL stage in `src`'s regions and its own counter
                // for `src`, in bounds as for the send.
                unsafe {
                    p2p_recv_ll::launch_unchecked(
                        &self.comm,
                        self.ll_cfg(),
                        &self.stage.ll,
                        &mut b.bytes_mut(),
                        src as u32,
                        (src * 2 * LL_REGION) as u32,
                        LL_REGION as u32,
                        self.ll_counters(false) as u32,
                        total as u32,
                        self.sig::<T>(src, me, 0, total),
                    )
                }
            }
            Piece::Chunk(k) => {
                let span = self.span(k, total);
                let mut bytes = b.bytes_mut();
                let mut part = bytes
                    .sub_mut(span.clone())
                    .ok_or_else(|| invalid(&self.comm, "a chunk outside its message".into()))?;
                let at = me * (HEADER + self.stage.room);
                let vec = u32::from(part.device_ptr().is_multiple_of(16));
                // SAFETY: `part` is bound for this rank and writable, and
                // the kernel writes its `span.len()` bytes only; it reads
                // rank `src`'s stage at its region for this rank (`at`),
                // in bounds and aligned as for the send (every rank's
                // stage has the same size).
                unsafe {
                    p2p_recv::launch_unchecked(
                        &self.comm,
                        self.cfg(),
                        &self.stage.smem,
                        &mut part,
                        src as u32,
                        at as u32,
                        self.slot() as u32,
                        span.len() as u32,
                        vec,
                        self.sig::<T>(src, me, k, total),
                    )
                }
            }
        }
    }
}

/// The problem with a batch of point-to-point operations on `comm`
/// (`(peer, send, elements)` each) that no stage is needed to find: a
/// peer out of range or this rank, a message past 4 GiB - 1.
pub(crate) fn check_ops<T: Element>(comm: &Comm, ops: &[(usize, bool, usize)]) -> Result<()> {
    let world = comm.world_size();
    let me = comm.rank();
    for &(peer, send, len) in ops {
        let what = if send { "destination" } else { "source" };
        if peer >= world || peer == me {
            return Err(invalid(
                comm,
                format!(
                    "p2p {what} rank {peer}: give another rank of the group's {world} \
                     (this one is {me})"
                ),
            ));
        }
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        if bytes > u32::MAX as usize {
            return Err(invalid(
                comm,
                format!("a p2p message of {bytes} bytes is longer than 4 GiB - 1"),
            ));
        }
    }
    Ok(())
}
