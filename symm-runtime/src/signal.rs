//! Stream-ordered signal operations and the device-side status word.
//!
//! The three host-launched operations (`put_signal`, `wait_signal`,
//! `barrier`) are small `#[symm_kernel]`s (in this module's `kernels`). They use self-resetting slots: a put moves a
//! slot from 0 to 1 (spinning while the previous signal is unconsumed) and a
//! wait moves it from 1 back to 0. No host synchronisation is needed between
//! calls, so they can be captured in a CUDA graph and replayed.
//!
//! Memory ordering: a put is a system-scope release, preceded by a
//! system-scope fence, so every write the stream made before the put is
//! visible to the peer once its wait returns; a wait is a system-scope
//! acquire. A barrier is a put to every peer followed by a wait on every peer.
//!
//! A timeout never traps (which would kill the CUDA context). The kernel
//! records who timed out in the device's status word and returns; the
//! runtime turns that into [`crate::Error::SignalTimeout`] at the next
//! synchronisation, and the context stays usable.

use std::fmt;
use std::sync::LazyLock;

use crate::layout::{MAX_WORLD_SIZE, SIGNAL_BLOCKS};

/// Which signal operation gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignalKind {
    /// `put_signal` found the peer's slot still holding an unconsumed signal.
    Put,
    /// `wait_signal` never saw the peer's signal.
    Wait,
    /// A barrier could not signal a peer.
    BarrierPut,
    /// A barrier never heard from a peer.
    BarrierWait,
}

impl SignalKind {
    pub(crate) const fn code(self) -> u32 {
        match self {
            SignalKind::Put => 1,
            SignalKind::Wait => 2,
            SignalKind::BarrierPut => 3,
            SignalKind::BarrierWait => 4,
        }
    }

    pub(crate) fn from_code(code: u32) -> Option<SignalKind> {
        Some(match code {
            1 => SignalKind::Put,
            2 => SignalKind::Wait,
            3 => SignalKind::BarrierPut,
            4 => SignalKind::BarrierWait,
            _ => return None,
        })
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
/// addressing, timeout records, and the put and wait protocols. Built from
/// the Rust layout constants so the two can never disagree.
pub(crate) static SIGNAL_DEVICE_FNS: LazyLock<String> = LazyLock::new(|| {
    format!(
        r#"
#define SYMM_SIGNAL_BLOCKS {blocks}u
#define SYMM_MAX_WORLD {world}u
#define SYMM_PAD_SLOTS {slots}u

static __device__ __forceinline__ __attribute__((unused)) symm_u32 symm_signal_slot(symm_u32 channel, symm_u32 block, symm_u32 peer) {{
    return (channel * SYMM_SIGNAL_BLOCKS + block) * SYMM_MAX_WORLD + peer;
}}

static __device__ __forceinline__ __attribute__((unused)) symm_u32* symm_slot(symm_u64 pad, symm_u32 channel, symm_u32 block, symm_u32 peer) {{
    return ((symm_u32*)pad) + symm_signal_slot(channel, block, peer);
}}

static __device__ __attribute__((unused)) void symm_record_timeout(symm_u32* status, symm_u32 kind, symm_u32 rank, symm_u32 peer,
                                           symm_u32 channel, symm_u32 timeout_ms) {{
    /* Claim with 2 ("being written"), fill, then publish 1 with release, so
       a reader that sees 1 sees the whole record. The first failure wins. */
    if (symm_atom_cas_acq_rel_sys_u32(status, 0u, 2u) == 0u) {{
        status[1] = kind; status[2] = rank; status[3] = blockIdx.x; status[4] = peer;
        status[5] = channel; status[6] = threadIdx.x; status[7] = timeout_ms;
        symm_st_release_sys_u32(status, 1u);
    }}
}}

/* Returns 1 on success, 0 after recording a timeout. */
static __device__ __attribute__((unused)) int symm_put(const symm_u64* pads, symm_u32 rank, symm_u32 dst, symm_u32 channel,
                               symm_u64 timeout_ns, symm_u32 timeout_ms, symm_u32* status, symm_u32 kind) {{
    symm_u32* slot = symm_slot(pads[dst], channel, blockIdx.x, rank);
    symm_u64 start = symm_globaltimer();
    symm_fence_acq_rel_sys();
    while (symm_atom_cas_release_sys_u32(slot, 0u, 1u) != 0u) {{
        if (symm_globaltimer() - start > timeout_ns) {{
            symm_record_timeout(status, kind, rank, dst, channel, timeout_ms);
            return 0;
        }}
    }}
    return 1;
}}

static __device__ __attribute__((unused)) int symm_wait(const symm_u64* pads, symm_u32 rank, symm_u32 src, symm_u32 channel,
                                symm_u64 timeout_ns, symm_u32 timeout_ms, symm_u32* status, symm_u32 kind) {{
    symm_u32* slot = symm_slot(pads[rank], channel, blockIdx.x, src);
    symm_u64 start = symm_globaltimer();
    while (symm_atom_cas_acquire_sys_u32(slot, 1u, 0u) != 1u) {{
        if (symm_globaltimer() - start > timeout_ns) {{
            symm_record_timeout(status, kind, rank, src, channel, timeout_ms);
            return 0;
        }}
    }}
    return 1;
}}
"#,
        blocks = SIGNAL_BLOCKS,
        world = MAX_WORLD_SIZE,
        slots = crate::layout::SIGNAL_PAD_SLOTS,
    )
});

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

    #[test]
    fn kernels_pass_the_kind_codes_the_decoder_expects() {
        // The DSL kernels below write these codes as literals.
        assert_eq!(
            [
                SignalKind::Put.code(),
                SignalKind::Wait.code(),
                SignalKind::BarrierPut.code(),
                SignalKind::BarrierWait.code()
            ],
            [1, 2, 3, 4]
        );
        assert!(!SIGNAL_DEVICE_FNS.contains("#include"));
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

/// The host-launched signal operations, as DSL kernels. (The emulator runs
/// the same protocol on the host, in `backend/host.rs`.)
pub(crate) mod kernels {
    use crate::dsl::*;
    use crate::symm_kernel;

    /// Thread 0 signals `dst` on `channel`.
    #[symm_kernel]
    pub fn signal_put<T: Scalar>(buf: SymmBuf<T>, dst: u32, channel: u32, timeout_ns: u64) {
        if thread_idx_x() == 0 {
            let _ = buf.put_signal_within(dst, channel, timeout_ns, 1);
        }
    }

    /// Thread 0 waits for (and consumes) `src`'s signal on `channel`.
    #[symm_kernel]
    pub fn signal_wait<T: Scalar>(buf: SymmBuf<T>, src: u32, channel: u32, timeout_ns: u64) {
        if thread_idx_x() == 0 {
            let _ = buf.wait_signal_within(src, channel, timeout_ns, 2);
        }
    }

    /// Thread `p` signals peer `p`, then waits for peer `p`'s signal.
    #[symm_kernel]
    pub fn signal_barrier<T: Scalar>(buf: SymmBuf<T>, channel: u32, timeout_ns: u64) {
        let p = thread_idx_x();
        if p < buf.world_size()
            && p != buf.rank()
            && buf.put_signal_within(p, channel, timeout_ns, 3)
        {
            let _ = buf.wait_signal_within(p, channel, timeout_ns, 4);
        }
    }
}
