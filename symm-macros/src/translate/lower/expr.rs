//! Lowering expressions (calls and methods are in `call`).

use syn::{Expr as SynExpr, Lit, UnOp};

use super::syntax::{block_tail, is_cmp, is_unsuffixed_lit};
use super::{scalar_type, suffix_type, Lowerer, BOOL, U64};
use crate::parse;
use crate::translate::ir::{BinOp, CType, Expr, ExprKind, FloatConst, LambdaElse};
use crate::translate::prim::CPrim;

/// The IR operator of `op`, and whether it is a compound assignment.
fn bin_op(op: &syn::BinOp) -> Option<(BinOp, bool)> {
    use syn::BinOp as B;
    Some(match op {
        B::Add(_) => (BinOp::Add, false),
        B::Sub(_) => (BinOp::Sub, false),
        B::Mul(_) => (BinOp::Mul, false),
        B::Div(_) => (BinOp::Div, false),
        B::Rem(_) => (BinOp::Rem, false),
        B::And(_) => (BinOp::And, false),
        B::Or(_) => (BinOp::Or, false),
        B::BitXor(_) => (BinOp::BitXor, false),
        B::BitAnd(_) => (BinOp::BitAnd, false),
        B::BitOr(_) => (BinOp::BitOr, false),
        B::Shl(_) => (BinOp::Shl, false),
        B::Shr(_) => (BinOp::Shr, false),
        B::Eq(_) => (BinOp::Eq, false),
        B::Lt(_) => (BinOp::Lt, false),
        B::Le(_) => (BinOp::Le, false),
        B::Ne(_) => (BinOp::Ne, false),
        B::Ge(_) => (BinOp::Ge, false),
        B::Gt(_) => (BinOp::Gt, false),
        B::AddAssign(_) => (BinOp::Add, true),
        B::SubAssign(_) => (BinOp::Sub, true),
        B::MulAssign(_) => (BinOp::Mul, true),
        B::DivAssign(_) => (BinOp::Div, true),
        B::RemAssign(_) => (BinOp::Rem, true),
        B::BitXorAssign(_) => (BinOp::BitXor, true),
        B::BitAndAssign(_) => (BinOp::BitAnd, true),
        B::BitOrAssign(_) => (BinOp::BitOr, true),
        B::ShlAssign(_) => (BinOp::Shl, true),
        B::ShrAssign(_) => (BinOp::Shr, true),
        _ => return None,
    })
}

/// The error of an array of `n` elements whose element type nothing tells.
fn infer_array(n: String) -> String {
    format!(
        "cannot infer this array's element type: its elements are unsuffixed literals or `if`/block values; \
         give the `let` a type (`let v: [f32; {n}] = ...;`) or suffix a literal (`1.0f32`)"
    )
}

/// Whether lowering `e` writes a C++ lambda (an `if` or block used as a
/// value), which C++17 does not allow inside `decltype`.
fn makes_lambda(e: &SynExpr) -> bool {
    match e {
        SynExpr::Lit(_) | SynExpr::Path(_) => false,
        SynExpr::Paren(p) => makes_lambda(&p.expr),
        SynExpr::Group(g) => makes_lambda(&g.expr),
        SynExpr::Unary(u) => makes_lambda(&u.expr),
        SynExpr::Cast(c) => makes_lambda(&c.expr),
        SynExpr::Binary(b) => makes_lambda(&b.left) || makes_lambda(&b.right),
        SynExpr::Index(i) => makes_lambda(&i.expr) || makes_lambda(&i.index),
        SynExpr::MethodCall(m) => makes_lambda(&m.receiver) || m.args.iter().any(makes_lambda),
        SynExpr::Call(c) => c.args.iter().any(makes_lambda),
        SynExpr::Array(a) => a.elems.iter().any(makes_lambda),
        SynExpr::Repeat(r) => makes_lambda(&r.expr),
        _ => true,
    }
}

