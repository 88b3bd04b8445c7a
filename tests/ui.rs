//! Compile-fail cases for #[symm_kernel] (trybuild). The pass cases run
//! as `tests/ui_pass.rs`: with compile-fail cases alone, trybuild only
//! checks, and does not generate code for every dependency again.
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
}
