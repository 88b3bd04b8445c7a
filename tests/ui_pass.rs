//! The UI suite's pass cases (`tests/ui/pass`), each a user's file that
//! must compile and whose `main` must run. A plain test binary, not
//! trybuild: trybuild then only checks (`tests/ui.rs` has compile-fail
//! cases alone), which skips generating code for every dependency a
//! second time.

#[allow(dead_code)]
#[path = "ui/pass/atomics_vectors_shared.rs"]
mod atomics_vectors_shared;
#[allow(dead_code)]
#[path = "ui/pass/generic_const_helper.rs"]
mod generic_const_helper;
// Its host-side assertion of a constant is the point of the case.
#[allow(dead_code, clippy::eq_op)]
#[path = "ui/pass/kernel_assert.rs"]
mod kernel_assert;
#[allow(dead_code)]
#[path = "ui/pass/symmbuf_signals.rs"]
mod symmbuf_signals;

#[test]
fn atomics_vectors_shared_compiles_and_runs() {
    atomics_vectors_shared::main();
}

#[test]
fn generic_const_helper_compiles_and_runs() {
    generic_const_helper::main();
}

#[test]
fn kernel_assert_compiles_and_runs() {
    kernel_assert::main();
}

#[test]
fn symmbuf_signals_compiles_and_runs() {
    symmbuf_signals::main();
}
