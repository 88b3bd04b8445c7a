//! What the collectives take and how they combine: [`ReduceOp`], the
//! element traits [`CopyElem`] and [`ReduceElem`] with their dispatch to
//! each kernel's instantiations, generated from the element-type tables
//! (`shared::elem`), and the argument sets of the launches.

use symm::{BoundSlice, Comm, DeviceSlice, LaunchConfig, Result, SymmetricMemory};

use super::device::*;
use crate::shared::agree::Problem;
use crate::shared::elem::{copy_types, float_types, native_types, vector, wide_packet};

/// A call's channel and its digest (see `enter_sending` in `shared/device.rs`).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Ch {
    pub(super) index: u32,
    pub(super) sig: u32,
}

/// How the reductions combine the ranks' elements, in rank order 0, 1, …:
/// the float types of 32 bits or less in f32, rounding once to the element
/// type; f64 in f64; integers in their own type, wrapping (as NCCL's do).
/// [`Avg`](ReduceOp::Avg) takes floats only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The sum divided by the world size (once, at the end).
    Avg,
    /// The least, by IEEE 754-2019 `minimum`: a NaN from any rank gives a
    /// NaN (the first in rank order, bit for bit in f32 and f64; in bf16
    /// and f16, rounded from f32, some NaN: the GPU's rounding gives the
    /// canonical one, the emulator's keeps the payload, as the DSL
    /// reference allows), and −0 counts below +0.
    Min,
    /// The greatest, by IEEE 754-2019 `maximum`: NaN as for `Min`, and +0
    /// counts above −0.
    Max,
    /// The product.
    Prod,
}

impl ReduceOp {
    /// Every op, for tests and benchmarks.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Avg,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Prod,
    ];

    /// The kernels' code for the op (their `OP` parameter).
    pub(crate) fn code(self) -> u64 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Avg => 1,
            ReduceOp::Min => 2,
            ReduceOp::Max => 3,
            ReduceOp::Prod => 4,
        }
    }

    /// The op applied to `a` and `b` as the kernels do for the float
    /// types that combine in f32: a reference for tests.
    pub fn combine(self, a: f32, b: f32) -> f32 {
        match self {
            ReduceOp::Sum | ReduceOp::Avg => a + b,
            ReduceOp::Prod => a * b,
            ReduceOp::Min | ReduceOp::Max if a.is_nan() => a,
            ReduceOp::Min | ReduceOp::Max if b.is_nan() => b,
            ReduceOp::Min if a == b => f32::from_bits(a.to_bits() | b.to_bits()),
            ReduceOp::Max if a == b => f32::from_bits(a.to_bits() & b.to_bits()),
            ReduceOp::Min => a.min(b),
            ReduceOp::Max => a.max(b),
        }
    }
}

/// Whether `T` reduces by `op`, and if not, the problem in words: avg
/// takes floats only (an integer mean would round, where NCCL has no avg
/// of integers either).
pub(crate) fn op_problem<T: ReduceElem>(op: ReduceOp) -> Option<Problem> {
    dtype_op_problem(T::DTYPE, op)
}

/// Whether the reductions combine `dtype` in its own type (integers and
/// f64: [`ReduceElem`]'s native types), so that a sum runs the op kernels
/// rather than the all-reduce's (which combine in f32).
pub(crate) const fn combines_natively(dtype: symm::DType) -> bool {
    !dtype.is_float() || matches!(dtype, symm::DType::F64)
}

/// [`op_problem`] by the element type's tag.
pub(crate) fn dtype_op_problem(dtype: symm::DType, op: ReduceOp) -> Option<Problem> {
    (op == ReduceOp::Avg && !dtype.is_float()).then(|| Problem {
        kind: symm::ErrorKind::Unsupported,
        text: format!(
            "ReduceOp::Avg takes floating-point elements (f32, f64, bf16, f16, f8e4m3, \
             f8e5m2); {t} elements reduce by Sum, Min, Max and Prod",
            t = dtype.name()
        ),
    })
}

