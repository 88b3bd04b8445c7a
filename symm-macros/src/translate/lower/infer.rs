//! What the macro can tell about the types of Rust expressions without
//! C++, where they are evident.

use syn::{BinOp, Expr, ExprLit, Lit, UnOp};

use super::syntax::is_cmp;
use super::{prim_type, scalar_type, suffix_type, Lowerer};
use crate::parse::{self, Generic};
use crate::translate::intrinsics;
use crate::translate::ir::CType;
use crate::translate::prim::CPrim;

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
