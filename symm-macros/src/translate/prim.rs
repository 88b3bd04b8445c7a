//! The C primitive types and memory scopes that the intrinsic table and
//! the IR are both written in: below both, so that the IR can point at the
//! table's entries.

/// A C primitive type of the prelude.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CPrim {
    F32,
    F64,
    U8,
    U16,
    U32,
    U64,
    I32,
    I64,
    Bool,
    Bf16,
    F16,
    F8e4m3,
    F8e5m2,
}

impl CPrim {
    /// Its size in bytes.
    pub fn size(self) -> usize {
        match self {
            CPrim::U8 | CPrim::Bool | CPrim::F8e4m3 | CPrim::F8e5m2 => 1,
            CPrim::U16 | CPrim::Bf16 | CPrim::F16 => 2,
            CPrim::U32 | CPrim::I32 | CPrim::F32 => 4,
            CPrim::U64 | CPrim::I64 | CPrim::F64 => 8,
        }
    }

    /// The primitive a Rust type name stands for (`usize` is `u64`).
    pub fn from_rust(name: &str) -> Option<CPrim> {
        Some(match name {
            "f32" => CPrim::F32,
            "f64" => CPrim::F64,
            "u8" => CPrim::U8,
            "u16" => CPrim::U16,
            "u32" => CPrim::U32,
            "u64" | "usize" => CPrim::U64,
            "i32" => CPrim::I32,
            "i64" | "isize" => CPrim::I64,
            "bool" => CPrim::Bool,
            "bf16" => CPrim::Bf16,
            "f16" => CPrim::F16,
            "f8e4m3" => CPrim::F8e4m3,
            "f8e5m2" => CPrim::F8e5m2,
            _ => return None,
        })
    }

    /// The C spelling.
    pub fn c_name(self) -> &'static str {
        match self {
            CPrim::F32 => "float",
            CPrim::F64 => "double",
            CPrim::U8 => "symm_u8",
            CPrim::U16 => "symm_u16",
            CPrim::U32 => "symm_u32",
            CPrim::U64 => "symm_u64",
            CPrim::I32 => "symm_i32",
            CPrim::I64 => "symm_i64",
            CPrim::Bool => "bool",
            CPrim::Bf16 => "symm_bf16",
            CPrim::F16 => "symm_f16",
            CPrim::F8e4m3 => "symm_f8e4m3",
            CPrim::F8e5m2 => "symm_f8e5m2",
        }
    }

    /// The smallest and largest value of an integer primitive, in C
    /// (`None` for the others).
    pub fn int_limits(self) -> Option<(&'static str, &'static str)> {
        Some(match self {
            CPrim::U8 => ("0", "255"),
            CPrim::U16 => ("0", "65535"),
            CPrim::U32 => ("0", "4294967295"),
            CPrim::U64 => ("0", "18446744073709551615"),
            CPrim::I32 => ("-2147483648", "2147483647"),
            // The literal 9223372036854775808 does not exist in C.
            CPrim::I64 => ("(-9223372036854775807LL - 1)", "9223372036854775807"),
            _ => return None,
        })
    }

    /// The Rust spelling, as the prelude's `symm_<ty>_from_bits` use it.
    pub fn rust_name(self) -> &'static str {
        match self {
            CPrim::F32 => "f32",
            CPrim::F64 => "f64",
            CPrim::U8 => "u8",
            CPrim::U16 => "u16",
            CPrim::U32 => "u32",
            CPrim::U64 => "u64",
            CPrim::I32 => "i32",
            CPrim::I64 => "i64",
            CPrim::Bool => "bool",
            CPrim::Bf16 => "bf16",
            CPrim::F16 => "f16",
            CPrim::F8e4m3 => "f8e4m3",
            CPrim::F8e5m2 => "f8e5m2",
        }
    }
}

/// A memory scope, written out as a template argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Block,
    Gpu,
    System,
}