/// Element types of the copies ([`all_gather`](super::all_gather), [`all_to_all`](super::all_to_all) and its
/// split forms, [`broadcast`](super::broadcast)): every element type, moved bit for bit.
#[diagnostic::on_unimplemented(
    message = "symm's copies do not take `{Self}` elements",
    label = "not an element type of the copies",
    note = "the copies (all_gather, all_to_all, broadcast and their forms) take f32, f64, bf16, \
            f16, f8e4m3, f8e5m2, u8, u32, u64, i32 and i64"
)]
pub trait CopyElem: symm::dsl::Scalar {
    #[doc(hidden)]
    fn __grid(kernel: Kernel, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Launches a copy kernel on checked arguments.
    ///
    /// # Safety
    ///
    /// The arguments are as the collectives' calls (`copies.rs`, …) make them: every index the
    /// kernel computes from them is in bounds of the buffers.
    #[doc(hidden)]
    unsafe fn __copy(comm: &Comm, cfg: LaunchConfig, call: CopyCall<'_, '_, Self>) -> Result<()>;

    /// Launches [`copy_ll`](super::copy_ll) on checked arguments.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy`]; `stage` holds `2 × world` regions of `cap`
    /// packets, at least `32 × blocks` (the headers' slots) and the call's packets.
    #[doc(hidden)]
    unsafe fn __copy_ll(comm: &Comm, cfg: LaunchConfig, call: LlCall<'_, '_, Self>) -> Result<()>;
}

/// One LL kernel's arguments: [`copy_ll`](super::copy_ll)'s (`op` unused) or
/// [`reduce_ll`](super::reduce_ll)'s (`kind` unused; `root` is its `chunk`, `flag` its
/// `scatter`).
#[doc(hidden)]
pub struct LlCall<'a, 'b, T: symm::dsl::Scalar> {
    pub(super) input: &'a SymmetricMemory,
    pub(super) stage: &'a SymmetricMemory,
    pub(super) out: &'a mut BoundSlice<'b, T>,
    pub(super) op: ReduceOp,
    pub(super) kind: u32,
    pub(super) n: u32,
    pub(super) root: u32,
    pub(super) flag: u32,
    pub(super) cap: u32,
    pub(super) ch: Ch,
}

/// Element types of the reductions ([`reduce_scatter`](super::reduce_scatter), [`all_reduce_op`](super::all_reduce_op)):
/// f32, bf16, f16 and the fp8 types f8e4m3 and f8e5m2, combined in f32 (as
/// NCCL does), and f64, i32, i64, u32 and u64, combined in their own type
/// ([`ReduceOp`]).
#[diagnostic::on_unimplemented(
    message = "symm's reductions do not take `{Self}` elements",
    label = "not an element type of the reductions",
    note = "the reductions (all_reduce with any op, reduce_scatter, the coalesced all-reduce) \
            take f32, bf16, f16, f8e4m3 and f8e5m2 (combined in f32) and f64, i32, i64, u32 \
            and u64 (combined in their own type; ReduceOp::Avg takes floats only)"
)]
pub trait ReduceElem: CopyElem {
    /// Whether the kernels combine in the element type itself (integers
    /// and f64) rather than in f32.
    #[doc(hidden)]
    const __NATIVE: bool;

    /// The built-in [`all_reduce`](crate::all_reduce::all_reduce) (its
    /// kernels and measured dispatch) for the types that combine in f32;
    /// `None` for the others, whose sum runs
    /// [`all_reduce_op`](super::all_reduce_op)'s kernels
    /// ([`sum`](super::sum) chooses).
    #[doc(hidden)]
    fn __builtin_sum(
        comm: &Comm,
        input: &SymmetricMemory,
        out: &mut (impl DeviceSlice<Self> + ?Sized),
        n: usize,
    ) -> Option<Result<()>>;

