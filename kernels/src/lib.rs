#![warn(missing_docs)]
//! Built-in symm kernels. Each is written with `#[symm_kernel]`; the
//! one-shot all-reduce lands here with the DSL.
