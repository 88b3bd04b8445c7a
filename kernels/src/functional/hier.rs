//! The all-reduce of a group that spans NVLink domains, hierarchically:
//! symm's reduce-scatter inside each domain, an all-reduce of each chunk
//! across the domains on its rail, and symm's all-gather inside each
//! domain. The rail's leg takes NCCL on GPUs; on the emulator, whose
//! domains are all simulated, symm's own kernels stand in for it across
//! them (`Comm::__emulated_network`), for tests of multi-node code.
//!
//! The whole group agrees on the call first (as any call of the group),
//! so ranks whose calls differ fail alike, before any leg. Every leg then
//! runs on the group's stream (the user's, or its communication stream),
//! in its order: the domain's and rail's handles of this rank are made on
//! it, so their kernels' failures are reported by the group's own
//! `synchronize`.

use super::*;
use symm::DeviceBuffer;

/// A spanning group's domain and rail collectives, and the chunks that
/// pass between them.
pub(super) struct Hier {
    domain: Collectives,
    rails: Collectives,
    /// Per element type and length: the reduce-scatter's and the rail
    /// all-reduce's outputs. Kept (not freed and made again) for CUDA
    /// graphs captured with them.
    scratch: Mutex<HashMap<(TypeId, usize), Box<dyn Any + Send>>>,
}

/// A pair of chunk buffers of one type and length.
struct Chunks<T: Element>(DeviceBuffer<T>, DeviceBuffer<T>);

impl Collectives {
    /// This group's domain and rail collectives, made at the first call
    /// that needs them (collective: every rank makes the same calls in
    /// the same order).
    fn hier(&self) -> Result<&Hier> {
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

    /// [`all_reduce`](Self::all_reduce) of a group that spans domains of
    /// one size, by its domains and rails (module docs), where
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
        let h = self.hier()?;
        // The whole group's agreement, with the rule's verdict on the
        // rail's leg (what NCCL refuses there, such as float min and max;
        // the whole group's own verdict would refuse ranks that share a
        // GPU within a domain).
        let bytes = n * std::mem::size_of::<T>();
        let facts = self.facts(Collective::AllReduce, Some(op), input, bytes, None);
        let route = h.rails.route(&facts)?;
        let shape = [n as u64, op.code(), 1];
        self.begin(&facts, route, &shape, input, &mut out, (n, None))?;
        let l = h.domain.cs.world_size();
        let out = if l > 1 && n.is_multiple_of(l) {
            // Reduce-scatter in the domain, the chunk across domains, and
            // all-gather in the domain.
            let mut scratch = h.scratch.lock().unwrap_or_else(|p| p.into_inner());
            let chunks = chunks::<T>(&mut scratch, &self.user, n / l)?;
            let Chunks(a, b) = chunks;
            let p1 = h.domain.reduce_scatter(input, &mut *a, op)?;
            let b = h.rails.all_reduce(&p1, &mut *b, op)?.wait()?;
            p1.wait()?;
            // (Bound, so that the call's temporaries end before `scratch`.)
            let out = h.domain.all_gather(&*b, out)?.wait()?;
            out
        } else if l > 1 {
            // A length the domain cannot chunk evenly: the whole message
            // in the domain, then across domains.
            let mut scratch = h.scratch.lock().unwrap_or_else(|p| p.into_inner());
            let Chunks(a, _) = chunks::<T>(&mut scratch, &self.user, n)?;
            let p1 = h.domain.all_reduce(input, &mut *a, op)?;
            let out = h.rails.all_reduce(&p1, out, op)?.wait()?;
            p1.wait()?;
            out
        } else {
            h.rails.all_reduce(input, out, op)?.wait()?
        };
        self.pending(out, "all_reduce")
    }
}

/// The chunk buffers of `T` and `len` in `scratch`, made (on `comm`) at
/// first use.
fn chunks<'s, T: Element>(
    scratch: &'s mut HashMap<(TypeId, usize), Box<dyn Any + Send>>,
    comm: &Comm,
    len: usize,
) -> Result<&'s mut Chunks<T>> {
    let slot = match scratch.entry((TypeId::of::<T>(), len)) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => e.insert(Box::new(Chunks(
            comm.device_buffer::<T>(len)?,
            comm.device_buffer::<T>(len)?,
        ))),
    };
    Ok(slot.downcast_mut::<Chunks<T>>().expect("keyed by its type"))
}

/// The [`Hier`] in `Collectives::hier` (which only this file sets).
fn mine(h: &(dyn Any + Send + Sync)) -> &Hier {
    h.downcast_ref::<Hier>()
        .expect("only hier.rs sets Collectives::hier")
}
