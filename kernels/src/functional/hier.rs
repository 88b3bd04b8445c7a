//! The collectives of a group that spans NVLink domains, hierarchically:
//! symm's kernels inside each domain ([`Comm::domain`]) and, between the
//! domains, the same collective on this rank's rail ([`Comm::rails`]: the
//! ranks of its index in every domain). The rail's leg takes NCCL on
//! GPUs; on the emulator, whose domains are all simulated, symm's own
//! kernels stand in for it across them (`Comm::__emulated_network`), for
//! tests of multi-node code.
//!
//! - **All-reduce:** reduce-scatter in the domain, the all-reduce of this
//!   rank's chunk on its rail, all-gather in the domain: each byte crosses
//!   the network once per domain, as in NCCL's own hierarchy.
//! - **All-gather** and **reduce-scatter** need domains that are blocks of
//!   consecutive ranks (as torchrun and `symm-run` number them), so that
//!   a domain's ranks' chunks are consecutive. Up to `Options::reorder_min_bytes`
//!   of the whole message, the rail's leg runs on what the domain's leg
//!   made (the all-gather: in the domain, then on the rail; the
//!   reduce-scatter: on the rail, then in the domain), which needs no
//!   reordering but sends the domain's size times the bytes across the
//!   network. From there, the network leg takes only this rank's own
//!   share (the all-gather: on the rail first; the reduce-scatter: in the
//!   domain first), and a reordering copy on the device puts the chunks
//!   in rank order (the all-gather's output) or in domain order (the
//!   reduce-scatter's input).
//! - **Broadcast:** the root's rail broadcasts from it, then every domain
//!   from its rank on that rail.
//! - **All-to-all** (domains of consecutive ranks): the input grouped by
//!   destination's local index, the all-to-all of those groups in the
//!   domain, what arrived regrouped by destination domain, and the rail's
//!   all-to-all of that: each rank's bytes cross the network once, in one
//!   message per domain.
//! - **In place and coalesced,** the all-reduce runs the same legs
//!   (hierarchical or exact) from a copy of the buffer, or from its
//!   ranges packed into one message (unpacked into the output over a copy
//!   of the input). Their scratch, as every form's, is kept per length.
//! - **Exact reductions** (the all-reduce and reduce-scatter in the
//!   deterministic mode, and those NCCL cannot run, such as float min and
//!   max): the all-to-all above brings every rank's copy of this rank's
//!   chunk here, `collectives::fold` combines them in rank order as a
//!   reduction in one domain does, and the all-reduce all-gathers the
//!   folded chunks. The network only copies: as many bytes as a flat ring
//!   all-reduce, between the domain's size and half of it times the
//!   hierarchical form's.
//!
//! The whole group agrees on the call first (as any call of the group),
//! so ranks whose calls differ fail alike, before any leg. Every leg then
//! runs on the group's stream (the user's, or its communication stream),
//! in its order: the domain's and rail's handles of this rank are made on
//! it, so their kernels' failures are reported by the group's own
//! `synchronize`. A leg that fails after the agreement (which leaves peers
//! of other domains waiting on the network for this rank) aborts the
//! group, its domain and its rail, so that they hear of it at once.

use super::*;
use symm::DeviceBuffer;

use crate::shared::checks::ranges_overlap;

/// A spanning group's domain and rail collectives, and the buffers that
/// pass between them.
pub(super) struct Hier {
    domain: Collectives,
    rails: Collectives,
    /// Per element type, form and lengths: the buffers between the legs,
    /// a `Mutex<[DeviceBuffer<T>; N]>` (each form holds its own while it
    /// runs, so that one form may run another's legs). Kept (not freed and
    /// made again) for CUDA graphs captured with them.
    scratch: Mutex<HashMap<ScratchKey, Arc<dyn Any + Send + Sync>>>,
}

