//! Point-to-point: [`P2p::send`], [`P2p::recv`] and the batched
//! [`P2p::send_recv`] (PyTorch's `batch_isend_irecv`), on symm's kernels.
//!
//! A [`P2p`] is made collectively ([`P2p::new`]: every rank of the group,
//! at the same point of its allocations), since it allocates the family's
//! stage: `world` regions per rank of [`P2p::chunk_bytes`] bytes each,
//! one per receiver. After that, sends and receives are between two ranks
//! only. A message moves through the sender's region for its receiver in
//! chunks of at most `chunk_bytes`: the sender copies a chunk in and
//! signals, the receiver copies it out and acknowledges, and the sender's
//! next chunk to that receiver waits for the acknowledgement. So a send of
//! one chunk returns without waiting for its receive (the next one to the
//! same rank waits for it), and a longer message's chunks take turns with
//! their receive: two ranks that exchange messages longer than a chunk
//! must use [`P2p::send_recv`] (or send and receive in opposite orders),
//! as with NCCL, or their sends wait for each other until the kernel
//! timeout, which names them.
//!
//! Every chunk carries a digest of the message (element type, length,
//! chunk, sender and receiver), which the receiver checks: a receive that
//! does not match its send fails with a `KernelAssert` of kind
//! [`Mismatch`](symm::ErrorKind::Mismatch) on the receiver.
//!
//! Calls run in order on the handle's stream, as a group's collectives
//! do; the stage is per group, shared by every `P2p` of it.

mod device;
pub use device::*;

use std::sync::{Arc, Mutex};

use symm::{BoundSlice, Comm, DeviceSlice, Element, Result, SymmetricMemory};

use crate::shared::checks::invalid;
use crate::shared::grid::{fit_blocks, fixed_grid};

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

/// The group's stage and what its ranks owe each other, kept in the
/// rank's extensions (memory only, no `Comm`).
struct Stage {
    smem: Arc<SymmetricMemory>,
    /// Bytes of a region's data part (what `with_chunk` was given).
    room: usize,
    /// Per receiver: whether a chunk sent to it may still be unacknowledged
    /// (every send after the first to a rank waits for the last one's).
    owed: Mutex<Vec<bool>>,
}

/// Point-to-point calls of one group (see the [module docs](self)).
#[derive(Clone)]
pub struct P2p {
    comm: Comm,
    stage: Arc<Stage>,
    blocks: u32,
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

impl P2p {
    /// The group's point-to-point calls, on `comm`'s stream, with the
    /// default chunk size. Collective (every rank, in the same order as
    /// its allocations) the first time on a group; later ones share the
    /// stage.
    pub fn new(comm: &Comm) -> Result<P2p> {
        P2p::with_chunk(comm, DEFAULT_CHUNK_BYTES)
    }

    /// [`new`](Self::new) with chunks of `chunk_bytes` (a multiple of 16,
    /// at least 16), the same on every rank; a group's first call decides
    /// it.
    pub fn with_chunk(comm: &Comm, chunk_bytes: usize) -> Result<P2p> {
        let most = BLOCKS as usize * 16;
        if chunk_bytes < most || chunk_bytes > u32::MAX as usize / 16 {
            return Err(invalid(
                comm,
                format!("p2p chunks of {chunk_bytes} bytes: give at least {most}"),
            ));
        }
        let world = comm.world_size();
        let stage = comm.extension(
            |_: &Stage| true,
            |_| {
                // Its own allocation (never a pool's): its pad is the
                // family's alone, so channels 0 and 1 need no reserving.
                let buf = comm.alloc_unpooled::<u8>(world * (HEADER + chunk_bytes))?;
                Ok(Stage {
                    smem: buf.rendezvous()?,
                    room: chunk_bytes,
                    owed: Mutex::new(vec![false; world]),
                })
            },
        )?;
        // Every block waits for its peer's, so where ranks share a GPU,
        // one block per multiprocessor each, as the LL kernels take.
        let blocks = fit_blocks(
            comm,
            "point-to-point",
            fixed_grid(comm, BLOCKS),
            std::iter::once(Ok(comm.co_resident_blocks(1))),
        )?;
        Ok(P2p {
            comm: comm.clone(),
            stage,
            blocks,
        })
    }

    /// Bytes of a chunk: the most one kernel moves, and the most a send
    /// moves before it waits for its receive. Every block has a slot of
    /// its own in the stage (a multiple of 16 bytes), so a chunk is the
    /// room given to [`with_chunk`](Self::with_chunk) rounded down to
    /// whole slots.
    pub fn chunk_bytes(&self) -> usize {
        self.slot() * self.blocks as usize
    }

