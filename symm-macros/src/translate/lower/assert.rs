//! `kernel_assert!`: its accepted forms, its lowering, and the errors for
//! Rust's own `assert!` family, which cannot report from a kernel.
//!
//! Every assertion of a function is numbered in the order lowering meets
//! it; the device records that number, and the expansion lists each
//! assertion's place and message on the host in the same order
//! ([`AssertInfo`]), so the CUDA C holds neither text nor lines.

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr as SynExpr, Lit, LitStr, Token};

use super::{AssertInfo, Lowerer, BOOL};
use crate::translate::ir::{ExprKind, Stmt};

/// What `kernel_assert!` accepts, said by every error about its form.
const FORMS: &str = "write `kernel_assert!(cond)` or `kernel_assert!(cond, \"message\")`";

/// A `kernel_assert!` of the accepted form.
pub struct KernelAssert {
    /// The condition, as written.
    pub cond: SynExpr,
    /// The message literal, if any.
    pub message: Option<LitStr>,
    /// Where the macro starts: its reports name this line and column.
    pub span: Span,
}

impl KernelAssert {
    /// The message as a `&'static str` expression: the literal, or the
    /// condition as written (`stringify!` of its tokens, so that both
    /// backends, which read it from different places of the expansion, get
    /// the same text).
    pub fn message_tokens(&self) -> TokenStream {
        match &self.message {
            Some(m) => quote_spanned!(self.span=> #m),
            None => {
                let c = &self.cond;
                quote_spanned!(self.span=> ::core::stringify!(#c))
            }
        }
    }
}

/// Whether `mac` is `kernel_assert!` (by any path ending in that name).
fn is_kernel_assert(mac: &syn::Macro) -> bool {
    mac.path
        .segments
        .last()
        .is_some_and(|s| s.ident == "kernel_assert")
}

/// `mac` as a `kernel_assert!`: `None` when it is another macro, an error
/// (spanned at what is wrong) when its arguments are not of an accepted
/// form.
pub fn kernel_assert(mac: &syn::Macro) -> Option<syn::Result<KernelAssert>> {
    if !is_kernel_assert(mac) {
        return None;
    }
    let span = mac
        .path
        .segments
        .first()
        .map_or_else(|| mac.path.span(), |s| s.ident.span());
    Some(
        mac.parse_body_with(Punctuated::<SynExpr, Token![,]>::parse_terminated)
            .map_err(|e| syn::Error::new(e.span(), format!("{e}; {FORMS}")))
            .and_then(|args| {
                let mut args = args.into_iter();
                let Some(cond) = args.next() else {
                    return Err(syn::Error::new_spanned(
                        mac,
                        format!("`kernel_assert!` needs a condition: {FORMS}"),
                    ));
                };
                let message = match args.next() {
                    None => None,
                    Some(SynExpr::Lit(syn::ExprLit {
                        lit: Lit::Str(s), ..
                    })) => Some(s),
                    Some(other) => {
                        return Err(syn::Error::new_spanned(
                            other,
                            format!(
                                "the message of `kernel_assert!` must be a string literal (it \
                                 stays on the host, so it cannot be computed): {FORMS}"
                            ),
                        ))
                    }
                };
                if let Some(extra) = args.next() {
                    return Err(syn::Error::new_spanned(
                        extra,
                        format!(
                            "`kernel_assert!` takes no format arguments (its message stays on \
                             the host, as written): {FORMS}"
                        ),
                    ));
                }
                if let Some(m) = &message {
                    if m.value().contains(['{', '}']) {
                        return Err(syn::Error::new_spanned(
                            m,
                            format!(
                                "a `kernel_assert!` message is not a format string (it stays on \
                                 the host, as written): remove `{{` and `}}`; {FORMS}"
                            ),
                        ));
                    }
                }
                Ok(KernelAssert {
                    cond,
                    message,
                    span,
                })
            }),
    )
}

/// The macros of Rust that stop a thread with a message, and what to write
/// in a kernel instead.
fn rust_assertion(mac: &syn::Macro) -> Option<&'static str> {
    let name = mac.path.segments.last()?.ident.to_string();
    Some(match name.as_str() {
        "assert" | "debug_assert" => "`kernel_assert!(cond, \"message\")`",
        "assert_eq" | "debug_assert_eq" => "`kernel_assert!(a == b, \"message\")`",
        "assert_ne" | "debug_assert_ne" => "`kernel_assert!(a != b, \"message\")`",
        "panic" | "unreachable" | "todo" | "unimplemented" => {
            "`kernel_assert!(false, \"message\")`"
        }
        _ => return None,
    })
}

impl Lowerer<'_> {
    /// A macro in statement position (`stmt`, which errors underline):
    /// `kernel_assert!`, or an error.
    pub(super) fn macro_stmt<N: quote::ToTokens>(
        &mut self,
        stmt: N,
        mac: &syn::Macro,
    ) -> Option<Stmt> {
        match kernel_assert(mac) {
            Some(Ok(a)) => {
                let cond = self.expr(&a.cond, Some(&BOOL));
                let index = u32::try_from(self.asserts.len()).unwrap_or(u32::MAX);
                self.asserts.push(AssertInfo {
                    span: a.span,
                    message: a.message_tokens(),
                });
                Some(Stmt::Assert { cond, index })
            }
            Some(Err(e)) => {
                self.errors.push(e);
                None
            }
            None => {
                self.reject_macro(stmt, mac);
                None
            }
        }
    }

    /// A macro in expression position: never supported.
    pub(super) fn macro_expr(&mut self, mac: &syn::Macro) -> ExprKind {
        if is_kernel_assert(mac) {
            return self.reject(
                mac,
                "`kernel_assert!` is a statement, not a value: write it on its own, ending with `;`",
            );
        }
        self.reject_macro(mac, mac);
        ExprKind::Error
    }

    /// Records the error for `mac`, a macro other than `kernel_assert!`,
    /// underlining `node`.
    fn reject_macro<N: quote::ToTokens>(&mut self, node: N, mac: &syn::Macro) {
        match rust_assertion(mac) {
            Some(instead) => {
                let name = mac
                    .path
                    .segments
                    .last()
                    .map(|s| s.ident.to_string())
                    .unwrap_or_default();
                self.err(
                    node,
                    format!(
                        "`{name}!` cannot stop a kernel with a report; write {instead} (the \
                         message a string literal): the thread stops, and the kernel, rank, \
                         block, thread and line are reported"
                    ),
                );
            }
            None => self.err(
                node,
                "macros other than `kernel_assert!` are not supported in kernels (no \
                 println!, ...); write the code out",
            ),
        }
    }
}
