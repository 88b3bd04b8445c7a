//! What the macro can tell from Rust syntax alone: which expressions are
//! literals or constants, and the shapes it looks for. Pure functions of
//! the tree, below the lowering that uses them.

use syn::{BinOp, Block, Expr, ExprLit, Lit, Stmt, UnOp};

use crate::parse::Generic;

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
