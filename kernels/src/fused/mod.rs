//! All-reduce fused with the residual add and RMSNorm that follow it in a
//! tensor-parallel transformer layer (TensorRT-LLM's `RESIDUAL_RMS_NORM`
//! fusion): one kernel reads every rank's partial sums of a row, adds them
//! in f32 in rank order, adds the residual, rounds once to the element
//! type (the new residual), and normalises that row by its root mean
//! square times a weight. Every rank computes every row the same way, so
//! both outputs are bitwise identical on every rank.
//!
//! One block per row (a decode step has a few rows of a few thousand
//! elements): the row's sum of squares is a block reduction, in a fixed
//! order, so it too is the same on every rank and every launch.

mod device;
pub use device::*;

use symm::dsl::Scalar;
use symm::{BoundSlice, Comm, DType, DeviceSlice, LaunchConfig, Result, SymmetricMemory};

use crate::shared::agree::{agree, Problem};
use crate::shared::checks::{overlaps_input, usable};
use crate::shared::elem::{vector, wide_float_types};
use crate::shared::grid::with_pdl;
use crate::shared::key::{call_digest, CallKey};
use crate::shared::staging::reserved_channels;

/// Threads per block (one row per block at a time).
pub const THREADS: u32 = 512;

/// The most blocks (rows at once); more rows loop.
pub const MAX_BLOCKS: u32 = 64;

/// The owner of the fused kernel's signal channel.
pub const CHANNEL_OWNER: &str = "symm_kernels::fused";

/// Element types of the fused kernel: bf16, f16 and f32.
#[diagnostic::on_unimplemented(
    message = "symm's fused all-reduce + RMSNorm does not take `{Self}` elements",
    label = "not an element type of the fused kernel",
    note = "the fused kernel takes f32, bf16 and f16"
)]
pub trait FusedElem: Scalar {
    /// Elements per 16-byte vector.
    #[doc(hidden)]
    const V: usize;

    /// Launches [`all_reduce_rms_norm`] on checked arguments.
    ///
    /// # Safety
    ///
    /// Every rank's `input` holds `rows × hidden` elements, `residual` and
    /// `out` too, `weight` holds `hidden`, and `hidden` is a multiple of
    /// `V`.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __launch(
        comm: &Comm,
        cfg: LaunchConfig,
        input: &SymmetricMemory,
        residual: &mut BoundSlice<'_, Self>,
        weight: &BoundSlice<'_, Self>,
        out: &mut BoundSlice<'_, Self>,
        rows: u32,
        hidden: u32,
        eps: f32,
        ch: u32,
        sig: u32,
    ) -> Result<()>;
}

macro_rules! fused_elem {
    ($($t:ty),* $(,)?) => {$(
        impl FusedElem for $t {
            const V: usize = vector::<$t>();

            unsafe fn __launch(
                comm: &Comm,
                cfg: LaunchConfig,
                input: &SymmetricMemory,
                residual: &mut BoundSlice<'_, Self>,
                weight: &BoundSlice<'_, Self>,
                out: &mut BoundSlice<'_, Self>,
                rows: u32,
                hidden: u32,
                eps: f32,
                ch: u32,
                sig: u32,
            ) -> Result<()> {
                // SAFETY: the caller's arguments, with which every index is
                // in bounds: a block reads and writes `base + i .. + V`
                // with `row < rows`, `i < hidden` and `hidden % V == 0`, so
                // below `rows × hidden`, which every buffer holds (the
                // weight: `i + V <= hidden`); peers' inputs hold as much
                // (agreed). tests/fused.rs runs it bounds-checked on the
                // emulator (worlds 1-8, 9, 16 and 40, every type, rows beyond the grid,
                // rows of one to many vectors per thread), and
                // `SYMM_CHECK_ALL=1` on a GPU.
                unsafe {
                    all_reduce_rms_norm::launch_unchecked::<$t, { vector::<$t>() }>(
                        comm, cfg, input, residual, weight, out, rows, hidden, eps, ch, sig,
                    )
                }
            }
        }
    )*};
}
wide_float_types!(fused_elem);

/// One fused call as the ranks agree on it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    dtype: DType,
    rows: usize,
    hidden: usize,
    eps_bits: u32,
}

