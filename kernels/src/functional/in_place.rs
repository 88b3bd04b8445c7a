//! The calls that need no second buffer: in place (the input is part of
//! the output, as PyTorch's `all_reduce(t)`), and with an output the call
//! allocates at the right size (so that the user computes no lengths).

use super::*;
use symm::PoolTensor;

impl Collectives {
    /// All-reduce by `op` in place: every rank's `buf` becomes the
    /// reduction of all ranks' (`buf` owned, or `&mut` of a pool tensor, a
    /// buffer or cudarc memory; returned by the wait). Graph-capturable.
    /// On symm's kernels the input is first staged, since a peer may still
    /// read what the kernel writes; on NCCL, in place; across NVLink
    /// domains, the all-reduce's hierarchical or exact form from a copy of
    /// the buffer (whose first call of a length makes its scratch: run it
    /// once before capturing a graph).
    pub fn all_reduce_in_place<'c, T, O>(
        &'c self,
        mut buf: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>>
    where
        T: ReduceElem,
        O: Output<T>,
    {
        let exact = self.exact_across(op, T::DTYPE);
        if exact
            || self.hierarchical(
                Collective::AllReduce,
                true,
                buf.__memory_mut().len() * std::mem::size_of::<T>(),
            )
        {
            return self.all_reduce_in_place_across(buf, op, exact);
        }
        let n = buf.__memory_mut().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts_in_place::<T>(Collective::AllReduce, Some(op), n, bytes, None);
        self.run_in_place(
            facts,
            &[n as u64, op.code()],
            buf,
            0..n,
            (n, n, None),
            "all_reduce_in_place",
            |c, smem, out| match op {
                ReduceOp::Sum => collectives::sum(c, smem, out, n),
                _ => collectives::all_reduce_op(c, smem, out, n, op),
            },
            |nccl, b, stream| {
                let ty = self.nccl_type::<T>(nccl)?;
                let p = b.device_ptr();
                // SAFETY: `b` holds `n` elements of this rank, bound to the
                // communication stream; NCCL reduces in place where send
                // and receive are one buffer; every rank agreed on the call.
                unsafe { nccl.all_reduces(&[(p, p, n)], ty, op, stream) }
            },
        )
    }

