//! The registration of symm pool segments with the communicator: at the
//! next NCCL call after a segment appears (registration is collective, and
//! a pool hook must not block), never during CUDA-graph capture, and
//! deregistered before the segment is freed.

use super::*;

impl Nccl {
    /// Registers `pool`'s segments with this communicator: those it holds
    /// now (the hook's snapshot) and those it makes later, at the next
    /// NCCL call after each; and deregisters each before it is freed.
    pub(crate) fn watch(self: &Arc<Self>, pool: &SymmPool) {
        // The list is held across the hook's registration, whose snapshot
        // reports to `hear` (which takes only the segments' lock).
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        if pools.iter().any(|(p, _)| p.id() == pool.id()) {
            return;
        }
        let me: Weak<Nccl> = Arc::downgrade(self);
        let id = pool.add_hook(move |event| {
            if let Some(n) = me.upgrade() {
                n.hear(event);
            }
        });
        pools.push((pool.clone(), id));
    }

    fn hear(&self, event: &SegmentEvent<'_>) {
        let mut s = self.segments.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            SegmentEvent::Allocated(info) => {
                let base = info.memory.buffer_ptrs()[info.memory.rank()];
                s.pending.push(((info.pool, info.index), base, info.bytes));
                s.ranges.insert((info.pool, info.index), (base, info.bytes));
            }
            SegmentEvent::Freeing(info) => {
                let key = (info.pool, info.index);
                s.pending.retain(|(k, ..)| *k != key);
                s.ranges.remove(&key);
                if let Some(r) = s.done.remove(&key) {
                    // Trims run at the same points on every rank (the pool's
                    // contract), so this collective deregistration meets its
                    // peers'; NCCL work still queued may read the segment.
                    if let Err(e) = self.stream.synchronize() {
                        tracing::warn!(rank = self.rank, "draining the NCCL stream: {e:?}");
                    }
                    self.deregister(r);
                }
            }
        }
    }

    pub(super) fn deregister(&self, r: Registered) {
        // An aborted communicator took its registrations with it.
        let Ok(_one) = self.enter() else { return };
        // SAFETY: each handle came from a registration on this communicator
        // (live: not aborted, `calls` held) and is deregistered once (it was
        // removed from `done`).
        let res = unsafe {
            match r {
                Registered::Window(w) => sys::ncclCommWindowDeregister(self.comm, w).result(),
                Registered::Buffer(h) => sys::ncclCommDeregister(self.comm, h).result(),
                Registered::Failed => return,
            }
        };
        let res = match res {
            Ok(_) => self.settle("NCCL deregistration"),
            Err(e) => Err(fail(
                self.who(),
                format!("NCCL deregistration: {}", code(&e)),
            )),
        };
        if let Err(e) = res {
            tracing::warn!(rank = self.rank, "{e}");
        }
    }

    /// Whether `bytes` at `ptr` touch a pool segment registered with this
    /// communicator (or to be, at the next call).
    pub(crate) fn registered(&self, ptr: u64, bytes: usize) -> bool {
        let s = self.segments.lock().unwrap_or_else(|p| p.into_inner());
        s.ranges
            .values()
            .any(|&(base, len)| ptr < base + len as u64 && base < ptr + bytes as u64)
    }

    /// Registers the segments heard of since the last call, unless
    /// `capturing` (registration is not stream work; it waits for the next
    /// call outside capture). Returns how many are still pending.
    pub(crate) fn flush(&self, capturing: bool) -> usize {
        let mut s = self.segments.lock().unwrap_or_else(|p| p.into_inner());
        if capturing {
            if !s.pending.is_empty() {
                tracing::debug!(
                    rank = self.rank,
                    pending = s.pending.len(),
                    "NCCL registration deferred: the stream is capturing a CUDA graph"
                );
            }
            return s.pending.len();
        }
        for (key, base, bytes) in std::mem::take(&mut s.pending) {
            let r = self.register(base, bytes);
            s.done.insert(key, r);
        }
        0
    }

    fn register(&self, base: u64, bytes: usize) -> Registered {
        let Ok(_one) = self.enter() else {
            return Registered::Failed;
        };
        let ptr = base as *mut std::ffi::c_void;
        if self.windows {
            let mut win = std::ptr::null_mut();
            // SAFETY: `ptr..ptr + bytes` is a live symm segment (a cuMem
            // allocation of the same size on every rank, as windows need);
            // every rank registers the same segments in the same order; the
            // communicator is live (not aborted, `calls` held).
            let r = unsafe { sys::ncclCommWindowRegister(self.comm, ptr, bytes, &mut win, 1) }
                .result()
                .map_err(|e| fail(self.who(), code(&e)))
                .and_then(|_| self.settle("ncclCommWindowRegister"));
            match r {
                Ok(_) => {
                    tracing::debug!(
                        rank = self.rank,
                        bytes,
                        "pool segment registered as an NCCL window"
                    );
                    return Registered::Window(win);
                }
                Err(e) if self.aborted.get().is_some() => {
                    tracing::warn!(rank = self.rank, "ncclCommWindowRegister: {e}");
                    return Registered::Failed;
                }
                Err(e) => tracing::debug!(
                    rank = self.rank,
                    "ncclCommWindowRegister failed ({e}); trying buffer registration"
                ),
            }
        }
        if has("ncclCommRegister") {
            let mut handle = std::ptr::null_mut();
            // SAFETY: as above; the handle is kept until deregistration.
            let r = unsafe { sys::ncclCommRegister(self.comm, ptr, bytes, &mut handle) }
                .result()
                .map_err(|e| fail(self.who(), code(&e)))
                .and_then(|_| self.settle("ncclCommRegister"));
            match r {
                Ok(_) => {
                    tracing::debug!(rank = self.rank, bytes, "pool segment registered with NCCL");
                    return Registered::Buffer(handle);
                }
                Err(e) => tracing::warn!(rank = self.rank, "ncclCommRegister failed: {e}"),
            }
        }
        Registered::Failed
    }

    /// Counts of (windows, buffer registrations, failed, pending), for
    /// tests and explanations.
    pub(crate) fn registrations(&self) -> (usize, usize, usize, usize) {
        let s = self.segments.lock().unwrap_or_else(|p| p.into_inner());
        let mut c = (0, 0, 0, s.pending.len());
        for r in s.done.values() {
            match r {
                Registered::Window(_) => c.0 += 1,
                Registered::Buffer(_) => c.1 += 1,
                Registered::Failed => c.2 += 1,
            }
        }
        c
    }
}