impl CallKey for Key {
    const FAMILY: &'static str = "symm_kernels::fused";

    fn name(&self) -> &'static str {
        "all_reduce_residual_rms_norm"
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rows of {} of {} (eps bits {:#x})",
            self.rows, self.hidden, self.dtype, self.eps_bits
        )
    }
}

/// The fused all-reduce, residual add and RMSNorm of `rows × hidden`
/// elements: `input` is this rank's partial sums (a rendezvoused
/// symmetric buffer), `residual` the residual stream (the same on every
/// rank; replaced by the new one), `weight` the norm's `hidden` weights,
/// `out` the normalised rows. A collective: every rank makes the same call
/// (checked through the store on the first call of a shape), ordered on its
/// stream, CUDA-graph capturable after one eager call.
///
/// `residual` and `out` must not overlap this rank's input (peers read it
/// while this rank writes them). Errors, the same on every rank on a
/// shape's first call, for: `hidden` not a multiple of 16 bytes, an input,
/// residual or output of fewer than `rows × hidden` elements or a weight of
/// fewer than `hidden`, an input of another element type or group, an
/// output or residual overlapping the input, misaligned memory, sizes past
/// 2^32 - 4096, and a rank whose kernel failed before. (A later call whose
/// local check fails errs on that rank, and its peers' kernels time out
/// naming it.)
#[allow(clippy::too_many_arguments)]
pub fn all_reduce_residual_rms_norm<T: FusedElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    residual: &mut (impl DeviceSlice<T> + ?Sized),
    weight: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSlice<T> + ?Sized),
    rows: usize,
    hidden: usize,
    eps: f32,
) -> Result<()> {
    let ch = channel(comm)?;
    let b_res = comm.bind_mut("residual", residual);
    let b_w = comm.bind("weight", weight);
    let b_out = comm.bind_mut("out", out);
    let problem = match (&b_res, &b_w, &b_out) {
        (Ok(res), Ok(w), Ok(o)) => check::<T>(comm, input, (res, w, o), rows, hidden).err(),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Some(Problem::from(e)),
    };
    let key = Key {
        dtype: T::DTYPE,
        rows,
        hidden,
        eps_bits: eps.to_bits(),
    };
    let key_hash = agree(comm, &key, problem)?;
    // What the kernel's barrier compares across ranks: the key and the
    // input (ranks that desynchronise after agreeing on a shape would sum
    // each other's wrong buffers).
    let sig = call_digest(key_hash, input);
    comm.check_call(ch, sig, || {
        format!(
            "all_reduce_residual_rms_norm of {key}, from allocation #{} at byte {}",
            input.alloc_id(),
            input.buffer_offset()
        )
    })?;
    let (mut res, w, mut o) = (b_res?, b_w?, b_out?);
    if rows == 0 {
        return Ok(());
    }
    let blocks = (rows as u32).min(MAX_BLOCKS);
    let blocks = comm
        .co_resident_blocks(1)
        .map_or(blocks, |limit| blocks.min(limit.max(1)))
        .min(comm.spread_blocks().unwrap_or(u32::MAX));
    // What the identity barriers need: warps whose thread r handshakes
    // with rank r, then a thread per rank that checks the peers' words
    // (`identity_checkers`; 40 threads up to 8 ranks, as always).
    let world = comm.world_size() as u32;
    let checkers = world.div_ceil(32).max(1) * 32;
    let threads = THREADS
        .min((hidden / T::V) as u32)
        .max(checkers + world.max(symm::layout::MAX_WORLD_SIZE as u32));
    let threads = threads.div_ceil(32) * 32;
    let cfg = with_pdl(comm, LaunchConfig::linear(blocks, threads));
    // SAFETY: checked above on this rank and agreed by every rank: each
    // buffer holds `rows × hidden` elements (the weight `hidden`), and
    // `hidden` is a multiple of `V`.
    unsafe {
        T::__launch(
            comm,
            cfg,
            input,
            &mut res,
            &w,
            &mut o,
            rows as u32,
            hidden as u32,
            eps,
            ch,
            sig,
        )
    }
}

