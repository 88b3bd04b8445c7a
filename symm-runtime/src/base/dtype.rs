//! Element types that symmetric buffers can hold.

use half::{bf16, f16};

use crate::fp8::{f8e4m3, f8e5m2};

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
    /// 8-bit float e4m3fn (PyTorch's `float8_e4m3fn`).
    F8E4M3,
    /// 8-bit float e5m2 (PyTorch's `float8_e5m2`).
    F8E5M2,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::U8 | DType::F8E4M3 | DType::F8E5M2 => 1,
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
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
        }
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2
        )
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
            DType::F8E4M3 => 10,
            DType::F8E5M2 => 11,
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
            10 => DType::F8E4M3,
            11 => DType::F8E5M2,
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

    /// The element's bits as they lie in memory, zero-extended to 64 (so
    /// `-1i32` is `0xffff_ffff`). Results that must agree across ranks or
    /// backends are compared by bits, not by `==`: `NaN != NaN`, and
    /// `0.0 == -0.0` hides a sign. See [`compare_bits`].
    fn to_bits64(self) -> u64;
}

macro_rules! element {
    ($($t:ty => $d:ident, |$v:ident| $bits:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_bits64(self) -> u64 {
                let $v = self;
                $bits
            }
        }
    )*};
}

element! {
    f32 => F32, |v| u64::from(v.to_bits());
    f64 => F64, |v| v.to_bits();
    f16 => F16, |v| u64::from(v.to_bits());
    bf16 => BF16, |v| u64::from(v.to_bits());
    u8 => U8, |v| u64::from(v);
    u32 => U32, |v| u64::from(v);
    i32 => I32, |v| u64::from(v as u32);
    u64 => U64, |v| v;
    i64 => I64, |v| v as u64;
    f8e4m3 => F8E4M3, |v| u64::from(v.to_bits());
    f8e5m2 => F8E5M2, |v| u64::from(v.to_bits());
}

/// Where two slices of elements first differ bit for bit, from
/// [`compare_bits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitMismatch {
    /// The slices have different lengths (their elements are not compared).
    Len {
        /// `got`'s length.
        got: usize,
        /// `want`'s length.
        want: usize,
    },
    /// Element `index` is the first whose bits differ.
    Element {
        /// Its index.
        index: usize,
        /// `got[index]`'s bits ([`Element::to_bits64`]).
        got: u64,
        /// `want[index]`'s bits.
        want: u64,
        /// The element type, for the message.
        dtype: DType,
    },
}

impl std::fmt::Display for BitMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BitMismatch::Len { got, want } => write!(f, "{got} elements, want {want}"),
            BitMismatch::Element {
                index,
                got,
                want,
                dtype,
            } => write!(
                f,
                "element {index} ({dtype}) holds bits {got:#x}, want {want:#x}"
            ),
        }
    }
}

impl std::error::Error for BitMismatch {}

/// Compares `got` with `want` bit for bit ([`Element::to_bits64`]), naming
/// the first element that differs: what a check of kernel results needs,
/// where `==` would take `-0.0` for `0.0` and never match a NaN.
///
/// ```
/// # use symm_runtime as symm;
/// assert!(symm::compare_bits(&[1.0f32, f32::NAN], &[1.0, f32::NAN]).is_ok());
/// let e = symm::compare_bits(&[1.0f32, 0.0], &[1.0, -0.0]).unwrap_err();
/// assert_eq!(e.to_string(), "element 1 (f32) holds bits 0x0, want 0x80000000");
/// ```
pub fn compare_bits<T: Element>(got: &[T], want: &[T]) -> Result<(), BitMismatch> {
    if got.len() != want.len() {
        return Err(BitMismatch::Len {
            got: got.len(),
            want: want.len(),
        });
    }
    match got
        .iter()
        .zip(want)
        .position(|(a, b)| a.to_bits64() != b.to_bits64())
    {
        None => Ok(()),
        Some(index) => Err(BitMismatch::Element {
            index,
            got: got[index].to_bits64(),
            want: want[index].to_bits64(),
            dtype: T::DTYPE,
        }),
    }
}

/// Views a slice of elements as bytes.
pub(crate) fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: `Element` is sealed to padding-free POD types, so every byte is
    // initialised; the length is exact and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    /// The bits are the bytes in memory, zero-extended, for every type.
    #[test]
    fn bits_are_the_bytes_in_memory() {
        fn check<T: Element>(v: T) {
            let mut b = [0u8; 8];
            b[..T::DTYPE.size()].copy_from_slice(as_bytes(&[v]));
            assert_eq!(v.to_bits64(), u64::from_le_bytes(b), "{v:?}");
        }
        let mut g = rand::rng();
        for _ in 0..100 {
            check(f32::from_bits(g.random()));
            check(f64::from_bits(g.random()));
            check(f16::from_bits(g.random()));
            check(bf16::from_bits(g.random()));
            check(f8e4m3::from_bits(g.random()));
            check(f8e5m2::from_bits(g.random()));
            check(g.random::<u8>());
            check(g.random::<u32>());
            check(g.random::<i32>());
            check(g.random::<u64>());
            check(g.random::<i64>());
        }
        assert_eq!((-1i32).to_bits64(), 0xffff_ffff);
    }

    /// Each element type's tag has its size and a code that rendezvous
    /// and the pool's records carry back to it; codes and names are unique.
    #[test]
    fn every_type_has_its_size_and_a_code_that_comes_back() {
        fn check<T: Element>() {
            let d = T::DTYPE;
            assert_eq!(d.size(), std::mem::size_of::<T>(), "{d}");
            assert_eq!(DType::from_code(d.code()), Some(d), "{d}");
        }
        check::<f32>();
        check::<f64>();
        check::<f16>();
        check::<bf16>();
        check::<u8>();
        check::<u32>();
        check::<i32>();
        check::<u64>();
        check::<i64>();
        check::<f8e4m3>();
        check::<f8e5m2>();
        let all: Vec<DType> = (0..=255).filter_map(DType::from_code).collect();
        let mut names: Vec<&str> = all.iter().map(|d| d.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!((all.len(), names.len()), (11, 11));
        assert!(DType::F8E4M3.is_float() && DType::F8E5M2.is_float());
    }

    /// The first differing element is named, NaNs match themselves and
    /// signed zeros differ; lengths are compared first.
    #[test]
    fn compare_bits_names_the_first_difference() {
        let mut g = rand::rng();
        let n = g.random_range(2..500);
        let a: Vec<f64> = (0..n).map(|_| f64::from_bits(g.random())).collect();
        assert_eq!(compare_bits(&a, &a.clone()), Ok(()));
        let mut b = a.clone();
        let (i, j) = (g.random_range(0..n - 1), n - 1);
        b[j] = f64::from_bits(!a[j].to_bits());
        b[i] = f64::from_bits(a[i].to_bits() ^ 1 << g.random_range(0..64));
        assert_eq!(
            compare_bits(&b, &a),
            Err(BitMismatch::Element {
                index: i,
                got: b[i].to_bits(),
                want: a[i].to_bits(),
                dtype: DType::F64,
            })
        );
        assert_eq!(
            compare_bits(&a[1..], &a),
            Err(BitMismatch::Len {
                got: n - 1,
                want: n
            })
        );
        assert!(compare_bits(&[f32::NAN], &[f32::NAN]).is_ok());
        assert!(compare_bits(&[0.0f32], &[-0.0]).is_err());
        assert_eq!(
            compare_bits(&[-2i32], &[2]).unwrap_err().to_string(),
            "element 0 (i32) holds bits 0xfffffffe, want 0x2"
        );
    }
}
