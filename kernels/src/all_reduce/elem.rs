//! The element types the all-reduce takes ([`AllReduceElem`]) and their
//! dispatch to each path's kernel instantiations, generated from the
//! float table (`shared::elem`), with the world size unrolled.

use symm::{Comm, DeviceSlice, LaunchConfig, Result, SymmetricMemory};

use super::device::*;
use super::plan::AllReducePath;
use super::staging::control;
use crate::shared::elem::{float_types, packet, vector};

/// Element types the all-reduce supports.
#[diagnostic::on_unimplemented(
    message = "symm's all-reduce does not take `{Self}` elements",
    label = "not an element type of the all-reduce",
    note = "the built-in all-reduce sums f32, bf16, f16, f8e4m3 and f8e5m2 in f32; integers \
            and f64 reduce by any op through symm::functional::Collectives::all_reduce or \
            symm::kernels::collectives::all_reduce_op"
)]
pub trait AllReduceElem: symm::dsl::Scalar {
    /// The largest grid of `path`'s kernel with `threads` per block that
    /// `comm` may launch ([`symm::Comm::co_resident_blocks`]); `None` for any.
    #[doc(hidden)]
    fn __co_resident_grid(path: AllReducePath, comm: &Comm, threads: u32) -> Result<Option<u32>>;

    /// Launches `path`'s kernel (with `aux` its staging or scratch buffer,
    /// for [`AllReducePath::Pull`] its control allocation, and `ch` its channel) on checked
    /// arguments, without bounds checks on the GPU.
    ///
    /// # Safety
    ///
    /// The arguments are as `launch` (`launch.rs`) makes them: `n` elements
    /// fit `input` and `out` (`check`), `aux` is the staging (or scratch)
    /// that `staging` sized for `n` on `path`, with `cap` elements per
    /// region (the push and Lamport one-shots derive it from `aux`'s
    /// length instead, which `staging` makes exactly `2 × world` regions),
    /// and `cfg` is the path's grid. `sig` is the call's identity digest,
    /// which every kernel checks against its peers' (LL folds it into its
    /// tags, the barrier kernels send it after the entry barrier's flag and
    /// compare it at the exit barrier, push and the Lamport kernels send it
    /// as one more vector past the data).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn __launch(
        path: AllReducePath,
        comm: &Comm,
        cfg: LaunchConfig,
        input: &SymmetricMemory,
        aux: &SymmetricMemory,
        out: &mut (impl DeviceSlice<Self> + ?Sized),
        n: u32,
        cap: u32,
        ch: u32,
        sig: u32,
    ) -> Result<()>;
}

/// Calls `kernel::f::<T, C, W>` with `W` the unrolled world size (2, 4 or
/// 8), or 0 (read at run time) for any other.
macro_rules! by_world {
    ($comm:expr, $k:ident::$f:ident::<$t:ty, $c:tt>($($arg:expr),*)) => {
        match $comm.world_size() {
            2 => $k::$f::<$t, $c, 2>($($arg),*),
            4 => $k::$f::<$t, $c, 4>($($arg),*),
            8 => $k::$f::<$t, $c, 8>($($arg),*),
            _ => $k::$f::<$t, $c, 0>($($arg),*),
        }
    };
}

macro_rules! elem {
    ($($t:ty),*) => {$(
        impl AllReduceElem for $t {
            fn __co_resident_grid(path: AllReducePath, comm: &Comm, threads: u32) -> Result<Option<u32>> {
                match path {
                    AllReducePath::Ll => by_world!(comm, one_shot_ll::co_resident_grid_unchecked::<$t, { packet::<$t>() }>(comm, threads, 0)),
                    AllReducePath::Push => by_world!(comm, one_shot_push::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0)),
                    AllReducePath::Lamport => by_world!(comm, one_shot_lamport::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0)),
                    AllReducePath::Pull => by_world!(comm, one_shot_all_reduce::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0)),
                    AllReducePath::TwoShot => by_world!(comm, two_shot_all_reduce::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0)),
                    AllReducePath::LamportTwoShot => by_world!(comm, two_shot_lamport::co_resident_grid_unchecked::<$t, { vector::<$t>() }>(comm, threads, 0)),
                }
            }

            unsafe fn __launch(
                path: AllReducePath,
                comm: &Comm,
                cfg: LaunchConfig,
                input: &SymmetricMemory,
                aux: &SymmetricMemory,
                out: &mut (impl DeviceSlice<Self> + ?Sized),
                n: u32,
                cap: u32,
                ch: u32,
                sig: u32,
            ) -> Result<()> {
                // SAFETY: the caller's arguments are `launch`'s, and with
                // those every index of these kernels is in bounds: the
                // emulator checks each one in tests/all_reduce.rs
                // (`matches_float64_and_is_bitwise_identical_across_ranks`,
                // `every_path_is_exact_at_odd_sizes`,
                // `in_place_matches_float64_on_every_path`,
                // `back_to_back_calls_with_changing_data_and_no_host_sync`:
                // every path, element type and unrolled world, worlds 1-8,
                // odd sizes), and `SYMM_CHECK_ALL=1` checks them on a GPU.
                unsafe {
                    match path {
                        AllReducePath::Ll => by_world!(comm, one_shot_ll::launch_unchecked::<$t, { packet::<$t>() }>(comm, cfg, input, aux, out, n, cap, ch, sig)),
                        AllReducePath::Push => by_world!(comm, one_shot_push::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, aux, out, n, ch, sig)),
                        AllReducePath::Lamport => by_world!(comm, one_shot_lamport::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, aux, out, n, ch, sig)),
                        AllReducePath::Pull => by_world!(comm, one_shot_all_reduce::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, aux, out, n, ch, sig)),
                        AllReducePath::TwoShot => {
                            let ctl = control(comm)?;
                            by_world!(comm, two_shot_all_reduce::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, aux, &ctl, out, n, ch, sig))
                        }
                        AllReducePath::LamportTwoShot => by_world!(comm, two_shot_lamport::launch_unchecked::<$t, { vector::<$t>() }>(comm, cfg, input, aux, out, n, cap, ch, sig)),
                    }
                }
            }
        }
    )*};
}

float_types!(elem);
