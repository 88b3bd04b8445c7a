//! The collectives a model calls, each one [`Collectives::run`] with its
//! shape, its symm kernel and its NCCL call.

use super::*;

impl Collectives {
    /// The error of a call whose NCCL route the rule never takes (reduce,
    /// gather, scatter: `rule::nccl_refuses`), should one reach it.
    fn refused(&self, what: &str) -> Error {
        unsupported(
            &self.cs,
            format!("{what} never runs on NCCL (bench/NOTES.md v37); symm's kernels run it"),
        )
    }

    /// All-reduce by `op`: every rank's `input` reduced into this rank's
    /// `out` (at least as long as `input`).
    pub fn all_reduce<'c, T, O>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>>
    where
        T: ReduceElem,
        O: Output<T>,
    {
        if self.exact_across(op, T::DTYPE) {
            return self.all_reduce_exact(input, out, op);
        }
        if self.hierarchical(Collective::AllReduce, true, input_bytes(input)) {
            return self.all_reduce_across(input, out, op);
        }
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let mut facts = self.facts(Collective::AllReduce, Some(op), input, bytes, None);
        // Where the sum's kernel reads peers' inputs at their symmetric
        // addresses, every rank stages, so no rank's input kind can differ
        // from its peers'.
        if op == ReduceOp::Sum
            && !T::__NATIVE
            && crate::all_reduce::reads_peer_inputs(self.cs.world_size(), bytes)
        {
            facts.placed = Placed::Plain;
        }
        self.run(
            facts,
            &[n as u64, op.code()],
            input,
            out,
            (n, n, None),
            "all_reduce",
            |c, smem, out| match op {
                ReduceOp::Sum => collectives::sum(c, smem, out, n),
                _ => collectives::all_reduce_op(c, smem, out, n, op),
            },
            |nccl, src, dst, stream| {
                let ty = self.nccl_type::<T>(nccl)?;
                // SAFETY: `src` and `dst` hold `n` elements of this rank
                // (checked before the agreement), bound to the
                // communication stream (NCCL's); every rank agreed on this
                // call.
                unsafe {
                    nccl.all_reduces(&[(src.device_ptr(), dst.device_ptr(), n)], ty, op, stream)
                }
            },
        )
    }

