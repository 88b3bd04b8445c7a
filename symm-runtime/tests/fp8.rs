//! The fp8 element types against references written independently here:
//! every bit pattern widened (by formula), every round trip, every midpoint
//! between neighbours and its f32 neighbours, the overflow, infinity and NaN
//! rules of c10 (`torch.float8_e4m3fn`, `torch.float8_e5m2`), and random
//! f32s against a nearest-by-search reference. Then the prelude's CUDA C
//! conversions against the Rust ones, bit for bit, as `static_assert`s that
//! NVRTC evaluates (no GPU needed; it needs NVRTC, see `common`).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use symm_runtime::cuda_prelude::PRELUDE;
use symm_runtime::dsl::{f8e4m3, f8e5m2, DslFloat, Num, Scalar};
use symm_runtime::jit::{Arch, CompileRequest, JitEngine};

mod common;
use common::nvrtc_or_skip;

/// A format as the references see it.
struct Fmt {
    name: &'static str,
    exp: u32,
    man: u32,
    bias: i32,
    /// Infinities and NaNs in the all-ones exponent (e5m2); else only
    /// S.1111.111 is NaN (e4m3fn).
    ieee: bool,
    /// What overflow and infinities give: NaN (e4m3fn) or infinity (e5m2).
    over: u8,
    /// The value after the largest finite one, had the format one: an f32
    /// rounds past the largest finite value iff it is nearer to this.
    past_max: f64,
}

const E4M3: Fmt = Fmt {
    name: "f8e4m3",
    exp: 4,
    man: 3,
    bias: 7,
    ieee: false,
    over: 0x7f,
    past_max: 480.0,
};
const E5M2: Fmt = Fmt {
    name: "f8e5m2",
    exp: 5,
    man: 2,
    bias: 15,
    ieee: true,
    over: 0x7c,
    past_max: 65536.0,
};

/// The conversions under test, by format.
trait Fp8: Copy {
    const FMT: Fmt;
    fn bits(self) -> u8;
    fn of_bits(b: u8) -> Self;
    fn of_f32(v: f32) -> Self;
    fn f32(self) -> f32;
}
macro_rules! fp8 {
    ($t:ident, $f:ident) => {
        impl Fp8 for $t {
            const FMT: Fmt = $f;
            fn bits(self) -> u8 {
                self.to_bits()
            }
            fn of_bits(b: u8) -> Self {
                $t::from_bits(b)
            }
            fn of_f32(v: f32) -> Self {
                $t::from_f32(v)
            }
            fn f32(self) -> f32 {
                self.to_f32()
            }
        }
    };
}
fp8!(f8e4m3, E4M3);
fp8!(f8e5m2, E5M2);

/// Whether the pattern is a NaN, from the format's definition.
fn ref_is_nan(b: u8, f: &Fmt) -> bool {
    let (e, m) = fields(b, f);
    let all_e = (1 << f.exp) - 1;
    if f.ieee {
        e == all_e && m != 0
    } else {
        e == all_e && m == (1 << f.man) - 1
    }
}

fn fields(b: u8, f: &Fmt) -> (u32, u32) {
    let b = u32::from(b);
    ((b >> f.man) & ((1 << f.exp) - 1), b & ((1 << f.man) - 1))
}

/// The value of a pattern by formula (NaN for the NaNs).
fn ref_value(b: u8, f: &Fmt) -> f64 {
    if ref_is_nan(b, f) {
        return f64::NAN;
    }
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let (e, m) = fields(b, f);
    let frac = f64::from(m) / f64::from(1u32 << f.man);
    if f.ieee && e == (1 << f.exp) - 1 {
        return sign * f64::INFINITY;
    }
    if e == 0 {
        sign * frac * 2f64.powi(1 - f.bias)
    } else {
        sign * (1.0 + frac) * 2f64.powi(e as i32 - f.bias)
    }
}

/// The non-negative finite patterns, by increasing value.
fn finite_positives(f: &Fmt) -> Vec<(f64, u8)> {
    (0..0x80u8)
        .map(|b| (ref_value(b, f), b))
        .filter(|(v, _)| v.is_finite())
        .collect()
}