impl Lowerer<'_> {
    /// Lowers an expression; `expect` is the type an unsuffixed literal in
    /// it takes.
    pub(super) fn expr(&mut self, e: &SynExpr, expect: Option<&CType>) -> Expr {
        let kind = self.expr_kind(e, expect);
        Expr {
            kind,
            ty: self.static_ty(e),
        }
    }

    /// `node` is unsupported: records `msg` and stands in for the value.
    pub(super) fn reject<N: quote::ToTokens>(
        &mut self,
        node: N,
        msg: impl std::fmt::Display,
    ) -> ExprKind {
        self.err(node, msg);
        ExprKind::Error
    }

    /// `expr`'s type when the macro knows it, else `SYMM_TY(expr)`.
    pub(super) fn type_or_typeof(expr: &Expr) -> CType {
        expr.ty
            .clone()
            .unwrap_or_else(|| CType::TypeOf(Box::new(expr.clone())))
    }

    /// What `e` computes (its type is `expr`'s business).
    fn expr_kind(&mut self, e: &SynExpr, expect: Option<&CType>) -> ExprKind {
        match e {
            SynExpr::Lit(l) => self.lit(&l.lit, expect),
            SynExpr::Paren(p) => ExprKind::Paren(Box::new(self.expr(&p.expr, expect))),
            SynExpr::Group(g) => self.expr(&g.expr, expect).kind,
            SynExpr::Path(p) => self.path(p),
            SynExpr::Unary(u) => {
                let v = Box::new(self.expr(&u.expr, expect));
                match u.op {
                    UnOp::Neg(_) => ExprKind::Neg(v),
                    UnOp::Not(_) => ExprKind::Not(v),
                    _ => self.reject(
                        u,
                        "dereferencing is not supported in kernels; index slices instead",
                    ),
                }
            }
            SynExpr::Binary(b) => self.binary(b, expect),
            SynExpr::Assign(a) => {
                let place = self.place(&a.left);
                let ty = Self::type_or_typeof(&place);
                let value = self.expr(&a.right, Some(&ty));
                ExprKind::Assign {
                    place: Box::new(place),
                    op: None,
                    value: Box::new(value),
                }
            }
            SynExpr::Cast(c) => {
                let ty = match parse::scalar(&c.ty, &self.sig.generics) {
                    Ok(s) => scalar_type(&s),
                    Err(e) => {
                        self.errors.push(e);
                        return ExprKind::Error;
                    }
                };
                let expr = Box::new(self.expr(&c.expr, None));
                ExprKind::Cast { ty, expr }
            }
            SynExpr::Index(i) => {
                if let SynExpr::Range(r) = &*i.index {
                    return self.reject(
                        r,
                        "sub-slicing is not supported in kernels; pass offsets as integers",
                    );
                }
                let base = Box::new(self.expr(&i.expr, None));
                let index = Box::new(self.expr(&i.index, Some(&U64)));
                let line = self.line_of(&i.index);
                ExprKind::Index { base, index, line }
            }
            SynExpr::MethodCall(m) => self.method(m),
            SynExpr::Call(c) => self.call(c, expect),
            SynExpr::If(i) => self.if_value(i, expect),
            SynExpr::Block(b) => {
                if b.label.is_some() {
                    return self.reject(
                        b,
                        "block labels are not supported in kernels; use `if` to skip code",
                    );
                }
                self.lambda(&b.block, expect)
            }
            SynExpr::Array(a) => {
                let elem = self.array_elem(expect, a.elems.iter());
                let elems = a
                    .elems
                    .iter()
                    .map(|x| self.expr(x, elem.as_ref()))
                    .collect();
                match elem {
                    Some(elem) => ExprKind::Array { elem, elems },
                    None => self.reject(a, infer_array(a.elems.len().to_string())),
                }
            }
            SynExpr::Repeat(r) => {
                let elem = self.array_elem(expect, std::iter::once(&*r.expr));
                let value = Box::new(self.expr(&r.expr, elem.as_ref()));
                let len = self.len(&r.len);
                if let Some(elem) = &elem {
                    self.check_array_size(r, elem, &len);
                }
                match elem {
                    Some(elem) => ExprKind::Repeat { elem, len, value },
                    None => {
                        let n = &r.len;
                        self.reject(r, infer_array(quote::quote!(#n).to_string()))
                    }
                }
            }
            SynExpr::Reference(r) => self.reject(
                r,
                "references are not supported in kernel bodies; pass values or slices",
            ),
            SynExpr::Closure(c) => self.reject(
                c,
                "closures are not supported in kernels; write a `#[symm_kernel(device)]` function",
            ),
            SynExpr::Match(m) => {
                self.reject(m, "`match` is not supported in kernels; use `if`/`else`")
            }
            SynExpr::Tuple(t) => self.reject(
                t,
                "tuples are not supported in kernels; use separate variables or an array",
            ),
            SynExpr::Struct(s) => self.reject(s, "struct literals are not supported in kernels; pass the fields as separate parameters or variables"),
            SynExpr::Field(f) => self.reject(f,
                "field access is not supported in kernels; pass the field as its own parameter (DSL handles offer methods such as `len()` and `rank()`)",
            ),
            SynExpr::Macro(m) => self.macro_expr(&m.mac),
            SynExpr::Range(r) => self.reject(r, "ranges are only supported as `for` loop bounds"),
            SynExpr::Unsafe(u) => self.reject(u, "`unsafe` blocks are not supported in kernels; the DSL has no unsafe operations, so write the code without `unsafe`"),
            SynExpr::Try(t) => self.reject(t, "`?` is not supported in kernels"),
            SynExpr::Async(a) => self.reject(a, "`async` is not supported in kernels"),
            SynExpr::Await(a) => self.reject(a, "`.await` is not supported in kernels"),
            SynExpr::Let(l) => self.reject(
                l,
                "`let` expressions (`if let`, `while let`) are not supported in kernels",
            ),
            SynExpr::While(_) | SynExpr::Loop(_) | SynExpr::ForLoop(_) => self.reject(
                e,
                "loops cannot be used as values in kernels; use them as statements",
            ),
            SynExpr::Return(_) | SynExpr::Break(_) | SynExpr::Continue(_) => self.reject(
                e,
                "`return`, `break` and `continue` must be statements in kernels",
            ),
            other => self.reject(other, "this expression is not supported in kernels"),
        }
    }

    /// A literal: unsuffixed, it takes `expect`.
    fn lit(&mut self, l: &Lit, expect: Option<&CType>) -> ExprKind {
        match l {
            Lit::Int(i) => {
                let suffix = suffix_type(i.suffix());
                if !i.suffix().is_empty() && suffix.is_none() {
                    return self.reject(i, format!("unsupported literal suffix `{}`", i.suffix()));
                }
                ExprKind::Int {
                    digits: i.base10_digits().to_string(),
                    ty: suffix.or_else(|| expect.cloned()),
                }
            }
            Lit::Float(f) => {
                let digits = f.base10_digits();
                let digits = if digits.contains(['.', 'e', 'E']) {
                    digits.to_string()
                } else {
                    format!("{digits}.0")
                };
                ExprKind::Float {
                    digits,
                    ty: suffix_type(f.suffix()).or_else(|| expect.cloned()),
                }
            }
            Lit::Bool(b) => ExprKind::Bool(b.value),
            other => self.reject(
                other,
                "only integer, float and bool literals are supported in kernels",
            ),
        }
    }

    /// The element type of an array value of `elems`: `expect`'s, else the
    /// first element type the macro can tell, else that of the first
    /// element that is no unsuffixed literal, as C++ sees it (`SYMM_TY`,
    /// as for any `let` without a type). `None` when every element is an
    /// unsuffixed literal, or writes a lambda (an `if` or block used as a
    /// value), which C++17 does not allow inside `decltype`.
    fn array_elem<'e>(
        &mut self,
        expect: Option<&CType>,
        elems: impl Iterator<Item = &'e SynExpr> + Clone,
    ) -> Option<CType> {
        if let Some(elem) = expect.and_then(CType::array_elem) {
            return Some(elem.clone());
        }
        if let Some(t) = elems.clone().find_map(|x| self.static_ty(x)) {
            return Some(t);
        }
        let sample = elems
            .into_iter()
            .find(|x| !is_unsuffixed_lit(x) && !makes_lambda(x))?;
        Some(self.type_of(sample))
    }

    /// An assignable place.
    fn place(&mut self, e: &SynExpr) -> Expr {
        match e {
            SynExpr::Path(_) | SynExpr::Index(_) => self.expr(e, None),
            SynExpr::Paren(p) => self.place(&p.expr),
            other => {
                let kind = self.reject(
                    other,
                    "only variables and indexed elements can be assigned in kernels",
                );
                Expr {
                    kind,
                    ty: self.static_ty(other),
                }
            }
        }
    }

    /// A path: a local, a const generic or a constant like `u32::MAX`.
    fn path(&mut self, p: &syn::ExprPath) -> ExprKind {
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        if segs.len() == 1 {
            let id = &p.path.segments[0].ident;
            if let Some(l) = self.lookup(&id.to_string()) {
                return ExprKind::Var(l.cpp.clone());
            }
            if self.is_const_generic(id) {
                return ExprKind::ConstGeneric(id.clone());
            }
            return self.reject(id,
                format!("`{id}` is not a local variable, parameter or const generic; kernels can only read those (pass other values as parameters)"),
            );
        }
        if segs.len() == 2 {
            let (ty, c) = (segs[0].as_str(), segs[1].as_str());
            if let Some(prim) = CPrim::from_rust(ty).filter(|p| p.int_limits().is_some()) {
                match c {
                    "MAX" => {
                        return ExprKind::IntLimit {
                            ty: prim,
                            max: true,
                        }
                    }
                    "MIN" => {
                        return ExprKind::IntLimit {
                            ty: prim,
                            max: false,
                        }
                    }
                    _ => {}
                }
            }
            let value = match c {
                "INFINITY" => Some(FloatConst::Infinity),
                "NEG_INFINITY" => Some(FloatConst::NegInfinity),
                "NAN" => Some(FloatConst::Nan),
                "MAX" => Some(FloatConst::Max),
                "MIN" => Some(FloatConst::Min),
                "EPSILON" => Some(FloatConst::Epsilon),
                _ => None,
            };
            let float = match ty {
                "f32" => Some(CPrim::F32),
                "f64" => Some(CPrim::F64),
                _ => None,
            };
            if let (Some(ty), Some(value)) = (float, value) {
                return ExprKind::FloatConst { ty, value };
            }
        }
        if p.path.segments.len() >= 2 {
            let enum_name = p.path.segments[p.path.segments.len() - 2].ident.to_string();
            if ["LoadOrder", "StoreOrder", "RmwOrder", "Scope"].contains(&enum_name.as_str()) {
                return self.reject(p, format!("`{enum_name}` values cannot be stored; write them inline where they are used, as in `x.load(i, LoadOrder::Acquire, Scope::System)`"));
            }
        }
        self.reject(p, "unsupported path in a kernel; kernels read locals, parameters, const generics and `u32::MAX`-style constants")
    }

    /// A binary operation or compound assignment.
    fn binary(&mut self, b: &syn::ExprBinary, expect: Option<&CType>) -> ExprKind {
        let Some((op, compound)) = bin_op(&b.op) else {
            return self.reject(b, "this operator is not supported in kernels");
        };
        if matches!(op, BinOp::And | BinOp::Or) {
            let lhs = Box::new(self.expr(&b.left, Some(&BOOL)));
            let rhs = Box::new(self.expr(&b.right, Some(&BOOL)));
            return ExprKind::Binary { op, lhs, rhs };
        }
        let shift = matches!(op, BinOp::Shl | BinOp::Shr);
        if compound {
            let place = self.place(&b.left);
            let lt = Self::type_or_typeof(&place);
            // A shift's amount has its own type.
            let value = self.expr(&b.right, (!shift).then_some(&lt));
            return ExprKind::Assign {
                place: Box::new(place),
                op: Some(op),
                value: Box::new(value),
            };
        }
        // Literal operands take the other side's type, as Rust infers.
        let outer = if is_cmp(&b.op) { None } else { expect };
        let (l_lit, r_lit) = (is_unsuffixed_lit(&b.left), is_unsuffixed_lit(&b.right));
        let (lhs, rhs) = if shift {
            (self.expr(&b.left, outer), self.expr(&b.right, None))
        } else if l_lit && !r_lit {
            let r = self.expr(&b.right, outer);
            let t = Self::type_or_typeof(&r);
            (self.expr(&b.left, Some(&t)), r)
        } else if r_lit && !l_lit {
            let l = self.expr(&b.left, outer);
            let t = Self::type_or_typeof(&l);
            let r = self.expr(&b.right, Some(&t));
            (l, r)
        } else {
            let t = outer
                .cloned()
                .or_else(|| self.static_ty(&b.left))
                .or_else(|| self.static_ty(&b.right));
            (
                self.expr(&b.left, t.as_ref()),
                self.expr(&b.right, t.as_ref()),
            )
        };
        ExprKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        }
    }

    /// An `if` used as a value.
    fn if_value(&mut self, i: &syn::ExprIf, expect: Option<&CType>) -> ExprKind {
        if let SynExpr::Let(l) = &*i.cond {
            return self.reject(l, "`if let` is not supported in kernels; use a condition");
        }
        let Some((_, else_e)) = &i.else_branch else {
            return self.reject(i, "an `if` used as a value needs an `else` branch");
        };
        let then_tail = (i.then_branch.stmts.len() == 1)
            .then(|| block_tail(&i.then_branch))
            .flatten();
        let else_tail = match &**else_e {
            SynExpr::Block(b) if b.block.stmts.len() == 1 => block_tail(&b.block),
            _ => None,
        };
        let cond = Box::new(self.expr(&i.cond, Some(&BOOL)));
        if let (Some(a), Some(b)) = (then_tail, else_tail) {
            let t = expect
                .cloned()
                .or_else(|| self.static_ty(a))
                .or_else(|| self.static_ty(b))
                .or_else(|| (!is_unsuffixed_lit(a)).then(|| self.type_of(a)))
                .or_else(|| (!is_unsuffixed_lit(b)).then(|| self.type_of(b)));
            let then = Box::new(self.expr(a, t.as_ref()));
            let els = Box::new(self.expr(b, t.as_ref()));
            return ExprKind::Ternary { cond, then, els };
        }
        // The general form: an immediately-invoked lambda returning the value,
        // typed by the expected type or by the then-branch's tail where it
        // stands (its `let`s may shadow outer names).
        self.in_lambda += 1;
        let (then, ret) = self.lambda_body(&i.then_branch, lambda_type(expect).as_ref());
        let els = match &**else_e {
            SynExpr::Block(b) => LambdaElse::Body(self.lambda_body(&b.block, ret.as_ref()).0),
            other => LambdaElse::Value(Box::new(self.expr(other, ret.as_ref()))),
        };
        self.in_lambda -= 1;
        ExprKind::IfLambda {
            ret,
            cond,
            then,
            els,
        }
    }

    /// A block used as a value.
    fn lambda(&mut self, b: &syn::Block, expect: Option<&CType>) -> ExprKind {
        self.in_lambda += 1;
        let (body, ret) = self.lambda_body(b, lambda_type(expect).as_ref());
        self.in_lambda -= 1;
        ExprKind::BlockLambda { ret, body }
    }
}

/// The expected type as a lambda's return type, unless it holds a lambda
/// itself, which C++17 forbids in `decltype` (C++ deduces the type then).
fn lambda_type(expect: Option<&CType>) -> Option<CType> {
    expect.filter(|t| !t.has_lambda()).cloned()
}
