//! Element types and their arithmetic, as kernels see them.

use std::ops::{
    Add, AddAssign, BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, BitXorAssign, Div, DivAssign,
    Mul, MulAssign, Neg, Not, Rem, RemAssign, Shl, ShlAssign, Shr, ShrAssign, Sub, SubAssign,
};

use half::{bf16, f16};

use crate::dtype::Element;
use crate::fp8::{f8e4m3, f8e5m2};

/// A numeric type kernels can use, with its CUDA C spelling.
pub trait Scalar: Element + PartialEq + PartialOrd {
    /// The CUDA C type name (`float`, `symm_bf16`, ...).
    const CUDA: &'static str;
    /// Converts to f32 (`symm_to_f32` on the GPU).
    fn to_f32(self) -> f32;
    /// Converts from f32, rounding to nearest or saturating (`symm_from_f32`).
    fn from_f32(v: f32) -> Self;
    /// The element's bits, zero-extended to 32 (for packing). `symm_to_bits32`.
    fn to_bits32(self) -> u32 {
        self.__to_bits64() as u32
    }
    /// The element with these low bits (for unpacking). `symm_from_bits32`.
    fn from_bits32(bits: u32) -> Self {
        Self::__from_bits64(u64::from(bits))
    }
    /// The element with these low bits, of any width (the inverse of
    /// [`Element::to_bits64`]). `symm_from_bits64`.
    fn from_bits64(bits: u64) -> Self {
        Self::__from_bits64(bits)
    }
    /// The bits as a kernel parameter slot holds them: integers
    /// sign-extended (`as u64`), unlike [`Element::to_bits64`], which
    /// zero-extends; only the low `size_of::<Self>()` bytes are ever read.
    #[doc(hidden)]
    fn __to_bits64(self) -> u64;
    #[doc(hidden)]
    fn __from_bits64(b: u64) -> Self;
}

/// Arithmetic shared by every numeric element type: the operators and their
/// compound assignments (`acc += x`), so that a generic kernel over
/// `T: Num` is written as one over `f32` would be. `%` is Rust's (truncating
/// for integers, `fmod` for floats), on both backends.
pub trait Num:
    Scalar
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + RemAssign
{
    /// Zero.
    fn zero() -> Self;
    /// One.
    fn one() -> Self;
    /// Smaller of two (for floats, IEEE minNum: a NaN loses). `symm_min`.
    fn min(self, other: Self) -> Self;
    /// Larger of two (for floats, IEEE maxNum). `symm_max`.
    fn max(self, other: Self) -> Self;
    /// Absolute value (wrapping for signed integers). `symm_abs`.
    fn abs(self) -> Self;
    /// `self * b + c` (for floats, with one rounding). `symm_fma`.
    fn fma(self, b: Self, c: Self) -> Self;
}

/// Floating-point element types: f32, f64, bf16, f16, f8e4m3, f8e5m2.
pub trait DslFloat: Num + Neg<Output = Self> {
    /// Correctly rounded square root. `symm_sqrt`.
    fn sqrt(self) -> Self;
}

/// Integer element types, with the bitwise operators and shifts by a `u32`
/// (and their compound assignments).
pub trait DslInt:
    Num
    + Ord
    + Not<Output = Self>
    + BitAnd<Output = Self>
    + BitOr<Output = Self>
    + BitXor<Output = Self>
    + Shl<u32, Output = Self>
    + Shr<u32, Output = Self>
    + BitAndAssign
    + BitOrAssign
    + BitXorAssign
    + ShlAssign<u32>
    + ShrAssign<u32>
{
}

/// 4- and 8-byte types that support ordered loads, stores, exchange and CAS.
pub trait AtomicScalar: Scalar {}
/// Types with an atomic add: u32, i32, u64, f32, f64.
pub trait AtomicAdd: AtomicScalar {}
/// Types with atomic min and max: u32, i32, u64, i64.
pub trait AtomicMinMax: AtomicScalar + Ord {}

macro_rules! int_scalar {
    ($($t:ty => $cuda:literal, $signed:tt);* $(;)?) => {$(
        impl Scalar for $t {
            const CUDA: &'static str = $cuda;
            fn to_f32(self) -> f32 { self as f32 }
            fn from_f32(v: f32) -> Self { v as $t }
            fn __to_bits64(self) -> u64 { self as u64 }
            fn __from_bits64(b: u64) -> Self { b as $t }
        }
        impl Num for $t {
            fn zero() -> Self { 0 }
            fn one() -> Self { 1 }
            fn min(self, o: Self) -> Self { Ord::min(self, o) }
            fn max(self, o: Self) -> Self { Ord::max(self, o) }
            fn abs(self) -> Self { int_abs!($signed, self) }
            fn fma(self, b: Self, c: Self) -> Self { self.wrapping_mul(b).wrapping_add(c) }
        }
        impl DslInt for $t {}
    )*};
}

macro_rules! int_abs {
    (true, $v:expr) => {
        $v.wrapping_abs()
    };
    (false, $v:expr) => {
        $v
    };
}

int_scalar! {
    u8 => "symm_u8", false;
    u32 => "symm_u32", false;
    u64 => "symm_u64", false;
    i32 => "symm_i32", true;
    i64 => "symm_i64", true;
}

