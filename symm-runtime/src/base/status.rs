//! What a kernel leaves behind when it gives up: the kinds of signal
//! timeout, an index out of bounds and a failed `kernel_assert!`, in the
//! status record, as the device writes it and the runtime reads it back.
//! (The signal operations themselves are in [`crate::signal`].)

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

/// The record kind of a failed `kernel_assert!` (`SYMM_KIND_ASSERT` on the
/// device).
pub(crate) const ASSERT_KIND: u32 = 17;

/// The record kind of a wait that the host stopped because the peer it
/// waited on left the group (`SYMM_KIND_ABORTED` on the device).
pub(crate) const ABORTED_KIND: u32 = 18;

/// The record kind of a receive that found a peer's data of another call
/// (`SYMM_KIND_MISMATCH` on the device; see [`CallMismatch`]).
pub(crate) const MISMATCH_KIND: u32 = 19;

/// The status record's abort words (`SYMM_ABORT_WORD`, the first of
/// [`ABORT_WORDS`]): bit `r % 32` of word `ABORT_WORD + r / 32` set by the
/// host stops this stream's kernels' waits on rank `r` (every bit, when a
/// rank of the group failed). No record writes them.
pub(crate) const ABORT_WORD: usize = STATUS_WORDS - ABORT_WORDS;

/// Words of the abort mask: a bit for each rank of the largest domain.
pub(crate) const ABORT_WORDS: usize = crate::layout::MAX_DOMAIN_SIZE.div_ceil(32);

/// A set of a domain's ranks, bit `r` for rank `r` (the abort words'
/// mask, as the host keeps it).
pub(crate) type RankMask = u128;

const _: () = assert!(ABORT_WORDS * 32 <= RankMask::BITS as usize && ABORT_WORD >= 13);

/// `ranks` as the abort words hold it.
pub(crate) fn abort_words(ranks: RankMask) -> [u32; ABORT_WORDS] {
    std::array::from_fn(|k| (ranks >> (32 * k)) as u32)
}

/// How long a device wait spins before it reads the abort word
/// (`SYMM_ABORT_POLL_NS`): a wait that ends sooner never loads it.
pub(crate) const ABORT_POLL_NS: u64 = 100_000;

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

/// The status record of a `kernel_assert!` that failed (kind
/// [`ASSERT_KIND`]).
///
/// Word layout: `[flag, kind, rank, block, kernel, function, thread,
/// assert, 0, ...]`: `block`, `thread`, `kernel` and `function` as in
/// [`OutOfBounds`], and `assert` the position of the `kernel_assert!` in
/// that function's [`AssertSite`] list, where its message and place are
/// (the device has neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AssertFailed {
    pub rank: usize,
    pub block: u32,
    pub thread: u32,
    pub kernel: u32,
    pub function: u32,
    pub assert: u32,
}

/// The status record of a receive that found a peer's data of another
/// call (kind [`MISMATCH_KIND`]): `gather_tagged2_checked` took a packet
/// whose tag agrees with the awaited one in its round's bits but not whole.
///
/// Word layout: `[flag, kind, rank, block, kernel, peer, thread, 0, ...]`,
/// `block`, `thread` and `kernel` as in [`OutOfBounds`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallMismatch {
    pub rank: usize,
    pub block: u32,
    pub thread: u32,
    pub kernel: u32,
    pub peer: usize,
}

