//! The differential tester's corpus: random `#[symm_kernel]`s written by
//! `build.rs` (see `gen.rs`), and the table the test drives them by.
//!
//! Each kernel is `fn dkNNNN(inp: &[u64], out: &mut [u64], scalars..)`: it
//! decodes typed values from the raw bits of `inp` (the types in
//! [`Kernel::inputs`]) and writes each result's bits to a slot of `out`
//! ([`OUT_SLOTS`] of them), so one driver runs every kernel on the
//! emulator, on the host (its CUDA C under a shim, `tests/difftest.rs`) and
//! on a GPU.
// The corpus's names are chosen to collide and confuse; this lint is
// crate-level only.
#![allow(mixed_script_confusables, confusable_idents, uncommon_codepoints)]

use symm::jit::Arch;
use symm::{Comm, DeviceBuffer};

/// Slots of `out` every kernel may write.
pub const OUT_SLOTS: usize = 8;

/// How the test launches a kernel: on `comm`, with one thread, `inp`,
/// `out` and the scalars' bits.
pub type LaunchFn =
    fn(&Comm, &DeviceBuffer<u64>, &mut DeviceBuffer<u64>, &[u64]) -> symm::Result<()>;

/// One generated kernel.
pub struct Kernel {
    /// Its name (the CUDA entry's too).
    pub name: &'static str,
    /// Its Rust source, device functions first (for a repro).
    pub source: &'static str,
    /// The type of each element of `inp` ([`Ty::from_code`]).
    pub inputs: &'static [u8],
    /// The type of each scalar parameter after the slices.
    pub scalars: &'static [u8],
    /// The type of each slot of `out`.
    pub outputs: &'static [u8],
    /// The generator classes it uses (`gen::Class` names).
    pub classes: &'static [&'static str],
    /// Launches it on `comm` with one thread: `inp`, `out` and the
    /// scalars' bits.
    pub launch: LaunchFn,
    /// Its complete CUDA C (unchecked).
    pub cuda: fn() -> String,
    /// Compiles it with NVRTC for an arch (no GPU needed).
    pub compile: fn(Arch) -> symm::Result<()>,
}

#[path = "../common.rs"]
mod common;
pub use common::Ty;

impl Ty {
    /// The type with this code (the generator's order).
    pub fn from_code(c: u8) -> Ty {
        [
            Ty::U8,
            Ty::U16,
            Ty::U32,
            Ty::U64,
            Ty::I32,
            Ty::I64,
            Ty::F32,
            Ty::F64,
            Ty::Bf16,
            Ty::F16,
            Ty::Bool,
        ][c as usize]
    }
    /// Its C type in the generated CUDA C.
    pub fn c_name(self) -> &'static str {
        match self {
            Ty::U8 => "symm_u8",
            Ty::U16 => "symm_u16",
            Ty::U32 => "symm_u32",
            Ty::U64 => "symm_u64",
            Ty::I32 => "symm_i32",
            Ty::I64 => "symm_i64",
            Ty::F32 => "float",
            Ty::F64 => "double",
            Ty::Bf16 => "symm_bf16",
            Ty::F16 => "symm_f16",
            Ty::Bool => "bool",
        }
    }
}

/// The generated kernels (their names collide and confuse on purpose: see
/// the crate's lint allowances).
mod generated {
    use super::*;
    include!(concat!(env!("OUT_DIR"), "/corpus.rs"));
}
pub use generated::*;
