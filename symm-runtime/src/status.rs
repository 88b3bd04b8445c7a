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
pub(crate) const STATUS_WORDS: usize = 16;

/// The record kind of an index out of bounds in a checked kernel
/// (`SYMM_KIND_OUT_OF_BOUNDS` on the device); timeouts record a
/// [`SignalKind`] code.
pub(crate) const OUT_OF_BOUNDS_KIND: u32 = 16;

/// The status record a timed-out kernel leaves behind.
///
/// Word layout: `[flag, kind, rank, block, peer, channel, thread, timeout_ms]`
/// (the other words stay 0). Only the first thread to claim the flag writes
/// the rest, so the record names the first failure.
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

/// The status record of a checked kernel that indexed out of bounds (kind
/// [`OUT_OF_BOUNDS_KIND`]).
///
/// Word layout: `[flag, kind, rank, block, kernel, function, thread, line,
/// index (low, high), length (low, high), negative, 0, 0, 0]`: `block` and
/// `thread` are linear (x fastest, as the emulator counts them), `kernel`
/// the id the runtime compiled the kernel with (see [`register_kernel`]),
/// `function` the position of the function whose code failed in that
/// kernel's source (0: the kernel, then its device functions), `line` the
/// Rust line of the index relative to that function's name, and `negative`
/// 1 where the index was a negative signed integer (its 64 bits, two's
/// complement).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OutOfBounds {
    pub rank: usize,
    pub block: u32,
    pub thread: u32,
    pub kernel: u32,
    pub function: u32,
    pub line: u32,
    pub index: u64,
    pub negative: bool,
    pub len: u64,
}

impl OutOfBounds {
    /// The error, worded as the emulator words an index out of bounds.
    pub(crate) fn into_error(self) -> crate::Error {
        let sites = kernel_sites(self.kernel);
        let kernel = sites
            .as_ref()
            .map_or_else(|| format!("#{:08x}", self.kernel), |s| s.kernel.to_string());
        let place = match sites
            .as_ref()
            .and_then(|s| s.functions.get(self.function as usize))
        {
            Some(f) if self.function == 0 => format!("{}:{}", f.file, f.line + self.line),
            Some(f) => format!(
                "{}:{}, in device function `{}`",
                f.file,
                f.line + self.line,
                f.name
            ),
            None => format!(
                "line {} of function {} of a kernel this process never compiled",
                self.line, self.function
            ),
        };
        let index = if self.negative {
            (self.index as i64).to_string()
        } else {
            self.index.to_string()
        };
        crate::Error::KernelFault {
            message: format!(
                "kernel `{kernel}` on rank {}, block {}, thread {}: index {index} is out of \
                 bounds for length {} (at {place})",
                self.rank, self.block, self.thread, self.len
            ),
            kernel,
            rank: self.rank,
        }
    }
}

/// What a kernel recorded in its status record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DeviceRecord {
    /// A signal operation timed out.
    Timeout(StatusRecord),
    /// A checked kernel indexed out of bounds.
    OutOfBounds(OutOfBounds),
}

impl DeviceRecord {
    /// Decodes the raw words; `None` when nothing was recorded.
    pub(crate) fn decode(w: &[u32; STATUS_WORDS]) -> Option<DeviceRecord> {
        if w[0] == 0 {
            return None;
        }
        let wide = |lo: usize| u64::from(w[lo]) | (u64::from(w[lo + 1]) << 32);
        if w[1] == OUT_OF_BOUNDS_KIND {
            return Some(DeviceRecord::OutOfBounds(OutOfBounds {
                rank: w[2] as usize,
                block: w[3],
                kernel: w[4],
                function: w[5],
                thread: w[6],
                line: w[7],
                index: wide(8),
                len: wide(10),
                negative: w[12] != 0,
            }));
        }
        Some(DeviceRecord::Timeout(StatusRecord {
            // An unknown kind can only come from a foreign writer; report it as
            // a wait, the most common case, rather than losing the record.
            kind: SignalKind::from_code(w[1]).unwrap_or(SignalKind::Wait),
            rank: w[2] as usize,
            block: w[3],
            peer: w[4] as usize,
            channel: w[5],
            thread: w[6],
            timeout_ms: u64::from(w[7]),
        }))
    }

    pub(crate) fn into_error(self) -> crate::Error {
        match self {
            DeviceRecord::Timeout(r) => r.into_error(),
            DeviceRecord::OutOfBounds(r) => r.into_error(),
        }
    }
}

/// A function whose code a checked kernel's source contains (the kernel
/// itself, or a device function it calls): its name, its file, and the line
/// of its name, which its indexing sites' lines are relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SiteFunction {
    pub name: &'static str,
    pub file: &'static str,
    pub line: u32,
}