    #[doc(hidden)]
    fn __rs_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    #[doc(hidden)]
    fn __ar_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Launches the two-shot all-reduce kernel of `op`.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy`]; `scratch` holds `n` elements.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __all_reduce(
        comm: &Comm,
        cfg: LaunchConfig,
        op: ReduceOp,
        input: &SymmetricMemory,
        scratch: &SymmetricMemory,
        out: &mut BoundSlice<'_, Self>,
        n: u32,
        ch: Ch,
    ) -> Result<()>;

    #[doc(hidden)]
    fn __arc_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Launches the coalesced all-reduce kernel of `op`.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy`]; `table` holds `count` entries that fit
    /// `buf` and `scratch`.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __all_reduce_coalesced(
        comm: &Comm,
        cfg: LaunchConfig,
        op: ReduceOp,
        buf: &SymmetricMemory,
        scratch: &mut BoundSlice<'_, Self>,
        table: &BoundSlice<'_, u32>,
        count: u32,
        ch: Ch,
    ) -> Result<()>;

    /// Launches [`reduce_ll`](super::reduce_ll) of `call.op` on checked arguments.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy_ll`].
    #[doc(hidden)]
    unsafe fn __reduce_ll(comm: &Comm, cfg: LaunchConfig, call: LlCall<'_, '_, Self>)
        -> Result<()>;

    #[doc(hidden)]
    fn __reduce_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Launches the reduce-to-root kernel of `op`.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy`]; the root's `out` holds `n` elements.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __reduce(
        comm: &Comm,
        cfg: LaunchConfig,
        op: ReduceOp,
        input: &SymmetricMemory,
        out: &mut BoundSlice<'_, Self>,
        n: u32,
        root: u32,
        ch: Ch,
    ) -> Result<()>;

    /// Launches [`fold_rows`](super::fold_rows) of `op` (a checked launch).
    #[doc(hidden)]
    fn __fold(
        comm: &Comm,
        cfg: LaunchConfig,
        op: ReduceOp,
        src: &BoundSlice<'_, Self>,
        out: &mut BoundSlice<'_, Self>,
        rows: u32,
        chunk: u32,
    ) -> Result<()>;

    /// Launches the reduce-scatter kernel of `op`.
    ///
    /// # Safety
    ///
    /// As [`CopyElem::__copy`].
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __reduce_scatter(
        comm: &Comm,
        cfg: LaunchConfig,
        op: ReduceOp,
        input: &SymmetricMemory,
        out: &mut BoundSlice<'_, Self>,
        n: u32,
        chunk: u32,
        ch: Ch,
    ) -> Result<()>;
}

/// The collectives' kernels, to ask for a co-resident grid.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    AllGather,
    Broadcast,
    /// The broadcast by scatter and all-gather.
    BroadcastSag,
    AllToAll,
    AllToAllV,
    AllGatherCoalesced,
    Gather,
    Scatter,
}

/// One copy kernel's arguments.
#[doc(hidden)]
pub enum CopyCall<'a, 'b, T: symm::dsl::Scalar> {
    AllGather {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        n: u32,
        in_place: u32,
        ch: Ch,
    },
    Broadcast {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        n: u32,
        root: u32,
        skip: u32,
        ch: Ch,
    },
    /// [`broadcast_sag`](super::broadcast_sag): `scratch` is unused
    /// where `direct`.
    BroadcastSag {
        input: &'a SymmetricMemory,
        scratch: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        n: u32,
        root: u32,
        skip: u32,
        direct: u32,
        ch: Ch,
    },
    AllToAll {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        m: u32,
        ch: Ch,
    },
    AllGatherCoalesced {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        table: &'a BoundSlice<'b, u32>,
        count: u32,
        ch: Ch,
    },
    Gather {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        n: u32,
        root: u32,
        ch: Ch,
    },
    Scatter {
        input: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        n: u32,
        root: u32,
        ch: Ch,
    },
    AllToAllV {
        input: &'a SymmetricMemory,
        meta: &'a SymmetricMemory,
        out: &'a mut BoundSlice<'b, T>,
        out_cap: u32,
        splits: &'a BoundSlice<'b, u64>,
        dev: u32,
        report: &'a mut BoundSlice<'b, u64>,
        packed: [u64; 8],
        ch: Ch,
    },
}

macro_rules! copy_elem {
    ($($t:ty),* $(,)?) => {$(
        impl CopyElem for $t {
            fn __grid(kernel: Kernel, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                match kernel {
                    Kernel::AllGather => all_gather_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0),
                    Kernel::Broadcast => broadcast_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0),
                    Kernel::BroadcastSag => broadcast_sag::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0),
                    Kernel::AllToAll => all_to_all_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0),
                    Kernel::AllToAllV if comm.world_size() > symm::layout::MAX_WORLD_SIZE =>
                        all_to_all_v_wide::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0),
                    Kernel::AllToAllV => all_to_all_v_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0),
                    Kernel::AllGatherCoalesced => all_gather_coalesced_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0),
                    Kernel::Gather => gather_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0),
                    Kernel::Scatter => scatter_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0),
                }
            }

            unsafe fn __copy(comm: &Comm, cfg: LaunchConfig, call: CopyCall<'_, '_, Self>) -> Result<()> {
                // SAFETY: the caller's arguments are the calls' (`copies.rs`, …), with
                // which every index of these kernels is in bounds (the
                // split sizes of `AllToAllV` are checked by the kernel
                // itself against every rank's input and output before any
                // copy): the emulator checks each index in
                // tests/collectives.rs at worlds 1-8, odd sizes and uneven
                // and zero splits.
                unsafe {
                    match call {
                        CopyCall::AllGather { input, out, n, in_place, ch } =>
                            all_gather_pull::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, out, n, in_place, ch.index, ch.sig),
                        CopyCall::Broadcast { input, out, n, root, skip, ch } =>
                            broadcast_pull::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, out, n, root, skip, ch.index, ch.sig),
                        CopyCall::BroadcastSag { input, scratch, out, n, root, skip, direct, ch } =>
                            broadcast_sag::launch_unchecked::<$t, { vector::<$t>() }>(
                                comm, cfg, input, scratch, out, n, root, skip, direct, ch.index, ch.sig,
                            ),
                        CopyCall::AllGatherCoalesced { input, out, table, count, ch } =>
                            all_gather_coalesced_pull::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, out, table, count, ch.index, ch.sig),
                        CopyCall::Gather { input, out, n, root, ch } =>
                            gather_pull::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, out, n, root, ch.index, ch.sig),
                        CopyCall::Scatter { input, out, n, root, ch } =>
                            scatter_pull::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, out, n, root, ch.index, ch.sig),
                        CopyCall::AllToAll { input, out, m, ch } =>
                            all_to_all_pull::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, out, m, ch.index, ch.sig),
                        // Past 8 ranks the splits (the host's packed in
                        // `splits`, `dev` 2) are read from device memory.
                        CopyCall::AllToAllV { input, meta, out, out_cap, splits, dev, report, ch, .. }
                            if comm.world_size() > symm::layout::MAX_WORLD_SIZE =>
                            all_to_all_v_wide::launch_unchecked::<$t, { vector::<$t>() }>(
                                comm, cfg, input, meta, out, out_cap, splits, dev, report, ch.index, ch.sig,
                            ),
                        CopyCall::AllToAllV { input, meta, out, out_cap, splits, dev, report, packed: p, ch } =>
                            all_to_all_v_pull::launch_unchecked::<$t, { vector::<$t>() }>(
                                comm, cfg, input, meta, out, out_cap, splits, dev, report,
                                p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], ch.index, ch.sig,
                            ),
                    }
                }
            }

            unsafe fn __copy_ll(comm: &Comm, cfg: LaunchConfig, c: LlCall<'_, '_, Self>) -> Result<()> {
                // SAFETY: as `__copy`, with the stage sized by `run_ll`.
                unsafe {
                    copy_ll::launch_unchecked::<$t, { wide_packet::<$t>() }>(
                        comm, cfg, c.input, c.stage, c.out, c.kind, c.n, c.root, c.flag, c.cap,
                        c.ch.index, c.ch.sig,
                    )
                }
            }
        }
    )*};
}
copy_types!(copy_elem);

/// Calls `kernel::f::<T, V, OP, NATIVE>` with `OP` the kernels' code of
/// `op` (its `OP` parameter is a constant, so each op is its own
/// instantiation).
macro_rules! by_op {
    ($op:expr, $k:ident::$f:ident::<$t:ty, $v:tt, $native:tt>($($arg:expr),*)) => {
        match $op {
            ReduceOp::Sum => $k::$f::<$t, $v, 0, $native>($($arg),*),
            ReduceOp::Avg => $k::$f::<$t, $v, 1, $native>($($arg),*),
            ReduceOp::Min => $k::$f::<$t, $v, 2, $native>($($arg),*),
            ReduceOp::Max => $k::$f::<$t, $v, 3, $native>($($arg),*),
            ReduceOp::Prod => $k::$f::<$t, $v, 4, $native>($($arg),*),
        }
    };
}

/// The built-in all-reduce, for the types that combine in f32.
macro_rules! builtin_sum {
    () => {
        fn __builtin_sum(
            comm: &Comm,
            input: &SymmetricMemory,
            out: &mut (impl DeviceSlice<Self> + ?Sized),
            n: usize,
        ) -> Option<Result<()>> {
            Some(crate::all_reduce::all_reduce(comm, input, out, n))
        }
    };
}

/// No built-in all-reduce, for the native types.
macro_rules! native_sum {
    () => {
        fn __builtin_sum(
            _: &Comm,
            _: &SymmetricMemory,
            _: &mut (impl DeviceSlice<Self> + ?Sized),
            _: usize,
        ) -> Option<Result<()>> {
            None
        }
    };
}

macro_rules! float_reduce_elem {
    ($($t:ty),*) => { reduce_elem!(false, builtin_sum; $($t),*); };
}

macro_rules! native_reduce_elem {
    ($($t:ty),*) => { reduce_elem!(true, native_sum; $($t),*); };
}

macro_rules! reduce_elem {
    ($native:tt, $sum:ident; $($t:ty),* $(,)?) => {$(
        impl ReduceElem for $t {
            const __NATIVE: bool = {
                // The kernels' flag, as the rule finds it from the type's tag.
                assert!(combines_natively(<$t as symm::Element>::DTYPE) == $native);
                $native
            };

            $sum!();

            fn __rs_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                by_op!(op, reduce_scatter_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }, $native>(comm, threads, 0))
            }

            unsafe fn __reduce_ll(comm: &Comm, cfg: LaunchConfig, c: LlCall<'_, '_, Self>) -> Result<()> {
                // SAFETY: as `__copy`, with the stage sized by `run_ll`.
                unsafe {
                    by_op!(c.op, reduce_ll::launch_unchecked::<$t, { wide_packet::<$t>() }, $native>(
                        comm, cfg, c.input, c.stage, c.out, c.n, c.root, c.flag, c.cap,
                        c.ch.index, c.ch.sig
                    ))
                }
            }

            fn __ar_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                by_op!(op, all_reduce_op_two_shot::co_resident_grid_unchecked::<$t, { vector::<$t>() }, $native>(comm, threads, 0))
            }

            unsafe fn __all_reduce(
                comm: &Comm,
                cfg: LaunchConfig,
                op: ReduceOp,
                input: &SymmetricMemory,
                scratch: &SymmetricMemory,
                out: &mut BoundSlice<'_, Self>,
                n: u32,
                ch: Ch,
            ) -> Result<()> {
                // SAFETY: as `__copy`: `all_reduce_op` checked `n` against
                // the input and `out`, and `scratch` holds `n` elements.
                unsafe {
                    by_op!(op, all_reduce_op_two_shot::launch_unchecked::<$t, { vector::<$t>() }, $native>(comm, cfg, input, scratch, out, n, ch.index, ch.sig))
                }
            }

            fn __arc_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                by_op!(op, all_reduce_coalesced_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }, $native>(comm, threads, 0))
            }

            unsafe fn __all_reduce_coalesced(
                comm: &Comm,
                cfg: LaunchConfig,
                op: ReduceOp,
                buf: &SymmetricMemory,
                scratch: &mut BoundSlice<'_, Self>,
                table: &BoundSlice<'_, u32>,
                count: u32,
                ch: Ch,
            ) -> Result<()> {
                // SAFETY: as `__copy`: `all_reduce_coalesced` checked every
                // range against the buffer and sized the scratch for them.
                unsafe {
                    by_op!(op, all_reduce_coalesced_pull::launch_unchecked::<$t, { vector::<$t>() }, $native>(comm, cfg, buf, scratch, table, count, ch.index, ch.sig))
                }
            }

            fn __reduce_grid(op: ReduceOp, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                by_op!(op, reduce_pull::co_resident_grid_unchecked::<$t, { vector::<$t>() }, $native>(comm, threads, 0))
            }

            unsafe fn __reduce(
                comm: &Comm,
                cfg: LaunchConfig,
                op: ReduceOp,
                input: &SymmetricMemory,
                out: &mut BoundSlice<'_, Self>,
                n: u32,
                root: u32,
                ch: Ch,
            ) -> Result<()> {
                // SAFETY: as `__copy`: `reduce` checked `n` against the
                // input and, on the root, its `out`.
                unsafe {
                    by_op!(op, reduce_pull::launch_unchecked::<$t, { vector::<$t>() }, $native>(comm, cfg, input, out, n, root, ch.index, ch.sig))
                }
            }

            fn __fold(
                comm: &Comm,
                cfg: LaunchConfig,
                op: ReduceOp,
                src: &BoundSlice<'_, Self>,
                out: &mut BoundSlice<'_, Self>,
                rows: u32,
                chunk: u32,
            ) -> Result<()> {
                match op {
                    ReduceOp::Sum => fold_rows::launch::<$t, 0, $native>(comm, cfg, src, out, rows, chunk),
                    ReduceOp::Avg => fold_rows::launch::<$t, 1, $native>(comm, cfg, src, out, rows, chunk),
                    ReduceOp::Min => fold_rows::launch::<$t, 2, $native>(comm, cfg, src, out, rows, chunk),
                    ReduceOp::Max => fold_rows::launch::<$t, 3, $native>(comm, cfg, src, out, rows, chunk),
                    ReduceOp::Prod => fold_rows::launch::<$t, 4, $native>(comm, cfg, src, out, rows, chunk),
                }
            }

            unsafe fn __reduce_scatter(
                comm: &Comm,
                cfg: LaunchConfig,
                op: ReduceOp,
                input: &SymmetricMemory,
                out: &mut BoundSlice<'_, Self>,
                n: u32,
                chunk: u32,
                ch: Ch,
            ) -> Result<()> {
                // SAFETY: as `__copy`: `reduce_scatter` checked `n`
                // against the input and this rank's chunk against `out`.
                unsafe {
                    by_op!(op, reduce_scatter_pull::launch_unchecked::<$t, { vector::<$t>() }, $native>(comm, cfg, input, out, n, chunk, ch.index, ch.sig))
                }
            }
        }
    )*};
}
float_types!(float_reduce_elem);
native_types!(native_reduce_elem);
