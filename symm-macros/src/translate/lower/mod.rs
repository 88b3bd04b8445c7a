//! Lowering: a checked signature and the Rust body to the typed IR.
//!
//! All checking of bodies happens here, in one walk, so that every error is
//! collected (once, in the order the walk meets it) before anything is
//! emitted. C names are
//! chosen here too (fresh names for shadowing and temporaries), which is
//! why a type only C++ knows (`SYMM_TY(e)`) holds the lowered `e`.

mod assert;
mod call;
mod expr;
mod infer;
mod syntax;

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{Expr as SynExpr, ExprLit, ItemFn, Lit, Pat, Stmt as SynStmt};

use super::ir::{BinOp, Block, CType, For, Function, Len, Stmt, TemplateParam};
use super::prim::CPrim;
use super::var_name;
use crate::parse::{self, DslType, Generic, Kind, Scalar, Sig};
pub use assert::kernel_assert;
pub use syntax::shared_array_call;
use syntax::{is_const, is_unsuffixed_lit, lit_only, strip};

/// The result of lowering one function.
pub struct Lowered {
    /// The function, meaningful only when `errors` is empty.
    pub function: Function,
    /// Paths of the device functions it calls, for the dependency list,
    /// once each: the C calls the `i`th as `d<i>`.
    pub deps: Vec<syn::Path>,
    /// Its `kernel_assert!`s, by the index the CUDA C records.
    pub asserts: Vec<AssertInfo>,
    /// Every problem found, in source order.
    pub errors: Vec<syn::Error>,
}

/// One `kernel_assert!` of a function, for the host's list, numbered as
/// the device records it (see the `assert` module).
pub struct AssertInfo {
    /// Where the macro starts.
    pub span: Span,
    /// Its message, as [`KernelAssert::message_tokens`](assert::KernelAssert::message_tokens).
    pub message: TokenStream,
}

/// Lowers the function `f`, whose signature is `sig`.
pub fn lower(sig: &Sig, f: &ItemFn) -> Lowered {
    let mut l = Lowerer::new(sig);
    let ret = l.ty(&sig.ret, f.sig.output.span());
    let body = l.body(&f.block, &ret);
    let template = sig
        .generics
        .iter()
        .map(|g| match g {
            Generic::Type(id) => TemplateParam::Type(id.clone()),
            Generic::Const(id, t) => TemplateParam::Const(prim_type(t), id.clone()),
        })
        .collect();
    Lowered {
        function: Function {
            kind: sig.kind,
            name: sig.name.clone(),
            template,
            params: l.params,
            ret,
            body,
        },
        deps: l.deps,
        asserts: l.asserts,
        errors: l.errors,
    }
}

/// The C type of a primitive's Rust name.
fn prim_type(rust: &str) -> CType {
    CPrim::from_rust(rust).map_or(CType::Void, CType::Prim)
}

/// The C type of a scalar.
fn scalar_type(s: &Scalar) -> CType {
    match s {
        Scalar::Prim(p) => prim_type(p),
        Scalar::Generic(id) => CType::Generic(id.clone()),
    }
}

/// The C type of a literal suffix (`u32`, ...), if it names a primitive.
fn suffix_type(suffix: &str) -> Option<CType> {
    CPrim::from_rust(suffix).map(CType::Prim)
}

/// The type of conditions.
const BOOL: CType = CType::Prim(CPrim::Bool);
/// The type of indices and lengths.
const U64: CType = CType::Prim(CPrim::U64);

/// What lowering knows about a local.
#[derive(Clone)]
struct Local {
    /// Its C name.
    cpp: String,
    /// Its C type, when the macro knows it.
    ty: Option<CType>,
    /// Whether it holds a handle (a slice or `SymmBuf` parameter, or a
    /// local bound to a handle, whose `ty` is left for C++ to name): its
    /// methods outside the table resolve by path.
    handle: bool,
}