/// This rank's problem with a fused call's arguments, if any: the memory
/// of `res`idual, `w`eight and `o`utput, bound to the rank's stream.
fn check<T: FusedElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    (res, w, o): (&BoundSlice<'_, T>, &BoundSlice<'_, T>, &BoundSlice<'_, T>),
    rows: usize,
    hidden: usize,
) -> std::result::Result<(), Problem> {
    usable(comm)?;
    if hidden == 0 || !hidden.is_multiple_of(T::V) {
        return Err(Problem::from(format!(
            "hidden {hidden} is not a positive multiple of {} (16 bytes of {})",
            T::V,
            T::DTYPE
        )));
    }
    // Headroom for the kernel's index steps, which may pass `n` by a
    // block's width before they stop.
    let n = rows
        .checked_mul(hidden)
        .filter(|&n| n <= (u32::MAX - THREADS * T::V as u32) as usize)
        .ok_or_else(|| {
            Problem::capacity(format!(
                "{rows} rows of {hidden} is more than 2^32 - 4096 elements"
            ))
        })?;
    if input.dtype() != T::DTYPE {
        return Err(Problem::from(format!(
            "the input holds {}, and the call is of {}",
            input.dtype(),
            T::DTYPE
        )));
    }
    if input.rank() != comm.rank() || input.world_size() != comm.world_size() {
        return Err(Problem::from(format!(
            "the input is rank {} of {}, and the call is on rank {} of {}",
            input.rank(),
            input.world_size(),
            comm.rank(),
            comm.world_size()
        )));
    }
    if !crate::shared::checks::vector_aligned(input) {
        return Err(Problem::from(
            "the input starts off 16 bytes (a view at such an offset): the fused kernel loads \
             rows in 16-byte vectors from its start"
                .to_string(),
        ));
    }
    for (name, b) in [("residual", res), ("out", o)] {
        if overlaps_input(input, b) {
            return Err(Problem::from(format!(
                "{name} overlaps the symmetric input, which peers read while this rank \
                 writes it"
            )));
        }
    }
    let cap = input.buffer_size() / std::mem::size_of::<T>();
    if cap < n || res.len() < n || o.len() < n || w.len() < hidden {
        return Err(Problem::from(format!(
            "{rows} rows of {hidden}: the input holds {cap}, the residual {}, the output {} \
             and the weight {}",
            res.len(),
            o.len(),
            w.len()
        )));
    }
    for (name, ptr) in [
        ("residual", res.device_ptr()),
        ("weight", w.device_ptr()),
        ("out", o.device_ptr()),
    ] {
        if !ptr.is_multiple_of(16) {
            return Err(Problem::from(format!(
                "{name} at {ptr:#x} is not 16-byte aligned"
            )));
        }
    }
    Ok(())
}

/// The fused kernel's channel on `comm`'s group, reserved on first use.
fn channel(comm: &Comm) -> Result<u32> {
    struct Fused;
    // The second holds the call identities (`enter_sending`).
    reserved_channels::<Fused, 2>(comm, CHANNEL_OWNER)
}

/// The fused kernel's result for one row, as the kernel computes it (f32,
/// rank order, one rounding per output; the sum of squares in the kernel's
/// block order is not reproduced, so compare the normalised row within its
/// rounding): (new residual, normalised row). A reference for tests.
pub fn reference<T: FusedElem>(
    partials: &[&[T]],
    residual: &[T],
    weight: &[T],
    eps: f32,
) -> (Vec<T>, Vec<f64>) {
    let h = residual.len();
    let new: Vec<T> = (0..h)
        .map(|i| {
            let mut acc = -0.0f32;
            for p in partials {
                acc += p[i].to_f32();
            }
            T::from_f32(acc + residual[i].to_f32())
        })
        .collect();
    let ms = new
        .iter()
        .map(|v| f64::from(v.to_f32()).powi(2))
        .sum::<f64>()
        / h as f64;
    let inv = 1.0 / (ms + f64::from(eps)).sqrt();
    let normed = new
        .iter()
        .zip(weight)
        .map(|(v, w)| f64::from(v.to_f32()) * inv * f64::from(w.to_f32()))
        .collect();
    (new, normed)
}
