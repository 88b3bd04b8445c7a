//! Built-in symm kernels, each written with `#[symm_kernel]` only: proof that
//! the DSL expresses real communication kernels.
#![warn(missing_docs)]

// Expansions name the runtime as `::symm`, as they do in users' crates; this
// crate sits below the `symm` facade, so it gives the runtime that name.
extern crate symm_runtime as symm;

mod shared;

pub mod all_reduce;
pub mod collectives;
pub mod functional;
pub mod fused;
pub mod moe;
pub mod p2p;
mod samples;
pub mod tutorial;

pub use samples::{broadcast, ping_pong, ring_all_gather};