/// The state of lowering one function.
struct Lowerer<'a> {
    sig: &'a Sig,
    errors: Vec<syn::Error>,
    scopes: Vec<HashMap<String, Local>>,
    /// How often each C name was declared, for fresh names.
    used: HashMap<String, u32>,
    deps: Vec<syn::Path>,
    /// The `kernel_assert!`s met so far (an assertion's index is its
    /// position).
    asserts: Vec<AssertInfo>,
    /// The counter of temporaries' names.
    tmp: u32,
    /// Lambda bodies (block and `if` values) being lowered: no
    /// `return`/`break`/`continue` may leave them.
    in_lambda: u32,
    params: Vec<(CType, String)>,
    /// The line of the function's name, which indexing sites' lines are
    /// relative to (0 where spans carry no lines).
    base_line: usize,
}

/// Largest register array: a GPU thread's local memory (the emulator's
/// thread stacks are sized from it).
const MAX_ARRAY_BYTES: u128 = 512 * 1024;

/// The bytes of an array of `len` elements of `elem`, where a literal
/// length and a primitive element make them known to the macro.
fn array_bytes(elem: &CType, len: &Len) -> Option<u128> {
    match (elem, len) {
        (CType::Prim(p), Len::Lit(digits)) => Some(
            digits
                .parse::<u128>()
                .map_or(u128::MAX, |n| n.saturating_mul(p.size() as u128)),
        ),
        _ => None,
    }
}

fn array_size_error(bytes: u128) -> String {
    format!("this array takes {bytes} bytes, more than a GPU thread's {} KiB of local memory; keep large data in a buffer or `shared_array`", MAX_ARRAY_BYTES / 1024)
}

const LEN_HELP: &str = "array lengths must be integer literals or const generic parameters";

impl<'a> Lowerer<'a> {
    /// Starts with the parameters in scope.
    fn new(sig: &'a Sig) -> Self {
        let mut l = Lowerer {
            sig,
            errors: vec![],
            scopes: vec![HashMap::new()],
            used: HashMap::new(),
            deps: vec![],
            asserts: vec![],
            tmp: 0,
            in_lambda: 0,
            params: vec![],
            base_line: sig.name.span().start().line,
        };
        for p in &sig.params {
            let ty = l.ty(&p.ty, p.rust_ty.span());
            let cpp = var_name(&p.name);
            l.used.insert(cpp.clone(), 1);
            l.params.push((ty.clone(), cpp.clone()));
            l.scopes[0].insert(
                p.name.to_string(),
                Local {
                    cpp,
                    handle: matches!(ty, CType::Slice(_) | CType::Buf(_)),
                    ty: Some(ty),
                },
            );
        }
        l
    }

    /// The line of `node`, relative to the function's name (see
    /// [`ExprKind::Index`](super::ir::ExprKind::Index)).
    fn line_of<N: Spanned>(&self, node: &N) -> u32 {
        let line = node.span().start().line;
        u32::try_from(line.saturating_sub(self.base_line)).unwrap_or(0)
    }

    /// Records an error underlining all of `node`.
    fn err<N: quote::ToTokens>(&mut self, node: N, msg: impl std::fmt::Display) {
        self.errors.push(syn::Error::new_spanned(node, msg));
    }

    /// The C type of a DSL type.
    fn ty(&mut self, t: &DslType, span: Span) -> CType {
        match t {
            DslType::Scalar(s) => scalar_type(s),
            DslType::Slice(s) | DslType::SliceMut(s) | DslType::Remote(s) => {
                CType::Slice(Box::new(scalar_type(s)))
            }
            DslType::SymmBuf(s) => CType::Buf(Box::new(scalar_type(s))),
            DslType::Shared(s, n) => {
                let n = match syn::parse2::<SynExpr>(n.clone()) {
                    Ok(e) => self.len(&e),
                    Err(_) => {
                        self.errors.push(syn::Error::new(span, LEN_HELP));
                        Len::Error
                    }
                };
                CType::SharedRef(Box::new(scalar_type(s)), n)
            }
            DslType::Array(e, n) => {
                let et = self.ty(e, span);
                let len = self.len(n);
                if let Some(b) = array_bytes(&et, &len) {
                    if b > MAX_ARRAY_BYTES {
                        self.errors.push(syn::Error::new(span, array_size_error(b)));
                    }
                }
                CType::Array(Box::new(et), len)
            }
            DslType::Unit => CType::Void,
        }
    }