    /// Bytes of a block's slot.
    fn slot(&self) -> usize {
        self.stage.room / self.blocks as usize / 16 * 16
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

    /// Every operation of `ops`, chunk by chunk: the first chunk of every
    /// send, then of every receive, then the second chunks, and so on, so
    /// that two ranks that exchange long messages never wait for each
    /// other's sends (each chunk's send waits only for its previous chunk's
    /// receive, enqueued a round earlier on its peer).
    pub fn send_recv<T: Element>(&self, ops: &mut [P2pOp<'_, T>]) -> Result<()> {
        let world = self.comm.world_size();
        let me = self.comm.rank();
        let size = std::mem::size_of::<T>();
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        for op in ops.iter_mut() {
            let (peer, what) = match op {
                P2pOp::Send { peer, .. } => (*peer, "destination"),
                P2pOp::Recv { peer, .. } => (*peer, "source"),
            };
            if peer >= world || peer == me {
                return Err(invalid(
                    &self.comm,
                    format!(
                        "p2p {what} rank {peer}: give another rank of the group's {world} (this one is {me})"
                    ),
                ));
            }
            match op {
                P2pOp::Send { input, peer } => {
                    let b = self.comm.bind("input", *input)?;
                    sends.push((*peer, b));
                }
                P2pOp::Recv { out, peer } => {
                    let b = self.comm.bind_mut("out", *out)?;
                    recvs.push((*peer, b));
                }
            }
        }
        let chunk = self.chunk_bytes();
        let bytes = |b: &BoundSlice<'_, T>| b.len() * size;
        for (_, b) in sends.iter().chain(&recvs) {
            if bytes(b) > u32::MAX as usize {
                return Err(invalid(
                    &self.comm,
                    format!(
                        "a p2p message of {} bytes is longer than 4 GiB - 1",
                        bytes(b)
                    ),
                ));
            }
        }
        let rounds = sends
            .iter()
            .chain(&recvs)
            .map(|(_, b)| bytes(b).div_ceil(chunk).max(1))
            .max()
            .unwrap_or(0);
        for k in 0..rounds {
            for (peer, b) in &sends {
                let total = bytes(b);
                if k * chunk < total || (k == 0 && total == 0) {
                    self.send_chunk::<T>(b, *peer, k, total)?;
                }
            }
            for (peer, b) in &mut recvs {
                let total = bytes(b);
                if k * chunk < total || (k == 0 && total == 0) {
                    self.recv_chunk::<T>(b, *peer, k, total)?;
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
        symm::LaunchConfig::linear(self.blocks, THREADS)
    }

    fn send_chunk<T: Element>(
        &self,
        b: &BoundSlice<'_, T>,
        dst: usize,
        k: usize,
        total: usize,
    ) -> Result<()> {
        let span = self.span(k, total);
        // Element boundaries do not matter to a byte copy: the chunk is
        // bytes `span` of the message.
        let bytes = b.bytes();
        let part = bytes
            .sub(span.clone())
            .ok_or_else(|| invalid(&self.comm, "a chunk outside its message".into()))?;
        let wait = {
            let mut owed = self.stage.owed.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut owed[dst], true)
        };
        let me = self.comm.rank();
        let at = dst * (HEADER + self.stage.room);
        // SAFETY: `part` is bound for this rank (checked by `bind`), and
        // the kernel reads its `span.len()` bytes only; it writes this
        // rank's stage at region `dst` (`at`), whose header holds 64
        // blocks' words and whose data `blocks` slots, each block at most
        // one slot (`span.len() <= chunk_bytes`, so a block's range, the
        // span over the blocks rounded up to 16, is at most a slot).
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
                u32::from(wait),
                self.sig::<T>(me, dst, k, total),
            )
        }
    }

    fn recv_chunk<T: Element>(
        &self,
        b: &mut BoundSlice<'_, T>,
        src: usize,
        k: usize,
        total: usize,
    ) -> Result<()> {
        let span = self.span(k, total);
        let mut bytes = b.bytes_mut();
        let mut part = bytes
            .sub_mut(span.clone())
            .ok_or_else(|| invalid(&self.comm, "a chunk outside its message".into()))?;
        let me = self.comm.rank();
        let at = me * (HEADER + self.stage.room);
        let vec = u32::from(part.device_ptr().is_multiple_of(16));
        // SAFETY: `part` is bound for this rank and writable, and the
        // kernel writes its `span.len()` bytes only; it reads rank `src`'s
        // stage at its region for this rank (`at`), in bounds as for the
        // send (every rank's stage has the same size).
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