impl Collectives {
    /// This group's domain and rail collectives, made at the first call
    /// that needs them (collective: every rank makes the same calls in
    /// the same order).
    pub(super) fn hier(&self) -> Result<&Hier> {
        if let Some(h) = self.hier.get() {
            return Ok(mine(&**h));
        }
        let on_stream = |c: Comm| match &self.stream {
            Some(s) => c.with_cuda_stream(s.clone()),
            None => Ok(c),
        };
        let options = self.options.clone().with_own_stream(false);
        let domain = Collectives::made(&on_stream(self.user.domain()?)?, options.clone(), true)?;
        let rails = self.user.rails()?;
        let rails = match rails.__emulated_network() {
            Some(network) => network,
            None => on_stream(rails)?,
        };
        let rails = Collectives::made(&rails, options, true)?;
        let _ = self.hier.set(Box::new(Hier {
            domain,
            rails,
            scratch: Mutex::default(),
        }));
        Ok(mine(&**self.hier.get().expect("set above")))
    }

    /// Why the domain's or rails' NCCL communicator was aborted (by its
    /// watchdog: an NCCL error, a call past the timeout, a peer gone), if
    /// one was: a hierarchical call's legs then ended early.
    pub(super) fn legs_aborted(&self) -> Option<Error> {
        let h = mine(&**self.hier.get()?);
        h.rails.nccl_aborted().or_else(|| h.domain.nccl_aborted())
    }

    /// The rule's facts of the rails, which a hierarchical call's NCCL
    /// legs take (the group's own, before they are made).
    pub(super) fn rails_facts(&self) -> GroupFacts {
        match self.hier.get() {
            Some(h) => mine(&**h).rails.group.clone(),
            None => self.group.clone(),
        }
    }

    /// A hierarchical call's start: the whole group's agreement on `shape`
    /// (with the input's kind: the legs read it as their own input, and
    /// ranks whose kinds differed would fail in one domain only), with
    /// the rule's verdict on the rail's leg (what NCCL refuses there, such
    /// as float min and max; the whole group's own verdict would refuse
    /// ranks that share a GPU within a domain).
    fn begin_across<T: Element, I: Operand<T> + ?Sized, O: Output<T>>(
        &self,
        facts: &CallFacts,
        rail_facts: &CallFacts,
        shape: &[u64],
        input: &I,
        out: &mut O,
        need: (usize, Option<String>),
    ) -> Result<&Hier> {
        let h = self.hier()?;
        let route = h.rails.route(rail_facts)?;
        let mut shape = shape.to_vec();
        shape.push(u64::from(facts.placed.is_symmetric()));
        // (Memory of the domain's own, which its leg reads in place.)
        shape.push(u64::from(input.__placed(&h.domain.cs).is_symmetric()));
        self.begin(facts, route, &shape, input, out, need)?;
        Ok(h)
    }

    /// `legs`' result, or, where a leg failed after the agreement, its
    /// error, once the group, its domain and its rail are aborted (their
    /// peers may be waiting for this rank's part of a leg).
    fn legs<R>(&self, h: &Hier, legs: impl FnOnce() -> Result<R>) -> Result<R> {
        legs().inspect_err(|e| {
            for c in [&self.user, &h.domain.user, &h.rails.user] {
                c.abort_with(e);
            }
        })
    }

