//! Point-to-point calls: [`Collectives::send`], [`Collectives::recv`] and
//! the batched [`Collectives::send_recv`], each operation on symm's
//! kernels ([`crate::p2p`]) up to the rule's threshold and on NCCL above
//! it where NCCL runs (decided by the message's bytes alone, so both ends
//! of a pair choose alike).

use super::*;
use crate::p2p::P2pOp as KernelOp;

/// One operation of [`Collectives::send_recv`].
pub enum P2pOp<'a, T: Element> {
    /// Send all of `input` (wherever it lies, a `Pending` included) to
    /// rank `peer`.
    Send {
        /// What to send.
        input: &'a dyn Operand<T>,
        /// The receiver.
        peer: usize,
    },
    /// Receive from rank `peer` into all of `out` (exactly as long as the
    /// message).
    Recv {
        /// Where the message lands.
        out: &'a mut dyn DeviceSlice<T>,
        /// The sender.
        peer: usize,
    },
}

impl Collectives {
    /// Sends all of `input` to rank `dst`, which receives it with
    /// [`recv`](Self::recv) of the same length and element type. A message
    /// of one chunk ([`crate::p2p::P2p::chunk_bytes`]) does not wait for
    /// its receive; see [`crate::p2p`] for longer ones and
    /// [`send_recv`](Self::send_recv) for exchanges.
    pub fn send<'c, T: CopyElem>(
        &'c self,
        input: &'c (impl Operand<T> + Sized),
        dst: usize,
    ) -> Result<Pending<'c, ()>> {
        self.p2p_ops(&mut [P2pOp::Send { input, peer: dst }])?;
        self.pending((), "send")
    }

    /// Receives from rank `src` into all of `out` (owned or `&mut`, given
    /// back by the wait).
    pub fn recv<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        mut out: O,
        src: usize,
    ) -> Result<Pending<'c, O>> {
        self.p2p_ops(&mut [P2pOp::Recv {
            out: out.__memory_mut(),
            peer: src,
        }])?;
        self.pending(out, "recv")
    }

    /// Every operation of `ops` as one batch (PyTorch's
    /// `batch_isend_irecv`): NCCL's in one NCCL group first, then symm's
    /// by rounds (see [`crate::p2p::P2p::send_recv`]), so two ranks that
    /// exchange messages of any number and length through one batch each
    /// never wait for each other. The handle borrows the operations.
    ///
    /// symm's messages carry a digest that the receiver checks (a
    /// mismatch fails it as [`symm::ErrorKind::Mismatch`]); NCCL's do not:
    /// a receive of another length than its send, on NCCL's route (or on
    /// another route than its send's, when the lengths straddle the
    /// threshold), ends at the group's timeout (the NCCL watchdog's, or a
    /// kernel's), not as a mismatch.
    pub fn send_recv<'c, T: CopyElem>(
        &'c self,
        ops: &'c mut [P2pOp<'_, T>],
    ) -> Result<Pending<'c, ()>> {
        self.p2p_ops(ops)?;
        self.pending((), "send_recv")
    }

    /// The address of scratch `k` of the NCCL sends and receives, grown
    /// to at least `bytes` (on a first call of a size: not capturable).
    pub(super) fn p2p_room(&self, scratch: &mut P2pScratch, k: usize, bytes: usize) -> Result<u64> {
        while scratch.rooms.len() <= k {
            scratch.rooms.push(self.cs.device_buffer::<u8>(16)?);
        }
        if scratch.rooms[k].len() < bytes {
            let bigger = self.cs.device_buffer::<u8>(bytes.next_power_of_two())?;
            let old = std::mem::replace(&mut scratch.rooms[k], bigger);
            scratch.older.push(old);
        }
        Ok(scratch.rooms[k].device_ptr())
    }

    fn p2p_ops<T: CopyElem>(&self, ops: &mut [P2pOp<'_, T>]) -> Result<()> {
        let size = std::mem::size_of::<T>();
        // Every operation checked and routed (by its bytes alone) before
        // any work is enqueued.
        let plan: Vec<(usize, bool, usize)> = ops
            .iter()
            .map(|op| match op {
                P2pOp::Send { input, peer } => (*peer, true, input.__memory().len()),
                P2pOp::Recv { out, peer } => (*peer, false, out.len()),
            })
            .collect();
        crate::p2p::check_ops::<T>(&self.cs, &plan)?;
        let routes = plan
            .iter()
            .map(|&(_, _, len)| {
                self.route(&CallFacts {
                    collective: Collective::SendRecv,
                    dtype: T::DTYPE,
                    op: None,
                    bytes: len * size,
                    bytes_per_peer: len * size,
                    nccl_shape: None,
                    placed: Placed::Plain,
                })
            })
            .collect::<Result<Vec<Route>>>()?;
        self.enter()?;
        if let Some(s) = &self.stream {
            for op in ops.iter() {
                if let P2pOp::Send { input, .. } = op {
                    input.__order(s)?;
                }
            }
        }
        // NCCL's first: every rank's NCCL group comes before its symm
        // kernels of the batch, so no NCCL group waits behind a kernel
        // that waits for it.
        let nccl = if routes.contains(&Route::Nccl) {
            Some(self.nccl()?)
        } else {
            None
        };
        // Pool memory registered with NCCL goes through plain scratch: on
        // NCCL 2.28 a 4 MiB send and receive between registered pool
        // segments hung (tests/functional.rs, point_to_point_from_pool_tensors,
        // 2 H200s). Sends are copied in before the group, receives out
        // after it, all on the communication stream.
        let mut scratch = self.p2p_scratch.lock().unwrap_or_else(|p| p.into_inner());
        let mut nccl_ops = Vec::new();
        let mut bound = Vec::new();
        let mut copy_out = Vec::new();
        let mut kops: Vec<KernelOp<'_, T>> = Vec::new();
        for (op, route) in ops.iter_mut().zip(&routes) {
            let by_nccl = nccl.as_ref().filter(|_| *route == Route::Nccl);
            match op {
                P2pOp::Send { input, peer } => {
                    let input: &dyn Operand<T> = *input;
                    if let Some(n) = by_nccl {
                        let b = self.cs.bind("input", input.__memory())?;
                        let bytes = b.len() * size;
                        if bytes > 0 && n.registered(b.device_ptr(), bytes) {
                            let k = nccl_ops.len();
                            let at = self.p2p_room(&mut scratch, k, bytes)?;
                            let mut room = self.cs.bind_mut("scratch", &mut scratch.rooms[k])?;
                            let mut room = room.bytes_mut();
                            let mut room = room.sub_mut(0..bytes).ok_or_else(|| {
                                invalid(&self.cs, "the p2p scratch is too short".into())
                            })?;
                            self.cs.copy(&b.bytes(), &mut room)?;
                            nccl_ops.push((*peer, true, at, bytes));
                        } else {
                            nccl_ops.push((*peer, true, b.device_ptr(), bytes));
                        }
                        bound.push(b);
                    } else {
                        kops.push(KernelOp::Send {
                            input: input.__memory(),
                            peer: *peer,
                        });
                    }
                }
                P2pOp::Recv { out, peer } => {
                    if let Some(n) = by_nccl {
                        let b = self.cs.bind_mut("out", &mut **out)?;
                        let bytes = b.len() * size;
                        if bytes > 0 && n.registered(b.device_ptr(), bytes) {
                            let k = nccl_ops.len();
                            let at = self.p2p_room(&mut scratch, k, bytes)?;
                            nccl_ops.push((*peer, false, at, bytes));
                            copy_out.push((k, bytes, b));
                        } else {
                            nccl_ops.push((*peer, false, b.device_ptr(), bytes));
                            bound.push(b);
                        }
                    } else {
                        kops.push(KernelOp::Recv {
                            out: &mut **out,
                            peer: *peer,
                        });
                    }
                }
            }
        }
        nccl_ops.retain(|op| op.3 > 0);
        if let Some(n) = nccl.filter(|_| !nccl_ops.is_empty()) {
            // SAFETY: every address is memory of this rank bound to the
            // communication stream (`bound`, `copy_out`, or the scratch,
            // kept in `self` and used by no other work of this stream in
            // between), of the bytes given; each peer makes the matching
            // operation, chosen by the same bytes.
            unsafe { n.p2p(&nccl_ops, self.stream()?)? };
        }
        for (k, bytes, mut b) in copy_out {
            let room = self.cs.bind("scratch", &scratch.rooms[k])?;
            let room = room.bytes();
            let room = room
                .sub(0..bytes)
                .ok_or_else(|| invalid(&self.cs, "the p2p scratch is too short".into()))?;
            self.cs.copy(&room, &mut b.bytes_mut())?;
        }
        drop(scratch);
        drop(bound);
        if kops.is_empty() {
            return Ok(());
        }
        match &self.p2p {
            Some(p2p) => p2p.send_recv(&mut kops),
            // The rule routes every message of such a group to NCCL.
            None => Err(crate::shared::checks::unsupported(
                &self.cs,
                "symm's point-to-point cannot cross NVLink domains".into(),
            )),
        }
    }
}
