//! Staging memory for kernels that run back to back: the host side of
//! [`crate::dsl::sync`].

use std::sync::Arc;

use crate::comm::Comm;
use crate::dsl::{DslFloat, Scalar};
use crate::error::Result;
use crate::memory::buffer::SymmBuffer;
use crate::memory::symmetric::SymmetricMemory;
use crate::signal::Channel;

/// A symmetric staging area of two parity halves of one region per rank,
/// with a signal channel for the per-block call counters of the kernels
/// that use it, both requested from the group.
///
/// A kernel takes it as two arguments, [`memory`](Self::memory) for a
/// `SymmBuf<T>` parameter and [`channel`](Self::channel) for a `u32`, and
/// uses the pieces of [`crate::dsl::sync`]: call `c` of every block reads
/// and writes only half `c & 1`, so back-to-back calls (and CUDA graph
/// replays) need no host reset. One stage serves one kernel (or a family
/// launched with the same grid, in one stream order): the counters count
/// its calls. After a kernel that used it fails (a timeout, say), the
/// ranks' counters and halves may be out of step: make a new group.
///
/// A stage holds its channel for the group's life, as every
/// [`Channel::request`] does (the application has 16 of a pad's 32), so
/// make a few stages and reuse them: keeping channels
/// until the group ends is what keeps every rank's channel numbers the
/// same whatever order the ranks drop their stages in.
///
/// The pieces are safe back to back under one rule: each call waits, before
/// it ends, on every rank it sent to (it takes that rank's message, or
/// passes a barrier with it), and takes every message sent to it. A rank
/// that only sends could otherwise lap a peer that only receives, and
/// overwrite a half the peer has not read. Launch one-dimensional grids of
/// at most [`SIGNAL_BLOCKS`](crate::layout::SIGNAL_BLOCKS) blocks.
///
/// ```
/// # extern crate symm_runtime as symm;
/// use symm::dsl::*;
/// use symm::{run, symm_kernel, CommOptions, LaunchConfig, Ranks, Stage};
///
/// /// The all-reduce (sum) of `x` into `y` over a sentinel stage, four
/// /// elements (16 bytes) at a time: the data movement, and nothing else.
/// #[symm_kernel]
/// fn sentinel_sum(x: &[f32], y: &mut [f32], n: u32, stage: SymmBuf<f32>, ch: u32) {
///     let call = call_begin(stage, ch);
///     let mut i = grid_thread() * 4;
///     while i < n {
///         let v = load_padded::<f32, 4>(x, i, n);
///         for r in 0..stage.world_size() {
///             sentinel_send::<f32, 4>(stage, call, r, i, v);
///         }
///         let got = sentinel_take::<f32, 4>(stage, call, all_ranks(stage), i);
///         let mut acc = [0.0f32; 4];
///         for r in 0..stage.world_size() {
///             for k in 0..4 {
///                 acc[k] += got[r][k];
///             }
///         }
///         store_padded::<f32, 4>(y, i, n, acc);
///         i += grid_threads() * 4;
///     }
///     call_end(stage, ch, call);
/// }
///
/// fn main() {
///     let sums = run(Ranks::Emulator(3), CommOptions::default(), |comm| {
///         let n = 99;
///         let stage = Stage::<f32>::sentinel(comm, n)?;
///         let x = comm.device_buffer_from(&vec![comm.rank() as f32 + 1.0; n])?;
///         let mut y = comm.device_buffer::<f32>(n)?;
///         for _ in 0..3 {
///             sentinel_sum::launch(
///                 comm,
///                 LaunchConfig::linear(2, 32),
///                 &x,
///                 &mut y,
///                 n as u32,
///                 stage.memory(),
///                 stage.channel(),
///             )?;
///         }
///         comm.synchronize()?;
///         y.to_host()
///     })
///     .unwrap();
///     assert!(sums.iter().all(|y| y.iter().all(|&v| v == 6.0)));
/// }
/// ```
pub struct Stage<T: Scalar> {
    buf: SymmBuffer<T>,
    smem: Arc<SymmetricMemory>,
    channel: Channel,
    cap: usize,
}

impl<T: Scalar> Stage<T> {
    /// A zeroed stage of `cap` elements per region (rounded up to 16
    /// bytes, so every region starts 16-byte aligned), for kernels that push
    /// data and then raise a flag ([`crate::dsl::sync::stage_at`] and the
    /// barriers). Collective, like [`Comm::alloc`]: every rank makes the
    /// same stages in the same order.
    pub fn new(comm: &Comm, cap: usize) -> Result<Stage<T>> {
        Stage::filled(comm, cap, 0)
    }

    fn filled(comm: &Comm, cap: usize, byte: u8) -> Result<Stage<T>> {
        // The channel first, before any check that could fail on one rank
        // alone, so every rank requests at the same point of its sequence.
        let channel = Channel::request(comm)?;
        let world = comm.world_size();
        let per_vector = (16 / std::mem::size_of::<T>()).max(1);
        let len = cap
            .checked_next_multiple_of(per_vector)
            .and_then(|cap| cap.checked_mul(2 * world))
            .filter(|&l| l <= u32::MAX as usize)
            .ok_or_else(|| {
                comm.invalid(format!(
                    "a stage of {cap} elements per region needs 2 × {world} regions, more \
                     than the 2^32 elements kernels index"
                ))
            })?;
        if cap == 0 {
            return Err(comm.invalid("a stage needs at least one element per region"));
        }
        let buf = comm.alloc::<T>(len)?;
        // Finished (a device memset that waits) before the rendezvous hands
        // the memory to any peer.
        buf.fill_bytes(byte)?;
        let smem = buf.rendezvous()?;
        Ok(Stage {
            buf,
            smem,
            channel,
            cap: len / (2 * world),
        })
    }

    /// The staging memory: the argument for the kernel's `SymmBuf<T>`.
    pub fn memory(&self) -> &SymmetricMemory {
        &self.smem
    }

    /// The channel whose slots hold the call counters: the kernel's `ch`.
    pub fn channel(&self) -> u32 {
        self.channel.index()
    }

    /// Elements per region (what [`crate::dsl::sync::stage_cap`] reads in a
    /// kernel).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The allocation under the stage.
    pub fn buffer(&self) -> &SymmBuffer<T> {
        &self.buf
    }
}

impl<T: DslFloat> Stage<T> {
    /// A stage whose every slot reads as empty (all bits one, a NaN) until
    /// a peer's data lands, for [`crate::dsl::sync::sentinel_send`] and
    /// [`crate::dsl::sync::sentinel_take`]: the receiver polls the data
    /// itself, and marks it empty again once read. Float types only, since
    /// every integer value is data.
    pub fn sentinel(comm: &Comm, cap: usize) -> Result<Stage<T>> {
        Stage::filled(comm, cap, 0xFF)
    }
}
