//! Checks for the test drivers that run on either backend: each failure is
//! an error of the rank that saw it (so a group reports every rank's), and
//! sizes follow the backend.

#![allow(dead_code)]

use symm::dsl::Scalar;
use symm::Comm;

/// `gpu` on a GPU rank, `emulator` elsewhere: the drivers' sizes.
pub fn sized<X>(c: &Comm, emulator: X, gpu: X) -> X {
    if c.backend_kind() == symm::BackendKind::Cuda {
        gpu
    } else {
        emulator
    }
}

/// `Ok` when `ok`, otherwise an error on `c`'s rank that says `what` failed.
pub fn check(c: &Comm, ok: bool, what: impl FnOnce() -> String) -> symm::Result<()> {
    if ok {
        return Ok(());
    }
    Err(symm::Error::InvalidArgument {
        rank: c.rank(),
        group: c.group_name().clone(),
        message: format!("CHECK FAILED: {}", what()),
    })
}

/// Checks `got` against `want` bit for bit, naming the first element that
/// differs.
pub fn check_bits<T: Scalar>(c: &Comm, what: &str, got: &[T], want: &[T]) -> symm::Result<()> {
    let diff = symm::compare_bits(got, want);
    check(c, diff.is_ok(), || match diff {
        Err(e) => format!("{what}: {e}"),
        Ok(()) => unreachable!("`check` calls this only on a mismatch"),
    })
}