/// The pattern `x` converts to: the nearest of all finite values (ties to
/// the even pattern), found by search; NaN for NaN, the format's overflow
/// value past the largest finite one.
fn ref_from_f32(x: f32, f: &Fmt) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    if x.is_nan() {
        return sign | 0x7f;
    }
    let a = f64::from(x.abs());
    let mut cands = finite_positives(f);
    cands.push((f.past_max, f.over));
    let mut best = cands[0];
    for &(v, b) in &cands[1..] {
        let (d, bd) = ((a - v).abs(), (a - best.0).abs());
        if d < bd || (d == bd && b % 2 == 0) {
            best = (v, b);
        }
    }
    if a >= f.past_max {
        best = (f.past_max, f.over);
    }
    sign | best.1
}

fn widen_every_pattern<T: Fp8>() {
    let f = T::FMT;
    for b in 0..=255u8 {
        let got = T::of_bits(b).f32();
        let want = ref_value(b, &f);
        if want.is_nan() {
            // c10 keeps a NaN's mantissa at the top of f32's.
            let (_, m) = fields(b, &f);
            let bits = (u32::from(b & 0x80) << 24) | 0x7f80_0000 | (m << (23 - f.man));
            assert_eq!(got.to_bits(), bits, "{} {b:#04x} widened", f.name);
            assert!(got.is_nan());
        } else {
            assert_eq!(f64::from(got), want, "{} {b:#04x} widened", f.name);
            assert_eq!(got.is_sign_negative(), b & 0x80 != 0, "{} {b:#04x}", f.name);
        }
    }
}

#[test]
fn every_pattern_widens_exactly() {
    widen_every_pattern::<f8e4m3>();
    widen_every_pattern::<f8e5m2>();
    // Landmarks, as PyTorch prints them.
    assert_eq!(f8e4m3::MAX.to_f32(), 448.0);
    assert_eq!(f8e4m3::from_bits(0x01).to_f32(), 2f32.powi(-9));
    assert_eq!(f8e4m3::from_bits(0x38).to_f32(), 1.0);
    assert_eq!(f8e4m3::from_bits(0x7f).to_f32().to_bits(), 0x7ff0_0000);
    assert_eq!(f8e5m2::MAX.to_f32(), 57344.0);
    assert_eq!(f8e5m2::from_bits(0x01).to_f32(), 2f32.powi(-16));
    assert_eq!(f8e5m2::from_bits(0x3c).to_f32(), 1.0);
    assert_eq!(f8e5m2::NEG_INFINITY.to_f32(), f32::NEG_INFINITY);
    assert_eq!(f8e5m2::from_bits(0x7d).to_f32().to_bits(), 0x7fa0_0000);
    assert_eq!(f8e5m2::from_bits(0xff).to_f32().to_bits(), 0xffe0_0000);
}

fn round_trip_every_pattern<T: Fp8>() {
    let f = T::FMT;
    for b in 0..=255u8 {
        if !ref_is_nan(b, &f) {
            let v = T::of_bits(b).f32();
            assert_eq!(T::of_f32(v).bits(), b, "{} {b:#04x} ({v})", f.name);
        }
    }
}

#[test]
fn every_pattern_but_nan_round_trips() {
    round_trip_every_pattern::<f8e4m3>();
    round_trip_every_pattern::<f8e5m2>();
}

fn next_up(x: f32) -> f32 {
    f32::from_bits(x.to_bits() + 1)
}
fn next_down(x: f32) -> f32 {
    f32::from_bits(x.to_bits() - 1)
}

/// Every midpoint between neighbours (and past the largest finite value)
/// rounds to the even one, and the f32s beside it to the nearer one, in
/// both signs.
fn midpoints<T: Fp8>() -> usize {
    let f = T::FMT;
    let mut vals = finite_positives(&f);
    vals.push((f.past_max, f.over));
    let mut n = 0;
    for w in vals.windows(2) {
        let ((lo, lb), (hi, hb)) = (w[0], w[1]);
        let mid = ((lo + hi) / 2.0) as f32;
        assert_eq!(f64::from(mid), (lo + hi) / 2.0, "midpoints are f32s");
        let even = if lb % 2 == 0 { lb } else { hb };
        for sign in [0u8, 0x80] {
            let s = |x: f32| if sign == 0 { x } else { -x };
            let name = f.name;
            assert_eq!(T::of_f32(s(mid)).bits(), sign | even, "{name} {}", s(mid));
            let (below, above) = (next_down(mid), next_up(mid));
            assert_eq!(T::of_f32(s(below)).bits(), sign | lb, "{name} {}", s(below));
            assert_eq!(T::of_f32(s(above)).bits(), sign | hb, "{name} {}", s(above));
            n += 1;
        }
    }
    n
}

