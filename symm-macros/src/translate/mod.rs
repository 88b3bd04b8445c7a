//! Translation of a checked Rust body to CUDA C, in two steps after
//! `parse`: [`lower`] checks the body and builds the typed IR ([`ir`]),
//! collecting every error; [`emit`] writes the IR as C and cannot fail.
//!
//! Every user identifier gets a prefix (`v_`, `G_`, `f_`) so that no Rust
//! name can collide with a C++ keyword, a CUDA builtin or the prelude, and
//! shadowed `let`s get fresh C++ names, because C++ forbids redeclaration.
//!
//! Literals take the type of the expression they combine with, as Rust's
//! inference would: `x + 1` becomes `x + ((SYMM_TY(x))1ULL)`. A `let` whose
//! initialiser is nothing but unsuffixed literals has no type the macro can
//! know, so it is an error asking for an annotation.

mod emit;
mod intrinsics;
pub mod ir;
mod lower;

pub use emit::function as emit;
pub use lower::{kernel_assert, lower, shared_array_call, AssertInfo};

/// C++ name of a user identifier.
pub fn var_name(id: &syn::Ident) -> String {
    format!("v_{}", id.to_string().trim_start_matches("r#"))
}

/// C++ name of a generic parameter.
pub fn generic_name(id: &syn::Ident) -> String {
    format!("G_{}", id.to_string().trim_start_matches("r#"))
}

/// C++ name of a device function.
pub fn fn_name(id: &syn::Ident) -> String {
    format!("f_{}", id.to_string().trim_start_matches("r#"))
}
