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
//!   a domain's ranks' chunks are consecutive. Up to `REORDER_MIN_BYTES`
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

use super::rule::REORDER_MIN_BYTES;

/// A spanning group's domain and rail collectives, and the buffers that
/// pass between them.
pub(super) struct Hier {
    domain: Collectives,
    rails: Collectives,
    /// Per element type, call and lengths: the buffers between the legs,
    /// a `[DeviceBuffer<T>; N]`. Kept (not freed and made again) for CUDA
    /// graphs captured with them.
    scratch: Mutex<HashMap<ScratchKey, Box<dyn Any + Send>>>,
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
        let domain = Collectives::with_options(&on_stream(self.user.domain()?)?, options.clone())?;
        let rails = self.user.rails()?;
        let rails = match rails.__emulated_network() {
            Some(network) => network,
            None => on_stream(rails)?,
        };
        let rails = Collectives::with_options(&rails, options)?;
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
        shape: &[u64],
        input: &I,
        out: &mut O,
        need: (usize, Option<String>),
    ) -> Result<&Hier> {
        let h = self.hier()?;
        let route = h.rails.route(facts)?;
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
        let h = self.begin_across(&facts, &[n as u64, op.code()], input, &mut out, (n, None))?;
        let l = h.domain.cs.world_size();
        let out = self.legs(h, || {
            if l > 1 && n.is_multiple_of(l) {
                // Reduce-scatter in the domain, the chunk across domains,
                // and all-gather in the domain.
                let mut scratch = h.scratch.lock().unwrap_or_else(|p| p.into_inner());
                let [a, b] = bufs::<T, 2>(&mut scratch, &self.user, "all_reduce", [n / l; 2])?;
                let p1 = h.domain.reduce_scatter(input, &mut *a, op)?;
                let b = h.rails.all_reduce(&p1, &mut *b, op)?.wait()?;
                p1.wait()?;
                // (Bound, so that the call's temporaries end before
                // `scratch`.)
                let out = h.domain.all_gather(&*b, out)?.wait()?;
                Ok(out)
            } else if l > 1 {
                // A length the domain cannot chunk evenly: the whole
                // message in the domain, then across domains.
                let mut scratch = h.scratch.lock().unwrap_or_else(|p| p.into_inner());
                let [a] = bufs::<T, 1>(&mut scratch, &self.user, "all_reduce", [n])?;
                let p1 = h.domain.all_reduce(input, &mut *a, op)?;
                let out = h.rails.all_reduce(&p1, out, op)?.wait()?;
                p1.wait()?;
                Ok(out)
            } else {
                h.rails.all_reduce(input, out, op)?.wait()
            }
        })?;
        self.pending(out, "all_reduce")
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
        let h = self.begin_across(&facts, &[n as u64], input, &mut out, (need, None))?;
        let (l, d) = (h.domain.cs.world_size(), h.rails.cs.world_size());
        let out = self.legs(h, || {
            let mut scratch = h.scratch.lock().unwrap_or_else(|p| p.into_inner());
            if need * size < REORDER_MIN_BYTES {
                // The domain's chunks, then every domain's: rank order.
                let [a] = bufs::<T, 1>(&mut scratch, &self.user, "all_gather", [l * n])?;
                let a = h.domain.all_gather(input, &mut *a)?.wait()?;
                let out = h.rails.all_gather(&*a, out)?.wait()?;
                Ok(out)
            } else {
                // This rank's rail's chunks (one per domain), then the
                // domain's rails': [local index][domain], reordered.
                let [a, b] =
                    bufs::<T, 2>(&mut scratch, &self.user, "all_gather", [d * n, l * d * n])?;
                let a = h.rails.all_gather(input, &mut *a)?.wait()?;
                let b = h.domain.all_gather(&*a, &mut *b)?.wait()?;
                self.reorder(&*b, out.__memory_mut(), (l, d), n)?;
                Ok(out)
            }
        })?;
        self.pending(out, "all_gather")
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
        let facts = self.facts(
            Collective::ReduceScatter,
            Some(op),
            input,
            chunk * size,
            None,
        );
        let shape = [n as u64, op.code()];
        let uneven = (!n.is_multiple_of(world)).then(|| {
            format!(
                "a reduce-scatter across NVLink domains takes equal chunks, and its input's \
                 {n} elements are no multiple of the world size {world}"
            )
        });
        let h = self.begin_across(&facts, &shape, input, &mut out, (chunk, uneven))?;
        let (l, d) = (h.domain.cs.world_size(), h.rails.cs.world_size());
        let out = self.legs(h, || {
            let mut scratch = h.scratch.lock().unwrap_or_else(|p| p.into_inner());
            if n * size < REORDER_MIN_BYTES {
                // The rail's sum of this rank's domain's chunks, then the
                // domain's of this rank's.
                let [a] = bufs::<T, 1>(&mut scratch, &self.user, "reduce_scatter", [l * chunk])?;
                let a = h.rails.reduce_scatter(input, &mut *a, op)?.wait()?;
                let out = h.domain.reduce_scatter(&*a, out, op)?.wait()?;
                Ok(out)
            } else {
                // The input in [local index][domain] order, the domain's
                // sum of this rank's rail's chunks, then the rail's.
                let [p, a] =
                    bufs::<T, 2>(&mut scratch, &self.user, "reduce_scatter", [n, d * chunk])?;
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
        let h = self.begin_across(&facts, &[n as u64, root as u64], input, &mut out, need)?;
        let t = self.user.topology();
        let (root_domain, root_local) = (t.domain_of(root), t.local_rank(root));
        let out = self.legs(h, || {
            let mut scratch = h.scratch.lock().unwrap_or_else(|p| p.into_inner());
            // Every domain's leg reads the same kind of input: this
            // buffer, the root's rail's copy of the root's input (only
            // the rail's rank's is read).
            let [a] = bufs::<T, 1>(&mut scratch, &self.user, "broadcast", [n])?;
            if h.domain.cs.rank() == root_local {
                h.rails.broadcast(input, &mut *a, root_domain)?.wait()?;
            }
            let out = h.domain.broadcast(&*a, out, root_local)?.wait()?;
            Ok(out)
        })?;
        self.pending(out, "broadcast")
    }

    /// Copies `src`, `rows × cols` chunks of `chunk` elements (row-major),
    /// into `dst` column-major, on the group's stream.
    fn reorder<T: Element>(
        &self,
        src: &dyn DeviceSlice<T>,
        dst: &mut dyn DeviceSlice<T>,
        (rows, cols): (usize, usize),
        chunk: usize,
    ) -> Result<()> {
        let s = self.cs.bind("input", src)?;
        let mut d = self.cs.bind_mut("out", dst)?;
        let at = |k: usize| k * chunk..(k + 1) * chunk;
        let short = || invalid(&self.cs, "a reordered chunk lies outside its buffer".into());
        for i in 0..rows {
            for j in 0..cols {
                let from = s.sub(at(i * cols + j)).ok_or_else(short)?;
                let mut to = d.sub_mut(at(j * rows + i)).ok_or_else(short)?;
                self.cs.copy(&from, &mut to)?;
            }
        }
        Ok(())
    }
}

/// A scratch slot: the element type, the call, and the count, first and
/// last lengths of its buffers (which determine the others).
type ScratchKey = (TypeId, &'static str, [usize; 3]);

/// The `N` buffers of `T` for `call` on `lens` elements in `scratch`, made
/// (on `comm`) at first use.
fn bufs<'s, T: Element, const N: usize>(
    scratch: &'s mut HashMap<ScratchKey, Box<dyn Any + Send>>,
    comm: &Comm,
    call: &'static str,
    lens: [usize; N],
) -> Result<&'s mut [DeviceBuffer<T>; N]> {
    const { assert!(N > 0 && N <= 2) };
    let key = (TypeId::of::<T>(), call, [N, lens[0], lens[N - 1]]);
    let slot = match scratch.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            let mut made: [Option<DeviceBuffer<T>>; N] = std::array::from_fn(|_| None);
            for (b, len) in made.iter_mut().zip(lens) {
                *b = Some(comm.device_buffer::<T>(len)?);
            }
            e.insert(Box::new(made.map(|b| b.expect("made above"))))
        }
    };
    Ok(slot
        .downcast_mut::<[DeviceBuffer<T>; N]>()
        .expect("keyed by its type, call and lengths"))
}

/// The [`Hier`] in `Collectives::hier` (which only this file sets).
fn mine(h: &(dyn Any + Send + Sync)) -> &Hier {
    h.downcast_ref::<Hier>()
        .expect("only hier.rs sets Collectives::hier")
}
