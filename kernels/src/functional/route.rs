//! One call's way through the layer, as [`Collectives::run`] takes it:
//! its route by the rule, this rank's problem, agreement across ranks,
//! the symmetric input (in place, or staged), and the backend's call.

use super::*;

impl Collectives {
    /// This rank's staging for `T`, holding at least `len` elements: made
    /// or grown on every rank alike (every rank asks for the same agreed
    /// `len` on every symm call, whatever its input, so the collective
    /// allocation meets its peers').
    pub(super) fn staging<T: Element>(&self, len: usize) -> Result<Arc<Staging<T>>> {
        let mut map = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        let now = map
            .get(&TypeId::of::<T>())
            .and_then(|b| b.downcast_ref::<Arc<Staging<T>>>())
            .cloned();
        if let Some(st) = now.as_ref().filter(|st| st.buf.len() >= len) {
            return Ok(st.clone());
        }
        let min = if now.is_some() {
            len
        } else {
            len.max(MIN_STAGING)
        };
        let buf = self.cs.alloc::<T>(min.next_power_of_two())?;
        let st = Arc::new(Staging {
            smem: buf.rendezvous()?,
            buf,
            _older: now,
        });
        map.insert(TypeId::of::<T>(), Box::new(st.clone()));
        Ok(st)
    }

