//! Memory a rank allocates: symmetric buffers (every rank's copy, mapped by
//! every rank once rendezvoused, with signal pads) and plain device buffers.
//! The two halves are one concept, an allocation and its mapping on every
//! rank, so they know each other: a buffer caches its rendezvous, and the
//! rendezvous reads the buffer's allocation. `interop` joins them to the
//! user's cudarc memory.

pub(crate) mod buffer;
pub(crate) mod interop;
pub(crate) mod pool;
pub(crate) mod symmetric;
