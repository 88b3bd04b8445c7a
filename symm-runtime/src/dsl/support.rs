//! The C++ layer between generated kernel code and the prelude: handle
//! types (`symm_slice`, `symm_buf`), the kernel context, and the wrappers
//! that DSL methods translate to. The code is in `symm-runtime/cuda/`
//! (`symm.cuh` declares it); this module assembles it.

use std::sync::LazyLock;

use crate::cuda_prelude::{device_defines, DSL_CONTRACT, PRELUDE};
use crate::status::SIGNAL_DEVICE_FNS;

/// The implementations behind `cuda/symm.cuh` that follow the signal
/// protocol: handles, operators, memory wrappers, flags, signals, receives.
const SUPPORT: &str = concat!(
    include_str!("../../cuda/symm_impl/support.cuh"),
    "\n",
    include_str!("../../cuda/symm_impl/receive.cuh"),
);

/// Everything generated kernel code is compiled against: the prelude, the
/// constants shared with Rust, the DSL contract, the signal protocol, and
/// [`SUPPORT`].
pub(crate) static DSL_SUPPORT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{PRELUDE}\n{}\n{DSL_CONTRACT}\n{SIGNAL_DEVICE_FNS}\n{SUPPORT}",
        device_defines()
    )
});
