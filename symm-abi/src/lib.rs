#![no_std]
#![warn(missing_docs)]
//! The kernel ABI of symm: how a launch's arguments reach the CUDA entry
//! that `#[symm_kernel]` writes. It is described here once; the macro writes
//! each entry's parameter list from it, the runtime packs each launch's
//! parameter slots from it, and the device code's handle structs are
//! generated from it.
//!
//! Every parameter takes one 8-byte slot (the driver reads as many bytes as
//! the C type has).

extern crate alloc;

use alloc::string::String;

/// The C++ definitions of the kernel context (`symm_kctx`, from [`HIDDEN`])
/// and of a symmetric buffer (`symm_buf<T>`, from [`SYMM_BUF`]), on one
/// line: the runtime defines `SYMM_ABI_STRUCTS` as this for the device
/// headers.
pub fn cuda_structs() -> String {
    fn fields(fs: &[Field]) -> String {
        let mut s = String::new();
        for f in fs {
            s.push(' ');
            s.push_str(f.c_type);
            s.push(' ');
            s.push_str(f.name);
            s.push(';');
        }
        s
    }
    let mut out = String::from("struct symm_kctx {");
    out.push_str(&fields(&HIDDEN));
    out.push_str(" }; template<typename T> struct symm_buf {");
    out.push_str(&fields(&SYMM_BUF));
    out.push_str(" };");
    out
}

/// One parameter of a kernel entry, or one field of a handle struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Its C type in the generated CUDA C.
    pub c_type: &'static str,
    /// Its name: the entry's parameter is `<argument>_<name>` (hidden
    /// parameters: `__<name>`), and the handle struct's field is `<name>`.
    pub name: &'static str,
}

const fn field(c_type: &'static str, name: &'static str) -> Field {
    Field { c_type, name }
}

/// The leading parameters of every entry, which the runtime fills: they
/// make the kernel's context (`symm_kctx`), in this order.
pub const HIDDEN: [Field; 3] = [
    // Where the kernel records a failure (a timeout, a bad index).
    field("symm_u32*", "status"),
    // How long its waits may take, in nanoseconds.
    field("symm_u64", "timeout_ns"),
    // The launching rank.
    field("symm_u32", "rank"),
];

/// Slot of each [`HIDDEN`] parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hidden {
    /// The device address of the stream's status record.
    Status = 0,
    /// The kernel timeout, in nanoseconds.
    Timeout = 1,
    /// The rank.
    Rank = 2,
}

/// A slice argument (`&[T]`, `&mut [T]`): the C++ `symm_slice<T>`.
pub const SLICE: [Field; 2] = [field("void*", "ptr"), field("symm_u64", "len")];

/// A symmetric buffer argument (`SymmBuf<T>`): the C++ `symm_buf<T>`.
pub const SYMM_BUF: [Field; 8] = [
    // Device array of every rank's buffer address.
    field("const symm_u64*", "ptrs"),
    // Device array of every rank's signal-pad address.
    field("const symm_u64*", "pads"),
    field("symm_u32", "rank"),
    field("symm_u32", "world"),
    // Elements in each rank's buffer.
    field("symm_u64", "len"),
    // This rank's own buffer and pad, also by value: a kernel reaches them
    // without first loading its pointer tables (a memory round trip at the
    // start of every call).
    field("symm_u64", "local"),
    field("symm_u64", "lpad"),
    // Bytes added to every `ptrs` entry: a pool tensor shares its segment's
    // tables, at its offset in the segment (0 for a whole allocation).
    field("symm_u64", "off"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_slots_are_in_order() {
        assert_eq!(HIDDEN[Hidden::Status as usize].name, "status");
        assert_eq!(HIDDEN[Hidden::Timeout as usize].name, "timeout_ns");
        assert_eq!(HIDDEN[Hidden::Rank as usize].name, "rank");
    }

    #[test]
    fn the_structs_follow_the_fields_in_order() {
        assert_eq!(
            cuda_structs(),
            "struct symm_kctx { symm_u32* status; symm_u64 timeout_ns; symm_u32 rank; }; \
             template<typename T> struct symm_buf { const symm_u64* ptrs; const symm_u64* pads; \
             symm_u32 rank; symm_u32 world; symm_u64 len; symm_u64 local; symm_u64 lpad; \
             symm_u64 off; };"
        );
    }

    #[test]
    fn names_are_unique() {
        for fields in [&HIDDEN[..], &SLICE[..], &SYMM_BUF[..]] {
            for (i, a) in fields.iter().enumerate() {
                assert!(fields[i + 1..].iter().all(|b| b.name != a.name), "{a:?}");
            }
        }
    }
}
