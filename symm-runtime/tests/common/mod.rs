//! Helpers shared by this crate's integration tests.

use symm_runtime::jit::nvrtc_available;

/// Whether to run an NVRTC-dependent test; panics if NVRTC is required.
pub fn nvrtc_or_skip(test: &str) -> bool {
    if nvrtc_available() {
        return true;
    }
    if std::env::var("SYMM_REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!("{test}: NVRTC not found but SYMM_REQUIRE_NVRTC=1; put nvidia/cu13/lib on LD_LIBRARY_PATH");
    }
    eprintln!(
        "SKIPPED: NVRTC not found; {test} did not run. Install nvidia-cuda-nvrtc 13.x and put \
         nvidia/cu13/lib on LD_LIBRARY_PATH (set SYMM_REQUIRE_NVRTC=1 to make this a failure)"
    );
    false
}