/// What a kernel recorded in its status record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DeviceRecord {
    /// A signal operation timed out.
    Timeout(StatusRecord),
    /// A checked kernel indexed out of bounds.
    OutOfBounds(OutOfBounds),
    /// A `kernel_assert!` failed.
    Assert(AssertFailed),
    /// A receive found a peer's data of another call.
    Mismatch(CallMismatch),
    /// The host stopped a wait of `rank` on `peer`, which left the group
    /// (see [`ABORT_WORD`]).
    Aborted {
        /// The rank whose wait stopped.
        rank: usize,
        /// The peer it waited on.
        peer: usize,
    },
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
        if w[1] == ABORTED_KIND {
            return Some(DeviceRecord::Aborted {
                rank: w[2] as usize,
                peer: w[4] as usize,
            });
        }
        if w[1] == MISMATCH_KIND {
            return Some(DeviceRecord::Mismatch(CallMismatch {
                rank: w[2] as usize,
                block: w[3],
                kernel: w[4],
                peer: w[5] as usize,
                thread: w[6],
            }));
        }
        if w[1] == ASSERT_KIND {
            return Some(DeviceRecord::Assert(AssertFailed {
                rank: w[2] as usize,
                block: w[3],
                kernel: w[4],
                function: w[5],
                thread: w[6],
                assert: w[7],
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
}

/// A `kernel_assert!` of a kernel or device function: where it is and what
/// it says, for the report of its failure. The device records only the
/// assertion's position in its function's list, so messages take no device
/// memory and the CUDA C does not change when the function moves in its
/// file.
///
/// (Public because `#[symm_kernel]` expansions build these lists, and
/// [`DeviceFn`](crate::dsl::DeviceFn) holds one.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssertSite {
    /// The line of the `kernel_assert!`.
    pub line: u32,
    /// Its column, counted from 1 (as `column!()` counts).
    pub column: u32,
    /// Its message: the string literal, or the condition as written.
    pub message: &'static str,
}

impl AssertSite {
    /// `file:line:column`, as both backends report it.
    pub(crate) fn location(&self, file: &str) -> String {
        format!("{file}:{}:{}", self.line, self.column)
    }
}

/// A function whose code a kernel's source contains (the kernel itself, or
/// a device function it calls): its name, its file, the line of its name,
/// which its indexing sites' lines are relative to, and its
/// `kernel_assert!`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SiteFunction {
    pub name: &'static str,
    pub file: &'static str,
    pub line: u32,
    pub asserts: &'static [AssertSite],
}

/// Where the indexing sites and assertions of a kernel instantiation are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelSites {
    /// The kernel's name.
    pub kernel: &'static str,
    /// By `SYMM_SITE_FN`: the kernel (0), then its device functions in the
    /// order its source defines them.
    pub functions: Vec<SiteFunction>,
}

/// Every instantiation this process compiled, by the id it records
/// (`SYMM_KERNEL_ID`).
static KERNEL_SITES: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<u32, std::sync::Arc<KernelSites>>>,
> = std::sync::LazyLock::new(Default::default);

/// Remembers that an instantiation compiled with `SYMM_KERNEL_ID` `id` has
/// the sites `sites` (the first registration of an id stays).
pub(crate) fn register_kernel(id: u32, sites: KernelSites) {
    KERNEL_SITES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(id)
        .or_insert_with(|| std::sync::Arc::new(sites));
}

/// The sites of the instantiation registered as `id`.
/// The sites of kernel `id`, and its name (its id in hex when this process
/// never compiled it).
pub(crate) fn kernel_named(id: u32) -> (Option<std::sync::Arc<KernelSites>>, String) {
    let sites = kernel_sites(id);
    let name = sites
        .as_ref()
        .map_or_else(|| format!("#{id:08x}"), |s| s.kernel.to_string());
    (sites, name)
}

fn kernel_sites(id: u32) -> Option<std::sync::Arc<KernelSites>> {
    KERNEL_SITES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&id)
        .cloned()
}