    /// [`all_reduce`](Self::all_reduce) across domains (module docs), where
    /// [`hierarchical`](Self::hierarchical) says so.
    pub(super) fn all_reduce_across<'c, T, O>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        mut out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>>
    where
        T: ReduceElem,
        O: Output<T>,
    {
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::AllReduce, Some(op), input, bytes, None);
        let shape = [n as u64, op.code()];
        let h = self.begin_across(&facts, &facts, &shape, input, &mut out, (n, None))?;
        let out = self.legs(h, || self.reduce_legs(h, input, out, op, n))?;
        self.pending(out, "all_reduce")
    }

    /// The legs of the hierarchical all-reduce of `input`'s `n` elements
    /// into `out` (module docs).
    fn reduce_legs<T, I, O>(&self, h: &Hier, input: &I, out: O, op: ReduceOp, n: usize) -> Result<O>
    where
        T: ReduceElem,
        I: Operand<T> + ?Sized,
        O: Output<T>,
    {
        let l = h.domain.cs.world_size();
        if l > 1 && n.is_multiple_of(l) {
            // Reduce-scatter in the domain, the chunk across domains, and
            // all-gather in the domain.
            let slot = h.bufs::<T, 2>(&self.user, "all_reduce", [n / l; 2])?;
            let mut slot = lock(&slot);
            let [a, b] = &mut *slot;
            let p1 = h.domain.reduce_scatter(input, &mut *a, op)?;
            let b = h.rails.all_reduce(&p1, &mut *b, op)?.wait()?;
            p1.wait()?;
            // (Bound, so that the call's temporaries end before `slot`.)
            let out = h.domain.all_gather(&*b, out)?.wait()?;
            Ok(out)
        } else if l > 1 {
            // A length the domain cannot chunk evenly: the whole message
            // in the domain, then across domains.
            let slot = h.bufs::<T, 1>(&self.user, "all_reduce", [n])?;
            let mut slot = lock(&slot);
            let [a] = &mut *slot;
            let p1 = h.domain.all_reduce(input, &mut *a, op)?;
            let out = h.rails.all_reduce(&p1, out, op)?.wait()?;
            p1.wait()?;
            Ok(out)
        } else {
            h.rails.all_reduce(input, out, op)?.wait()
        }
    }

    /// [`all_reduce`](Self::all_reduce) across domains in the exact form,
    /// where [`exact_across`](Self::exact_across) says so: the
    /// all-to-all of the message's `world` chunks (the last ones padded),
    /// this rank's chunk of every rank folded in rank order, as in one
    /// domain, then the all-gather of the folded chunks. As many bytes
    /// cross the network as in a flat ring all-reduce (module docs).
    pub(super) fn all_reduce_exact<'c, T, O>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        mut out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>>
    where
        T: ReduceElem,
        O: Output<T>,
    {
        let n = input.__memory().len();
        let size = std::mem::size_of::<T>();
        let facts = self.facts(Collective::AllReduce, Some(op), input, n * size, None);
        let moves = self.exact_moves(&facts, self.exact_chunk(n) * size);
        let shape = [n as u64, op.code(), EXACT];
        let big = self.exact_too_long(n);
        let h = self.begin_across(&facts, &moves, &shape, input, &mut out, (n, big))?;
        let out = self.legs(h, || self.exact_legs(h, input.__memory(), out, op, n))?;
        self.pending(out, "all_reduce")
    }

    /// The chunk of an exact all-reduce of `n` elements: the world's share,
    /// rounded up (the last chunks padded).
    pub(super) fn exact_chunk(&self, n: usize) -> usize {
        n.div_ceil(self.cs.world_size())
    }

    /// Why an exact all-reduce of `n` elements cannot run: its padded
    /// chunks pass symm's kernels' lengths.
    fn exact_too_long(&self, n: usize) -> Option<String> {
        (self.exact_chunk(n) * self.cs.world_size() > u32::MAX as usize).then(|| too_long(n))
    }

    /// The legs of the exact all-reduce of `input`'s `n` elements into
    /// `out` ([`all_reduce_exact`](Self::all_reduce_exact)).
    fn exact_legs<T: ReduceElem, O: Output<T>>(
        &self,
        h: &Hier,
        input: &dyn DeviceSlice<T>,
        out: O,
        op: ReduceOp,
        n: usize,
    ) -> Result<O> {
        if n == 0 {
            return Ok(out);
        }
        let world = self.cs.world_size();
        let chunk = self.exact_chunk(n);
        let padded = chunk * world;
        let slot = h.bufs::<T, 3>(&self.user, "all_reduce_exact", [padded, padded, chunk])?;
        let mut slot = lock(&slot);
        let [p, q, b] = &mut *slot;
        self.exchange_fold(h, input, &mut *b, op, chunk, [p, q])?;
        if n == padded {
            self.gather_legs(h, &*b, out, chunk)
        } else {
            // The padded chunks' all-gather, then its first `n`.
            let p = self.gather_legs(h, &*b, &mut *p, chunk)?;
            let mut o = out;
            self.reorder(&*p, o.__memory_mut(), (1, 1), n)?;
            Ok(o)
        }
    }

    /// This rank's `chunk` of every rank's `input` (`world` chunks, the
    /// last ones maybe short) into `out`, reduced in rank order: the exact
    /// form's all-to-all, then `collectives::fold`, through `p` and `q`
    /// (`world × chunk` each).
    fn exchange_fold<T: ReduceElem>(
        &self,
        h: &Hier,
        input: &dyn DeviceSlice<T>,
        out: &mut dyn DeviceSlice<T>,
        op: ReduceOp,
        chunk: usize,
        [p, q]: [&mut DeviceBuffer<T>; 2],
    ) -> Result<()> {
        let q = self.exchange(h, input, q, p, chunk)?;
        // (On the domain's handle, on the same stream: the fold is local,
        // and a group that spans domains launches no kernel.)
        collectives::fold(&h.domain.cs, op, &*q, out, self.cs.world_size())
    }

    /// [`all_reduce_in_place`](Self::all_reduce_in_place) across domains,
    /// in the exact form (`exact`) or the hierarchical one: `buf` copied
    /// aside, and the out-of-place form's legs from the copy into `buf`.
    pub(super) fn all_reduce_in_place_across<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        mut buf: O,
        op: ReduceOp,
        exact: bool,
    ) -> Result<Pending<'c, O>> {
        let n = buf.__memory_mut().len();
        let size = std::mem::size_of::<T>();
        let facts = self.facts_in_place::<T>(Collective::AllReduce, Some(op), n, n * size, None);
        let moves = self.exact_moves(&facts, self.exact_chunk(n) * size);
        let (rail, form, big) = match exact {
            true => (&moves, EXACT, self.exact_too_long(n)),
            false => (&facts, 0, None),
        };
        let shape = [n as u64, op.code(), IN_PLACE, form];
        let h = self.hier()?;
        let route = h.rails.route(rail)?;
        self.begin_in_place(&facts, route, &shape, &mut buf, (n, big))?;
        let out = self.legs(h, || {
            let slot = h.bufs::<T, 1>(&self.user, "in_place", [n])?;
            let mut slot = lock(&slot);
            let [copy] = &mut *slot;
            let mut buf = buf;
            self.reorder(&*buf.__memory_mut(), &mut *copy, (1, 1), n)?;
            match exact {
                true => self.exact_legs(h, &*copy, buf, op, n),
                false => self.reduce_legs(h, &*copy, buf, op, n),
            }
        })?;
        self.pending(out, "all_reduce_in_place")
    }

    /// [`all_reduce_coalesced`](Self::all_reduce_coalesced) across
    /// domains, in the exact form (`exact`) or the hierarchical one: the
    /// ranges packed into one message, its all-reduce, and the reductions
    /// unpacked into `out` over a copy of the input (what the call leaves
    /// outside the ranges).
    pub(super) fn all_reduce_coalesced_across<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        ranges: &[std::ops::Range<usize>],
        mut out: O,
        op: ReduceOp,
        exact: bool,
    ) -> Result<Pending<'c, O>> {
        let len = input.__memory().len();
        let out_len = out.__memory_mut().len();
        // (Saturating: a bogus range is an agreed problem, not a panic.)
        let total = ranges.iter().fold(0usize, |t, r| t.saturating_add(r.len()));
        let size = std::mem::size_of::<T>();
        // The same problems as in one domain (`collectives::all_reduce_coalesced`).
        let problem = coalesced_problem(ranges, len, out_len)
            .or_else(|| ranges_overlap(ranges).then(|| "the ranges overlap".to_string()))
            .or_else(|| {
                (total > u32::MAX as usize)
                    .then(|| "the ranges hold 2^32 elements or more".to_string())
            })
            .or_else(|| exact.then(|| self.exact_too_long(total)).flatten());
        let mut facts = self.facts(
            Collective::AllReduceCoalesced,
            Some(op),
            input,
            total.saturating_mul(size),
            None,
        );
        facts.placed = Placed::Plain;
        let legs_facts = CallFacts {
            collective: Collective::AllReduce,
            ..facts.clone()
        };
        let moves = self.exact_moves(&facts, self.exact_chunk(total).saturating_mul(size));
        let rail = if exact { &moves } else { &legs_facts };
        let mut shape = vec![len as u64, op.code()];
        shape.extend(ranges.iter().flat_map(|r| [r.start as u64, r.end as u64]));
        shape.push(if exact { EXACT } else { 0 });
        // (Not `begin_across`: the legs read the packed copy, never the
        // input in place, so its kind need not agree.)
        let h = self.hier()?;
        let route = h.rails.route(rail)?;
        self.begin(&facts, route, &shape, input, &mut out, (len, problem))?;
        let out = self.legs(h, || {
            let slot = h.bufs::<T, 2>(&self.user, "all_reduce_coalesced", [total; 2])?;
            let mut slot = lock(&slot);
            let [packed, sums] = &mut *slot;
            self.pack(input.__memory(), &mut *packed, ranges, true)?;
            let sums = match exact {
                true => self.exact_legs(h, &*packed, &mut *sums, op, total)?,
                false => self.reduce_legs(h, &*packed, &mut *sums, op, total)?,
            };
            let mut out = out;
            self.reorder(input.__memory(), out.__memory_mut(), (1, 1), len)?;
            self.pack(&*sums, out.__memory_mut(), ranges, false)?;
            Ok(out)
        })?;
        self.pending(out, "all_reduce_coalesced")
    }

    /// Copies each of `ranges` of `src` into consecutive elements of `dst`
    /// (`to_packed`), or consecutive elements of `src` into `ranges` of
    /// `dst`, on the group's stream.
    fn pack<T: Element>(
        &self,
        src: &dyn DeviceSlice<T>,
        dst: &mut dyn DeviceSlice<T>,
        ranges: &[std::ops::Range<usize>],
        to_packed: bool,
    ) -> Result<()> {
        let src = self.cs.bind("src", src)?;
        let mut dst = self.cs.bind_mut("dst", dst)?;
        let mut at = 0;
        for r in ranges {
            let packed = at..at + r.len();
            let (from, to) = match to_packed {
                true => (r.clone(), packed),
                false => (packed, r.clone()),
            };
            let (Some(from), Some(mut to)) = (src.sub(from), dst.sub_mut(to)) else {
                return Err(invalid(&self.cs, "a range lies outside its buffer".into()));
            };
            self.cs.copy(&from, &mut to)?;
            at += r.len();
        }
        Ok(())
    }

    /// The calls that move an exact reduction's bytes, as the rule sees
    /// them (copies, which NCCL runs whatever the op): its route is the
    /// rails' all-to-all's.
    pub(super) fn exact_moves(&self, facts: &CallFacts, chunk_bytes: usize) -> CallFacts {
        CallFacts {
            collective: Collective::AllToAll,
            op: None,
            bytes: chunk_bytes,
            bytes_per_peer: chunk_bytes,
            nccl_shape: None,
            ..facts.clone()
        }
    }

    /// [`reduce_scatter`](Self::reduce_scatter) across domains in the
    /// exact form ([`all_reduce_exact`](Self::all_reduce_exact)'s first
    /// half), of an input the world size divides (else an error on every
    /// rank).
    pub(super) fn reduce_scatter_exact<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        mut out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let world = self.cs.world_size();
        let chunk = n / world;
        let size = std::mem::size_of::<T>();
        let mut facts = self.facts(
            Collective::ReduceScatter,
            Some(op),
            input,
            chunk * size,
            None,
        );
        facts.bytes = chunk * size;
        let moves = self.exact_moves(&facts, chunk * size);
        let problem = match n.is_multiple_of(world) {
            false => Some(uneven_across(n, world)),
            true => (n > u32::MAX as usize).then(|| too_long(n)),
        };
        let shape = [n as u64, op.code(), EXACT];
        let h = self.begin_across(&facts, &moves, &shape, input, &mut out, (chunk, problem))?;
        let out = self.legs(h, || {
            if n == 0 {
                return Ok(out);
            }
            let slot = h.bufs::<T, 2>(&self.user, "reduce_scatter_exact", [n, n])?;
            let mut slot = lock(&slot);
            let [p, q] = &mut *slot;
            let mut o = out;
            self.exchange_fold(h, input.__memory(), o.__memory_mut(), op, chunk, [p, q])?;
            Ok(o)
        })?;
        self.pending(out, "reduce_scatter")
    }

    /// [`all_to_all`](Self::all_to_all) across domains of consecutive
    /// ranks (module docs), of an input the world size divides (else an
    /// error on every rank).
    pub(super) fn all_to_all_across<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        mut out: O,
    ) -> Result<Pending<'c, O>> {
        let len = input.__memory().len();
        let world = self.cs.world_size();
        let m = len / world;
        let facts = self.facts(
            Collective::AllToAll,
            None,
            input,
            m * std::mem::size_of::<T>(),
            None,
        );
        let uneven = (!len.is_multiple_of(world)).then(|| {
            format!("all_to_all of {len} elements on {world} ranks: the world size must divide the input")
        });
        let h = self.begin_across(
            &facts,
            &facts,
            &[len as u64],
            input,
            &mut out,
            (len, uneven),
        )?;
        let out = self.legs(h, || {
            if len == 0 {
                return Ok(out);
            }
            let slot = h.bufs::<T, 2>(&self.user, "all_to_all", [len, len])?;
            let mut slot = lock(&slot);
            let [p, q] = &mut *slot;
            let q = self.exchange(h, input.__memory(), q, p, m)?;
            let mut o = out;
            self.reorder(&*q, o.__memory_mut(), (1, 1), len)?;
            Ok(o)
        })?;
        self.pending(out, "all_to_all")
    }

    /// The legs of an all-to-all across domains of consecutive ranks, of
    /// `m` elements for each rank from `input` (`world × m`, or fewer: a
    /// padded message's, whose missing elements are never read back),
    /// into `out` (`world × m`), through `spare` (as long): the input
    /// grouped by local index ([local index][domain]), the all-to-all of
    /// those groups in the domain, regrouped by domain, and the rail's
    /// all-to-all of those. Each rank's bytes cross the network once, in
    /// one message per domain. Returns `out`.
    fn exchange<'o, T: CopyElem>(
        &self,
        h: &Hier,
        input: &dyn DeviceSlice<T>,
        out: &'o mut DeviceBuffer<T>,
        spare: &mut DeviceBuffer<T>,
        m: usize,
    ) -> Result<&'o mut DeviceBuffer<T>> {
        let (l, d) = (h.domain.cs.world_size(), h.rails.cs.world_size());
        if l == 1 {
            // One rank per domain: the rail's all-to-all alone.
            self.reorder(input, &mut *spare, (1, 1), d * m)?;
            return h.rails.all_to_all(&*spare, out)?.wait();
        }
        self.reorder(input, &mut *spare, (d, l), m)?;
        let got = h.domain.all_to_all(&*spare, &mut *out)?.wait()?;
        self.reorder(&*got, &mut *spare, (l, d), m)?;
        h.rails.all_to_all(&*spare, out)?.wait()
    }

    /// [`all_gather`](Self::all_gather) across domains (module docs).
    pub(super) fn all_gather_across<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        mut out: O,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let size = std::mem::size_of::<T>();
        let world = self.cs.world_size();
        let facts = self.facts(Collective::AllGather, None, input, n * size, None);
        let need = n.saturating_mul(world);
        let h = self.begin_across(&facts, &facts, &[n as u64], input, &mut out, (need, None))?;
        let out = self.legs(h, || self.gather_legs(h, input, out, n))?;
        self.pending(out, "all_gather")
    }

    /// The legs of an all-gather of `n` elements across domains of
    /// consecutive ranks, in the form its size takes (module docs).
    fn gather_legs<T: CopyElem, I: Operand<T> + ?Sized, O: Output<T>>(
        &self,
        h: &Hier,
        input: &I,
        out: O,
        n: usize,
    ) -> Result<O> {
        let (l, d) = (h.domain.cs.world_size(), h.rails.cs.world_size());
        if n * l * d * std::mem::size_of::<T>() < self.options.reorder_min_bytes() {
            // The domain's chunks, then every domain's: rank order.
            let slot = h.bufs::<T, 1>(&self.user, "all_gather", [l * n])?;
            let mut slot = lock(&slot);
            let [a] = &mut *slot;
            let a = h.domain.all_gather(input, &mut *a)?.wait()?;
            let out = h.rails.all_gather(&*a, out)?.wait()?;
            Ok(out)
        } else {
            // This rank's rail's chunks (one per domain), then the
            // domain's rails': [local index][domain], reordered.
            let slot = h.bufs::<T, 2>(&self.user, "all_gather", [d * n, l * d * n])?;
            let mut slot = lock(&slot);
            let [a, b] = &mut *slot;
            let a = h.rails.all_gather(input, &mut *a)?.wait()?;
            let b = h.domain.all_gather(&*a, &mut *b)?.wait()?;
            let mut out = out;
            self.reorder(&*b, out.__memory_mut(), (l, d), n)?;
            Ok(out)
        }
    }

    /// [`reduce_scatter`](Self::reduce_scatter) across domains (module
    /// docs), of an input the world size divides (else an error on every
    /// rank).
    pub(super) fn reduce_scatter_across<'c, T: ReduceElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        mut out: O,
        op: ReduceOp,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let size = std::mem::size_of::<T>();
        let world = self.cs.world_size();
        let chunk = n / world;
        let mut facts = self.facts(
            Collective::ReduceScatter,
            Some(op),
            input,
            chunk * size,
            None,
        );
        // (The chunk, as the flat call's facts weigh it.)
        facts.bytes = chunk * size;
        let shape = [n as u64, op.code()];
        let uneven = (!n.is_multiple_of(world)).then(|| uneven_across(n, world));
        let h = self.begin_across(&facts, &facts, &shape, input, &mut out, (chunk, uneven))?;
        let (l, d) = (h.domain.cs.world_size(), h.rails.cs.world_size());
        let out = self.legs(h, || {
            if n * size < self.options.reorder_min_bytes() {
                // The rail's sum of this rank's domain's chunks, then the
                // domain's of this rank's.
                let slot = h.bufs::<T, 1>(&self.user, "reduce_scatter", [l * chunk])?;
                let mut slot = lock(&slot);
                let [a] = &mut *slot;
                let a = h.rails.reduce_scatter(input, &mut *a, op)?.wait()?;
                let out = h.domain.reduce_scatter(&*a, out, op)?.wait()?;
                Ok(out)
            } else {
                // The input in [local index][domain] order, the domain's
                // sum of this rank's rail's chunks, then the rail's.
                let slot = h.bufs::<T, 2>(&self.user, "reduce_scatter", [n, d * chunk])?;
                let mut slot = lock(&slot);
                let [p, a] = &mut *slot;
                self.reorder(input.__memory(), &mut *p, (d, l), chunk)?;
                let a = h.domain.reduce_scatter(&*p, &mut *a, op)?.wait()?;
                let out = h.rails.reduce_scatter(&*a, out, op)?.wait()?;
                Ok(out)
            }
        })?;
        self.pending(out, "reduce_scatter")
    }

    /// [`broadcast`](Self::broadcast) across domains (module docs).
    pub(super) fn broadcast_across<'c, T: CopyElem, O: Output<T>>(
        &'c self,
        input: &'c (impl Operand<T> + ?Sized),
        mut out: O,
        root: usize,
    ) -> Result<Pending<'c, O>> {
        let n = input.__memory().len();
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::Broadcast, None, input, bytes, None);
        let world = self.cs.world_size();
        let need = (n, root_problem(root, world));
        let shape = [n as u64, root as u64];
        let h = self.begin_across(&facts, &facts, &shape, input, &mut out, need)?;
        let t = self.user.topology();
        let (root_domain, root_local) = (t.domain_of(root), t.local_rank(root));
        let out = self.legs(h, || {
            // Every domain's leg reads the same kind of input: this
            // buffer, the root's rail's copy of the root's input (only
            // the rail's rank's is read).
            let slot = h.bufs::<T, 1>(&self.user, "broadcast", [n])?;
            let mut slot = lock(&slot);
            let [a] = &mut *slot;
            if h.domain.cs.rank() == root_local {
                h.rails.broadcast(input, &mut *a, root_domain)?.wait()?;
            }
            let out = h.domain.broadcast(&*a, out, root_local)?.wait()?;
            Ok(out)
        })?;
        self.pending(out, "broadcast")
    }

    /// Copies `src`, `rows × cols` chunks of `chunk` elements (row-major),
    /// into `dst` column-major, on the group's stream. Either may end
    /// early (a padded message's): only the elements both hold are copied.
    fn reorder<T: Element>(
        &self,
        src: &dyn DeviceSlice<T>,
        dst: &mut dyn DeviceSlice<T>,
        (rows, cols): (usize, usize),
        chunk: usize,
    ) -> Result<()> {
        let s = self.cs.bind("input", src)?;
        let mut d = self.cs.bind_mut("out", dst)?;
        let (sl, dl) = (s.len(), d.len());
        let short = || invalid(&self.cs, "a reordered chunk lies outside its buffer".into());
        for i in 0..rows {
            for j in 0..cols {
                let (a, b) = ((i * cols + j) * chunk, (j * rows + i) * chunk);
                let len = chunk.min(sl.saturating_sub(a)).min(dl.saturating_sub(b));
                if len == 0 {
                    continue;
                }
                let from = s.sub(a..a + len).ok_or_else(short)?;
                let mut to = d.sub_mut(b..b + len).ok_or_else(short)?;
                self.cs.copy(&from, &mut to)?;
            }
        }
        Ok(())
    }
}

