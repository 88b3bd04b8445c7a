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
        self.p2p.check_ops::<T>(&plan)?;
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
        let mut nccl_ops = Vec::new();
        let mut bound = Vec::new();
        let mut kops: Vec<KernelOp<'_, T>> = Vec::new();
        for (op, route) in ops.iter_mut().zip(&routes) {
            let nccl = *route == Route::Nccl;
            match op {
                P2pOp::Send { input, peer } => {
                    let input: &dyn Operand<T> = *input;
                    if nccl {
                        let b = self.cs.bind("input", input.__memory())?;
                        nccl_ops.push((*peer, true, b.device_ptr(), b.len() * size));
                        bound.push(b);
                    } else {
                        kops.push(KernelOp::Send {
                            input: input.__memory(),
                            peer: *peer,
                        });
                    }
                }
                P2pOp::Recv { out, peer } => {
                    if nccl {
                        let b = self.cs.bind_mut("out", &mut **out)?;
                        nccl_ops.push((*peer, false, b.device_ptr(), b.len() * size));
                        bound.push(b);
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
        if !nccl_ops.is_empty() {
            let n = self.nccl()?;
            // SAFETY: every address is memory of this rank bound to the
            // communication stream (`bound`, alive until after the
            // enqueue), of the bytes given; each peer makes the matching
            // operation, chosen by the same bytes.
            unsafe { n.p2p(&nccl_ops, self.stream()?)? };
        }
        drop(bound);
        if kops.is_empty() {
            return Ok(());
        }
        self.p2p.send_recv(&mut kops)
    }
}
