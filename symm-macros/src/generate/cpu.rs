//! The CPU body: the user's body as real Rust, with indexing rewritten into
//! calls the emulator can check and make atomic, and each `kernel_assert!`
//! into a test that reports to the emulator.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{BinOp, Expr, Stmt};

use crate::translate::{kernel_assert, shared_array_call};

/// Rewrites `block` of function `name` in place; returns the errors it found.
pub fn rewrite(block: &mut syn::Block, name: &syn::Ident) -> Vec<syn::Error> {
    let mut r = Rewrite {
        errors: vec![],
        site: 0,
        name: name.to_string(),
    };
    r.visit_block_mut(block);
    r.errors
}

struct Rewrite {
    errors: Vec<syn::Error>,
    site: u32,
    /// Names the function in shared-array sites: a kernel and the device
    /// functions it calls share one per-block map, keyed by the whole site.
    name: String,
}

fn compound(op: &BinOp) -> Option<TokenStream> {
    Some(match op {
        BinOp::AddAssign(_) => quote!(+),
        BinOp::SubAssign(_) => quote!(-),
        BinOp::MulAssign(_) => quote!(*),
        BinOp::DivAssign(_) => quote!(/),
        BinOp::RemAssign(_) => quote!(%),
        BinOp::BitAndAssign(_) => quote!(&),
        BinOp::BitOrAssign(_) => quote!(|),
        BinOp::BitXorAssign(_) => quote!(^),
        BinOp::ShlAssign(_) => quote!(<<),
        BinOp::ShrAssign(_) => quote!(>>),
        _ => return None,
    })
}

impl Rewrite {
    /// The base and index of an assignment target `base[index]`.
    fn target(&mut self, e: &mut Expr) -> Option<(Expr, Expr)> {
        let Expr::Index(ix) = e else { return None };
        if matches!(*ix.expr, Expr::Index(_)) {
            self.errors.push(syn::Error::new(
                ix.span(),
                "assigning to a nested index (`a[i][j] = v`) is not supported in kernels; use a flat array",
            ));
        }
        self.visit_expr_mut(&mut ix.expr);
        self.visit_expr_mut(&mut ix.index);
        Some(((*ix.expr).clone(), (*ix.index).clone()))
    }
}

impl VisitMut for Rewrite {
    fn visit_stmt_mut(&mut self, s: &mut Stmt) {
        let mac = match s {
            Stmt::Macro(m) => &m.mac,
            Stmt::Expr(Expr::Macro(m), _) => &m.mac,
            _ => return visit_mut::visit_stmt_mut(self, s),
        };
        // A malformed one is lowering's error to report.
        let Some(Ok(a)) = kernel_assert(mac) else {
            return;
        };
        let mut cond = a.cond.clone();
        self.visit_expr_mut(&mut cond);
        let message = a.message_tokens();
        let private = crate::private::path();
        // The place comes from the macro's span, as the host's list of the
        // function's assertions takes it for the GPU: the same line and
        // column on both backends. The `let` makes rustc report a condition
        // that is not a `bool` at the condition rather than at the macro.
        *s = syn::parse_quote_spanned!(a.span=> {
            let __symm_assert: bool = #cond;
            if !__symm_assert {
                #private::assert_failed(#message, ::core::file!(), ::core::line!(), ::core::column!());
            }
        });
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        let span = e.span();
        match e {
            Expr::Assign(a) if matches!(*a.left, Expr::Index(_)) => {
                self.visit_expr_mut(&mut a.right);
                let right = (*a.right).clone();
                if let Some((base, index)) = self.target(&mut a.left) {
                    *e = syn::parse_quote_spanned!(span=> (#base).__dsl_set(#index, #right));
                }
            }
            Expr::Binary(b) if matches!(*b.left, Expr::Index(_)) && compound(&b.op).is_some() => {
                let op = compound(&b.op).unwrap_or_default();
                self.visit_expr_mut(&mut b.right);
                let right = (*b.right).clone();
                if let Some((base, index)) = self.target(&mut b.left) {
                    *e = syn::parse_quote_spanned!(span=> {
                        let __symm_i = #index;
                        let __symm_v = (#base).__dsl_get(__symm_i) #op (#right);
                        (#base).__dsl_set(__symm_i, __symm_v)
                    });
                }
            }
            Expr::Index(ix) => {
                self.visit_expr_mut(&mut ix.expr);
                self.visit_expr_mut(&mut ix.index);
                let (base, index) = (&ix.expr, &ix.index);
                *e = syn::parse_quote_spanned!(span=> (#base).__dsl_get(#index));
            }
            Expr::Call(_) if shared_array_call(e).is_some() => {
                if let Some((t, n)) = shared_array_call(e) {
                    let site = self.site;
                    let name = &self.name;
                    self.site += 1;
                    *e = syn::parse_quote_spanned!(span=> ::symm::dsl::__shared_array_at::<#t, { #n }>(
                        ::core::concat!(::core::module_path!(), "::", #name), #site));
                }
            }
            // `a.min(b)` and `a.max(b)` are the DSL's (`Num`), as `min(a, b)`
            // is: Rust would pick the inherent methods of f32 and the half
            // types first, which leave the sign of a zero result open.
            Expr::MethodCall(m)
                if m.args.len() == 1
                    && m.turbofish.is_none()
                    && (m.method == "min" || m.method == "max") =>
            {
                visit_mut::visit_expr_mut(self, e);
                if let Expr::MethodCall(m) = &*e {
                    let (recv, method, arg) = (&m.receiver, &m.method, &m.args[0]);
                    *e = syn::parse_quote_spanned!(span=> ::symm::dsl::Num::#method(#recv, #arg));
                }
            }
            // A register array of a const-generic length is checked where
            // the function is instantiated: past a GPU thread's local
            // memory it is a compile error (a literal length is the
            // macro's own error), never an emulated thread's overflowed
            // stack.
            Expr::Repeat(_) => {
                visit_mut::visit_expr_mut(self, e);
                let private = crate::private::path();
                let inner = e.clone();
                *e = syn::parse_quote_spanned!(span=> {
                    let __symm_a = #inner;
                    #private::register_array_fits(&__symm_a);
                    __symm_a
                });
            }
            _ => visit_mut::visit_expr_mut(self, e),
        }
    }
}

/// The `use` that brings the index traits into a CPU body.
pub fn prelude() -> TokenStream {
    let private = crate::private::path();
    quote_spanned!(proc_macro2::Span::call_site()=>
        #[allow(unused_imports)]
        use #private::{ArrayIndex as _, HandleGet as _, HandleSet as _};
    )
}