    /// All-gather in place: `buf` holds `world × n` elements, this rank's
    /// part at `rank × n` (the input); every rank's part lands at its
    /// place. Graph-capturable after a first call of the shape (which makes
    /// the staging, and on NCCL, for parts off 16 bytes, the scratch).
    pub fn all_gather_in_place<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        mut buf: O,
    ) -> Result<Pending<'c, O>> {
        let len = buf.__memory_mut().len();
        let world = self.cs.world_size();
        let n = len / world;
        let uneven = (!len.is_multiple_of(world)).then(|| {
            format!(
                "all_gather_in_place of {len} elements on {world} ranks: the buffer holds every \
                 rank's part, so the world size must divide it"
            )
        });
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts_in_place::<T>(Collective::AllGather, None, n, bytes, None);
        let rank = self.cs.rank();
        self.run_in_place(
            facts,
            &[n as u64],
            buf,
            rank * n..(rank + 1) * n,
            (len, n, uneven),
            "all_gather_in_place",
            |c, smem, out| collectives::all_gather(c, smem, out, n),
            |nccl, b, stream| {
                let p = b.device_ptr();
                if bytes.is_multiple_of(16) && p.is_multiple_of(16) {
                    // SAFETY: `b` holds `world × n` elements (checked
                    // before the agreement), bound to the communication
                    // stream; NCCL gathers in place where the send buffer
                    // is the receive buffer's part of this rank; agreed by
                    // every rank.
                    return unsafe {
                        nccl.all_gathers(&[(p + (rank * bytes) as u64, p, bytes)], stream)
                    };
                }
                // Parts off 16 bytes: NCCL 2.28's in-place all-gather on a
                // registered window (a pool tensor) wrote the element
                // before such a part wrong on 2 H200s, on the rank whose
                // own part was aligned too (bench/NOTES.md v35), so it
                // gathers out of place, through plain scratch.
                let world = self.cs.world_size();
                self.with_scratch::<T>((world + 1) * n, |scratch| {
                    let mut s = self.cs.bind_mut("scratch", scratch)?;
                    let own = b
                        .sub(rank * n..(rank + 1) * n)
                        .ok_or_else(|| invalid(&self.cs, "this rank's part is outside".into()))?;
                    let mut first = s
                        .sub_mut(0..n)
                        .ok_or_else(|| invalid(&self.cs, "the scratch is too short".into()))?;
                    self.cs.copy(&own, &mut first)?;
                    drop((own, first));
                    let at = s.device_ptr();
                    // SAFETY: the scratch holds `(world + 1) × n` elements,
                    // bound to the communication stream: this rank's part,
                    // then room for every rank's; agreed by every rank.
                    unsafe {
                        nccl.all_gathers(&[(at, at + bytes as u64, bytes)], stream)?;
                    }
                    let all = s
                        .sub(n..(world + 1) * n)
                        .ok_or_else(|| invalid(&self.cs, "the scratch is too short".into()))?;
                    self.cs.copy(&all, &mut *b)
                })
            },
        )
    }

    /// Broadcast in place: rank `root`'s `buf` into every rank's `buf` (of
    /// the same length on every rank). Graph-capturable.
    pub fn broadcast_in_place<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        mut buf: O,
        root: usize,
    ) -> Result<Pending<'c, O>> {
        let n = buf.__memory_mut().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts_in_place::<T>(Collective::Broadcast, None, n, bytes, None);
        let world = self.cs.world_size();
        let bad_root = root_problem(root, world);
        self.run_in_place(
            facts,
            &[n as u64, root as u64],
            buf,
            0..n,
            (n, n, bad_root),
            "broadcast_in_place",
            |c, smem, out| collectives::broadcast(c, smem, out, n, root),
            |nccl, b, stream| {
                let p = b.device_ptr();
                // SAFETY: `b` holds `n` elements, bound to the
                // communication stream; root is a rank (checked before the
                // agreement); NCCL broadcasts in place; agreed by all.
                unsafe { nccl.broadcast(p, p, bytes, root, stream) }
            },
        )
    }

    /// Reduce-scatter by `op` into a slice of its input: every rank's
    /// `buf` (`n` elements) reduced, and this rank's chunk of the result
    /// ([`collectives::reduce_scatter_chunk`]`(n, world, rank)`) written
    /// over the same elements of its `buf`; the rest of `buf` is left as
    /// it was. Graph-capturable after a first call of the shape, as
    /// [`all_gather_in_place`](Self::all_gather_in_place).
    pub fn reduce_scatter_in_place<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        mut buf: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>> {
        let n = buf.__memory_mut().len();
        let world = self.cs.world_size();
        let uneven = (!n.is_multiple_of(world)).then_some(
            "NCCL's reduce-scatter takes equal chunks, and n is no multiple of the world size",
        );
        let bytes = n.div_ceil(world) * std::mem::size_of::<T>();
        let mut facts =
            self.facts_in_place::<T>(Collective::ReduceScatter, Some(op), n, bytes, uneven);
        facts.bytes = bytes;
        let mine = collectives::reduce_scatter_chunk(n, world, self.cs.rank());
        let size = std::mem::size_of::<T>();
        self.run_in_place(
            facts,
            &[n as u64, op.code()],
            buf,
            0..n,
            (n, n, None),
            "reduce_scatter_in_place",
            |c, smem, b| {
                let mut out = b
                    .sub_mut(mine.clone())
                    .ok_or_else(|| invalid(c, "the chunk is not inside the buffer".into()))?;
                // The kernels write a chunk at any element offset.
                collectives::reduce_scatter(c, smem, &mut out, n, op)
            },
            |nccl, b, stream| {
                let ty = self.nccl_type::<T>(nccl)?;
                let p = b.device_ptr();
                if (n / world * size).is_multiple_of(16) && p.is_multiple_of(16) {
                    // SAFETY: `b` holds `n` elements, bound to the
                    // communication stream; NCCL's route has equal chunks,
                    // and reduces in place where the receive buffer is the
                    // send buffer's chunk of this rank; agreed by every
                    // rank.
                    return unsafe {
                        nccl.reduce_scatter(
                            p,
                            p + (mine.start * size) as u64,
                            n / world,
                            ty,
                            op,
                            stream,
                        )
                    };
                }
                // Chunks off 16 bytes go through plain scratch, as the
                // all-gather's parts do.
                self.with_scratch::<T>(n / world, |scratch| {
                    let s = self.cs.bind_mut("scratch", scratch)?;
                    // SAFETY: `b` holds `n` elements and the scratch at
                    // least `n / world`, both bound to the communication
                    // stream; agreed by every rank.
                    unsafe { nccl.reduce_scatter(p, s.device_ptr(), n / world, ty, op, stream)? };
                    let got = s
                        .sub(0..n / world)
                        .ok_or_else(|| invalid(&self.cs, "the scratch is too short".into()))?;
                    let mut out = b.sub_mut(mine.clone()).ok_or_else(|| {
                        invalid(&self.cs, "the chunk is not inside the buffer".into())
                    })?;
                    self.cs.copy(&got, &mut out)
                })
            },
        )
    }

    /// Runs `f` on this rank's plain scratch memory of `T`, of at least
    /// `len` elements (grown on first need; earlier ones are kept for CUDA
    /// graphs captured with them). Local: no peer reads it.
    fn with_scratch<T: Element>(
        &self,
        len: usize,
        f: impl FnOnce(&mut symm::DeviceBuffer<T>) -> Result<()>,
    ) -> Result<()> {
        let mut map = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let all = map
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(Vec::<symm::DeviceBuffer<T>>::new()))
            .downcast_mut::<Vec<symm::DeviceBuffer<T>>>()
            .expect("scratch is kept by its element type");
        if all.last().is_none_or(|b| b.len() < len) {
            all.push(self.cs.device_buffer::<T>(len.next_power_of_two())?);
        }
        f(all.last_mut().expect("just made"))
    }

    /// A new output of `len` elements (the block of `reserve` on every
    /// rank, so that ranks whose outputs differ allocate alike): from the
    /// pool in use on the group ([`Comm::use_pool`]), else from this
    /// `Collectives`' own pool, made on first use. Every rank asks in the
    /// same order, as its calls do.
    fn new_output<T: Element>(&self, len: usize, reserve: usize) -> Result<PoolTensor<T>> {
        let pool = match self.user.current_pool() {
            Some(p) => p,
            None => self.own_pool.get_or_init(|| self.user.pool()).clone(),
        };
        pool.alloc_reserving(len, reserve)
    }

    /// [`all_reduce`](Self::all_reduce) into a new tensor of the input's
    /// length (see [`all_gather_new`](Self::all_gather_new) for where it
    /// comes from).
    pub fn all_reduce_new<'c, T>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        op: ReduceOp,
    ) -> Result<Pending<'c, PoolTensor<T>>>
    where
        T: ReduceElem,
    {
        let n = input.__memory().len();
        self.all_reduce(input, self.new_output(n, n)?, op)
    }

    /// [`all_gather`](Self::all_gather) into a new tensor of `world ×` the
    /// input's length. New outputs are pool tensors: from the pool in use
    /// on the group ([`Comm::use_pool`]), else from a pool of this
    /// `Collectives`' own, so that the next call reads them in place.
    /// Allocating may grow the pool, which is collective and not
    /// capturable: in a CUDA graph, run the calls once before capturing
    /// (a freed tensor's block is reused).
    pub fn all_gather_new<'c, T: CopyElem>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
    ) -> Result<Pending<'c, PoolTensor<T>>> {
        let len = input.__memory().len().saturating_mul(self.cs.world_size());
        self.all_gather(input, self.new_output(len, len)?)
    }

    /// [`reduce_scatter`](Self::reduce_scatter) into a new tensor of this
    /// rank's chunk's length (ranks of uneven chunks allocate alike).
    pub fn reduce_scatter_new<'c, T: ReduceElem>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        op: ReduceOp,
    ) -> Result<Pending<'c, PoolTensor<T>>> {
        let (n, world) = (input.__memory().len(), self.cs.world_size());
        let mine = collectives::reduce_scatter_chunk(n, world, self.cs.rank()).len();
        self.reduce_scatter(input, self.new_output(mine, n.div_ceil(world))?, op)
    }

    /// [`broadcast`](Self::broadcast) into a new tensor of the input's
    /// length.
    pub fn broadcast_new<'c, T: CopyElem>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        root: usize,
    ) -> Result<Pending<'c, PoolTensor<T>>> {
        let n = input.__memory().len();
        self.broadcast(input, self.new_output(n, n)?, root)
    }

    /// [`all_to_all`](Self::all_to_all) into a new tensor of the input's
    /// length.
    pub fn all_to_all_new<'c, T: CopyElem>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
    ) -> Result<Pending<'c, PoolTensor<T>>> {
        let n = input.__memory().len();
        self.all_to_all(input, self.new_output(n, n)?)
    }

    /// [`all_gather_coalesced`](Self::all_gather_coalesced) into a new
    /// tensor of `world ×` the ranges' total length.
    pub fn all_gather_coalesced_new<'c, T: CopyElem>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        ranges: &[std::ops::Range<usize>],
    ) -> Result<Pending<'c, PoolTensor<T>>> {
        let total = ranges
            .iter()
            .fold(0usize, |a, r| a.saturating_add(r.len()))
            .saturating_mul(self.cs.world_size());
        self.all_gather_coalesced(input, ranges, self.new_output(total, total)?)
    }

    /// [`all_reduce_coalesced`](Self::all_reduce_coalesced) into a new
    /// tensor of the input's length.
    pub fn all_reduce_coalesced_new<'c, T: ReduceElem>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        ranges: &[std::ops::Range<usize>],
        op: ReduceOp,
    ) -> Result<Pending<'c, PoolTensor<T>>> {
        let n = input.__memory().len();
        self.all_reduce_coalesced(input, ranges, self.new_output(n, n)?, op)
    }
}
