//! Element types that symmetric buffers can hold.

use half::{bf16, f16};

/// Run-time tag of an element type; rendezvous compares it across ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// Unsigned byte.
    U8,
    /// 32-bit unsigned.
    U32,
    /// 32-bit signed.
    I32,
    /// 64-bit unsigned.
    U64,
    /// 64-bit signed.
    I64,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::U32 | DType::I32 => 4,
            DType::F64 | DType::U64 | DType::I64 => 8,
        }
    }

    /// Short lowercase name, as in Rust (`f32`, `bf16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::U8 => "u8",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U64 => "u64",
            DType::I64 => "i64",
        }
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// Stable numeric code, used on the wire during rendezvous.
    pub(crate) const fn code(self) -> u8 {
        match self {
            DType::F32 => 1,
            DType::F64 => 2,
            DType::F16 => 3,
            DType::BF16 => 4,
            DType::U8 => 5,
            DType::U32 => 6,
            DType::I32 => 7,
            DType::U64 => 8,
            DType::I64 => 9,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::F64,
            3 => DType::F16,
            4 => DType::BF16,
            5 => DType::U8,
            6 => DType::U32,
            7 => DType::I32,
            8 => DType::U64,
            9 => DType::I64,
            _ => return None,
        })
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A plain-old-data element type that may live in device memory.
///
/// Sealed: every implementor has no padding and no invalid bit patterns, which
/// is what makes the byte views below sound.
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static + std::fmt::Debug {
    /// The run-time tag of this type.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
    )*};
}

element!(f32 => F32, f64 => F64, f16 => F16, bf16 => BF16, u8 => U8, u32 => U32, i32 => I32, u64 => U64, i64 => I64);

/// Views a slice of elements as bytes.
pub(crate) fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: `Element` is sealed to padding-free POD types, so every byte is
    // initialised; the length is exact and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}
