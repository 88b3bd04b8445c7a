//! Compile-fail cases for #[symm_kernel] (trybuild). The pass cases run
//! as `tests/ui_pass.rs`: with compile-fail cases alone, trybuild only
//! checks, and does not generate code for every dependency again.
//!
//! The rest tier's (`SYMM_TESTS=full` or `rest`): trybuild builds every
//! case, a minute of CI's two cores.

#[path = "support/tier.rs"]
mod tier;

#[test]
fn ui() {
    if !tier::full_test("trybuild's compile-fail cases (tests/ui/fail)") {
        return;
    }
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
}
