//! What a kernel leaves behind when it gives up: the kinds of signal
//! timeout and the status record, as the device writes it and the runtime
//! reads it back. (The signal operations themselves are in
//! [`crate::signal`].)

use std::fmt;

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
///
/// (Public only because the emulator's `KernelThread` hook takes one; its
/// module is private.)
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusRecord {
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
