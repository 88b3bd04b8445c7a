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

/// An invalid-argument error on `comm`'s rank.
pub(crate) fn invalid(comm: &symm::Comm, message: String) -> symm::Error {
    symm::Error::InvalidArgument {
        rank: comm.rank(),
        message,
    }
}

/// `cfg` with programmatic dependent launch, unless the comm turned it off.
pub(crate) fn with_pdl(comm: &symm::Comm, cfg: symm::LaunchConfig) -> symm::LaunchConfig {
    if comm.options().pdl {
        cfg.with_pdl()
    } else {
        cfg
    }
}

/// Whether `b` overlaps this rank's buffer of `input`, which peers read
/// while this rank writes.
pub(crate) fn overlaps_input<T: symm::Element>(
    input: &symm::SymmetricMemory,
    b: &symm::BoundSlice<'_, T>,
) -> bool {
    let base = input.buffer_ptrs()[input.rank()];
    let end = base + input.buffer_size() as u64;
    let p = b.device_ptr();
    let p_end = p + (b.len() * std::mem::size_of::<T>()) as u64;
    p < end && base < p_end
}