/// Device functions that the signal protocol (`crate::dsl`'s `protocol`,
/// written in the DSL) and the receives stand on: the status record's
/// writers and a wait's give-up check
/// (`cuda/symm_impl/signal.cuh`, declared in `cuda/symm.cuh`). The layout
/// constants they use come from [`crate::cuda_prelude::device_defines`].
pub(crate) const SIGNAL_DEVICE_FNS: &str = include_str!("../../cuda/symm_impl/signal.cuh");

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
        let msg = r.into_error(&crate::GroupName::NONE).to_string();
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
                        asserts: &[],
                    },
                    SiteFunction {
                        name: "helper",
                        file: "src/helpers.rs",
                        line: 7,
                        asserts: &[],
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
        let err = rec.into_error(&crate::GroupName::NONE);
        let crate::Error::KernelFault { kernel, rank, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!((kernel.as_str(), *rank), ("off_by_one", 1));
        assert_eq!(
            err.to_string(),
            "kernel `off_by_one` on rank 1, block 3, thread 4: index 4294967301 is out of \
             bounds for length 4294967301 (at tests/gpu_dsl.rs:42)"
        );
        // A subgroup's rank says whose it is.
        let sub = crate::GroupName::of("symm.split0[1,3]");
        assert_eq!(
            rec.into_error(&sub).to_string(),
            "kernel `off_by_one` on rank 1 of group symm.split0[1,3], block 3, thread 4: index \
             4294967301 is out of bounds for length 4294967301 (at tests/gpu_dsl.rs:42)"
        );
        // In a device function, and a negative index.
        let msg = DeviceRecord::decode(&words(1, 1, (-2i64) as u64))
            .unwrap()
            .into_error(&crate::GroupName::NONE)
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
        let msg = DeviceRecord::decode(&w)
            .unwrap()
            .into_error(&crate::GroupName::NONE)
            .to_string();
        assert!(
            msg.starts_with("kernel `#0bad0bad` on rank 1, block 3, thread 4: index 9 is out"),
            "{msg}"
        );
    }

    #[test]
    fn assert_record_decodes_to_its_message_and_place() {
        const KERNEL: &[AssertSite] = &[AssertSite {
            line: 12,
            column: 5,
            message: "never",
        }];
        const HELPER: &[AssertSite] = &[
            AssertSite {
                line: 30,
                column: 9,
                message: "first",
            },
            AssertSite {
                line: 31,
                column: 9,
                message: "n <= buf.len()",
            },
        ];
        register_kernel(
            0x5eed_0002,
            KernelSites {
                kernel: "guarded",
                functions: vec![
                    SiteFunction {
                        name: "guarded",
                        file: "src/guarded.rs",
                        line: 10,
                        asserts: KERNEL,
                    },
                    SiteFunction {
                        name: "helper",
                        file: "src/helper.rs",
                        line: 28,
                        asserts: HELPER,
                    },
                ],
            },
        );
        let words = |kernel: u32, function: u32, assert: u32| {
            record(&[1, ASSERT_KIND, 2, 5, kernel, function, 7, assert])
        };
        let rec = DeviceRecord::decode(&words(0x5eed_0002, 1, 1)).unwrap();
        assert_eq!(
            rec,
            DeviceRecord::Assert(AssertFailed {
                rank: 2,
                block: 5,
                thread: 7,
                kernel: 0x5eed_0002,
                function: 1,
                assert: 1,
            })
        );
        let err = rec.into_error(&crate::GroupName::NONE);
        let crate::Error::KernelAssert {
            kernel,
            rank,
            group: _,
            block,
            thread,
            message,
            location,
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(
            (kernel.as_str(), *rank, *block, *thread),
            ("guarded", 2, 5, 7)
        );
        assert_eq!(
            (message.as_str(), location.as_str()),
            ("n <= buf.len()", "src/helper.rs:31:9")
        );
        assert_eq!(
            err.to_string(),
            "kernel `guarded` on rank 2, block 5, thread 7: assertion failed: n <= buf.len() \
             (at src/helper.rs:31:9)"
        );
        let msg = DeviceRecord::decode(&words(0x5eed_0002, 0, 0))
            .unwrap()
            .into_error(&crate::GroupName::NONE)
            .to_string();
        assert!(
            msg.ends_with("assertion failed: never (at src/guarded.rs:12:5)"),
            "{msg}"
        );
        // An assertion or kernel this process does not know still names the
        // rest, and says what it does not know.
        for (kernel, function, assert) in [
            (0x5eed_0002, 0, 1),
            (0x5eed_0002, 2, 0),
            (0x0bad_0bad, 0, 0),
        ] {
            let err = DeviceRecord::decode(&words(kernel, function, assert))
                .unwrap()
                .into_error(&crate::GroupName::NONE);
            let msg = err.to_string();
            assert!(matches!(
                err,
                crate::Error::KernelAssert {
                    rank: 2,
                    block: 5,
                    thread: 7,
                    ..
                }
            ));
            assert!(
                msg.contains(&format!(
                    "assertion failed: assertion {assert} of function {function} (not in any \
                     kernel this process compiled) (at an unknown place)"
                )),
                "{msg}"
            );
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
        assert_eq!(SignalKind::from_code(OUT_OF_BOUNDS_KIND), None);
        assert_eq!(SignalKind::from_code(ASSERT_KIND), None);
        assert_eq!(SignalKind::from_code(MISMATCH_KIND), None);
    }

    /// A call mismatch comes back with its rank, block, thread and peer,
    /// and the kernel's name once registered (its id otherwise).
    #[test]
    fn a_call_mismatch_decodes_with_its_peer() {
        let rec = DeviceRecord::decode(&record(&[1, MISMATCH_KIND, 3, 9, 0x5eed_0077, 2, 40]));
        assert_eq!(
            rec,
            Some(DeviceRecord::Mismatch(CallMismatch {
                rank: 3,
                block: 9,
                thread: 40,
                kernel: 0x5eed_0077,
                peer: 2,
            }))
        );
        let msg = rec.unwrap().into_error(&crate::GroupName::NONE).to_string();
        assert!(
            msg.starts_with("kernel `#5eed0077` on rank 3, block 9, thread 40: rank 2's data belongs to another call: the ranks made different calls"),
            "{msg}"
        );
    }
}
