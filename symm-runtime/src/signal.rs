//! Stream-ordered signal operations and the device-side status word.
//!
//! The three host-launched operations (`put_signal`, `wait_signal`,
//! `barrier`) are small `#[symm_kernel]`s (in this module's `kernels`), the
//! only implementation: a GPU launches them, and the CPU emulator runs the
//! same kernels. They use self-resetting slots: a put moves a
//! slot from 0 to 1 (spinning while the previous signal is unconsumed) and a
//! wait moves it from 1 back to 0. No host synchronisation is needed between
//! calls, so they can be captured in a CUDA graph and replayed.
//!
//! Memory ordering: a put is a system-scope release, preceded by a
//! system-scope fence, so every write the stream made before the put is
//! visible to the peer once its wait returns; a wait is a system-scope
//! acquire. A barrier is a put to every peer followed by a wait on every peer.
//!
//! Which channel an operation uses is requested from the group
//! ([`Channel`]), never numbered by hand, so the application and the
//! built-in collectives cannot collide.
//!
//! A timeout never traps (which would kill the CUDA context). The kernel
//! records who timed out in the device's status word and returns; the
//! runtime turns that into [`crate::Error::SignalTimeout`] at the next
//! synchronisation, and the context stays usable.

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::CudaStream;

use crate::backend::{Backend, KernelSpec};
use crate::error::Result;
use crate::launch::LaunchConfig;
use crate::memory::symmetric::SymmetricMemory;

mod channel;
pub(crate) mod stage;
pub use crate::status::SignalKind;
pub use channel::Channel;

/// The host's signal operations: each launches one of the signal kernels
/// below on the rank's stream (or the caller's), as a GPU runs them and as
/// the emulator runs them.
impl SymmetricMemory {
    /// Stream-ordered barrier with every rank on `channel`. See
    /// [`crate::signal`] for its memory ordering.
    pub fn barrier(&self, channel: &Channel, timeout: Duration) -> Result<()> {
        self.signal(&**self.backend(), SignalOp::Barrier, channel, timeout)
    }

    /// Stream-ordered signal to rank `dst` on `channel` (a system-scope release).
    pub fn put_signal(&self, dst: usize, channel: &Channel, timeout: Duration) -> Result<()> {
        self.check_rank("destination", dst)?;
        self.signal(&**self.backend(), SignalOp::Put { dst }, channel, timeout)
    }

    /// Stream-ordered wait for rank `src`'s signal on `channel` (a
    /// system-scope acquire), consuming it.
    pub fn wait_signal(&self, src: usize, channel: &Channel, timeout: Duration) -> Result<()> {
        self.check_rank("source", src)?;
        self.signal(&**self.backend(), SignalOp::Wait { src }, channel, timeout)
    }

    /// [`barrier`](Self::barrier) on the caller's CUDA stream.
    pub fn barrier_on(
        &self,
        stream: &Arc<CudaStream>,
        channel: &Channel,
        timeout: Duration,
    ) -> Result<()> {
        self.signal(
            &*self.backend().with_cuda_stream(stream.clone())?,
            SignalOp::Barrier,
            channel,
            timeout,
        )
    }

    /// [`put_signal`](Self::put_signal) on the caller's CUDA stream.
    pub fn put_signal_on(
        &self,
        stream: &Arc<CudaStream>,
        dst: usize,
        channel: &Channel,
        timeout: Duration,
    ) -> Result<()> {
        self.check_rank("destination", dst)?;
        self.signal(
            &*self.backend().with_cuda_stream(stream.clone())?,
            SignalOp::Put { dst },
            channel,
            timeout,
        )
    }

    /// [`wait_signal`](Self::wait_signal) on the caller's CUDA stream.
    pub fn wait_signal_on(
        &self,
        stream: &Arc<CudaStream>,
        src: usize,
        channel: &Channel,
        timeout: Duration,
    ) -> Result<()> {
        self.check_rank("source", src)?;
        self.signal(
            &*self.backend().with_cuda_stream(stream.clone())?,
            SignalOp::Wait { src },
            channel,
            timeout,
        )
    }