#[test]
fn midpoints_tie_to_even_and_their_neighbours_round_to_nearest() {
    assert_eq!(midpoints::<f8e4m3>(), 2 * 127);
    assert_eq!(midpoints::<f8e5m2>(), 2 * 124);
}

#[test]
fn overflow_infinity_and_nan_follow_c10() {
    let nans = [
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffbf_ffff),
    ];
    for x in nans {
        let sign = if x.is_sign_negative() { 0x80 } else { 0 };
        assert_eq!(f8e4m3::from_f32(x).to_bits(), sign | 0x7f, "{x:?}");
        assert_eq!(f8e5m2::from_f32(x).to_bits(), sign | 0x7f, "{x:?}");
    }
    // e4m3fn does not saturate: past 464 (the midpoint of 448 and 480) and
    // at infinity it is NaN, as in c10.
    for (x, b) in [
        (448.0, 0x7e),
        (464.0, 0x7e),
        (next_up(464.0), 0x7f),
        (479.9, 0x7f),
        (480.0, 0x7f),
        (1e30, 0x7f),
        (f32::MAX, 0x7f),
        (f32::INFINITY, 0x7f),
    ] {
        assert_eq!(f8e4m3::from_f32(x).to_bits(), b, "{x}");
        assert_eq!(f8e4m3::from_f32(-x).to_bits(), 0x80 | b, "{}", -x);
    }
    // e5m2 overflows to infinity from 61440 (the midpoint of 57344 and 2^16).
    for (x, b) in [
        (57344.0, 0x7b),
        (next_down(61440.0), 0x7b),
        (61440.0, 0x7c),
        (65536.0, 0x7c),
        (f32::MAX, 0x7c),
        (f32::INFINITY, 0x7c),
    ] {
        assert_eq!(f8e5m2::from_f32(x).to_bits(), b, "{x}");
        assert_eq!(f8e5m2::from_f32(-x).to_bits(), 0x80 | b, "{}", -x);
    }
    // Tiny values: f32 subnormals and anything up to half the smallest
    // subnormal become zero of their sign.
    for x in [f32::from_bits(1), f32::MIN_POSITIVE, 2f32.powi(-10)] {
        assert_eq!(f8e4m3::from_f32(x).to_bits(), 0, "{x}");
        assert_eq!(f8e4m3::from_f32(-x).to_bits(), 0x80, "{x}");
    }
    assert_eq!(f8e4m3::from_f32(next_up(2f32.powi(-10))).to_bits(), 1);
    assert_eq!(f8e5m2::from_f32(2f32.powi(-17)).to_bits(), 0);
    assert_eq!(f8e5m2::from_f32(next_up(2f32.powi(-17))).to_bits(), 1);
    assert!(f8e4m3::NAN.is_nan() && !f8e4m3::from_f32(f32::INFINITY).is_infinite());
    assert!(f8e5m2::from_f32(1e9).is_infinite() && f8e5m2::NAN.is_nan());
}

fn random_f32s<T: Fp8>(g: &mut StdRng, seed: u64) {
    let f = T::FMT;
    for k in 0..400_000 {
        // Half any bit pattern, half near the format's range.
        let bits = if k % 2 == 0 {
            g.random::<u32>()
        } else {
            let e = g.random_range(127 - 30..=127 + 18u32);
            (g.random::<u32>() & 0x807f_ffff) | (e << 23)
        };
        let x = f32::from_bits(bits);
        assert_eq!(
            T::of_f32(x).bits(),
            ref_from_f32(x, &f),
            "{} from {x:e} ({bits:#010x}); seed {seed}",
            f.name
        );
    }
}

#[test]
fn random_f32s_round_like_a_nearest_by_search_reference() {
    let seed = rand::rng().random();
    let mut g = StdRng::seed_from_u64(seed);
    random_f32s::<f8e4m3>(&mut g, seed);
    random_f32s::<f8e5m2>(&mut g, seed);
}

