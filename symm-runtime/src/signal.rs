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

use std::fmt;

mod channel;
pub(crate) mod emulated;
pub use channel::Channel;

/// Which signal operation gave up.
///
/// The discriminants are the codes that the status record carries: the
/// single definition, which the device code receives as `SYMM_KIND_*`
/// `#define`s (see [`crate::cuda_prelude`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[repr(u32)]
pub enum SignalKind {
    /// `put_signal` found the peer's slot still holding an unconsumed signal.
    Put = 1,
    /// `wait_signal` never saw the peer's signal.
    Wait,
    /// A barrier could not signal a peer.
    BarrierPut,
    /// A barrier never heard from a peer.
    BarrierWait,
}

impl SignalKind {
    /// Every kind, in code order.
    pub(crate) const ALL: [SignalKind; 4] = [
        SignalKind::Put,
        SignalKind::Wait,
        SignalKind::BarrierPut,
        SignalKind::BarrierWait,
    ];

    pub(crate) const fn code(self) -> u32 {
        self as u32
    }

    pub(crate) fn from_code(code: u32) -> Option<SignalKind> {
        SignalKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The name of this kind's code in the device headers.
    pub(crate) const fn device_name(self) -> &'static str {
        match self {
            SignalKind::Put => "SYMM_KIND_PUT",
            SignalKind::Wait => "SYMM_KIND_WAIT",
            SignalKind::BarrierPut => "SYMM_KIND_BARRIER_PUT",
            SignalKind::BarrierWait => "SYMM_KIND_BARRIER_WAIT",
        }
    }
}

impl fmt::Display for SignalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SignalKind::Put => "put_signal (peer never consumed the previous signal)",
            SignalKind::Wait => "wait_signal (peer never signalled)",
            SignalKind::BarrierPut => {
                "barrier, signalling (peer never consumed the previous signal)"
            }
            SignalKind::BarrierWait => "barrier, waiting (peer never arrived)",
        })
    }
}

/// Number of `u32` words in the status record.
pub(crate) const STATUS_WORDS: usize = 8;

/// The status record a timed-out kernel leaves behind.
///
/// Word layout: `[flag, kind, rank, block, peer, channel, thread, timeout_ms]`.
/// Only the first thread to claim the flag writes the rest, so the record
/// names the first failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StatusRecord {
    pub kind: SignalKind,
    pub rank: usize,
    pub block: u32,
    pub peer: usize,
    pub channel: u32,
    pub thread: u32,
    pub timeout_ms: u64,
}

impl StatusRecord {
    /// Decodes the raw words; `None` when nothing was recorded.
    pub(crate) fn decode(w: &[u32; STATUS_WORDS]) -> Option<StatusRecord> {
        if w[0] == 0 {
            return None;
        }
        Some(StatusRecord {
            // An unknown kind can only come from a foreign writer; report it as
            // a wait, the most common case, rather than losing the record.
            kind: SignalKind::from_code(w[1]).unwrap_or(SignalKind::Wait),
            rank: w[2] as usize,
            block: w[3],
            peer: w[4] as usize,
            channel: w[5],
            thread: w[6],
            timeout_ms: u64::from(w[7]),
        })
    }

    pub(crate) fn into_error(self) -> crate::Error {
        crate::Error::SignalTimeout {
            rank: self.rank,
            block: self.block,
            thread: self.thread,
            peer: self.peer,
            channel: self.channel,
            kind: self.kind,
            timeout_ms: self.timeout_ms,
        }
    }
}

/// Device functions shared by the signal kernels and by DSL kernels: slot
/// addressing, timeout records, and the put and wait protocols
/// (`cuda/symm_impl/signal.cuh`, declared in `cuda/symm.cuh`). The layout
/// constants they use come from [`crate::cuda_prelude::device_defines`].
pub(crate) const SIGNAL_DEVICE_FNS: &str = include_str!("../cuda/symm_impl/signal.cuh");

/// A signal operation, as the backends execute it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SignalOp {
    Put { dst: usize },
    Wait { src: usize },
    Barrier,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trip() {
        assert_eq!(StatusRecord::decode(&[0; STATUS_WORDS]), None);
        let r =
            StatusRecord::decode(&[1, SignalKind::BarrierWait.code(), 3, 7, 1, 2, 5, 250]).unwrap();
        assert_eq!(r.kind, SignalKind::BarrierWait);
        assert_eq!(
            (r.rank, r.block, r.peer, r.channel, r.thread, r.timeout_ms),
            (3, 7, 1, 2, 5, 250)
        );
        let msg = r.into_error().to_string();
        for needle in [
            "rank 3",
            "block 7",
            "peer 1",
            "channel 2",
            "250 ms",
            "barrier",
        ] {
            assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
        }
    }

    #[test]
    fn kinds_round_trip() {
        for k in [
            SignalKind::Put,
            SignalKind::Wait,
            SignalKind::BarrierPut,
            SignalKind::BarrierWait,
        ] {
            assert_eq!(SignalKind::from_code(k.code()), Some(k));
        }
        assert_eq!(SignalKind::from_code(0), None);
    }
}

#[cfg(test)]
mod nvrtc_tests {
    use super::*;
    use crate::jit::{nvrtc_available, Arch, CompileRequest, JitEngine};

    /// The signal kernels compile with NVRTC for every arch the runtime
    /// targets (CI checks this without a GPU).
    #[test]
    fn signal_kernels_compile_to_cubin() {
        if !nvrtc_available() {
            assert!(
                std::env::var("SYMM_REQUIRE_NVRTC").as_deref() != Ok("1"),
                "NVRTC required but not found"
            );
            eprintln!("SKIPPED: NVRTC not found; signal kernels were not compiled");
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

/// The host-launched signal operations, as DSL kernels: launched on a GPU
/// by the CUDA backend, and run by the emulator too ([`emulated`]).
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
