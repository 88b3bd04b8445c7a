//! The `#[symm_kernel]` procedural macro of symm (the DSL lands in its own
//! change; the crate exists so the workspace has its final shape).