    /// Launches the signal kernel of `op` on `backend`'s stream: one block,
    /// one thread for a put or a wait, one per rank for a barrier.
    fn signal(
        &self,
        backend: &dyn Backend,
        op: SignalOp,
        channel: &Channel,
        timeout: Duration,
    ) -> Result<()> {
        if channel.owner() != self.owner() {
            return Err(self.invalid(format!(
                "channel {} was requested on another rank or group (rank {}) than the one \
                 that owns this allocation; request channels from this rank's Comm",
                channel.index(),
                channel.rank()
            )));
        }
        self.signal_on(backend, op, channel.index(), timeout)
    }

    /// [`signal`](Self::signal) on channel `ch` of this memory's pad,
    /// which the caller owns: the pad of an allocation of its own, or a
    /// channel it was given.
    fn signal_on(
        &self,
        backend: &dyn Backend,
        op: SignalOp,
        ch: u32,
        timeout: Duration,
    ) -> Result<()> {
        use kernels::{signal_barrier, signal_put, signal_wait};
        self.before_collective_use()?;
        let (rank, world) = (self.rank(), self.world_size());
        let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // The kernels touch only the pads, but get the whole buffer, as
        // bytes: one ABI value for the slots and the emulator's handle.
        let arg = self.abi_arg(1);
        // SAFETY: `arg` is this memory's own, whose tables hold every
        // rank's buffer and pad, mapped while `self` lives, which outlasts
        // the launch (the emulator runs it to completion inside `launch`).
        let buf = unsafe { crate::dsl::SymmBuf::<u8>::__from_abi(arg) };
        type Source<'a> = &'a dyn Fn(&str) -> String;
        let (def, threads, mut params, source, cpu): (_, u32, Vec<[u8; 8]>, Source<'_>, &dyn Fn()) =
            match op {
                SignalOp::Put { dst } => (
                    &signal_put::DEF,
                    1,
                    signal_put::__params::<u8>(arg, dst as u32, ch, timeout_ns).to_vec(),
                    &|e| signal_put::__source::<u8>(e),
                    &move || signal_put::cpu::<u8>(buf, dst as u32, ch, timeout_ns),
                ),
                SignalOp::Wait { src } => (
                    &signal_wait::DEF,
                    1,
                    signal_wait::__params::<u8>(arg, src as u32, ch, timeout_ns).to_vec(),
                    &|e| signal_wait::__source::<u8>(e),
                    &move || signal_wait::cpu::<u8>(buf, src as u32, ch, timeout_ns),
                ),
                SignalOp::Barrier => (
                    &signal_barrier::DEF,
                    world as u32,
                    signal_barrier::__params::<u8>(arg, ch, timeout_ns).to_vec(),
                    &|e| signal_barrier::__source::<u8>(e),
                    &move || signal_barrier::cpu::<u8>(buf, ch, timeout_ns),
                ),
            };
        let spec = |def: &'static crate::__private_0_1_0::KernelDef, source, cpu| KernelSpec {
            name: def.name(),
            id: (def.id(), 0),
            // The signal kernels index nothing.
            checked: false,
            // One block always fits beside the other ranks' kernels.
            peers: false,
            max_threads: 0,
            source,
            cpu,
        };
        // All three at the first operation, as the device's loads wait for
        // its kernels to end: a rank's first wait must not need a load while
        // a peer on the same GPU spins in a barrier until that wait's kernel
        // runs.
        self.once_signal_kernels(|| {
            let none = &|| {};
            backend.prepare(&[
                &spec(&signal_put::DEF, &|e| signal_put::__source::<u8>(e), none),
                &spec(&signal_wait::DEF, &|e| signal_wait::__source::<u8>(e), none),
                &spec(
                    &signal_barrier::DEF,
                    &|e| signal_barrier::__source::<u8>(e),
                    none,
                ),
            ])
        })?;
        let spec = spec(def, source, cpu);
        let ctx = crate::backend::LaunchCtx {
            rank,
            world,
            kernel_timeout: timeout,
            placement: self.placement(),
            group: self.group_key(),
            name: self.group_name(),
        };
        let cfg = LaunchConfig::linear(1, threads.max(32));
        backend.launch(&spec, &cfg, &mut params, &ctx)
    }
}

