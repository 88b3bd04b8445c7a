//! Memory a rank allocates: symmetric buffers (every rank's copy, mapped by
//! every rank once rendezvoused, with signal pads) and plain device buffers.
//!
//! Bottom up: `slice` (what a kernel argument is, and binding it to a
//! rank's stream), `interop` (the user's cudarc memory as arguments, and
//! symm's as cudarc views), `symmetric` (an allocation's rendezvous and
//! its mapping on every rank), `buffer` (the rank's own allocations, which
//! cache their rendezvous), `pool` (segments of buffers cut into tensors,
//! and `Comm::alloc`, which takes from the current pool). A lower file
//! that needs something of a higher one says so with a trait the higher
//! one implements (`buffer::Lent`, `symmetric::CollectiveCheck`).

pub(crate) mod buffer;
pub(crate) mod interop;
pub(crate) mod pool;
pub(crate) mod slice;
pub(crate) mod symmetric;
