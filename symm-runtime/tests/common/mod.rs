//! Helpers shared by this crate's integration tests.

/// Whether to run an NVRTC-dependent test: fails without NVRTC, or skips
/// loudly under `SYMM_SKIP_NVRTC=1` ([`symm_runtime::jit::require_nvrtc`]).
pub fn nvrtc_or_skip(test: &str) -> bool {
    symm_runtime::jit::require_nvrtc(&format!("the kernels of `{test}`"))
}
