//! What generated code calls the runtime by. A module of its own, below
//! every step that generates code, rather than in the crate root, which
//! calls those steps.

/// `::symm::__private_<version>`, the runtime's hidden module for generated
/// code. Named after the version (as serde's is), so that a macro and a
/// runtime of different versions fail to compile together, at the first
/// kernel, instead of disagreeing about the kernel ABI.
pub(crate) fn path() -> proc_macro2::TokenStream {
    let id = quote::format_ident!(
        "__private_{}",
        env!("CARGO_PKG_VERSION").replace(['.', '-', '+'], "_")
    );
    quote::quote!(::symm::#id)
}