    /// An array length: a literal, a const generic, or arithmetic on those.
    fn len(&mut self, e: &SynExpr) -> Len {
        match e {
            SynExpr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => Len::Lit(i.base10_digits().to_string()),
            SynExpr::Path(p) if p.path.segments.len() == 1 => {
                let id = &p.path.segments[0].ident;
                if self.is_const_generic(id) {
                    Len::Generic(id.clone())
                } else {
                    self.err(e, LEN_HELP);
                    Len::Error
                }
            }
            SynExpr::Binary(b) => {
                let op = match b.op {
                    syn::BinOp::Add(_) => BinOp::Add,
                    syn::BinOp::Sub(_) => BinOp::Sub,
                    syn::BinOp::Mul(_) => BinOp::Mul,
                    syn::BinOp::Div(_) => BinOp::Div,
                    _ => {
                        self.err(e, LEN_HELP);
                        return Len::Error;
                    }
                };
                let (l, r) = (self.len(&b.left), self.len(&b.right));
                Len::Op(Box::new(l), op, Box::new(r))
            }
            SynExpr::Paren(p) => self.len(&p.expr),
            SynExpr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
                SynStmt::Expr(e, None) => self.len(e),
                _ => {
                    self.err(e, LEN_HELP);
                    Len::Error
                }
            },
            _ => {
                self.err(e, LEN_HELP);
                Len::Error
            }
        }
    }

    /// An error at `node` if an array of `len` elements of `elem` is known
    /// to be larger than a GPU thread's local memory (a const-generic
    /// length is checked where the function is instantiated).
    fn check_array_size<N: quote::ToTokens>(&mut self, node: N, elem: &CType, len: &Len) {
        if let Some(b) = array_bytes(elem, len) {
            if b > MAX_ARRAY_BYTES {
                self.err(node, array_size_error(b));
            }
        }
    }

    /// Whether `id` names a const generic parameter.
    fn is_const_generic(&self, id: &syn::Ident) -> bool {
        self.sig
            .generics
            .iter()
            .any(|g| matches!(g, Generic::Const(c, _) if c == id))
    }

    /// The innermost local named `name`.
    fn lookup(&self, name: &str) -> Option<&Local> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    /// Declares `id` in the innermost scope: its C name, fresh if shadowing.
    fn declare(&mut self, id: &syn::Ident, ty: Option<CType>) -> String {
        self.declare_local(id, ty, false)
    }

    /// [`declare`](Self::declare), saying whether the local holds a handle.
    fn declare_local(&mut self, id: &syn::Ident, ty: Option<CType>, handle: bool) -> String {
        let n = self.used.entry(var_name(id)).or_insert(0);
        *n += 1;
        let cpp = super::mangle('v', id, *n);
        if let Some(s) = self.scopes.last_mut() {
            s.insert(
                id.to_string(),
                Local {
                    cpp: cpp.clone(),
                    ty,
                    handle,
                },
            );
        }
        cpp
    }

    /// Declares every name bound by `pat` (after a rejected pattern), so
    /// that later uses add no errors.
    fn declare_pattern_names(&mut self, pat: &Pat) {
        match pat {
            Pat::Ident(pi) => {
                self.declare(&pi.ident, None);
            }
            Pat::Tuple(tp) => tp.elems.iter().for_each(|p| self.declare_pattern_names(p)),
            Pat::Type(pt) => self.declare_pattern_names(&pt.pat),
            Pat::Paren(pp) => self.declare_pattern_names(&pp.pat),
            Pat::Reference(r) => self.declare_pattern_names(&r.pat),
            Pat::Slice(sp) => sp.elems.iter().for_each(|p| self.declare_pattern_names(p)),
            Pat::TupleStruct(ts) => ts.elems.iter().for_each(|p| self.declare_pattern_names(p)),
            Pat::Struct(ps) => ps
                .fields
                .iter()
                .for_each(|f| self.declare_pattern_names(&f.pat)),
            _ => {}
        }
    }

    /// A fresh C name for a temporary.
    fn fresh(&mut self, what: &str) -> String {
        self.tmp += 1;
        format!("t_{what}{}", self.tmp)
    }

    /// The function body; its tail is returned when `ret` is not `void`.
    fn body(&mut self, b: &syn::Block, ret: &CType) -> Vec<Stmt> {
        let mut out = Vec::new();
        let n = b.stmts.len();
        for (i, s) in b.stmts.iter().enumerate() {
            if let (true, SynStmt::Expr(e, None)) = (i + 1 == n, s) {
                if !matches!(ret, CType::Void) {
                    out.push(Stmt::Return(Some(self.expr(e, Some(ret)))));
                    continue;
                }
            }
            out.extend(self.stmt(s));
        }
        out
    }

    /// A block, in its own scope.
    fn block(&mut self, b: &syn::Block) -> Block {
        self.scopes.push(HashMap::new());
        let stmts = b.stmts.iter().filter_map(|s| self.stmt(s)).collect();
        self.scopes.pop();
        Block(stmts)
    }

    /// The body of a lambda (a block or `if` used as a value), whose tail
    /// is returned as `rt`, or, without one, as the type the tail shows
    /// where it stands (inside the block, whose `let`s may shadow outer
    /// names), which is returned too.
    fn lambda_body(&mut self, b: &syn::Block, rt: Option<&CType>) -> (Vec<Stmt>, Option<CType>) {
        self.scopes.push(HashMap::new());
        let mut out = Vec::new();
        let mut ret = rt.cloned();
        let n = b.stmts.len();
        for (i, s) in b.stmts.iter().enumerate() {
            match s {
                SynStmt::Expr(e, None) if i + 1 == n => {
                    if ret.is_none() {
                        ret = self.static_ty(e);
                    }
                    out.push(Stmt::Return(Some(self.expr(e, ret.as_ref()))));
                }
                _ => out.extend(self.stmt(s)),
            }
        }
        if syntax::block_tail(b).is_none() {
            self.err(b, "a block used as a value must end with an expression");
        }
        self.scopes.pop();
        (out, ret)
    }

    /// A statement (`None`: nothing to emit, after an error).
    fn stmt(&mut self, s: &SynStmt) -> Option<Stmt> {
        match s {
            SynStmt::Local(l) => self.local(l),
            SynStmt::Expr(e, _) => self.expr_stmt(e),
            SynStmt::Item(i) => {
                self.err(i, "items (fn, struct, use, const, ...) cannot be declared inside a kernel; move them outside");
                None
            }
            SynStmt::Macro(m) => self.macro_stmt(m, &m.mac),
        }
    }

    /// A `let`.
    fn local(&mut self, l: &syn::Local) -> Option<Stmt> {
        const DESTRUCTURE: &str =
            "`let` must bind a plain name; destructuring is not supported in kernels";
        let (id, annot) = match &l.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                (pi.ident.clone(), None)
            }
            Pat::Type(pt) => match &*pt.pat {
                Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                    (pi.ident.clone(), Some(&*pt.ty))
                }
                other => {
                    self.err(other, DESTRUCTURE);
                    self.declare_pattern_names(other);
                    return None;
                }
            },
            Pat::Wild(_) => {
                return l
                    .init
                    .as_ref()
                    .map(|init| Stmt::Discard(self.expr(&init.expr, None)));
            }
            other => {
                self.err(other, DESTRUCTURE);
                self.declare_pattern_names(other);
                return None;
            }
        };
        if let Some(init) = &l.init {
            if let Some((_, d)) = &init.diverge {
                self.err(d, "`let ... else` is not supported in kernels; use `if`");
            }
            if let Some((t, n)) = shared_array_call(&init.expr) {
                let elem = match parse::scalar(&t, &self.sig.generics) {
                    Ok(s) => scalar_type(&s),
                    Err(e) => {
                        self.errors.push(e);
                        CType::Prim(CPrim::F32)
                    }
                };
                let len = self.len(&n);
                let name = self.declare(&id, None);
                let ty = CType::Array(Box::new(elem), len);
                return Some(Stmt::Shared { ty, name });
            }
        }
        let ty = match annot {
            Some(t) => match parse::dsl_type(t, &self.sig.generics, Kind::Device) {
                Ok(DslType::Shared(..)) => {
                    self.err(
                        t,
                        "declare shared arrays with `let s = shared_array::<T, N>();`",
                    );
                    None
                }
                Ok(dt) => Some(self.ty(&dt, t.span())),
                Err(e) => {
                    self.errors.push(e);
                    None
                }
            },
            None => None,
        };
        match &l.init {
            None => match ty {
                Some(ty) => {
                    let name = self.declare(&id, Some(ty.clone()));
                    Some(Stmt::Decl { ty, name })
                }
                None => {
                    self.err(l, "a `let` without a value needs a type: `let x: f32;`");
                    None
                }
            },
            Some(init) => {
                if ty.is_none() && lit_only(&init.expr) {
                    self.err(&init.expr,
                        "cannot infer this literal's type in a kernel; add a suffix (`0u32`, `1.0f32`) or a type (`let x: u32 = 0;`)",
                    );
                }
                let handle = self.is_handle(&init.expr);
                let init = self.expr(&init.expr, ty.as_ref());
                let known = ty.clone().or_else(|| init.ty.clone());
                let name = self.declare_local(&id, known, handle);
                Some(Stmt::Let { ty, name, init })
            }
        }
    }

    /// An expression in statement position: control flow, or a value
    /// computed for its effect.
    fn expr_stmt(&mut self, e: &SynExpr) -> Option<Stmt> {
        const LABEL: &str =
            "loop labels are not supported in kernels; use a flag variable to leave outer loops";
        Some(match e {
            SynExpr::If(i) => return self.if_stmt(i),
            SynExpr::While(w) => {
                if let Some(l) = &w.label {
                    self.err(l, LABEL);
                }
                if let SynExpr::Let(l) = &*w.cond {
                    self.err(
                        l,
                        "`while let` is not supported in kernels; use `while` with a condition",
                    );
                    return None;
                }
                let cond = self.expr(&w.cond, Some(&BOOL));
                let body = self.block(&w.body);
                Stmt::While { cond, body }
            }
            SynExpr::Loop(l) => {
                if let Some(lb) = &l.label {
                    self.err(lb, LABEL);
                }
                Stmt::Loop(self.block(&l.body))
            }
            SynExpr::ForLoop(f) => return self.for_loop(f),
            SynExpr::Macro(m) => return self.macro_stmt(m, &m.mac),
            SynExpr::Block(b) => {
                if let Some(l) = &b.label {
                    self.err(
                        l,
                        "block labels are not supported in kernels; use `if` to skip code",
                    );
                }
                Stmt::Block(self.block(&b.block))
            }
            SynExpr::Return(r) => {
                if self.in_lambda > 0 {
                    self.err(r, "`return` inside an `if` or block used as a value is not supported; use a statement");
                }
                match &r.expr {
                    Some(v) => {
                        let sig = self.sig;
                        let rt = match &sig.ret {
                            DslType::Unit => None,
                            t => Some(self.ty(t, r.span())),
                        };
                        Stmt::Return(Some(self.expr(v, rt.as_ref())))
                    }
                    None => Stmt::Return(None),
                }
            }
            SynExpr::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    self.err(b,
                        "`break` with a label or value is not supported in kernels; set a variable and `break` from the innermost loop",
                    );
                }
                if self.in_lambda > 0 {
                    self.err(
                        b,
                        "`break` inside an `if` or block used as a value is not supported",
                    );
                }
                Stmt::Break
            }
            SynExpr::Continue(c) => {
                if c.label.is_some() {
                    self.err(c, "`continue` with a label is not supported in kernels");
                }
                if self.in_lambda > 0 {
                    self.err(
                        c,
                        "`continue` inside an `if` or block used as a value is not supported",
                    );
                }
                Stmt::Continue
            }
            _ => Stmt::Expr(self.expr(e, None)),
        })
    }

    /// An `if` statement (with its `else if` chain).
    fn if_stmt(&mut self, i: &syn::ExprIf) -> Option<Stmt> {
        if let SynExpr::Let(l) = &*i.cond {
            self.err(l, "`if let` is not supported in kernels; use a condition");
            return None;
        }
        let cond = self.expr(&i.cond, Some(&BOOL));
        let then = self.block(&i.then_branch);
        let els = match i.else_branch.as_ref().map(|(_, e)| &**e) {
            None => None,
            Some(SynExpr::If(ei)) => self.if_stmt(ei),
            Some(SynExpr::Block(b)) => Some(Stmt::Block(self.block(&b.block))),
            Some(other) => self.expr_stmt(other),
        };
        Some(Stmt::If {
            cond,
            then,
            els: els.map(Box::new),
        })
    }

    /// A `for` loop over a range; its counter has the bounds' type.
    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Option<Stmt> {
        if let Some(l) = &f.label {
            self.err(l, "loop labels are not supported in kernels; use a flag variable to leave outer loops");
        }
        let var = match &*f.pat {
            Pat::Ident(pi)
                if pi.by_ref.is_none() && pi.subpat.is_none() && pi.mutability.is_none() =>
            {
                Some(pi.ident.clone())
            }
            Pat::Wild(_) => None,
            other => {
                self.err(other, "`for` must bind a plain name or `_`");
                None
            }
        };
        // Accept `a..b`, `a..=b`, and `(range).step_by(s)`.
        let (range, step) = match &*f.expr {
            SynExpr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                (strip(&m.receiver), Some(&m.args[0]))
            }
            other => (strip(other), None),
        };
        let SynExpr::Range(r) = range else {
            self.err(
                &f.expr,
                "kernels loop only over ranges: `for i in a..b`, `a..=b` or `(a..b).step_by(s)`",
            );
            return None;
        };
        let (Some(start), Some(end)) = (&r.start, &r.end) else {
            self.err(r, "kernel ranges need both ends: `a..b`");
            return None;
        };
        let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
        let ty = self
            .static_ty(start)
            .or_else(|| self.static_ty(end))
            .or_else(|| (!is_unsuffixed_lit(end)).then(|| self.type_of(end)))
            .unwrap_or(CType::Prim(CPrim::I32));
        let start_ir = self.expr(start, Some(&ty));
        let end_ir = self.expr(end, Some(&ty));
        let step_ir = step.map(|s| self.expr(s, Some(&ty)));
        let unroll = is_const(&self.sig.generics, start)
            && is_const(&self.sig.generics, end)
            && step.is_none_or(|s| is_const(&self.sig.generics, s));
        let end_name = self.fresh("end");
        self.scopes.push(HashMap::new());
        let var = match &var {
            Some(id) => self.declare(id, Some(ty.clone())),
            None => self.fresh("i"),
        };
        let body = self.block(&f.body);
        self.scopes.pop();
        Some(Stmt::For(Box::new(For {
            ty,
            end_name,
            end: end_ir,
            unroll,
            var,
            start: start_ir,
            inclusive,
            step: step_ir,
            body,
        })))
    }

    /// `SYMM_TY(e)`, lowering `e` aside: its errors and assertions are
    /// those of `e` itself, which is lowered again where it is used. Its
    /// calls stay listed: a dependency's index must mean one function
    /// wherever the C names it (a call in `e` is a call of the body anyway).
    fn type_of(&mut self, e: &SynExpr) -> CType {
        let (n, asserts) = (self.errors.len(), self.asserts.len());
        let v = self.expr(e, None);
        self.errors.truncate(n);
        self.asserts.truncate(asserts);
        CType::TypeOf(Box::new(v))
    }
}