    /// Elements the staging of `T` holds now (what it will hold when first
    /// made, before that): no allocation.
    pub(super) fn staging_len<T: Element>(&self) -> usize {
        let map = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&TypeId::of::<T>())
            .and_then(|b| b.downcast_ref::<Arc<Staging<T>>>())
            .map_or(MIN_STAGING, |st| st.buf.len())
    }

    /// The symmetric memory a symm kernel reads `input` from: the input
    /// itself where it is symmetric, otherwise the staging buffer, with
    /// `input` copied into it on the communication stream. `grow` is the
    /// agreed length the staging must hold (the same on every rank).
    pub(super) fn symm_input<T: Element>(
        &self,
        input: &(impl Operand<T> + ?Sized),
        staged: bool,
        grow: usize,
    ) -> Result<Arc<SymmetricMemory>> {
        let st = self.staging::<T>(grow)?;
        if !staged {
            if let Some(s) = input.__symmetric(&self.cs) {
                return s;
            }
        }
        let mut dst = st.buf.slice(..input.__memory().len())?;
        self.cs.copy(input.__memory(), &mut dst)?;
        Ok(st.smem.clone())
    }

    /// What this rank finds wrong with a call before any peer is waited
    /// for: the call's own `extra` problem, an output too small for what
    /// the call writes, memory this rank may not use (another rank's, or
    /// another device's), and, for NCCL (which waits for a peer that
    /// returned early forever), memory it cannot bind. Published in the
    /// agreement, so that every rank fails alike.
    pub(super) fn local_problem<T: Element>(
        &self,
        route: Route,
        input: Option<&dyn DeviceSlice<T>>,
        (out, out_name): (&mut dyn DeviceSlice<T>, &str),
        need_out: usize,
        extra: Option<String>,
    ) -> Option<Problem> {
        if let Some(text) = extra {
            return Some(text.into());
        }
        if out.len() < need_out {
            return Some(
                format!(
                    "the output holds {} elements, and the call writes {need_out}",
                    out.len()
                )
                .into(),
            );
        }
        let reach = match input {
            Some(input) => self.cs.check_memory("input", input, false),
            None => Ok(()),
        }
        .and_then(|()| self.cs.check_memory(out_name, &*out, true));
        if let Err(e) = reach {
            return Some(Problem::from(&e));
        }
        if route != Route::Nccl {
            return None;
        }
        if let Some(Err(e)) = input.map(|i| self.cs.bind("input", i)) {
            return Some(Problem::from(&e));
        }
        self.cs
            .bind_mut(out_name, out)
            .err()
            .map(|e| Problem::from(&e))
    }

    /// Checks the call across ranks (on the first call of its shape, as the
    /// kernels do: the route, the element type, the shape, and every rank's
    /// local problem); the choice in words goes to the debug log when that
    /// is on.
    pub(super) fn decide(
        &self,
        facts: &CallFacts,
        route: Route,
        shape: &[u64],
        problem: Option<Problem>,
    ) -> Result<()> {
        // Where each rank's input lies is not in the key: it may differ
        // between ranks only as an error, which the kernels' digest (the
        // input's identity) reports on every rank.
        let key = Key {
            collective: facts.collective,
            nccl: route == Route::Nccl,
            dtype: facts.dtype,
            shape,
        };
        agree(&self.cs, &key, problem)?;
        let name = facts.collective.name();
        if tracing::enabled!(tracing::Level::DEBUG) {
            // `explain`'s words: a call across domains is its form's.
            if let Ok(choice) = self.explain(facts) {
                tracing::debug!(rank = self.cs.rank(), call = name, "{choice}");
            }
        }
        Ok(())
    }

    pub(super) fn facts<T: Element>(
        &self,
        collective: Collective,
        op: Option<ReduceOp>,
        input: &(impl Operand<T> + ?Sized),
        bytes_per_peer: usize,
        nccl_shape: Option<&'static str>,
    ) -> CallFacts {
        let len = input.__memory().len();
        CallFacts {
            placed: input.__placed(&self.cs),
            ..self.facts_in_place::<T>(collective, op, len, bytes_per_peer, nccl_shape)
        }
    }

    /// The facts of an in-place call on `len` elements: its input is
    /// always staged (the kernels would write what peers still read); with
    /// the input's place, [`facts`](Self::facts) of any call.
    pub(super) fn facts_in_place<T: Element>(
        &self,
        collective: Collective,
        op: Option<ReduceOp>,
        len: usize,
        bytes_per_peer: usize,
        nccl_shape: Option<&'static str>,
    ) -> CallFacts {
        CallFacts {
            collective,
            dtype: T::DTYPE,
            op,
            bytes: len * std::mem::size_of::<T>(),
            bytes_per_peer,
            nccl_shape,
            placed: Placed::Plain,
        }
    }

    /// The route of `facts`, or the rule's error (the same on every rank);
    /// an op the element type lacks is reported first, as the more basic
    /// fault.
    pub(super) fn route(&self, facts: &CallFacts) -> Result<Route> {
        rule::route(&self.options, &self.group, facts).map_err(|e| match facts.op_problem() {
            Some(p) => self.cs.error(p.kind, p.text),
            None => rule_error(&self.cs, e),
        })
    }

    /// One call: its route, checked across ranks with every rank's local
    /// problem (`extra`, and an output shorter than `need_out`); the
    /// communication stream ordered after the user's work and the input's
    /// producer; then `symm` (the kernel on the input's symmetric memory,
    /// in place or staged into a staging of at least `grow` elements) or
    /// `nccl` (on the input and output bound to the communication
    /// stream); and the handle, which borrows the input (it may not change
    /// before the wait).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run<'c, T: Element, I: Operand<T> + ?Sized, O: Output<T>>(
        &'c self,
        facts: CallFacts,
        shape: &[u64],
        input: &'c I,
        out: O,
        (need_out, grow, extra): (usize, usize, Option<String>),
        what: &'static str,
        symm: impl FnOnce(&Comm, &SymmetricMemory, &mut dyn DeviceSlice<T>) -> Result<()>,
        nccl: impl FnOnce(
            &nccl::Nccl,
            &BoundSlice<'_, T>,
            &mut BoundSlice<'_, T>,
            &CudaStream,
        ) -> Result<()>,
    ) -> Result<Pending<'c, O>> {
        let route = self.route(&facts)?;
        self.run_on(
            route,
            facts,
            shape,
            input,
            out,
            (need_out, grow, extra),
            what,
            symm,
            nccl,
        )
    }

    /// [`run`](Self::run) on `route`, which the caller took from
    /// [`route`](Self::route) for `facts` (to choose its symm kernel by it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_on<'c, T: Element, I: Operand<T> + ?Sized, O: Output<T>>(
        &'c self,
        route: Route,
        facts: CallFacts,
        shape: &[u64],
        input: &'c I,
        mut out: O,
        (need_out, grow, extra): (usize, usize, Option<String>),
        what: &'static str,
        symm: impl FnOnce(&Comm, &SymmetricMemory, &mut dyn DeviceSlice<T>) -> Result<()>,
        nccl: impl FnOnce(
            &nccl::Nccl,
            &BoundSlice<'_, T>,
            &mut BoundSlice<'_, T>,
            &CudaStream,
        ) -> Result<()>,
    ) -> Result<Pending<'c, O>> {
        self.begin(&facts, route, shape, input, &mut out, (need_out, extra))?;
        match route {
            Route::Symm { staged, .. } => {
                let smem = self.symm_input(input, staged, grow)?;
                symm(&self.cs, &smem, out.__memory_mut())?;
            }
            Route::Nccl => {
                let n = self.nccl()?;
                let src = self.cs.bind("input", input.__memory())?;
                let mut dst = self.cs.bind_mut("out", out.__memory_mut())?;
                nccl(&n, &src, &mut dst, self.stream()?)?;
            }
        }
        self.pending(out, what)
    }

    /// A call's start on `route`: this rank's problem (the op's, else
    /// [`local_problem`](Self::local_problem)'s) agreed with every rank's,
    /// then the communication stream ordered after the user's work and
    /// the input's producer.
    pub(super) fn begin<T: Element, I: Operand<T> + ?Sized, O: Output<T>>(
        &self,
        facts: &CallFacts,
        route: Route,
        shape: &[u64],
        input: &I,
        out: &mut O,
        (need_out, extra): (usize, Option<String>),
    ) -> Result<()> {
        let problem = facts.op_problem().or_else(|| {
            self.local_problem(
                route,
                Some(input.__memory()),
                (out.__memory_mut(), "out"),
                need_out,
                extra,
            )
        });
        self.decide(facts, route, shape, problem)?;
        self.enter()?;
        if let Some(s) = &self.stream {
            input.__order(s)?;
        }
        Ok(())
    }

    /// [`begin`](Self::begin) of a call whose input is part of its output
    /// `buf` (checked to hold `need_out`, else the call's `extra` problem).
    pub(super) fn begin_in_place<T: Element, O: Output<T>>(
        &self,
        facts: &CallFacts,
        route: Route,
        shape: &[u64],
        buf: &mut O,
        (need_out, extra): (usize, Option<String>),
    ) -> Result<()> {
        let problem = facts.op_problem().or_else(|| {
            self.local_problem(route, None, (buf.__memory_mut(), "buf"), need_out, extra)
        });
        self.decide(facts, route, shape, problem)?;
        self.enter()
    }

    /// [`run`](Self::run) of a call whose input is elements `input` of its
    /// output `out` (checked to hold `need_out`, else the call's `extra`
    /// problem): on symm, the input is staged (the kernel then writes
    /// `out`, which no peer reads) and `symm` runs on the staging and
    /// `out` bound to the communication stream; on NCCL, `nccl` runs on
    /// `out` bound there (NCCL's in-place forms).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_in_place<'c, T: Element, O: Output<T>>(
        &'c self,
        facts: CallFacts,
        shape: &[u64],
        mut out: O,
        input: std::ops::Range<usize>,
        (need_out, grow, extra): (usize, usize, Option<String>),
        what: &'static str,
        symm: impl FnOnce(&Comm, &SymmetricMemory, &mut BoundSlice<'_, T>) -> Result<()>,
        nccl: impl FnOnce(&nccl::Nccl, &mut BoundSlice<'_, T>, &CudaStream) -> Result<()>,
    ) -> Result<Pending<'c, O>> {
        let route = self.route(&facts)?;
        self.begin_in_place(&facts, route, shape, &mut out, (need_out, extra))?;
        let mut b = self.cs.bind_mut("buf", out.__memory_mut())?;
        match route {
            Route::Symm { .. } => {
                let st = self.staging::<T>(grow)?;
                let src = b.sub(input.clone()).ok_or_else(|| {
                    invalid(&self.cs, format!("{input:?} is not inside the output"))
                })?;
                let mut dst = st.buf.slice(..src.len())?;
                self.cs.copy(&src, &mut dst)?;
                drop(src);
                symm(&self.cs, &st.smem, &mut b)?;
            }
            Route::Nccl => {
                let n = self.nccl()?;
                nccl(&n, &mut b, self.stream()?)?;
            }
        }
        drop(b);
        self.pending(out, what)
    }
}
