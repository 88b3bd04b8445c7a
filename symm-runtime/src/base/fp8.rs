//! The 8-bit float element types [`f8e4m3`] and [`f8e5m2`], bit for bit
//! PyTorch's `torch.float8_e4m3fn` and `torch.float8_e5m2`.
//!
//! Like `half`'s bf16 and f16 they are storage types: arithmetic widens to
//! f32 (exactly), computes there and rounds once back, as c10 does. The
//! conversions are integer code, two `const fn`s shared by both formats,
//! the reference: `cuda/symm_impl/convert.cuh` mirrors them line for line
//! (NVRTC checks that copy against these with `static_assert`, no GPU
//! needed), and its conversions that kernels call are faster code that
//! gives the same bits (PTX's `cvt` on sm_89 and later, which saturates,
//! with c10's overflow to NaN or infinity set after it), checked against
//! these on every fp8 value and millions of f32s by `tests/gpu_dsl.rs` on
//! a GPU. The GPU and the emulator must agree bit for bit.

use std::cmp::Ordering;
use std::fmt;
use std::ops::{
    Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Rem, RemAssign, Sub, SubAssign,
};

/// An fp8 binary format.
struct Format {
    /// Exponent bits.
    exp: u32,
    /// Mantissa bits.
    man: u32,
    /// IEEE-like: the all-ones exponent holds infinities and NaNs (e5m2).
    /// Otherwise only S.1111.111 is NaN and there is no infinity (e4m3fn).
    ieee: bool,
}

const E4M3: Format = Format {
    exp: 4,
    man: 3,
    ieee: false,
};
const E5M2: Format = Format {
    exp: 5,
    man: 2,
    ieee: true,
};

/// The f32 bits of the fp8 value `b`, exactly. A NaN keeps its payload at
/// the top of the f32 mantissa, as c10's conversions do.
const fn to_f32_bits(b: u8, f: &Format) -> u32 {
    let b = b as u32;
    let sign = (b & 0x80) << 24;
    let all = (1u32 << f.man) - 1;
    let emax = (1u32 << f.exp) - 1;
    let bias = (1u32 << (f.exp - 1)) - 1;
    let exp = (b >> f.man) & emax;
    let mut man = b & all;
    if exp == emax && (f.ieee || man == all) {
        return sign | 0x7f80_0000 | (man << (23 - f.man));
    }
    if exp == 0 {
        if man == 0 {
            return sign;
        }
        // A subnormal, man * 2^(1 - bias - man bits): shift its leading one
        // into the implicit bit.
        let mut e = 127 + 1 - bias;
        while man & (1 << f.man) == 0 {
            man <<= 1;
            e -= 1;
        }
        return sign | (e << 23) | ((man & all) << (23 - f.man));
    }
    sign | ((exp + 127 - bias) << 23) | (man << (23 - f.man))
}

/// The fp8 value nearest the f32 with bits `u`, ties to even, as c10 rounds:
/// a NaN gives NaN (0x7F with the sign); an infinity, or a finite value that
/// rounds past the largest finite one, gives NaN in e4m3fn (which has no
/// infinity) and infinity in e5m2.
const fn from_f32_bits(u: u32, f: &Format) -> u8 {
    let sign = ((u >> 24) & 0x80) as u8;
    let a = u & 0x7fff_ffff;
    let nan = 0x7fu8;
    let over = if f.ieee {
        (((1u32 << f.exp) - 1) << f.man) as u8
    } else {
        nan
    };
    let max_finite = over as u32 - 1;
    if a > 0x7f80_0000 {
        return sign | nan;
    }
    let e = (a >> 23) as i32;
    if e == 0 {
        // Zero or an f32 subnormal: far below half the smallest fp8 one.
        return sign;
    }
    let bias = (1i32 << (f.exp - 1)) - 1;
    // The fp8 biased exponent: below 1 for subnormals. Past 1 << exp (and
    // for infinities) the value overflows whatever the rounding.
    let te = e - 127 + bias;
    if te > 1 << f.exp {
        return sign | over;
    }
    let sig = (a & 0x7f_ffff) | 0x80_0000;
    let shift = (23 - f.man) + if te < 1 { (1 - te) as u32 } else { 0 };
    if shift > 24 {
        // Below half the smallest subnormal (sig < 2^24 <= half).
        return sign;
    }
    let half = 1u32 << (shift - 1);
    let rem = sig & ((1u32 << shift) - 1);
    let mut q = sig >> shift;
    if rem > half || (rem == half && q & 1 == 1) {
        q += 1;
    }
    // A normal's implicit bit lands in the exponent field (te - 1 + 1); a
    // carry out of the mantissa moves it up one binade, as it must.
    let r = if te >= 1 {
        ((te as u32 - 1) << f.man) + q
    } else {
        q
    };
    if r > max_finite {
        return sign | over;
    }
    sign | r as u8
}

