//! Built-in symm kernels, each written with `#[symm_kernel]` only: proof that
//! the DSL expresses real communication kernels.
#![warn(missing_docs)]

// Expansions name the runtime as `::symm`, as they do in users' crates; this
// crate sits below the `symm` facade, so it gives the runtime that name.
extern crate symm_runtime as symm;

pub mod all_reduce;
pub mod collectives;
pub mod functional;
pub mod fused;
mod samples;
pub mod tutorial;

pub use all_reduce::{
    all_reduce as one_shot_all_reduce, one_shot_all_reduce as one_shot_all_reduce_kernel,
};
pub use samples::{broadcast, ping_pong, ring_all_gather};

use std::marker::PhantomData;

/// The first of the channels a family of kernels reserved, kept in the
/// rank's extensions under the family's marker `M`.
struct FirstChannel<M>(u32, PhantomData<fn() -> M>);

/// The first of `N` adjacent channels that `owner` reserves from `comm`'s
/// group ([`symm::signal::Channel::reserve`]) on its first call, and the
/// same on every later one; `M` names the family.
pub(crate) fn reserved_channels<M: 'static, const N: usize>(
    comm: &symm::Comm,
    owner: &'static str,
) -> symm::Result<u32> {
    let r = comm.extension(
        |_: &FirstChannel<M>| true,
        |_| {
            let chans = symm::signal::Channel::reserve::<N>(comm, owner)?;
            Ok(FirstChannel(chans[0].index(), PhantomData))
        },
    )?;
    Ok(r.0)
}
