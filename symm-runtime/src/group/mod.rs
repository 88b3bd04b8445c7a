//! The group floor: one rank of a group and how it comes to be. Which
//! ranks share a GPU (`placement`), which can map each other's memory
//! (`topology`: the NVLink domains), what a rank needs of its machine
//! (`backend`: the CUDA device or the emulator), the rank itself
//! (`comm`), and the ways to start a group (`run`, `bootstrap`).

pub(crate) mod backend;
pub(crate) mod bootstrap;
pub(crate) mod comm;
pub(crate) mod placement;
pub(crate) mod run;
pub(crate) mod topology;