macro_rules! fp8_type {
    ($(#[$doc:meta])* $t:ident, $fmt:ident) => {
        $(#[$doc])*
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Default)]
        #[repr(transparent)]
        pub struct $t(u8);

        impl $t {
            /// The value with these bits.
            pub const fn from_bits(bits: u8) -> Self {
                Self(bits)
            }
            /// The bits.
            pub const fn to_bits(self) -> u8 {
                self.0
            }
            /// The nearest value to `v`, ties to even (see the type's docs
            /// for overflow and NaN).
            pub const fn from_f32(v: f32) -> Self {
                Self(from_f32_bits(v.to_bits(), &$fmt))
            }
            /// The value as an f32, exactly (a NaN keeps its payload).
            pub const fn to_f32(self) -> f32 {
                f32::from_bits(to_f32_bits(self.0, &$fmt))
            }
            /// Whether this is a NaN.
            pub const fn is_nan(self) -> bool {
                self.to_f32().is_nan()
            }
            /// Whether this is an infinity (never, for e4m3fn).
            pub const fn is_infinite(self) -> bool {
                self.to_f32().is_infinite()
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.to_f32(), f)
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f32(), f)
            }
        }

        impl From<$t> for f32 {
            fn from(v: $t) -> f32 {
                v.to_f32()
            }
        }

        // By value, like floats: NaN is unequal to everything, -0 == +0.
        impl PartialEq for $t {
            fn eq(&self, o: &Self) -> bool {
                self.to_f32() == o.to_f32()
            }
        }

        impl PartialOrd for $t {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                self.to_f32().partial_cmp(&o.to_f32())
            }
        }

        impl Neg for $t {
            type Output = Self;
            fn neg(self) -> Self {
                Self(self.0 ^ 0x80)
            }
        }

        fp8_ops!($t: Add add AddAssign add_assign +, Sub sub SubAssign sub_assign -,
            Mul mul MulAssign mul_assign *, Div div DivAssign div_assign /,
            Rem rem RemAssign rem_assign %);
    };
}

/// The binary operators and their compound assignments, through f32 and
/// rounded once (what the prelude's operators do on the GPU).
macro_rules! fp8_ops {
    ($t:ident: $($tr:ident $m:ident $tra:ident $ma:ident $op:tt),*) => {$(
        impl $tr for $t {
            type Output = Self;
            fn $m(self, o: Self) -> Self {
                Self::from_f32(self.to_f32() $op o.to_f32())
            }
        }
        impl $tra for $t {
            fn $ma(&mut self, o: Self) {
                *self = *self $op o;
            }
        }
    )*};
}

fp8_type!(
    /// PyTorch's `torch.float8_e4m3fn`: 1 sign, 4 exponent (bias 7) and 3
    /// mantissa bits; no infinities, NaN is S.1111.111 (0x7F, 0xFF); largest
    /// finite ±448, smallest subnormal 2^-9.
    ///
    /// [`from_f32`](Self::from_f32) rounds to nearest even and does not
    /// saturate (c10's `fp8e4m3fn_from_fp32_value`): a value whose magnitude
    /// rounds past 448 (464 < |v|), an infinity or a NaN gives NaN, with
    /// the input's sign.
    f8e4m3,
    E4M3
);

fp8_type!(
    /// PyTorch's `torch.float8_e5m2`: 1 sign, 5 exponent (bias 15) and 2
    /// mantissa bits, IEEE-like: ±infinity is 0x7C/0xFC, 0x7D..=0x7F (and
    /// with the sign) are NaNs; largest finite ±57344, smallest subnormal
    /// 2^-16.
    ///
    /// [`from_f32`](Self::from_f32) rounds to nearest even (c10's
    /// `fp8e5m2_from_fp32_value`): a value that rounds past 57344
    /// (61440 <= |v|) gives the infinity of its sign, a NaN gives NaN
    /// (0x7F with the sign).
    f8e5m2,
    E5M2
);

impl f8e4m3 {
    /// Largest finite value, 448.
    pub const MAX: Self = Self(0x7e);
    /// Smallest finite value, -448.
    pub const MIN: Self = Self(0xfe);
    /// Smallest positive normal value, 2^-6.
    pub const MIN_POSITIVE: Self = Self(0x08);
    /// The NaN `from_f32` gives (0x7F).
    pub const NAN: Self = Self(0x7f);
}

impl f8e5m2 {
    /// Largest finite value, 57344.
    pub const MAX: Self = Self(0x7b);
    /// Smallest finite value, -57344.
    pub const MIN: Self = Self(0xfb);
    /// Smallest positive normal value, 2^-14.
    pub const MIN_POSITIVE: Self = Self(0x04);
    /// The NaN `from_f32` gives (0x7F).
    pub const NAN: Self = Self(0x7f);
    /// Positive infinity.
    pub const INFINITY: Self = Self(0x7c);
    /// Negative infinity.
    pub const NEG_INFINITY: Self = Self(0xfc);
}
