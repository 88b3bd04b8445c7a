//! The ground floor: what every floor above speaks, and nothing here
//! touches a device, a group or a kernel. Element types, the allocation
//! and signal-pad layout, launch shapes, the status record a kernel
//! leaves, the call ledger, the key-value stores, the NVRTC JIT engine,
//! and [`Error`](crate::Error), which wraps the stores' and the JIT's own
//! errors (so those two sit here, below it, rather than with the group
//! and the driver that use them).

pub(crate) mod dtype;
pub(crate) mod error;
pub(crate) mod fp8;
pub mod jit;
pub(crate) mod launch;
pub mod layout;
pub(crate) mod ledger;
pub(crate) mod status;
pub mod store;
