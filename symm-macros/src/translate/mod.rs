//! Translation of a checked Rust body to CUDA C, in two steps after
//! `parse`: [`lower`] checks the body and builds the typed IR ([`ir`]),
//! collecting every error; [`emit`] writes the IR as C and cannot fail.
//!
//! Every user identifier gets a prefix (`v_`, `G_`, `f_`, `k_`; see
//! [`mangle`]) so that no Rust name can collide with a C++ keyword, a CUDA
//! builtin, the prelude or a generated name, and shadowed `let`s get fresh
//! C++ names (`v2_x`), because C++ forbids redeclaration.
//!
//! Literals take the type of the expression they combine with, as Rust's
//! inference would: `x + 1` becomes `x + ((SYMM_TY(x))1ULL)`. A `let` whose
//! initialiser is nothing but unsuffixed literals has no type the macro can
//! know, so it is an error asking for an annotation.

mod emit;
mod intrinsics;
pub mod ir;
mod lower;
pub mod prim;

pub use emit::function as emit;
pub use lower::{kernel_assert, lower, shared_array_call, AssertInfo};

/// The C++ spelling of a Rust identifier under a one-letter `role`:
/// `{role}_{name}` for an ASCII name, and `{role}x_{hex}` (the UTF-8 bytes
/// in hex) for any other, since NVRTC accepts only ASCII identifiers.
/// `version` above 1 (a shadowing `let`) goes between the role and the
/// separator (`v2_x`). The second character tells the forms apart (`_`,
/// `x` or a digit), so no two (role, name, version) share a spelling, and
/// no spelling can equal a generated name, which starts with another
/// letter (`t_` temporaries, `p<j>_` entry parameters, `__` hidden ones).
pub fn mangle(role: char, id: &syn::Ident, version: u32) -> String {
    let name = id.to_string();
    let name = name.trim_start_matches("r#");
    let v = if version > 1 {
        version.to_string()
    } else {
        String::new()
    };
    if name.is_ascii() {
        format!("{role}{v}_{name}")
    } else {
        let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
        format!("{role}x{v}_{hex}")
    }
}

/// Deepest nesting of expressions and blocks a body may have. Deeper ones
/// are an error at the expression that passes it: the macro itself copes
/// (it runs on a large stack of its own), but the C++ compiler's limits
/// are not ours to test.
pub const MAX_DEPTH: usize = 512;

/// An error at the first expression of `f` nested deeper than
/// [`MAX_DEPTH`].
pub fn check_depth(f: &syn::ItemFn) -> Option<syn::Error> {
    use syn::visit::Visit;
    struct Depth {
        depth: usize,
        error: Option<syn::Error>,
    }
    impl<'a> Visit<'a> for Depth {
        fn visit_expr(&mut self, e: &'a syn::Expr) {
            if self.error.is_some() {
                return;
            }
            // Parentheses nest no operation.
            let level = usize::from(!matches!(e, syn::Expr::Paren(_) | syn::Expr::Group(_)));
            self.depth += level;
            if self.depth > MAX_DEPTH {
                self.error = Some(syn::Error::new_spanned(
                    e,
                    format!("this expression is nested more than {MAX_DEPTH} deep (a long `+` or `else if` chain counts one level per link); split it with `let`s or a loop"),
                ));
            } else {
                syn::visit::visit_expr(self, e);
            }
            self.depth -= level;
        }
    }
    let mut d = Depth {
        depth: 0,
        error: None,
    };
    d.visit_block(&f.block);
    d.error
}

/// Whether a call of `name` is the DSL's own whatever is in scope: the
/// typed math intrinsics and the grammar (`fence`, `shared_array`). A
/// device function may not take such a name.
pub fn grammar_name(name: &str) -> bool {
    intrinsics::lookup(name).is_some() || matches!(name, "fence" | "shared_array")
}

/// C++ name of a user identifier (its first declaration).
pub fn var_name(id: &syn::Ident) -> String {
    mangle('v', id, 1)
}

/// C++ name of a generic parameter.
pub fn generic_name(id: &syn::Ident) -> String {
    mangle('G', id, 1)
}

/// C++ name of a device function.
pub fn fn_name(id: &syn::Ident) -> String {
    mangle('f', id, 1)
}

/// C++ name of a kernel's body.
pub fn kernel_name(id: &syn::Ident) -> String {
    mangle('k', id, 1)
}
