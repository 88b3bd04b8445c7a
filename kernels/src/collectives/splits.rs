//! The all-to-all with split sizes: given on the host
//! ([`all_to_all_single`]) or read from device memory by the kernel
//! ([`all_to_all_v`]).

use symm::{BoundSlice, Comm, DeviceSlice, Result, SymmetricMemory};

use super::call::{begin, channel, grid, threads, Call, Kind};
use super::elem::{CopyCall, CopyElem, Kernel};
use super::MAX_BLOCKS;
use crate::shared::agree::Problem;
use crate::shared::checks::{capturing, disjoint, fits, out_fits, InPlace};

/// All-to-all with split sizes given on the host, as PyTorch's
/// `all_to_all_single`: this rank sends `input[off..off + in_splits[r]]`
/// to rank r (`off` the sum of the splits before r), and receives
/// `out_splits[p]` elements from rank p, placed in rank order in `out`.
/// Every rank's `out_splits[p]` must be rank p's `in_splits` entry for it:
/// the kernel checks the whole exchange, and a mismatch fails it on every
/// rank alike ([`symm::Error::KernelAssert`]; the group then refuses
/// further collectives, as after any failed kernel). Up to 8 ranks the
/// splits travel in the launch's parameters; past 8 they are copied to
/// device memory on the rank's stream first, the host waiting for the
/// stream's earlier work, so that there the call synchronises the host and
/// cannot be captured in a CUDA graph (an error on every rank: capture
/// [`all_to_all_v`] instead).
pub fn all_to_all_single<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    in_splits: &[usize],
    out_splits: &[usize],
) -> Result<()> {
    let world = comm.world_size();
    let mut packed = vec![0u64; world];
    let mut problem = None;
    if in_splits.len() != world || out_splits.len() != world {
        problem = Some(Problem::from(format!(
            "all_to_all_single takes one split per rank ({world}), and got {} send and {} \
             receive splits",
            in_splits.len(),
            out_splits.len()
        )));
    } else if let Some(bad) = in_splits
        .iter()
        .chain(out_splits)
        .find(|&&s| s >= u32::MAX as usize)
    {
        problem = Some(Problem::capacity(format!(
            "a split of {bad} elements is 2^32 - 1 or more"
        )));
    } else {
        for r in 0..world {
            packed[r] = in_splits[r] as u64 | ((out_splits[r] as u64) << 32);
        }
    }
    // Saturating: a huge split is this rank's problem to report, not a
    // panic on this rank alone.
    let sent = in_splits.iter().fold(0usize, |a, &b| a.saturating_add(b));
    let received = out_splits.iter().fold(0usize, |a, &b| a.saturating_add(b));
    split_call(
        comm,
        input,
        out,
        Splits::Host {
            packed,
            problem,
            sent,
            received,
        },
    )
}

/// All-to-all with split sizes in device memory, read by the kernel, so
/// that MoE dispatch and combine need no host synchronisation (PyTorch's
/// `all_to_all_vdev`): this rank sends `in_splits[r]` elements (u64) to
/// rank r, from consecutive spans of `input`; what it receives lands in
/// rank order in `out`, and `out_splits_offsets[r]` and
/// `out_splits_offsets[world + r]` get the size received from rank r and
/// its offset in `out`. The kernel checks every rank's splits against
/// every rank's input and output sizes before it copies; a split that does
/// not fit fails it on every rank alike ([`symm::Error::KernelAssert`]).
pub fn all_to_all_v<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    in_splits: &(impl DeviceSlice<u64> + ?Sized),
    out_splits_offsets: &mut (impl DeviceSlice<u64> + ?Sized),
) -> Result<()> {
    split_call(
        comm,
        input,
        out,
        Splits::Device {
            in_splits: comm.bind("in_splits", in_splits)?,
            report: comm.bind_mut("out_splits_offsets", out_splits_offsets)?,
        },
    )
}

/// Where an all-to-all's split sizes come from.
enum Splits<'a> {
    Host {
        /// Per rank, the split sent and (high 32 bits) the split expected
        /// back.
        packed: Vec<u64>,
        problem: Option<Problem>,
        sent: usize,
        received: usize,
    },
    Device {
        in_splits: BoundSlice<'a, u64>,
        report: BoundSlice<'a, u64>,
    },
}

