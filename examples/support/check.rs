//! The main job's verdict on an all-reduce's results, apart so that
//! `tests/all_reduce.rs` can show it fails a rank that sums in another
//! order.

use symm::dsl::Scalar;

/// How every rank's result compares with the float64 sum of the inputs.
pub(crate) struct Verdict {
    /// Rank 0's RMS error, relative to the RMS of Σ|x| (the scale of a
    /// summation's rounding error, which stays meaningful where inputs of
    /// either sign cancel).
    pub rel: f64,
    /// Whether every rank holds rank 0's bits.
    pub agree: bool,
}

impl Verdict {
    /// Right: every rank agrees, within `tol` of float64.
    pub(crate) fn ok(&self, tol: f64) -> bool {
        self.agree && self.rel <= tol
    }
}

/// The verdict on `outs` (one result per rank) for `inputs` (one per
/// rank).
pub(crate) fn verdict<T: Scalar>(inputs: &[Vec<T>], outs: &[Vec<T>]) -> Verdict {
    let agree = outs.iter().all(|o| symm::compare_bits(o, &outs[0]).is_ok());
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (i, got) in outs[0].iter().enumerate() {
        let want: f64 = inputs.iter().map(|v| f64::from(v[i].to_f32())).sum();
        let mag: f64 = inputs.iter().map(|v| f64::from(v[i].to_f32()).abs()).sum();
        num += (f64::from(got.to_f32()) - want).powi(2);
        den += mag.powi(2);
    }
    let rel = if num.is_finite() {
        (num / den.max(f64::MIN_POSITIVE)).sqrt()
    } else {
        f64::INFINITY
    };
    Verdict { rel, agree }
}
