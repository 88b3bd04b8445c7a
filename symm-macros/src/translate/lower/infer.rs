//! What the macro can tell about Rust expressions without C++: their
//! types where evident, and which are literals or constants.

use syn::{BinOp, Block, Expr, ExprLit, Lit, Stmt, UnOp};

use super::{prim_type, scalar_type, suffix_type, Lowerer};
use crate::parse::{self, Generic};
use crate::translate::intrinsics;
use crate::translate::ir::{CPrim, CType};

impl Lowerer<'_> {
    /// The C type of `e`, when the macro can tell without C++. A syntactic
    /// guess, deliberately: it decides which type literals take, and so
    /// the generated text.
    pub(super) fn static_ty(&self, e: &Expr) -> Option<CType> {
        match e {
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => suffix_type(i.suffix()),
            Expr::Lit(ExprLit {
                lit: Lit::Float(f), ..
            }) => suffix_type(f.suffix()),
            Expr::Lit(ExprLit {
                lit: Lit::Bool(_), ..
            }) => Some(CType::Prim(CPrim::Bool)),
            Expr::Paren(p) => self.static_ty(&p.expr),
            Expr::Group(g) => self.static_ty(&g.expr),
            Expr::Cast(c) => parse::scalar(&c.ty, &self.sig.generics)
                .ok()
                .map(|s| scalar_type(&s)),
            Expr::Path(p) if p.path.segments.len() == 1 => {
                let id = &p.path.segments[0].ident;
                if let Some(l) = self.lookup(&id.to_string()) {
                    // Handles are not values that literals could take.
                    return l
                        .ty
                        .clone()
                        .filter(|t| !matches!(t, CType::Slice(_) | CType::Buf(_)));
                }
                self.sig.generics.iter().find_map(|g| match g {
                    Generic::Const(c, t) if c == id => Some(prim_type(t)),
                    _ => None,
                })
            }
            Expr::Unary(u) if !matches!(u.op, UnOp::Deref(_)) => self.static_ty(&u.expr),
            Expr::Binary(b) if is_cmp(&b.op) || matches!(b.op, BinOp::And(_) | BinOp::Or(_)) => {
                Some(CType::Prim(CPrim::Bool))
            }
            Expr::Binary(b) if matches!(b.op, BinOp::Shl(_) | BinOp::Shr(_)) => {
                self.static_ty(&b.left)
            }
            Expr::Binary(b) => self.static_ty(&b.left).or_else(|| self.static_ty(&b.right)),
            Expr::MethodCall(m) => intrinsics::method_type(&m.method.to_string()).map(CType::Prim),
            // A call's type is its callee's, which only C++ sees (calls
            // resolve by path).
            _ => None,
        }
    }
}

/// Whether `e` is made of unsuffixed literals only (so has no type the
/// macro can know).
pub fn lit_only(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) => is_unsuffixed_lit(e),
        Expr::Paren(p) => lit_only(&p.expr),
        Expr::Group(g) => lit_only(&g.expr),
        Expr::Unary(u) => lit_only(&u.expr),
        Expr::Binary(b) => lit_only(&b.left) && lit_only(&b.right) && !is_cmp(&b.op),
        Expr::Array(a) => a.elems.iter().all(lit_only),
        Expr::Repeat(r) => lit_only(&r.expr),
        Expr::If(i) => {
            block_tail(&i.then_branch).is_some_and(lit_only)
                && i.else_branch.as_ref().is_some_and(|(_, e)| lit_only(e))
        }
        Expr::Block(b) => block_tail(&b.block).is_some_and(lit_only),
        _ => false,
    }
}

/// Whether `e` is one unsuffixed (possibly negated) literal.
pub fn is_unsuffixed_lit(e: &Expr) -> bool {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.suffix().is_empty(),
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) => f.suffix().is_empty(),
        Expr::Paren(p) => is_unsuffixed_lit(&p.expr),
        Expr::Group(g) => is_unsuffixed_lit(&g.expr),
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => is_unsuffixed_lit(&u.expr),
        _ => false,
    }
}

/// Whether `e` is a compile-time constant: literals, const generics
/// (`generics`) and operators on those.
pub fn is_const(generics: &[Generic], e: &Expr) -> bool {
    match strip(e) {
        Expr::Lit(_) => true,
        Expr::Path(p) if p.path.segments.len() == 1 => generics
            .iter()
            .any(|g| matches!(g, Generic::Const(c, _) if *c == p.path.segments[0].ident)),
        Expr::Binary(b) => is_const(generics, &b.left) && is_const(generics, &b.right),
        _ => false,
    }
}

/// The tail expression of a block, if it has one.
pub fn block_tail(b: &Block) -> Option<&Expr> {
    match b.stmts.last() {
        Some(Stmt::Expr(e, None)) => Some(e),
        _ => None,
    }
}

/// Whether `op` compares.
pub fn is_cmp(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::Eq(_) | BinOp::Ne(_) | BinOp::Lt(_) | BinOp::Le(_) | BinOp::Gt(_) | BinOp::Ge(_)
    )
}

/// `e` without enclosing parentheses or invisible groups.
pub fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        other => other,
    }
}

/// `shared_array::<T, N>()` as (T, N).
pub fn shared_array_call(e: &Expr) -> Option<(syn::Type, Expr)> {
    let Expr::Call(c) = strip(e) else { return None };
    let Expr::Path(p) = &*c.func else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "shared_array" || !c.args.is_empty() {
        return None;
    }
    let syn::PathArguments::AngleBracketed(a) = &last.arguments else {
        return None;
    };
    let mut it = a.args.iter();
    let t = match it.next()? {
        syn::GenericArgument::Type(t) => t.clone(),
        _ => return None,
    };
    let n: Expr = match it.next()? {
        syn::GenericArgument::Const(e) => e.clone(),
        syn::GenericArgument::Type(syn::Type::Path(tp)) => syn::parse_quote!(#tp),
        _ => return None,
    };
    Some((t, n))
}