/// The memory of a group's barriers ([`Comm::barrier`]): an allocation of
/// its own (its pad is the barriers' alone), kept in the rank's
/// extensions.
struct BarrierMem(Arc<SymmetricMemory>);

/// How many host barriers this rank has passed ([`Comm::host_barrier`]).
#[derive(Default)]
struct HostBarriers(std::sync::atomic::AtomicU64);

impl crate::comm::Comm {
    /// A barrier of every rank of the group, stream-ordered: this handle's
    /// stream goes on once every rank's stream has reached its barrier, and
    /// the host does not wait. Everything a stream wrote before its barrier
    /// is visible to every rank's work after theirs. Capturable in a CUDA
    /// graph once a first barrier has run (it allocates the barriers'
    /// memory: collective, as every barrier is). A rank that never comes
    /// makes the others' barriers time out after the kernel timeout,
    /// naming it, at their next `synchronize`.
    pub fn barrier(&self) -> Result<()> {
        let mem = self.extension(
            |_: &BarrierMem| true,
            |_| {
                let buf = self.alloc_unpooled::<u32>(1)?;
                Ok(BarrierMem(buf.rendezvous()?))
            },
        )?;
        mem.0.signal_on(
            &*self.backend,
            SignalOp::Barrier,
            0,
            self.options().kernel_timeout,
        )
    }

    /// A barrier of every rank's host thread: returns once every rank of
    /// the group has called it as many times, through the group's store
    /// (no device work). Past the group's timeout, or as soon as a rank
    /// fails or leaves, an error names the ranks that have not arrived.
    pub fn host_barrier(&self) -> Result<()> {
        let n = self
            .extension(|_: &HostBarriers| true, |_| Ok(HostBarriers::default()))?
            .0
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let store = self.store();
        let world = self.world_size() as i64;
        let err = |source| self.store_error(source);
        store
            .set(
                &self.store_key(&format!("host_barrier/at/{}", self.rank())),
                n.to_string().as_bytes(),
            )
            .map_err(err)?;
        let arrived = store
            .add(&self.store_key("host_barrier/count"), 1)
            .map_err(err)?;
        let done = self.store_key(&format!("host_barrier/done/{n}"));
        if arrived == world * n as i64 {
            store.set(&done, b"1").map_err(err)?;
        }
        let timeout = self.options().timeout;
        match store.wait(std::slice::from_ref(&done), timeout) {
            Ok(()) => Ok(()),
            Err(crate::store::StoreError::Timeout { .. }) => {
                let missing: Vec<usize> = (0..self.world_size())
                    .filter(|&r| {
                        let at = store
                            .try_get(&self.store_key(&format!("host_barrier/at/{r}")))
                            .ok()
                            .flatten()
                            .and_then(|v| String::from_utf8(v).ok()?.parse::<u64>().ok());
                        at.is_none_or(|at| at < n)
                    })
                    .collect();
                Err(err(crate::store::StoreError::Timeout {
                    timeout,
                    missing: missing
                        .iter()
                        .map(|r| {
                            format!(
                                "rank {r} of group {} at host barrier {n}",
                                self.group_label()
                            )
                        })
                        .collect(),
                }))
            }
            Err(e) => Err(err(e)),
        }
    }
}

