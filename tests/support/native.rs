//! The element types that reduce in their own type (integers and f64),
//! with references written apart from the kernels, for the tests of the
//! collectives and of the functional layer.

#![allow(dead_code)]

use rand::Rng;
use symm::kernels::collectives::{ReduceElem, ReduceOp};

/// The element types that reduce in their own type, each with a
/// reference written apart from the kernels: integers wrap, as the kernels
/// and NCCL do (checked against a 128-bit sum cut to the type); f64
/// combines in f64 in rank order (the float64 reference itself).
pub trait Native: ReduceElem {
    /// A random value: zeros (both signs for f64), small values and (with
    /// `extremes`) the type's extremes now and then, else full-width bits
    /// (integers, so sums and products wrap) or a full-mantissa value of
    /// mixed magnitude.
    fn random(rng: &mut impl Rng, extremes: bool) -> Self;
    /// `a` combined with `b` by `op` (avg as the sum; divided at the end).
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self;
    /// The reduction of `vals` (rank order) by `op`.
    fn reduce(op: ReduceOp, vals: &[Self]) -> Self;
}

macro_rules! native_int {
    ($($t:ty),*) => {$(
        impl Native for $t {
            fn random(rng: &mut impl Rng, extremes: bool) -> Self {
                match rng.random_range(0..8) {
                    0 => 0,
                    1 if extremes => <$t>::MAX,
                    2 if extremes => <$t>::MIN,
                    3 => rng.random_range(0..5),
                    _ => rng.random(),
                }
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => Ord::min(a, b),
                    ReduceOp::Max => Ord::max(a, b),
                }
            }
            fn reduce(op: ReduceOp, vals: &[Self]) -> Self {
                let got = vals[1..].iter().fold(vals[0], |a, &b| Self::combine(op, a, b));
                if op == ReduceOp::Sum {
                    // The wrapped sum is the exact one modulo 2^bits.
                    let exact: i128 = vals.iter().map(|&v| v as i128).sum();
                    assert_eq!(got, exact as $t, "the wrapping reference");
                }
                got
            }
        }
    )*};
}
native_int!(i32, i64, u32, u64);

/// The floats: f64 combines in f64, and f32, which every reduction
/// combines in f32 too, the same way.
macro_rules! native_float {
    ($($t:ident, $range:expr);*) => {$(
        impl Native for $t {
            fn random(rng: &mut impl Rng, extremes: bool) -> Self {
                match rng.random_range(0..16) {
                    0 => 0.0,
                    1 => -0.0,
                    2 if extremes => $t::MAX,
                    _ => {
                        let m = 1.0 + rng.random::<$t>();
                        let sign = if rng.random::<bool>() { -1.0 } else { 1.0 };
                        sign * m * (2.0 as $t).powi(rng.random_range($range))
                    }
                }
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a + b,
                    ReduceOp::Prod => a * b,
                    // IEEE 754-2019 minimum and maximum: a NaN wins (the
                    // first), and -0 is below +0.
                    _ if a.is_nan() => a,
                    _ if b.is_nan() => b,
                    ReduceOp::Min if a == b => if a.is_sign_negative() { a } else { b },
                    ReduceOp::Max if a == b => if a.is_sign_positive() { a } else { b },
                    ReduceOp::Min => if b < a { b } else { a },
                    ReduceOp::Max => if b > a { b } else { a },
                }
            }
            fn reduce(op: ReduceOp, vals: &[Self]) -> Self {
                let acc = vals[1..].iter().fold(vals[0], |a, &b| Self::combine(op, a, b));
                if op == ReduceOp::Avg {
                    acc / vals.len() as $t
                } else {
                    acc
                }
            }
        }
    )*};
}
native_float!(f64, -30..30; f32, -20..20);

/// `n` random values of `T` ([`Native::random`]).
pub fn native_values<T: Native>(n: usize, extremes: bool) -> Vec<T> {
    let mut rng = rand::rng();
    (0..n).map(|_| T::random(&mut rng, extremes)).collect()
}

/// The ops `T` reduces by: avg for f64 only.
pub fn native_ops<T: Native>() -> Vec<ReduceOp> {
    ReduceOp::ALL
        .into_iter()
        .filter(|&op| op != ReduceOp::Avg || T::DTYPE.is_float())
        .collect()
}
