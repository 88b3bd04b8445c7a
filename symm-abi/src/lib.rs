#![no_std]
#![warn(missing_docs)]
//! The kernel ABI of symm: how a launch's arguments reach the CUDA entry
//! that `#[symm_kernel]` writes. It is described here once, as one typed
//! value per struct ([`KernelCtx`], [`SliceArg`], [`SymmBufArg`]) with its
//! field table: the macro writes each entry's parameter list from the
//! tables, the runtime fills each value once per launch and packs its slots
//! from it, the device headers' structs are generated from the tables, and
//! the emulator's handles are built from the same values.
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

/// Defines one ABI struct from one list of fields: the Rust value a launch
/// fills (`$value`, each field as its Rust type), the C field table
/// (`$table`, which the macro writes entries and the device headers'
/// structs from) and the value's parameter slots (`slots`), in one order.
/// A field added here reaches all three; there is no second list to keep
/// in step.
macro_rules! abi_struct {
    (
        $(#[$vattr:meta])* $value:ident,
        $(#[$tattr:meta])* $table:ident,
        { $($(#[$fattr:meta])* $f:ident: $rt:ty => $c:literal),* $(,)? }
    ) => {
        $(#[$vattr])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $value {
            $($(#[$fattr])* pub $f: $rt,)*
        }

        $(#[$tattr])*
        pub const $table: [Field; [$(stringify!($f)),*].len()] = [$(field($c, stringify!($f))),*];

        impl $value {
            /// Parameter slots this value takes.
            pub const SLOTS: usize = $table.len();

            /// Its parameter slots, in the ABI's order: each field's value,
            /// little-endian in its 8 bytes (the driver reads as many as
            /// the C type has).
            pub fn slots(&self) -> [[u8; 8]; Self::SLOTS] {
                [$(u64::from(self.$f).to_le_bytes()),*]
            }
        }
    };
}

abi_struct!(
    /// The kernel context (`symm_kctx`): the leading parameters of every
    /// entry, which the runtime's backend fills at each launch.
    KernelCtx,
    /// [`KernelCtx`]'s fields.
    HIDDEN,
    {
        /// Device address of the stream's status record, where the kernel
        /// records a failure (a timeout, a bad index).
        status: u64 => "symm_u32*",
        /// How long its waits may take, in nanoseconds.
        timeout_ns: u64 => "symm_u64",
        /// The launching rank.
        rank: u32 => "symm_u32",
    }
);

abi_struct!(
    /// A slice argument (`&[T]`, `&mut [T]`): the C++ `symm_slice<T>`.
    SliceArg,
    /// [`SliceArg`]'s fields.
    SLICE,
    {
        /// Device address of its first element (the entry takes it untyped).
        ptr: u64 => "void*",
        /// Its length in elements.
        len: u64 => "symm_u64",
    }
);

abi_struct!(
    /// A symmetric buffer argument (`SymmBuf<T>`): the C++ `symm_buf<T>`.
    /// The emulator's `SymmBuf` handle is built from this value too.
    SymmBufArg,
    /// [`SymmBufArg`]'s fields.
    SYMM_BUF,
    {
        /// Device array of every rank's buffer address.
        ptrs: u64 => "const symm_u64*",
        /// Device array of every rank's signal-pad address.
        pads: u64 => "const symm_u64*",
        /// The rank whose argument this is.
        rank: u32 => "symm_u32",
        /// The number of ranks (entries in each table).
        world: u32 => "symm_u32",
        /// Elements in each rank's buffer.
        len: u64 => "symm_u64",
        /// This rank's own buffer, also by value: a kernel reaches it
        /// without first loading its pointer table (a memory round trip at
        /// the start of every call).
        local: u64 => "symm_u64",
        /// This rank's own signal pad, by value, for the same reason.
        lpad: u64 => "symm_u64",
        /// Bytes added to every `ptrs` entry: a pool tensor shares its
        /// segment's tables, at its offset in the segment (0 for a whole
        /// allocation).
        off: u64 => "symm_u64",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_fields_in_order() {
        let ctx = KernelCtx {
            status: 0x1122_3344_5566_7788,
            timeout_ns: 7,
            rank: 3,
        };
        assert_eq!(
            ctx.slots(),
            [
                0x1122_3344_5566_7788u64.to_le_bytes(),
                7u64.to_le_bytes(),
                3u64.to_le_bytes()
            ]
        );
        let buf = SymmBufArg {
            ptrs: 1,
            pads: 2,
            rank: 3,
            world: 4,
            len: 5,
            local: 6,
            lpad: 7,
            off: 8,
        };
        let want: [[u8; 8]; 8] = core::array::from_fn(|i| (i as u64 + 1).to_le_bytes());
        assert_eq!(buf.slots(), want);
        assert_eq!(
            SYMM_BUF.map(|f| f.name),
            ["ptrs", "pads", "rank", "world", "len", "local", "lpad", "off"]
        );
        assert_eq!(
            SliceArg { ptr: 9, len: 10 }.slots(),
            [9u64.to_le_bytes(), 10u64.to_le_bytes()]
        );
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
