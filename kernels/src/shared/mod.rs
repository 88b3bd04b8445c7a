//! The ground floor of the kernels crate: what every family of built-in
//! kernels (the all-reduce, the collectives, the fused kernels, the
//! functional layer) shares, and nothing that knows one of them.
//!
//! - [`key`]: typed call keys, hashed and described from one definition;
//! - [`agree`]: the cross-rank agreement on a call's key;
//! - [`elem`]: the element-type tables every dispatch is generated from;
//! - [`grid`]: grid sizing (vector grids, fixed grids, shared GPUs);
//! - [`staging`]: staging areas that grow, and reserved channels;
//! - [`checks`]: argument checks that every family makes;
//! - [`device`]: device functions every family's kernels share.
//!
//! Nothing here imports a family (`symm-runtime/tests/module_graph.rs`
//! checks it):
//! the families import this floor, never the other way.

pub(crate) mod agree;
pub(crate) mod checks;
pub(crate) mod device;
pub(crate) mod elem;
pub(crate) mod grid;
pub(crate) mod key;
pub(crate) mod staging;
