//! The test tiers, chosen at run time by `SYMM_TESTS` (no rebuild): a
//! plain `cargo test` runs the quick tier, a sample of the cases that keeps
//! CI's test execution short; `SYMM_TESTS=full` runs every case;
//! `SYMM_TESTS=rest` runs exactly the cases the quick tier leaves out, so
//! that CI can run the quick tier and then the rest without running any
//! case twice.
//!
//! Only the test binaries that include this file have a rest part (`.ci/run`
//! runs them, and only them, under `rest`); the others are quick whole.
//! In those that include it, every test belongs to the quick part or the
//! rest part as a whole ([`quick_test`], [`full_test`]), or splits its
//! cases between the two ([`runs`], [`split`], and `per_world! { sampled;
//! … }` through [`world_runs`]): a test that asks nothing would run under
//! `rest` again.

#![allow(dead_code)]

use std::io::Write;

/// Which part of the suite runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// The default: the quick part of every test.
    Quick,
    /// `SYMM_TESTS=rest`: only what the quick tier leaves out.
    Rest,
    /// `SYMM_TESTS=full`: everything.
    Full,
}

/// The tier `SYMM_TESTS` names (`quick` when unset or empty). Any other
/// value panics: a typo must not run a different suite quietly.
pub fn tier() -> Tier {
    static TIER: std::sync::OnceLock<Tier> = std::sync::OnceLock::new();
    *TIER.get_or_init(|| match std::env::var("SYMM_TESTS").as_deref() {
        Err(_) | Ok("") | Ok("quick") => Tier::Quick,
        Ok("rest") => Tier::Rest,
        Ok("full") => Tier::Full,
        Ok(other) => panic!("SYMM_TESTS={other:?}: expected quick (the default), rest or full"),
    })
}

/// Whether the quick part runs (the quick and full tiers).
pub fn quick() -> bool {
    tier() != Tier::Rest
}

/// Whether the rest part runs (the rest and full tiers).
pub fn rest() -> bool {
    tier() != Tier::Quick
}

/// The cases of `cases` that this tier runs: those `is_quick` picks in the
/// quick tier, the others under `rest`, all of them under `full`.
pub fn split<T>(
    cases: impl IntoIterator<Item = T>,
    mut is_quick: impl FnMut(&T) -> bool,
) -> Vec<T> {
    let all: Vec<T> = cases.into_iter().collect();
    let total = all.len();
    let kept: Vec<T> = all.into_iter().filter(|c| runs(is_quick(c))).collect();
    if tier() == Tier::Quick && kept.len() < total {
        let test = std::thread::current().name().unwrap_or("?").to_string();
        skipped(&format!("{test}: {} of {total} cases", total - kept.len()));
    }
    kept
}

/// Whether a case runs in this tier: one of the quick part (`quick_case`)
/// in the quick and full tiers, one of the rest part under `rest` and
/// `full`.
pub fn runs(quick_case: bool) -> bool {
    if quick_case {
        quick()
    } else {
        rest()
    }
}

/// For a test wholly in the quick part: whether it runs (not under `rest`,
/// which runs only what the quick tier leaves out).
pub fn quick_test() -> bool {
    quick()
}

/// For a test wholly in the rest part: whether it runs. In the quick tier
/// it says `SKIPPED` past libtest's capture, so a skip is never mistaken
/// for a pass.
pub fn full_test(what: &str) -> bool {
    if !rest() {
        skipped(what);
    }
    rest()
}

/// Says loudly, past libtest's capture (as `symm::jit::require_nvrtc`
/// does), that `what` did not run in the quick tier.
pub fn skipped(what: &str) {
    let line = format!("SKIPPED (quick tier): {what}; set SYMM_TESTS=full to run it\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The world sizes the quick tier samples. The emulator's cost grows with
/// the world (every rank's threads run on the host's cores): one rank and
/// a pair; the tests that need an odd group pick world 3 themselves.
pub const QUICK_WORLDS: [usize; 2] = [1, 2];

/// Whether `world` is one of the quick tier's world sizes.
pub fn quick_world(world: usize) -> bool {
    QUICK_WORLDS.contains(&world)
}

/// Whether a `per_world!` test of `world` ranks is in the quick part. A test
/// listed at none of [`QUICK_WORLDS`] keeps its smallest world in the quick
/// tier, so that every test runs there at least once.
pub fn world_is_quick(world: usize, listed: &[usize]) -> bool {
    let sample = listed
        .iter()
        .any(|w| QUICK_WORLDS.contains(w))
        .then_some(QUICK_WORLDS.as_slice());
    match sample {
        Some(q) => q.contains(&world),
        None => listed.iter().min() == Some(&world),
    }
}

/// For `per_world!`'s test of `world` ranks (of those `listed`): whether it
/// runs in this tier; one the quick tier leaves out says so loudly.
pub fn world_runs(test: &str, world: usize, listed: &[usize]) -> bool {
    if world_is_quick(world, listed) {
        return quick();
    }
    if !rest() {
        skipped(&format!("{test} at world size {world}"));
    }
    rest()
}