/// A signal operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SignalOp {
    Put { dst: usize },
    Wait { src: usize },
    Barrier,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signal kernels' slots come from their generated packing (one
    /// for every kernel): the buffer's ABI value after the hidden slots,
    /// then the peer of a put or a wait, the channel and the timeout, as
    /// many as the entry `#[symm_kernel]` wrote (a mismatch is an
    /// invalid-value launch error that only a GPU would show).
    #[test]
    fn signal_launches_pack_every_argument_in_its_slots() {
        use crate::__private_0_1_0::{slot, SymmBufArg, HIDDEN_SLOTS};
        use kernels::{signal_barrier, signal_put, signal_wait};
        let arg = SymmBufArg {
            ptrs: 0x10,
            pads: 0x20,
            rank: 1,
            world: 3,
            len: 64,
            local: 0x30,
            lpad: 0x40,
            off: 0x50,
        };
        let (h, b) = (HIDDEN_SLOTS, HIDDEN_SLOTS + SymmBufArg::SLOTS);
        let put = signal_put::__params::<u8>(arg, 2, 5, 777);
        let wait = signal_wait::__params::<u8>(arg, 0, 5, 777);
        let barrier = signal_barrier::__params::<u8>(arg, 5, 777);
        for p in [&put[..], &wait[..], &barrier[..]] {
            assert_eq!(p[h..b], arg.slots());
            assert!(
                p[..h].iter().all(|s| *s == [0; 8]),
                "hidden slots are the backend's"
            );
        }
        assert_eq!(put[b..], [slot(2u32), slot(5u32), slot(777u64)]);
        assert_eq!(wait[b..], [slot(0u32), slot(5u32), slot(777u64)]);
        assert_eq!(barrier[b..], [slot(5u32), slot(777u64)]);
    }
}

#[cfg(test)]
mod nvrtc_tests {
    use super::*;
    use crate::jit::{Arch, CompileRequest, JitEngine};

    /// The signal kernels compile with NVRTC for every arch the runtime
    /// targets (CI checks this without a GPU).
    #[test]
    fn signal_kernels_compile_to_cubin() {
        if !crate::jit::require_nvrtc("the signal kernels") {
            return;
        }
        for arch in [Arch { major: 9, minor: 0 }, Arch { major: 8, minor: 0 }] {
            for (name, source) in [
                ("signal_put", kernels::signal_put::cuda_source_for::<u8>()),
                ("signal_wait", kernels::signal_wait::cuda_source_for::<u8>()),
                (
                    "signal_barrier",
                    kernels::signal_barrier::cuda_source_for::<u8>(),
                ),
            ] {
                let (c, _) = JitEngine::new(None)
                    .compile(&CompileRequest {
                        kernel_name: name,
                        source: &source,
                        arch,
                        options: &[],
                    })
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(&c.cubin[..4], b"\x7fELF");
            }
        }
    }
}

/// The host-launched signal operations, as DSL kernels: the one
/// implementation, which a GPU launches and the emulator runs.
pub(crate) mod kernels {
    use crate::dsl::*;
    use crate::symm_kernel;

    /// Thread 0 signals `dst` on `channel`.
    #[symm_kernel]
    pub fn signal_put<T: Scalar>(buf: SymmBuf<T>, dst: u32, channel: u32, timeout_ns: u64) {
        if thread_idx_x() == 0 {
            let _ = buf.put_signal_within(dst, channel, timeout_ns, false);
        }
    }

    /// Thread 0 waits for (and consumes) `src`'s signal on `channel`.
    #[symm_kernel]
    pub fn signal_wait<T: Scalar>(buf: SymmBuf<T>, src: u32, channel: u32, timeout_ns: u64) {
        if thread_idx_x() == 0 {
            let _ = buf.wait_signal_within(src, channel, timeout_ns, false);
        }
    }

    /// Thread `p` signals peer `p`, then waits for peer `p`'s signal.
    #[symm_kernel]
    pub fn signal_barrier<T: Scalar>(buf: SymmBuf<T>, channel: u32, timeout_ns: u64) {
        let p = thread_idx_x();
        if p < buf.world_size()
            && p != buf.rank()
            && buf.put_signal_within(p, channel, timeout_ns, true)
        {
            let _ = buf.wait_signal_within(p, channel, timeout_ns, true);
        }
    }
}