/// Where the indexing sites of a checked kernel instantiation are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelSites {
    /// The kernel's name.
    pub kernel: &'static str,
    /// By `SYMM_SITE_FN`: the kernel (0), then its device functions in the
    /// order its source defines them.
    pub functions: Vec<SiteFunction>,
}

/// Every checked instantiation this process compiled, by the id it records
/// (`SYMM_KERNEL_ID`).
static KERNEL_SITES: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<u32, std::sync::Arc<KernelSites>>>,
> = std::sync::LazyLock::new(Default::default);

/// Remembers that a checked instantiation compiled with `SYMM_KERNEL_ID`
/// `id` has the indexing sites `sites` (the first registration of an id
/// stays).
pub(crate) fn register_kernel(id: u32, sites: KernelSites) {
    KERNEL_SITES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(id)
        .or_insert_with(|| std::sync::Arc::new(sites));
}

/// The sites of the instantiation registered as `id`.
fn kernel_sites(id: u32) -> Option<std::sync::Arc<KernelSites>> {
    KERNEL_SITES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&id)
        .cloned()
}

/// Device functions shared by the signal kernels and by DSL kernels: slot
/// addressing, timeout records, and the put and wait protocols
/// (`cuda/symm_impl/signal.cuh`, declared in `cuda/symm.cuh`). The layout
/// constants they use come from [`crate::cuda_prelude::device_defines`].
pub(crate) const SIGNAL_DEVICE_FNS: &str = include_str!("../cuda/symm_impl/signal.cuh");

#[cfg(test)]
mod tests {
    use super::*;

    /// `words` padded with zeros to a whole record.
    fn record(words: &[u32]) -> [u32; STATUS_WORDS] {
        let mut w = [0; STATUS_WORDS];
        w[..words.len()].copy_from_slice(words);
        w
    }

    #[test]
    fn status_round_trip() {
        assert_eq!(DeviceRecord::decode(&[0; STATUS_WORDS]), None);
        let Some(DeviceRecord::Timeout(r)) = DeviceRecord::decode(&record(&[
            1,
            SignalKind::BarrierWait.code(),
            3,
            7,
            1,
            2,
            5,
            250,
        ])) else {
            panic!("not a timeout")
        };
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
    fn out_of_bounds_record_decodes_to_a_kernel_fault() {
        register_kernel(
            0x5eed_0001,
            KernelSites {
                kernel: "off_by_one",
                functions: vec![
                    SiteFunction {
                        name: "off_by_one",
                        file: "tests/gpu_dsl.rs",
                        line: 40,
                    },
                    SiteFunction {
                        name: "helper",
                        file: "src/helpers.rs",
                        line: 7,
                    },
                ],
            },
        );
        // Index 2^32 + 5 of length 2^32 + 5: both halves of each word pair.
        let (index, len) = ((1u64 << 32) + 5, (1u64 << 32) + 5);
        let words = |function: u32, negative: u32, index: u64| {
            record(&[
                1,
                OUT_OF_BOUNDS_KIND,
                1,
                3,
                0x5eed_0001,
                function,
                4,
                2,
                index as u32,
                (index >> 32) as u32,
                len as u32,
                (len >> 32) as u32,
                negative,
            ])
        };
        let rec = DeviceRecord::decode(&words(0, 0, index)).unwrap();
        assert_eq!(
            rec,
            DeviceRecord::OutOfBounds(OutOfBounds {
                rank: 1,
                block: 3,
                thread: 4,
                kernel: 0x5eed_0001,
                function: 0,
                line: 2,
                index,
                negative: false,
                len,
            })
        );
        let err = rec.into_error();
        let crate::Error::KernelFault {
            kernel,
            rank,
            message,
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!((kernel.as_str(), *rank), ("off_by_one", 1));
        assert_eq!(
            message,
            "kernel `off_by_one` on rank 1, block 3, thread 4: index 4294967301 is out of \
             bounds for length 4294967301 (at tests/gpu_dsl.rs:42)"
        );
        // In a device function, and a negative index.
        let msg = DeviceRecord::decode(&words(1, 1, (-2i64) as u64))
            .unwrap()
            .into_error()
            .to_string();
        assert!(
            msg.ends_with(
                "index -2 is out of bounds for length 4294967301 \
                 (at src/helpers.rs:9, in device function `helper`)"
            ),
            "{msg}"
        );
        // An id this process never registered still names everything else.
        let mut w = words(0, 0, 9);
        w[4] = 0x0bad_0bad;
        let msg = DeviceRecord::decode(&w).unwrap().into_error().to_string();
        assert!(
            msg.starts_with("kernel `#0bad0bad` on rank 1, block 3, thread 4: index 9 is out"),
            "{msg}"
        );
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
        assert_eq!(SignalKind::from_code(OUT_OF_BOUNDS_KIND), None);
    }
}