#[test]
fn values_compare_and_compute_through_f32() {
    let (a, b) = (f8e4m3::from_f32(1.5), f8e4m3::from_f32(-0.375));
    assert_eq!(a + b, f8e4m3::from_f32(1.125));
    assert_eq!((a * b).to_bits(), f8e4m3::from_f32(-0.5625).to_bits());
    assert_eq!((-a).to_bits(), a.to_bits() ^ 0x80);
    assert_eq!(f8e4m3::from_bits(0x00), f8e4m3::from_bits(0x80));
    assert_ne!(f8e4m3::NAN, f8e4m3::NAN);
    assert!(b < a && f8e5m2::NEG_INFINITY < f8e5m2::MIN);
    assert!(f8e4m3::NAN.partial_cmp(&a).is_none());
    let mut c = f8e5m2::from_f32(3.0);
    c /= f8e5m2::from_f32(2.0);
    c %= f8e5m2::from_f32(1.0);
    assert_eq!(c.to_f32(), 0.5);
    assert_eq!(Num::abs(f8e5m2::from_f32(-2.0)).to_f32(), 2.0);
    assert_eq!(DslFloat::sqrt(f8e4m3::from_f32(2.0)).to_f32(), 1.375);
    assert_eq!(<f8e4m3 as Scalar>::from_bits32(0x38).to_f32(), 1.0);
    assert_eq!(f8e5m2::from_f32(1.0).to_bits32(), 0x3c);
    assert_eq!(format!("{:?} {}", f8e4m3::MAX, f8e5m2::MIN), "448.0 -57344");
}

/// The CUDA C conversions of the prelude against the Rust ones, bit for bit:
/// every pattern widened, and rounded from every value, every midpoint and
/// its neighbours, the specials and random f32s. Each pair is a
/// `static_assert` that NVRTC evaluates, so a difference fails the compile
/// and the log names its input.
#[test]
fn cuda_conversions_equal_the_rust_ones_under_nvrtc() {
    if !nvrtc_or_skip("cuda_conversions_equal_the_rust_ones_under_nvrtc") {
        return;
    }
    let seed = rand::rng().random();
    let mut g = StdRng::seed_from_u64(seed);
    let mut body = String::from("namespace symm_fp8_check {\nusing namespace symm_detail;\n");
    assertions::<f8e4m3>(&mut body, "4, 3, false", &mut g);
    assertions::<f8e5m2>(&mut body, "5, 2, true", &mut g);
    body.push_str(
        "}\nextern \"C\" __global__ void fp8_check(symm_f8e4m3* a, symm_f8e5m2* b, float* f) {\n\
         a[0] = symm_f32_to_f8e4m3(f[0]); b[0] = symm_f32_to_f8e5m2(f[1]);\n\
         f[2] = symm_f8e4m3_to_f32(a[1]); f[3] = symm_f8e5m2_to_f32(b[1]);\n}\n",
    );
    let source = format!("{PRELUDE}\n{body}");
    for arch in [Arch::new(9, 0), Arch::new(8, 0)] {
        let req = CompileRequest {
            kernel_name: "fp8_check",
            source: &source,
            arch,
            options: &[],
        };
        let (compiled, _) = JitEngine::new(None)
            .compile(&req)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(compiled.log.trim().is_empty(), "{}", compiled.log);
    }
}

/// Appends the `static_assert`s of one format (template arguments `targs`).
fn assertions<T: Fp8>(out: &mut String, targs: &str, g: &mut StdRng) {
    use std::fmt::Write;
    let name = T::FMT.name;
    for b in 0..=255u8 {
        let want = T::of_bits(b).f32().to_bits();
        writeln!(
            out,
            "static_assert(f8_to_f32_bits<{targs}>({b}) == {want}u, \"{name} {b:#04x} widened\");"
        )
        .unwrap();
    }
    let mut xs: Vec<f32> = vec![f32::INFINITY, f32::MAX, 1e30, f32::from_bits(1), 0.0];
    xs.extend([
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0x7fbf_ffff),
    ]);
    for b in 0..0x80u8 {
        let v = T::of_bits(b).f32();
        if v.is_finite() {
            xs.extend([v, next_up(v)]);
            if b > 0 {
                xs.push(next_down(v));
            }
            let w = T::of_bits(b + 1).f32();
            if w.is_finite() {
                let mid = ((f64::from(v) + f64::from(w)) / 2.0) as f32;
                xs.extend([mid, next_up(mid), next_down(mid)]);
            }
        }
    }
    xs.extend([464.0, next_up(464.0), 61440.0, next_down(61440.0)]);
    xs.extend((0..2000).map(|_| f32::from_bits(g.random())));
    for x in xs.iter().flat_map(|&x| [x, -x]) {
        let u = x.to_bits();
        let want = T::of_f32(x).bits();
        writeln!(
            out,
            "static_assert(f8_from_f32_bits<{targs}>({u}u) == {want}, \"{name} from {u:#010x}\");"
        )
        .unwrap();
    }
}