/// [`all_to_all_single`] and [`all_to_all_v`]: one kernel, which takes the
/// splits from its parameters or from device memory.
fn split_call<T: CopyElem>(
    comm: &Comm,
    input: &SymmetricMemory,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    splits: Splits<'_>,
) -> Result<()> {
    // Reserved first, before any step that could fail on one rank alone.
    channel(comm)?;
    // Before the output's binding, which borrows for as long as these
    // (the launch takes them with one lifetime).
    let holders = placeholders(comm)?;
    let mut holders = holders.0.lock().unwrap_or_else(|p| p.into_inner());
    let (empty, report_host, wide_host) = &mut *holders;
    let world = comm.world_size();
    let dev = matches!(splits, Splits::Device { .. });
    let call = Call {
        kind: if dev {
            Kind::AllToAllV
        } else {
            Kind::AllToAllSingle
        },
        ll: None,
        // Never empty: every rank launches, whatever its splits (a rank
        // that sends and receives nothing still meets its peers').
        empty: false,
        path: None,
    };
    let wide = world > symm::layout::MAX_WORLD_SIZE;
    let ready = begin(comm, input, ("out", out), call, |out| {
        disjoint(input, out, InPlace::No)?;
        if wide && !dev && capturing(comm.cuda_stream().as_deref()) {
            return Err(Problem::from(
                "all_to_all_single past 8 ranks copies its splits to the device, with the \
                 host waiting for the rank's stream, which a CUDA graph's capture cannot \
                 hold: capture all_to_all_v, whose splits are in device memory"
                    .to_string(),
            ));
        }
        match &splits {
            Splits::Host {
                problem: Some(p), ..
            } => return Err(p.clone()),
            Splits::Host { sent, received, .. } => {
                fits::<T>(input, *sent, "the input")?;
                out_fits(out, Some(*received), "the received splits")?;
            }
            Splits::Device { in_splits, report } => {
                out_fits(out, Some(0), "nothing")?;
                if in_splits.len() < world || report.len() < 2 * world {
                    return Err(format!(
                        "all_to_all_v needs {world} send splits and room for {} sizes and \
                         offsets, and got {} and {}",
                        2 * world,
                        in_splits.len(),
                        report.len()
                    )
                    .into());
                }
            }
        }
        if out.len() > u32::MAX as usize {
            return Err(Problem::capacity(
                "the output holds 2^32 elements or more".into(),
            ));
        }
        Ok(())
    })?;
    let Some(mut r) = ready else {
        return Ok(());
    };
    // Past 8 ranks the wide kernel (`all_to_all_v_wide`): rows of 72
    // splits in `meta`, and the host's splits in device memory.
    let meta = meta(comm, wide)?;
    // The grid must be the same on every rank (each block waits for the
    // same block of every peer), and the splits are not known before the
    // kernel reads them (device splits): so it follows the input's length,
    // the same on every rank (rendezvous checks it), which bounds what any
    // rank sends to one peer.
    let cap = r.out.len().min(u32::MAX as usize);
    let in_len = input.buffer_size() / std::mem::size_of::<T>();
    let cfg = grid::<T>(comm, (in_len as u64).max(1), || {
        T::__grid(Kernel::AllToAllV, comm, threads::<T>())
    })?;
    let (in_splits, mut report, packed, dev) = match splits {
        Splits::Host { packed, .. } if wide => {
            // Written on the rank's stream, after its earlier kernels
            // (the last that read these splits).
            wide_host.write(0, &packed)?;
            (
                comm.bind("in_splits", &*wide_host)?,
                comm.bind_mut("report", &mut *report_host)?,
                [0u64; 8],
                2,
            )
        }
        Splits::Host { packed, .. } => (
            comm.bind("in_splits", &*empty)?,
            comm.bind_mut("report", &mut *report_host)?,
            std::array::from_fn(|r| packed.get(r).copied().unwrap_or(0)),
            0,
        ),
        Splits::Device { in_splits, report } => (in_splits, report, [0u64; 8], 1),
    };
    let call = CopyCall::AllToAllV {
        input,
        meta: &meta,
        out: &mut r.out,
        out_cap: cap as u32,
        splits: &in_splits,
        dev,
        report: &mut report,
        packed,
        ch: r.ch,
    };
    // SAFETY: the kernel checks every rank's splits against every rank's
    // input length and output capacity (`out_cap`) before it copies, on
    // every rank alike, and reads `in_splits` only where `dev` is 1 (then
    // it holds `world` entries, checked) or 2 (the wide kernel's host
    // splits, `world` entries), and writes `report` only where it is 1.
    unsafe { T::__copy(comm, cfg, call) }
}

/// The all-to-all's meta area (`meta_entries` u64 per block, or
/// `wide_meta_entries` for the `wide` kernel, for every block),
/// rendezvoused once per rank and kept in its extensions.
fn meta(comm: &Comm, wide: bool) -> Result<std::sync::Arc<SymmetricMemory>> {
    struct Meta(std::sync::Arc<SymmetricMemory>);
    let m = comm.extension(
        |_: &Meta| true,
        |_| {
            let per_block = if wide { 160 } else { 32 };
            let buf = comm.alloc::<u64>(per_block * MAX_BLOCKS as usize)?;
            Ok(Meta(buf.rendezvous()?))
        },
    )?;
    Ok(m.0.clone())
}

/// Stand-ins for the device splits and report of a call with host splits
/// (the kernel never touches them there; one element each, since a slice
/// needs memory), and, past 8 ranks, where the host's splits go for the
/// wide kernel (a split per rank), made once per rank: an allocation per
/// call would cost time and could not be captured in a CUDA graph.
#[allow(clippy::type_complexity)]
struct Placeholders(
    std::sync::Mutex<(
        symm::DeviceBuffer<u64>,
        symm::DeviceBuffer<u64>,
        symm::DeviceBuffer<u64>,
    )>,
);

fn placeholders(comm: &Comm) -> Result<std::sync::Arc<Placeholders>> {
    comm.extension(
        |_: &Placeholders| true,
        |_| {
            Ok(Placeholders(std::sync::Mutex::new((
                comm.device_buffer::<u64>(1)?,
                comm.device_buffer::<u64>(1)?,
                comm.device_buffer::<u64>(comm.world_size())?,
            ))))
        },
    )
}