impl Scalar for f32 {
    const CUDA: &'static str = "float";
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(v: f32) -> Self {
        v
    }
    fn __to_bits64(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn __from_bits64(b: u64) -> Self {
        f32::from_bits(b as u32)
    }
}

impl Scalar for f64 {
    const CUDA: &'static str = "double";
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn from_f32(v: f32) -> Self {
        f64::from(v)
    }
    fn __to_bits64(self) -> u64 {
        self.to_bits()
    }
    fn __from_bits64(b: u64) -> Self {
        f64::from_bits(b)
    }
}

macro_rules! half_scalar {
    ($($t:ident => $cuda:literal, $bits:ty),*) => {$(
        impl Scalar for $t {
            const CUDA: &'static str = $cuda;
            fn to_f32(self) -> f32 { $t::to_f32(self) }
            fn from_f32(v: f32) -> Self { $t::from_f32(v) }
            fn __to_bits64(self) -> u64 { u64::from(self.to_bits()) }
            fn __from_bits64(b: u64) -> Self { $t::from_bits(b as $bits) }
        }
    )*};
}

half_scalar!(
    bf16 => "symm_bf16", u16,
    f16 => "symm_f16", u16,
    f8e4m3 => "symm_f8e4m3", u8,
    f8e5m2 => "symm_f8e5m2", u8
);

macro_rules! float_num {
    ($($t:ident),*) => {$(
        impl Num for $t {
            fn zero() -> Self { Self::from_f32(0.0) }
            fn one() -> Self { Self::from_f32(1.0) }
            // The operand the prelude's symm_min/symm_max pick, also on ties:
            // a NaN loses, and of two zeros min is -0.0 and max +0.0.
            fn min(self, o: Self) -> Self {
                let neg = self.__to_bits64() & sign_bit::<$t>() != 0;
                if self.is_nan() || o < self || (o == self && !neg) { o } else { self }
            }
            fn max(self, o: Self) -> Self {
                let neg = self.__to_bits64() & sign_bit::<$t>() != 0;
                if self.is_nan() || o > self || (o == self && neg) { o } else { self }
            }
            fn abs(self) -> Self { Self::__from_bits64(self.__to_bits64() & !sign_bit::<$t>()) }
            fn fma(self, b: Self, c: Self) -> Self { fma_impl(self, b, c) }
        }
        impl DslFloat for $t {
            fn sqrt(self) -> Self { sqrt_impl(self) }
        }
    )*};
}

float_num!(f32, f64, bf16, f16, f8e4m3, f8e5m2);

fn sign_bit<T: Scalar>() -> u64 {
    1u64 << (std::mem::size_of::<T>() * 8 - 1)
}

trait FloatImpl {
    fn fma_i(a: Self, b: Self, c: Self) -> Self;
    fn sqrt_i(a: Self) -> Self;
}
impl FloatImpl for f32 {
    fn fma_i(a: Self, b: Self, c: Self) -> Self {
        a.mul_add(b, c)
    }
    fn sqrt_i(a: Self) -> Self {
        a.sqrt()
    }
}
impl FloatImpl for f64 {
    fn fma_i(a: Self, b: Self, c: Self) -> Self {
        a.mul_add(b, c)
    }
    fn sqrt_i(a: Self) -> Self {
        a.sqrt()
    }
}
macro_rules! half_float_impl {
    ($($t:ident),*) => {$(
        impl FloatImpl for $t {
            // Computed in f32 and rounded once, exactly as symm_fma does on the GPU.
            fn fma_i(a: Self, b: Self, c: Self) -> Self { $t::from_f32(a.to_f32().mul_add(b.to_f32(), c.to_f32())) }
            fn sqrt_i(a: Self) -> Self { $t::from_f32(a.to_f32().sqrt()) }
        }
    )*};
}
half_float_impl!(bf16, f16, f8e4m3, f8e5m2);

fn fma_impl<T: FloatImpl>(a: T, b: T, c: T) -> T {
    T::fma_i(a, b, c)
}
fn sqrt_impl<T: FloatImpl>(a: T) -> T {
    T::sqrt_i(a)
}

macro_rules! marker {
    ($tr:ident: $($t:ty),*) => {$( impl $tr for $t {} )*};
}
marker!(AtomicScalar: u32, i32, u64, i64, f32, f64);
marker!(AtomicAdd: u32, i32, u64, f32, f64);
marker!(AtomicMinMax: u32, i32, u64, i64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_min_max_ignore_nan_like_the_gpu() {
        assert_eq!(Num::min(f32::NAN, 1.0), 1.0);
        assert_eq!(Num::max(2.0f32, f32::NAN), 2.0);
        assert_eq!(
            Num::min(bf16::from_f32(-1.0), bf16::from_f32(3.0)),
            bf16::from_f32(-1.0)
        );
        assert_eq!(Num::abs(f16::from_f32(-2.5)), f16::from_f32(2.5));
        assert_eq!(Num::abs(i32::MIN), i32::MIN);
        assert_eq!(Num::abs(-0.0f64).to_bits(), 0);
    }

    #[test]
    fn half_fma_rounds_once_from_f32() {
        let (a, b, c) = (
            bf16::from_f32(1.1),
            bf16::from_f32(3.3),
            bf16::from_f32(-2.0),
        );
        assert_eq!(
            Num::fma(a, b, c),
            bf16::from_f32(a.to_f32().mul_add(b.to_f32(), c.to_f32()))
        );
    }
}
