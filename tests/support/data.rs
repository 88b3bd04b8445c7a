//! Test data that can show a summation order: `rand`'s
//! `random_range(-1.0..1.0)` for f32 draws multiples of 2^-22, whose sums of
//! up to a few hundred terms are exact in any order, so a rank that sums in
//! a different order would still agree bit for bit.

#![allow(dead_code)]

use rand::Rng;

/// A random f32 with a full 23-bit mantissa, either sign, and |x| in
/// [2^-12, 1): sums of a few of them round, differently in different orders.
pub fn mixed_f32(rng: &mut impl Rng) -> f32 {
    let sign = (rng.random::<u32>() & 1) << 31;
    let exponent = rng.random_range(115u32..=126) << 23;
    let mantissa = rng.random::<u32>() & 0x7f_ffff;
    f32::from_bits(sign | exponent | mantissa)
}

/// `n` of [`mixed_f32`].
pub fn mixed_f32s(n: usize) -> Vec<f32> {
    let mut rng = rand::rng();
    (0..n).map(|_| mixed_f32(&mut rng)).collect()
}