/// A scratch slot: the element type, the call (a form's name), and the
/// count and lengths of its buffers.
type ScratchKey = (TypeId, &'static str, [usize; 5]);

/// The last word of an exact reduction's agreed shape: ranks that would
/// take the exact form and the hierarchical one for the same call fail
/// at its agreement, not in legs that never meet.
const EXACT: u64 = u64::MAX;

/// The word an in-place reduction's agreed shape adds (against the same
/// call out of place, whose input a rank could otherwise pass instead).
const IN_PLACE: u64 = u64::MAX - 1;

impl Hier {
    /// The `N` buffers of `T` for `form` on `lens` elements, made (on
    /// `comm`) at first use.
    fn bufs<T: Element, const N: usize>(
        &self,
        comm: &Comm,
        form: &'static str,
        lens: [usize; N],
    ) -> Result<Arc<Mutex<[DeviceBuffer<T>; N]>>> {
        const { assert!(N > 0 && N <= 4) };
        let mut key_lens = [N, 0, 0, 0, 0];
        key_lens[1..=N].copy_from_slice(&lens);
        let key = (TypeId::of::<T>(), form, key_lens);
        let mut scratch = lock(&self.scratch);
        let slot = match scratch.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let mut made: [Option<DeviceBuffer<T>>; N] = std::array::from_fn(|_| None);
                for (b, len) in made.iter_mut().zip(lens) {
                    *b = Some(comm.device_buffer::<T>(len)?);
                }
                e.insert(Arc::new(Mutex::new(made.map(|b| b.expect("made above")))))
            }
        };
        Ok(slot
            .clone()
            .downcast::<Mutex<[DeviceBuffer<T>; N]>>()
            .unwrap_or_else(|_| unreachable!("keyed by its type, form and lengths")))
    }
}

/// `m` locked, through a poisoning (what it guards is device memory that
/// the next call overwrites whole).
fn lock<X: ?Sized>(m: &Mutex<X>) -> std::sync::MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why an exact reduction of `n` elements cannot run: past symm's
/// kernels' lengths.
fn too_long(n: usize) -> String {
    format!(
        "an exact reduction across NVLink domains (the deterministic mode's, or float min \
         and max) of {n} elements passes symm's {} elements",
        u32::MAX
    )
}

/// Why a reduce-scatter across domains of `n` elements on `world` ranks
/// cannot run.
fn uneven_across(n: usize, world: usize) -> String {
    format!(
        "a reduce-scatter across NVLink domains takes equal chunks, and its input's {n} \
         elements are no multiple of the world size {world}"
    )
}

/// The [`Hier`] in `Collectives::hier` (which only this file sets).
fn mine(h: &(dyn Any + Send + Sync)) -> &Hier {
    h.downcast_ref::<Hier>()
        .expect("only hier.rs sets Collectives::hier")
}