    /// All-gather: every rank's `input` in rank order into this rank's
    /// `out` (at least `world ×` as long).
    pub fn all_gather<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
    ) -> Result<Pending<'c, O>> {
        if self.hierarchical(Collective::AllGather, true, input_bytes(input)) {
            return self.all_gather_across(input, out);
        }
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::AllGather, None, input, bytes, None);
        let world = self.cs.world_size();
        let route = self.route(&facts)?;
        let path = copy_engine(route);
        self.run_on(
            route,
            facts,
            &[n as u64],
            input,
            out,
            (n.saturating_mul(world), n, None),
            "all_gather",
            |c, smem, out| match path {
                Some(p) => collectives::all_gather_with(p, c, smem, out, n),
                None => collectives::all_gather(c, smem, out, n),
            },
            |nccl, src, dst, stream| {
                // SAFETY: `src` holds `n` elements and `dst` `world × n`
                // (checked before the agreement), bound to the
                // communication stream; agreed by every rank.
                unsafe { nccl.all_gathers(&[(src.device_ptr(), dst.device_ptr(), bytes)], stream) }
            },
        )
    }

    /// Reduce-scatter by `op`: rank r's `out` gets the reduction of its
    /// chunk ([`collectives::reduce_scatter_chunk`]) of every rank's
    /// `input`. The rule weighs the chunk's bytes (what each rank gets, as
    /// the measured tables give the size).
    pub fn reduce_scatter<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let world = self.cs.world_size();
        let chunk = n.div_ceil(world);
        // (Whatever this rank's `n`: ranks whose lengths differ, or that
        // the world size does not divide, fail alike in the agreement.)
        if self.exact_across(op, T::DTYPE) {
            return self.reduce_scatter_exact(input, out, op);
        }
        if self.hierarchical(
            Collective::ReduceScatter,
            true,
            chunk * std::mem::size_of::<T>(),
        ) {
            return self.reduce_scatter_across(input, out, op);
        }
        let uneven = (!n.is_multiple_of(world)).then_some(
            "NCCL's reduce-scatter takes equal chunks, and n is no multiple of the world size",
        );
        let bytes = chunk * std::mem::size_of::<T>();
        let mut facts = self.facts(Collective::ReduceScatter, Some(op), input, bytes, uneven);
        facts.bytes = bytes;
        let mine = collectives::reduce_scatter_chunk(n, world, self.cs.rank()).len();
        self.run(
            facts,
            &[n as u64, op.code()],
            input,
            out,
            (mine, n, None),
            "reduce_scatter",
            |c, smem, out| collectives::reduce_scatter(c, smem, out, n, op),
            |nccl, src, dst, stream| {
                let ty = self.nccl_type::<T>(nccl)?;
                // SAFETY: `src` holds `n` and `dst` `n / world` elements
                // (checked before the agreement; NCCL's route has equal
                // chunks), bound to the communication stream; agreed by
                // every rank.
                unsafe {
                    nccl.reduce_scatter(
                        src.device_ptr(),
                        dst.device_ptr(),
                        n / world,
                        ty,
                        op,
                        stream,
                    )
                }
            },
        )
    }

    /// Broadcast: rank `root`'s `input` into every rank's `out` (every
    /// rank passes an input of the same length; only the root's is read).
    pub fn broadcast<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        root: usize,
    ) -> Result<Pending<'c, O>> {
        if self.hierarchical(Collective::Broadcast, true, input_bytes(input)) {
            return self.broadcast_across(input, out, root);
        }
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::Broadcast, None, input, bytes, None);
        let world = self.cs.world_size();
        let bad_root = root_problem(root, world);
        self.run(
            facts,
            &[n as u64, root as u64],
            input,
            out,
            (n, n, bad_root),
            "broadcast",
            |c, smem, out| collectives::broadcast(c, smem, out, n, root),
            |nccl, src, dst, stream| {
                // SAFETY: `src` and `dst` hold `n` elements (checked before
                // the agreement), bound to the communication stream; root
                // is a rank; agreed by every rank.
                unsafe { nccl.broadcast(src.device_ptr(), dst.device_ptr(), bytes, root, stream) }
            },
        )
    }

    /// Reduce by `op` to `root`: rank `root`'s `out` (at least as long as
    /// `input`) gets the reduction of every rank's `input`, combined as
    /// every reduction is ([`ReduceOp`]); the other ranks' `out` is not
    /// written and may be empty. Always on symm's kernels (the rule refuses
    /// NCCL: bench/NOTES.md v37).
    pub fn reduce<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        op: ReduceOp,
        root: usize,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::Reduce, Some(op), input, bytes, None);
        let world = self.cs.world_size();
        let bad_root = root_problem(root, world);
        let need = if self.cs.rank() == root { n } else { 0 };
        self.run(
            facts,
            &[n as u64, op.code(), root as u64],
            input,
            out,
            (need, n, bad_root),
            "reduce",
            |c, smem, out| collectives::reduce(c, smem, out, n, op, root),
            |_, _, _, _| Err(self.refused("reduce")),
        )
    }

    /// Gather to `root`: rank p's `input` lands at `out[p × n..]` of rank
    /// `root` (whose `out` holds at least `world ×` the input's length
    /// `n`); the other ranks' `out` is not written and may be empty.
    /// Always on symm's kernels, as [`reduce`](Self::reduce).
    pub fn gather<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        root: usize,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::Gather, None, input, bytes, None);
        let world = self.cs.world_size();
        let bad_root = root_problem(root, world);
        let need = if self.cs.rank() == root {
            n.saturating_mul(world)
        } else {
            0
        };
        self.run(
            facts,
            &[n as u64, root as u64],
            input,
            out,
            (need, n, bad_root),
            "gather",
            |c, smem, out| collectives::gather(c, smem, out, n, root),
            |_, _, _, _| Err(self.refused("gather")),
        )
    }

    /// Scatter from `root`: every rank r's `out` (at least `n` long) gets
    /// elements `r × n..(r + 1) × n` of rank `root`'s `input`, whose
    /// length (the same on every rank; only the root's is read) is
    /// `world × n`. Always on symm's kernels, as [`reduce`](Self::reduce).
    pub fn scatter<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        root: usize,
    ) -> Result<Pending<'c, O>> {
        let len = input.__memory().len();
        let world = self.cs.world_size();
        let n = len / world;
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::Scatter, None, input, bytes, None);
        let problem = root_problem(root, world).or_else(|| {
            (!len.is_multiple_of(world)).then(|| {
                format!("scatter of {len} elements on {world} ranks: the world size must divide the input")
            })
        });
        self.run(
            facts,
            &[len as u64, root as u64],
            input,
            out,
            (n, len, problem),
            "scatter",
            |c, smem, out| collectives::scatter(c, smem, out, n, root),
            |_, _, _, _| Err(self.refused("scatter")),
        )
    }

    /// All-to-all with equal splits: rank p's `input[r × m..(r + 1) × m]`
    /// lands at `out[p × m..]` of rank r (`m` is the input's length over
    /// the world size, which must divide it).
    pub fn all_to_all<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
    ) -> Result<Pending<'c, O>> {
        if self.hierarchical(Collective::AllToAll, true, input_bytes(input)) {
            return self.all_to_all_across(input, out);
        }
        let len = input.__memory().len();
        let world = self.cs.world_size();
        let uneven = (!len.is_multiple_of(world)).then(|| {
            format!("all_to_all of {len} elements on {world} ranks: the world size must divide the input")
        });
        let m = len / world;
        let bytes = m * std::mem::size_of::<T>();
        let facts = self.facts(Collective::AllToAll, None, input, bytes, None);
        let route = self.route(&facts)?;
        let path = copy_engine(route);
        self.run_on(
            route,
            facts,
            &[len as u64],
            input,
            out,
            (len, len, uneven),
            "all_to_all",
            |c, smem, out| match path {
                Some(p) => collectives::all_to_all_with(p, c, smem, out, m),
                None => collectives::all_to_all(c, smem, out, m),
            },
            |nccl, src, dst, stream| {
                let each = vec![bytes; world];
                self.nccl_exchange(nccl, src, dst, &each, &each, stream)
            },
        )
    }

    /// All-to-all with split sizes on the host (PyTorch's
    /// `all_to_all_single`), as [`collectives::all_to_all_single`]: symm's
    /// kernel only, which checks every rank's splits against its peers' on
    /// the device (NCCL would wait forever on a mismatch). The ranks'
    /// inputs may differ in length, so a non-symmetric input is staged only
    /// up to the staging's present length (at least 4096 elements); a
    /// longer one must be a pool tensor or a `SymmBuffer`.
    pub fn all_to_all_single<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        in_splits: &[usize],
        out_splits: &[usize],
    ) -> Result<Pending<'c, O>> {
        let world = self.cs.world_size();
        let len = input.__memory().len();
        let size = std::mem::size_of::<T>();
        let biggest = in_splits.iter().copied().max().unwrap_or(0);
        let facts = self.facts(
            Collective::AllToAllSingle,
            None,
            input,
            biggest * size,
            Some("its splits differ by rank and NCCL would wait forever on a mismatch"),
        );
        let sent = in_splits.iter().fold(0usize, |a, &b| a.saturating_add(b));
        let received = out_splits.iter().fold(0usize, |a, &b| a.saturating_add(b));
        let problem = if in_splits.len() != world || out_splits.len() != world {
            Some(format!(
                "all_to_all_single takes one split per rank ({world}), and got {} send and {} \
                 receive splits",
                in_splits.len(),
                out_splits.len()
            ))
        } else if sent > len {
            Some(format!(
                "the send splits total {sent} elements, and the input holds {len}"
            ))
        } else if !facts.placed.is_symmetric() && len > self.staging_len::<T>() {
            Some(format!(
                "a non-symmetric input of {len} elements is longer than the group's staging \
                 ({}): the ranks' inputs differ in length, so it cannot grow for one; pass a \
                 pool tensor or a SymmBuffer",
                self.staging_len::<T>()
            ))
        } else {
            None
        };
        // Splits and input sizes differ between ranks: the kernel checks
        // the whole exchange on the device.
        self.run(
            facts,
            &[world as u64],
            input,
            out,
            (received, 0, problem),
            "all_to_all_single",
            |c, smem, out| collectives::all_to_all_single(c, smem, out, in_splits, out_splits),
            |_, _, _, _| {
                Err(unsupported(
                    &self.cs,
                    "all_to_all_single runs on symm only".into(),
                ))
            },
        )
    }

    /// All-to-all with split sizes in device memory, as
    /// [`collectives::all_to_all_v`]: symm's kernel only (NCCL needs its
    /// splits on the host), from a symmetric input on every rank (a pool
    /// tensor or a `SymmBuffer`: the kernel checks the device splits
    /// against the input's size, which staging would hide).
    pub fn all_to_all_v<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        out: O,
        in_splits: &(impl DeviceSlice<u64> + ?Sized),
        out_splits_offsets: &mut (impl DeviceSlice<u64> + ?Sized),
    ) -> Result<Pending<'c, O>> {
        let facts = self.facts(
            Collective::AllToAllV,
            None,
            input,
            input.__memory().len() * std::mem::size_of::<T>(),
            Some("its splits are in device memory, and NCCL needs them on the host"),
        );
        let problem = (!facts.placed.is_symmetric()).then(|| {
            "all_to_all_v takes its input in symmetric memory (a pool tensor or a \
             SymmBuffer): the kernel checks the device splits against the input's size"
                .to_string()
        });
        self.run(
            facts,
            &[self.cs.world_size() as u64],
            input,
            out,
            (0, 0, problem),
            "all_to_all_v",
            |c, smem, out| collectives::all_to_all_v(c, smem, out, in_splits, out_splits_offsets),
            |_, _, _, _| Err(unsupported(&self.cs, "NCCL takes no device splits".into())),
        )
    }

    /// Coalesced all-gather: each of `ranges` of `input` (the same on every
    /// rank) gathered, as [`collectives::all_gather_coalesced`] lays them
    /// out in `out`.
    pub fn all_gather_coalesced<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        ranges: &[std::ops::Range<usize>],
        out: O,
    ) -> Result<Pending<'c, O>> {
        let size = std::mem::size_of::<T>();
        let len = input.__memory().len();
        let total: usize = ranges.iter().map(|r| r.len()).sum();
        let facts = self.facts(
            Collective::AllGatherCoalesced,
            None,
            input,
            total * size,
            None,
        );
        let mut shape = vec![len as u64];
        shape.extend(ranges.iter().flat_map(|r| [r.start as u64, r.end as u64]));
        let world = self.cs.world_size();
        self.run(
            facts,
            &shape,
            input,
            out,
            (
                total.saturating_mul(world),
                len,
                ranges_problem(ranges, len),
            ),
            "all_gather_coalesced",
            |c, smem, out| collectives::all_gather_coalesced(c, smem, ranges, out),
            |nccl, src, dst, stream| {
                let mut at = 0;
                let mut ops = Vec::with_capacity(ranges.len());
                for r in ranges {
                    ops.push((
                        src.device_ptr() + (r.start * size) as u64,
                        dst.device_ptr() + (at * world * size) as u64,
                        r.len() * size,
                    ));
                    at += r.len();
                }
                // SAFETY: every range is inside `src` and its gathered span
                // inside `dst` (checked before the agreement), bound to the
                // communication stream; agreed by every rank.
                unsafe { nccl.all_gathers(&ops, stream) }
            },
        )
    }

    /// Coalesced all-reduce by `op`: `out` (as long as `input`) gets
    /// `input` with each of `ranges` (the same on every rank) reduced
    /// across ranks. symm's kernel reduces in place, so the input is
    /// always staged and copied back out; across NVLink domains, the
    /// ranges are packed into one message for the all-reduce's
    /// hierarchical or exact form (its first call of a length makes its
    /// scratch: run it once before capturing a graph).
    pub fn all_reduce_coalesced<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        ranges: &[std::ops::Range<usize>],
        mut out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>> {
        let exact = self.exact_across(op, T::DTYPE);
        // (The packed ranges' bytes, as the hierarchical form sends them.)
        let packed = ranges
            .iter()
            .fold(0usize, |t, r| t.saturating_add(r.len()))
            .saturating_mul(std::mem::size_of::<T>());
        if exact || self.hierarchical(Collective::AllReduceCoalesced, true, packed) {
            return self.all_reduce_coalesced_across(input, ranges, out, op, exact);
        }
        let len = input.__memory().len();
        let out_len = out.__memory_mut().len();
        let problem = coalesced_problem(ranges, len, out_len);
        let size = std::mem::size_of::<T>();
        let total: usize = ranges.iter().map(|r| r.len()).sum();
        let mut facts = self.facts(
            Collective::AllReduceCoalesced,
            Some(op),
            input,
            total * size,
            None,
        );
        facts.placed = Placed::Plain;
        let mut shape = vec![len as u64, op.code()];
        shape.extend(ranges.iter().flat_map(|r| [r.start as u64, r.end as u64]));
        self.run(
            facts,
            &shape,
            input,
            out,
            (len, len, problem),
            "all_reduce_coalesced",
            |c, _, out| {
                // Staged (placed as plain above): the staging holds the input.
                let st = self.staging::<T>(len)?;
                collectives::all_reduce_coalesced(c, &st.buf, ranges, op)?;
                c.copy(&st.buf.slice(..len)?, out)
            },
            |nccl, src, dst, stream| {
                let ty = self.nccl_type::<T>(nccl)?;
                let ops: Vec<(u64, u64, usize)> = ranges
                    .iter()
                    .map(|r| {
                        let off = (r.start * size) as u64;
                        (src.device_ptr() + off, dst.device_ptr() + off, r.len())
                    })
                    .collect();
                // The input first, then each range reduced into the same
                // place of `out`: the output is the input with its ranges
                // reduced, as on symm.
                self.cs.copy(src, dst)?;
                // SAFETY: every range is inside `src` and `dst`, both the
                // input's length (checked before the agreement), bound to
                // the communication stream; agreed by every rank.
                unsafe { nccl.all_reduces(&ops, ty, op, stream) }
            },
        )
    }
}

/// The copy engines' path where the rule's `route` names it (its kernel
/// family), else `None` (the call's own dispatch).
fn copy_engine(route: Route) -> Option<collectives::CollectivePath> {
    let ce = collectives::CollectivePath::CopyEngine;
    matches!(route, Route::Symm { kernel, .. } if kernel == ce.name()).then_some(ce)
}

/// Bytes of `input` ([`CallFacts::bytes`]), which the rule weighs.
fn input_bytes<T: Element>(input: &(impl Operand<T> + ?Sized)) -> usize {
    input.__memory().len() * std::mem::size_of::<T>()
}
