//! Translation of a checked Rust body to CUDA C.
//!
//! Every user identifier gets a prefix (`v_`, `G_`, `f_`) so that no Rust
//! name can collide with a C++ keyword, a CUDA builtin or the prelude, and
//! shadowed `let`s get fresh C++ names, because C++ forbids redeclaration.
//!
//! Literals take the type of the expression they combine with, as Rust's
//! inference would: `x + 1` becomes `x + ((SYMM_TY(x))1ULL)`. A `let` whose
//! initialiser is nothing but unsuffixed literals has no type the macro can
//! know, so it is an error asking for an annotation.

use std::collections::HashMap;
use std::fmt::Write;

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, ExprLit, Lit, Pat, Stmt, UnOp};

use crate::parse::{self, DslType, Generic, Kind, Scalar, Sig};

/// What the translator knows about a local.
#[derive(Clone)]
struct Local {
    cpp: String,
    /// The C++ type, when the macro knows it.
    ty: Option<String>,
}

/// Translates one function body.
pub struct Translator<'a> {
    sig: &'a Sig,
    pub errors: Vec<syn::Error>,
    scopes: Vec<HashMap<String, Local>>,
    used: HashMap<String, u32>,
    /// Paths of called device functions, for the dependency list.
    pub deps: Vec<syn::Path>,
    tmp: u32,
    in_lambda: u32,
}

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

/// C++ spelling of a scalar.
pub fn scalar_cpp(s: &Scalar) -> String {
    match s {
        Scalar::Prim(p) => parse::prim_cuda(p).to_string(),
        Scalar::Generic(id) => generic_name(id),
    }
}

fn lit_only(e: &Expr) -> bool {
    match e {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => i.suffix().is_empty(),
        Expr::Lit(ExprLit {
            lit: Lit::Float(f), ..
        }) => f.suffix().is_empty(),
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

fn is_unsuffixed_lit(e: &Expr) -> bool {
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

fn block_tail(b: &Block) -> Option<&Expr> {
    match b.stmts.last() {
        Some(Stmt::Expr(e, None)) => Some(e),
        _ => None,
    }
}

fn is_cmp(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::Eq(_) | BinOp::Ne(_) | BinOp::Lt(_) | BinOp::Le(_) | BinOp::Gt(_) | BinOp::Ge(_)
    )
}

fn suffix_cpp(s: &str) -> Option<&'static str> {
    parse::PRIMS
        .iter()
        .find(|&&p| p == s)
        .map(|p| parse::prim_cuda(p))
}

/// Intrinsic free functions: name, arity, C++ template.
/// `{0}`… are the translated arguments.
const INTRINSICS: &[(&str, usize, &str, Option<&str>)] = &[
    (
        "thread_idx_x",
        0,
        "((symm_u32)threadIdx.x)",
        Some("symm_u32"),
    ),
    (
        "thread_idx_y",
        0,
        "((symm_u32)threadIdx.y)",
        Some("symm_u32"),
    ),
    (
        "thread_idx_z",
        0,
        "((symm_u32)threadIdx.z)",
        Some("symm_u32"),
    ),
    ("block_idx_x", 0, "((symm_u32)blockIdx.x)", Some("symm_u32")),
    ("block_idx_y", 0, "((symm_u32)blockIdx.y)", Some("symm_u32")),
    ("block_idx_z", 0, "((symm_u32)blockIdx.z)", Some("symm_u32")),
    ("block_dim_x", 0, "((symm_u32)blockDim.x)", Some("symm_u32")),
    ("block_dim_y", 0, "((symm_u32)blockDim.y)", Some("symm_u32")),
    ("block_dim_z", 0, "((symm_u32)blockDim.z)", Some("symm_u32")),
    ("grid_dim_x", 0, "((symm_u32)gridDim.x)", Some("symm_u32")),
    ("grid_dim_y", 0, "((symm_u32)gridDim.y)", Some("symm_u32")),
    ("grid_dim_z", 0, "((symm_u32)gridDim.z)", Some("symm_u32")),
    ("lane_id", 0, "symm_lane_id()", Some("symm_u32")),
    ("sync_threads", 0, "__syncthreads()", Some("void")),
    ("globaltimer", 0, "symm_globaltimer()", Some("symm_u64")),
    (
        "grid_dependency_wait",
        0,
        "symm_grid_dependency_wait()",
        Some("void"),
    ),
    (
        "launch_dependents",
        0,
        "symm_launch_dependents()",
        Some("void"),
    ),
    ("ballot", 1, "symm_ballot({0})", Some("symm_u32")),
    ("shfl_xor", 2, "symm_shfl_xor({0}, (symm_u32)({1}))", None),
    ("min", 2, "symm_min({0}, {1})", None),
    ("max", 2, "symm_max({0}, {1})", None),
    ("abs", 1, "symm_abs({0})", None),
    ("fma", 3, "symm_fma({0}, {1}, {2})", None),
    (
        "signal_slot",
        3,
        "symm_signal_slot((symm_u32)({0}), (symm_u32)({1}), (symm_u32)({2}))",
        Some("symm_u32"),
    ),
];

fn fill(template: &str, args: &[String]) -> String {
    let mut s = template.to_string();
    for (i, a) in args.iter().enumerate() {
        s = s.replace(&format!("{{{i}}}"), a);
    }
    s
}

impl<'a> Translator<'a> {
    pub fn new(sig: &'a Sig) -> Self {
        let mut t = Translator {
            sig,
            errors: vec![],
            scopes: vec![HashMap::new()],
            used: HashMap::new(),
            deps: vec![],
            tmp: 0,
            in_lambda: 0,
        };
        for p in &sig.params {
            let ty = match &p.ty {
                DslType::Scalar(s) => Some(scalar_cpp(s)),
                other => Some(t.type_cpp(other, p.rust_ty.span())),
            };
            let cpp = var_name(&p.name);
            t.used.insert(cpp.clone(), 1);
            t.scopes[0].insert(p.name.to_string(), Local { cpp, ty });
        }
        t
    }

    /// Records an error underlining all of `node`.
    fn err<N: quote::ToTokens>(&mut self, node: N, msg: impl std::fmt::Display) -> String {
        self.errors.push(syn::Error::new_spanned(node, msg));
        "0".into()
    }

    /// Records an error at a bare span.
    fn err_span(&mut self, span: Span, msg: impl std::fmt::Display) -> String {
        self.errors.push(syn::Error::new(span, msg));
        "0".into()
    }

    /// C++ spelling of a DSL type.
    pub fn type_cpp(&mut self, t: &DslType, span: Span) -> String {
        match t {
            DslType::Scalar(s) => scalar_cpp(s),
            DslType::Slice(s) | DslType::SliceMut(s) | DslType::Remote(s) => {
                format!("symm_slice<{}>", scalar_cpp(s))
            }
            DslType::SymmBuf(s) => format!("symm_buf<{}>", scalar_cpp(s)),
            DslType::Shared(s, n) => {
                let n = self.const_tokens(n.clone(), span);
                format!("symm_array<{}, {n}>&", scalar_cpp(s))
            }
            DslType::Array(e, n) => {
                let et = self.type_cpp(e, span);
                let n = self.const_expr(n);
                format!("symm_array<{et}, {n}>")
            }
            DslType::Unit => "void".into(),
        }
    }

    fn const_tokens(&mut self, ts: proc_macro2::TokenStream, span: Span) -> String {
        match syn::parse2::<Expr>(ts) {
            Ok(e) => self.const_expr(&e),
            Err(_) => self.err_span(
                span,
                "array lengths must be integer literals or const generic parameters",
            ),
        }
    }

    /// An array length: a literal, a const generic, or arithmetic on those.
    fn const_expr(&mut self, e: &Expr) -> String {
        match e {
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => format!("{}ULL", i.base10_digits()),
            Expr::Path(p) if p.path.segments.len() == 1 => {
                let id = &p.path.segments[0].ident;
                if self
                    .sig
                    .generics
                    .iter()
                    .any(|g| matches!(g, Generic::Const(c, _) if c == id))
                {
                    generic_name(id)
                } else {
                    self.err(
                        e,
                        "array lengths must be integer literals or const generic parameters",
                    )
                }
            }
            Expr::Binary(b)
                if matches!(
                    b.op,
                    BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_)
                ) =>
            {
                let (l, r) = (self.const_expr(&b.left), self.const_expr(&b.right));
                format!("({l} {} {r})", op_str(&b.op))
            }
            Expr::Paren(p) => self.const_expr(&p.expr),
            Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
                Stmt::Expr(e, None) => self.const_expr(e),
                _ => self.err(
                    e,
                    "array lengths must be integer literals or const generic parameters",
                ),
            },
            _ => self.err(
                e,
                "array lengths must be integer literals or const generic parameters",
            ),
        }
    }

    fn lookup(&self, name: &str) -> Option<&Local> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn declare(&mut self, id: &syn::Ident, ty: Option<String>) -> String {
        let base = var_name(id);
        let n = self.used.entry(base.clone()).or_insert(0);
        *n += 1;
        let cpp = if *n == 1 { base } else { format!("{base}_{n}") };
        if let Some(s) = self.scopes.last_mut() {
            s.insert(
                id.to_string(),
                Local {
                    cpp: cpp.clone(),
                    ty,
                },
            );
        }
        cpp
    }

    fn fresh(&mut self, what: &str) -> String {
        self.tmp += 1;
        format!("t_{what}{}", self.tmp)
    }

    /// Translates a function body; `ret` is the C++ return type.
    pub fn body(&mut self, b: &Block, ret: Option<&str>) -> String {
        let mut out = String::new();
        let n = b.stmts.len();
        for (i, s) in b.stmts.iter().enumerate() {
            if i + 1 == n {
                if let (Stmt::Expr(e, None), Some(rt)) = (s, ret) {
                    if rt != "void" && !is_control(e) {
                        let v = self.expr(e, Some(rt));
                        let _ = writeln!(out, "return {v};");
                        continue;
                    }
                    if rt != "void" {
                        let v = self.value_of(e, Some(rt));
                        let _ = writeln!(out, "return {v};");
                        continue;
                    }
                }
            }
            out += &self.stmt(s);
        }
        out
    }

    fn block(&mut self, b: &Block) -> String {
        self.scopes.push(HashMap::new());
        let mut out = String::from("{\n");
        for s in &b.stmts {
            out += &self.stmt(s);
        }
        out += "}\n";
        self.scopes.pop();
        out
    }

    fn stmt(&mut self, s: &Stmt) -> String {
        match s {
            Stmt::Local(l) => self.local(l),
            Stmt::Expr(e, _) => self.expr_stmt(e),
            Stmt::Item(i) => {
                self.err(i, "items (fn, struct, use, const, ...) cannot be declared inside a kernel; move them outside");
                String::new()
            }
            Stmt::Macro(m) => {
                self.err(m, "macros are not supported in kernels (no println!, assert!, ...); write the code out");
                String::new()
            }
        }
    }

    fn local(&mut self, l: &syn::Local) -> String {
        let (id, annot) = match &l.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                (pi.ident.clone(), None)
            }
            Pat::Type(pt) => {
                match &*pt.pat {
                    Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                        (pi.ident.clone(), Some((*pt.ty).clone()))
                    }
                    other => {
                        self.err(other, "`let` must bind a plain name; destructuring is not supported in kernels");
                        // Declare the names anyway, so later uses add no errors.
                        declare_pattern_names(self, other);
                        return String::new();
                    }
                }
            }
            Pat::Wild(_) => {
                return match &l.init {
                    Some(init) => {
                        let v = self.expr(&init.expr, None);
                        format!("(void)({v});\n")
                    }
                    None => String::new(),
                };
            }
            other => {
                self.err(
                    other,
                    "`let` must bind a plain name; destructuring is not supported in kernels",
                );
                // Declare the names anyway, so later uses add no errors.
                declare_pattern_names(self, other);
                return String::new();
            }
        };
        if let Some(init) = &l.init {
            if let Some((_, d)) = &init.diverge {
                self.err(d, "`let ... else` is not supported in kernels; use `if`");
            }
            if let Some((t, n)) = shared_array_call(&init.expr) {
                let ty = match parse::scalar(&t, &self.generics_only()) {
                    Ok(s) => scalar_cpp(&s),
                    Err(e) => {
                        self.errors.push(e);
                        "float".into()
                    }
                };
                let n = self.const_expr(&n);
                let name = self.declare(&id, None);
                return format!("__shared__ symm_array<{ty}, {n}> {name};\n");
            }
        }
        let ty = match &annot {
            Some(t) => match parse::dsl_type(t, &self.sig.generics, Kind::Device) {
                Ok(DslType::Shared(..)) => {
                    self.err(
                        t,
                        "declare shared arrays with `let s = shared_array::<T, N>();`",
                    );
                    None
                }
                Ok(dt) => Some(self.type_cpp(&dt, t.span())),
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
                    format!("{ty} {name};\n")
                }
                None => {
                    self.err(l, "a `let` without a value needs a type: `let x: f32;`");
                    String::new()
                }
            },
            Some(init) => {
                if ty.is_none() && lit_only(&init.expr) {
                    self.err(&init.expr,
                        "cannot infer this literal's type in a kernel; add a suffix (`0u32`, `1.0f32`) or a type (`let x: u32 = 0;`)",
                    );
                }
                let known = ty.clone().or_else(|| self.static_ty(&init.expr));
                let v = self.value_of(&init.expr, ty.as_deref());
                let decl = ty.unwrap_or_else(|| "auto".into());
                let name = self.declare(&id, known);
                format!("{decl} {name} = {v};\n")
            }
        }
    }

    fn generics_only(&self) -> Vec<Generic> {
        self.sig.generics.clone()
    }

    fn expr_stmt(&mut self, e: &Expr) -> String {
        match e {
            Expr::If(i) => self.if_stmt(i),
            Expr::While(w) => {
                if let Some(l) = &w.label {
                    self.err(l, "loop labels are not supported in kernels; use a flag variable to leave outer loops");
                }
                if let Expr::Let(l) = &*w.cond {
                    self.err(
                        l,
                        "`while let` is not supported in kernels; use `while` with a condition",
                    );
                    return String::new();
                }
                let c = self.expr(&w.cond, Some("bool"));
                let b = self.block(&w.body);
                format!("while ({c}) {b}")
            }
            Expr::Loop(l) => {
                if let Some(lb) = &l.label {
                    self.err(lb, "loop labels are not supported in kernels; use a flag variable to leave outer loops");
                }
                let b = self.block(&l.body);
                format!("while (true) {b}")
            }
            Expr::ForLoop(f) => self.for_loop(f),
            Expr::Block(b) => {
                if let Some(l) = &b.label {
                    self.err(
                        l,
                        "block labels are not supported in kernels; use `if` to skip code",
                    );
                }
                self.block(&b.block)
            }
            Expr::Return(r) => {
                if self.in_lambda > 0 {
                    self.err(r, "`return` inside an `if` or block used as a value is not supported; use a statement");
                }
                match &r.expr {
                    Some(v) => {
                        let rt = match &self.sig.ret {
                            DslType::Unit => None,
                            t => Some(self.type_cpp(&t.clone(), r.span())),
                        };
                        let v = self.expr(v, rt.as_deref());
                        format!("return {v};\n")
                    }
                    None => "return;\n".into(),
                }
            }
            Expr::Break(b) => {
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
                "break;\n".into()
            }
            Expr::Continue(c) => {
                if c.label.is_some() {
                    self.err(c, "`continue` with a label is not supported in kernels");
                }
                if self.in_lambda > 0 {
                    self.err(
                        c,
                        "`continue` inside an `if` or block used as a value is not supported",
                    );
                }
                "continue;\n".into()
            }
            _ => {
                let v = self.expr(e, None);
                format!("{v};\n")
            }
        }
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> String {
        if let Expr::Let(l) = &*i.cond {
            self.err(l, "`if let` is not supported in kernels; use a condition");
            return String::new();
        }
        let c = self.expr(&i.cond, Some("bool"));
        let t = self.block(&i.then_branch);
        let mut s = format!("if ({c}) {t}");
        if let Some((_, e)) = &i.else_branch {
            s += "else ";
            s += &match &**e {
                Expr::If(ei) => self.if_stmt(ei),
                Expr::Block(b) => self.block(&b.block),
                other => self.expr_stmt(other),
            };
        }
        s
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> String {
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
            Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                (strip(&m.receiver), Some(&m.args[0]))
            }
            other => (strip(other), None),
        };
        let Expr::Range(r) = range else {
            self.err(
                &f.expr,
                "kernels loop only over ranges: `for i in a..b`, `a..=b` or `(a..b).step_by(s)`",
            );
            return String::new();
        };
        let (Some(start), Some(end)) = (&r.start, &r.end) else {
            self.err(r, "kernel ranges need both ends: `a..b`");
            return String::new();
        };
        let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
        let ty = self
            .static_ty(start)
            .or_else(|| self.static_ty(end))
            .or_else(|| (!is_unsuffixed_lit(end)).then(|| format!("SYMM_TY({})", self.peek(end))))
            .unwrap_or_else(|| "symm_i32".into());
        let a = self.expr(start, Some(&ty));
        let b = self.expr(end, Some(&ty));
        let s = match step {
            Some(s) => self.expr(s, Some(&ty)),
            None => "1".into(),
        };
        let unroll =
            self.is_const(start) && self.is_const(end) && step.is_none_or(|s| self.is_const(s));
        let endv = self.fresh("end");
        self.scopes.push(HashMap::new());
        let name = match &var {
            Some(id) => self.declare(id, Some(ty.clone())),
            None => self.fresh("i"),
        };
        let body = self.block(&f.body);
        self.scopes.pop();
        let cmp = if inclusive { "<=" } else { "<" };
        let pragma = if unroll { "#pragma unroll\n" } else { "" };
        format!("{{\nconst {ty} {endv} = {b};\n{pragma}for ({ty} {name} = {a}; {name} {cmp} {endv}; {name} += {s}) {body}}}\n")
    }

    /// Whether `e` is a compile-time constant (literals and const generics).
    fn is_const(&self, e: &Expr) -> bool {
        match strip(e) {
            Expr::Lit(_) => true,
            Expr::Path(p) if p.path.segments.len() == 1 => self
                .sig
                .generics
                .iter()
                .any(|g| matches!(g, Generic::Const(c, _) if *c == p.path.segments[0].ident)),
            Expr::Binary(b) => self.is_const(&b.left) && self.is_const(&b.right),
            _ => false,
        }
    }

    /// Translation without recording errors twice (used for `SYMM_TY`).
    fn peek(&mut self, e: &Expr) -> String {
        let n = self.errors.len();
        let deps = self.deps.len();
        let v = self.expr(e, None);
        self.errors.truncate(n);
        self.deps.truncate(deps);
        v
    }

    /// The C++ type of `e`, when the macro can tell without C++.
    fn static_ty(&self, e: &Expr) -> Option<String> {
        match e {
            Expr::Lit(ExprLit {
                lit: Lit::Int(i), ..
            }) => suffix_cpp(i.suffix()).map(String::from),
            Expr::Lit(ExprLit {
                lit: Lit::Float(f), ..
            }) => suffix_cpp(f.suffix()).map(String::from),
            Expr::Lit(ExprLit {
                lit: Lit::Bool(_), ..
            }) => Some("bool".into()),
            Expr::Paren(p) => self.static_ty(&p.expr),
            Expr::Group(g) => self.static_ty(&g.expr),
            Expr::Cast(c) => match parse::scalar(&c.ty, &self.sig.generics) {
                Ok(s) => Some(scalar_cpp(&s)),
                Err(_) => None,
            },
            Expr::Path(p) if p.path.segments.len() == 1 => {
                let id = &p.path.segments[0].ident;
                if let Some(l) = self.lookup(&id.to_string()) {
                    return l
                        .ty
                        .clone()
                        .filter(|t| !t.starts_with("symm_slice") && !t.starts_with("symm_buf"));
                }
                self.sig.generics.iter().find_map(|g| match g {
                    Generic::Const(c, t) if c == id => Some(parse::prim_cuda(t).to_string()),
                    _ => None,
                })
            }
            Expr::Unary(u) if !matches!(u.op, UnOp::Deref(_)) => self.static_ty(&u.expr),
            Expr::Binary(b) if is_cmp(&b.op) || matches!(b.op, BinOp::And(_) | BinOp::Or(_)) => {
                Some("bool".into())
            }
            Expr::Binary(b) if matches!(b.op, BinOp::Shl(_) | BinOp::Shr(_)) => {
                self.static_ty(&b.left)
            }
            Expr::Binary(b) => self.static_ty(&b.left).or_else(|| self.static_ty(&b.right)),
            Expr::MethodCall(m) => match m.method.to_string().as_str() {
                "len" => Some("symm_u64".into()),
                "is_empty" => Some("bool".into()),
                "to_f32" => Some("float".into()),
                "rank" | "world_size" => Some("symm_u32".into()),
                _ => None,
            },
            Expr::Call(c) => {
                let name = call_name(&c.func)?;
                INTRINSICS
                    .iter()
                    .find(|i| i.0 == name)
                    .and_then(|i| i.3)
                    .filter(|t| *t != "void")
                    .map(String::from)
            }
            _ => None,
        }
    }

    /// An expression used as a value (also `if`/block expressions).
    fn value_of(&mut self, e: &Expr, expect: Option<&str>) -> String {
        self.expr(e, expect)
    }

    fn lit(&mut self, l: &Lit, expect: Option<&str>) -> String {
        match l {
            Lit::Int(i) => {
                let ty = suffix_cpp(i.suffix())
                    .map(String::from)
                    .or_else(|| expect.map(String::from));
                if !i.suffix().is_empty() && suffix_cpp(i.suffix()).is_none() {
                    return self.err(i, format!("unsupported literal suffix `{}`", i.suffix()));
                }
                match ty {
                    Some(t) => format!("(({t}){}ULL)", i.base10_digits()),
                    None => i.base10_digits().to_string(),
                }
            }
            Lit::Float(f) => {
                let digits = f.base10_digits();
                let d = if digits.contains(['.', 'e', 'E']) {
                    digits.to_string()
                } else {
                    format!("{digits}.0")
                };
                let ty = suffix_cpp(f.suffix())
                    .map(String::from)
                    .or_else(|| expect.map(String::from));
                match ty.as_deref() {
                    Some("float") => format!("{d}f"),
                    Some(t) => format!("(({t}){d})"),
                    None => d,
                }
            }
            Lit::Bool(b) => (if b.value { "true" } else { "false" }).into(),
            other => self.err(
                other,
                "only integer, float and bool literals are supported in kernels",
            ),
        }
    }

    /// Translates an expression; `expect` is the C++ type an unsuffixed
    /// literal should take.
    pub fn expr(&mut self, e: &Expr, expect: Option<&str>) -> String {
        match e {
            Expr::Lit(l) => self.lit(&l.lit, expect),
            Expr::Paren(p) => format!("({})", self.expr(&p.expr, expect)),
            Expr::Group(g) => self.expr(&g.expr, expect),
            Expr::Path(p) => self.path(p),
            Expr::Unary(u) => {
                let v = self.expr(&u.expr, expect);
                match u.op {
                    UnOp::Neg(_) => format!("(-{v})"),
                    UnOp::Not(_) => format!("symm_not({v})"),
                    _ => self.err(u,
                        "dereferencing is not supported in kernels; index slices instead",
                    ),
                }
            }
            Expr::Binary(b) => self.binary(b, expect),
            Expr::Assign(a) => {
                let l = self.place(&a.left);
                let ty = self
                    .static_ty(&a.left)
                    .unwrap_or_else(|| format!("SYMM_TY({l})"));
                let r = self.expr(&a.right, Some(&ty));
                format!("{l} = {r}")
            }
            Expr::Cast(c) => {
                let ty = match parse::scalar(&c.ty, &self.sig.generics) {
                    Ok(s) => scalar_cpp(&s),
                    Err(e) => {
                        self.errors.push(e);
                        return "0".into();
                    }
                };
                let v = self.expr(&c.expr, None);
                format!("symm_cast<{ty}>({v})")
            }
            Expr::Index(i) => {
                if let Expr::Range(r) = &*i.index {
                    return self.err(r,
                        "sub-slicing is not supported in kernels; pass offsets as integers",
                    );
                }
                let a = self.expr(&i.expr, None);
                let ix = self.expr(&i.index, Some("symm_u64"));
                format!("{a}[{ix}]")
            }
            Expr::MethodCall(m) => self.method(m, expect),
            Expr::Call(c) => self.call(c, expect),
            Expr::If(i) => self.if_value(i, expect),
            Expr::Block(b) => {
                if b.label.is_some() {
                    return self.err(b, "block labels are not supported in kernels; use `if` to skip code");
                }
                self.lambda(&b.block, expect)
            }
            Expr::Array(a) => {
                let et = self.array_elem_ty(expect, a.elems.iter().find(|x| !is_unsuffixed_lit(x)));
                let vals: Vec<String> = a
                    .elems
                    .iter()
                    .map(|x| self.expr(x, et.as_deref()))
                    .collect();
                match et {
                    Some(t) => format!("symm_array<{t}, {}ULL>{{{{{}}}}}", vals.len(), vals.join(", ")),
                    None => self.err(a, "cannot infer this array's element type; annotate the `let` or suffix a literal"),
                }
            }
            Expr::Repeat(r) => {
                let et =
                    self.array_elem_ty(expect, (!is_unsuffixed_lit(&r.expr)).then_some(&*r.expr));
                let v = self.expr(&r.expr, et.as_deref());
                let n = self.const_expr(&r.len);
                match et {
                    Some(t) => format!("symm_array_fill<{t}, {n}>({v})"),
                    None => self.err(r, "cannot infer this array's element type; annotate the `let` or suffix a literal"),
                }
            }
            Expr::Reference(r) => self.err(r,
                "references are not supported in kernel bodies; pass values or slices",
            ),
            Expr::Closure(c) => self.err(c,
                "closures are not supported in kernels; write a `#[symm_kernel(device)]` function",
            ),
            Expr::Match(m) => self.err(m,
                "`match` is not supported in kernels; use `if`/`else`",
            ),
            Expr::Tuple(t) => self.err(t,
                "tuples are not supported in kernels; use separate variables or an array",
            ),
            Expr::Struct(s) => self.err(s, "struct literals are not supported in kernels; pass the fields as separate parameters or variables"),
            Expr::Field(f) => self.err(f,
                "field access is not supported in kernels; pass the field as its own parameter (DSL handles offer methods such as `len()` and `rank()`)",
            ),
            Expr::Macro(m) => self.err(m,
                "macros are not supported in kernels (no println!, assert!, ...)",
            ),
            Expr::Range(r) => self.err(r, "ranges are only supported as `for` loop bounds"),
            Expr::Unsafe(u) => self.err(u, "`unsafe` blocks are not supported in kernels; the DSL has no unsafe operations, so write the code without `unsafe`"),
            Expr::Try(t) => self.err(t, "`?` is not supported in kernels"),
            Expr::Async(a) => self.err(a, "`async` is not supported in kernels"),
            Expr::Await(a) => self.err(a, "`.await` is not supported in kernels"),
            Expr::Let(l) => self.err(l,
                "`let` expressions (`if let`, `while let`) are not supported in kernels",
            ),
            Expr::While(_) | Expr::Loop(_) | Expr::ForLoop(_) => self.err(e,
                "loops cannot be used as values in kernels; use them as statements",
            ),
            Expr::Return(_) | Expr::Break(_) | Expr::Continue(_) => self.err(e,
                "`return`, `break` and `continue` must be statements in kernels",
            ),
            other => self.err(other, "this expression is not supported in kernels"),
        }
    }

    fn array_elem_ty(&self, expect: Option<&str>, sample: Option<&Expr>) -> Option<String> {
        if let Some(t) = expect {
            if let Some(inner) = t.strip_prefix("symm_array<") {
                // `symm_array<E, N>`: E is everything before the last comma.
                if let Some(i) = inner.rfind(',') {
                    return Some(inner[..i].trim().to_string());
                }
            }
        }
        sample.and_then(|s| self.static_ty(s))
    }

    /// An assignable place.
    fn place(&mut self, e: &Expr) -> String {
        match e {
            Expr::Path(_) | Expr::Index(_) => self.expr(e, None),
            Expr::Paren(p) => self.place(&p.expr),
            other => self.err(
                other,
                "only variables and indexed elements can be assigned in kernels",
            ),
        }
    }

    fn path(&mut self, p: &syn::ExprPath) -> String {
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        if segs.len() == 1 {
            let id = &p.path.segments[0].ident;
            if let Some(l) = self.lookup(&id.to_string()) {
                return l.cpp.clone();
            }
            if self
                .sig
                .generics
                .iter()
                .any(|g| matches!(g, Generic::Const(c, _) if c == id))
            {
                return generic_name(id);
            }
            return self.err(id,
                format!("`{id}` is not a local variable, parameter or const generic; kernels can only read those (pass other values as parameters)"),
            );
        }
        if segs.len() == 2 {
            let (ty, c) = (segs[0].as_str(), segs[1].as_str());
            let int_bounds = |t: &str| -> Option<(&str, &str)> {
                Some(match t {
                    "u8" => ("0", "255"),
                    "u16" => ("0", "65535"),
                    "u32" => ("0", "4294967295"),
                    "u64" | "usize" => ("0", "18446744073709551615"),
                    "i32" => ("-2147483648", "2147483647"),
                    "i64" | "isize" => ("(-9223372036854775807LL - 1)", "9223372036854775807"),
                    _ => return None,
                })
            };
            if let (Some((lo, hi)), Some(cpp)) = (int_bounds(ty), suffix_cpp(ty)) {
                match c {
                    "MAX" => return format!("(({cpp}){hi}ULL)"),
                    "MIN" if lo.starts_with('(') => return format!("(({cpp}){lo})"),
                    "MIN" => return format!("(({cpp})({lo}LL))"),
                    _ => {}
                }
            }
            let float = |bits32: &str, bits64: &str| match ty {
                "f32" => Some(format!("symm_f32_from_bits({bits32}u)")),
                "f64" => Some(format!("symm_f64_from_bits({bits64}ULL)")),
                _ => None,
            };
            let v = match c {
                "INFINITY" => float("0x7f800000", "0x7ff0000000000000"),
                "NEG_INFINITY" => float("0xff800000", "0xfff0000000000000"),
                "NAN" => float("0x7fc00000", "0x7ff8000000000000"),
                "MAX" => float("0x7f7fffff", "0x7fefffffffffffff"),
                "MIN" => float("0xff7fffff", "0xffefffffffffffff"),
                "EPSILON" => float("0x34000000", "0x3cb0000000000000"),
                _ => None,
            };
            if let Some(v) = v {
                return v;
            }
        }
        if p.path.segments.len() >= 2 {
            let enum_name = p.path.segments[p.path.segments.len() - 2].ident.to_string();
            if ["LoadOrder", "StoreOrder", "RmwOrder", "Scope"].contains(&enum_name.as_str()) {
                return self.err(p, format!("`{enum_name}` values cannot be stored; write them inline where they are used, as in `x.load(i, LoadOrder::Acquire, Scope::System)`"));
            }
        }
        self.err(p, "unsupported path in a kernel; kernels read locals, parameters, const generics and `u32::MAX`-style constants")
    }

    fn binary(&mut self, b: &syn::ExprBinary, expect: Option<&str>) -> String {
        let op = op_str(&b.op);
        let cmp_or_logic = is_cmp(&b.op) || matches!(b.op, BinOp::And(_) | BinOp::Or(_));
        let shift = matches!(
            b.op,
            BinOp::Shl(_) | BinOp::Shr(_) | BinOp::ShlAssign(_) | BinOp::ShrAssign(_)
        );
        let assign = matches!(
            b.op,
            BinOp::AddAssign(_)
                | BinOp::SubAssign(_)
                | BinOp::MulAssign(_)
                | BinOp::DivAssign(_)
                | BinOp::RemAssign(_)
                | BinOp::BitAndAssign(_)
                | BinOp::BitOrAssign(_)
                | BinOp::BitXorAssign(_)
                | BinOp::ShlAssign(_)
                | BinOp::ShrAssign(_)
        );
        if matches!(b.op, BinOp::And(_) | BinOp::Or(_)) {
            let l = self.expr(&b.left, Some("bool"));
            let r = self.expr(&b.right, Some("bool"));
            return format!("({l} {op} {r})");
        }
        if assign {
            let l = self.place(&b.left);
            let lt = self
                .static_ty(&b.left)
                .unwrap_or_else(|| format!("SYMM_TY({l})"));
            let r = if shift {
                self.expr(&b.right, None)
            } else {
                self.expr(&b.right, Some(&lt))
            };
            return format!("{l} {op} {r}");
        }
        // Literal operands take the other side's type, as Rust infers.
        let outer = if cmp_or_logic { None } else { expect };
        let (l_lit, r_lit) = (is_unsuffixed_lit(&b.left), is_unsuffixed_lit(&b.right));
        let (l, r) = if shift {
            (self.expr(&b.left, outer), self.expr(&b.right, None))
        } else if l_lit && !r_lit {
            let r = self.expr(&b.right, outer);
            let t = self
                .static_ty(&b.right)
                .unwrap_or_else(|| format!("SYMM_TY({r})"));
            (self.expr(&b.left, Some(&t)), r)
        } else if r_lit && !l_lit {
            let l = self.expr(&b.left, outer);
            let t = self
                .static_ty(&b.left)
                .unwrap_or_else(|| format!("SYMM_TY({l})"));
            (l, self.expr(&b.right, Some(&t)))
        } else {
            let t = outer
                .map(String::from)
                .or_else(|| self.static_ty(&b.left))
                .or_else(|| self.static_ty(&b.right));
            (
                self.expr(&b.left, t.as_deref()),
                self.expr(&b.right, t.as_deref()),
            )
        };
        if matches!(b.op, BinOp::Rem(_)) {
            return format!("symm_rem({l}, {r})");
        }
        format!("({l} {op} {r})")
    }

    fn if_value(&mut self, i: &syn::ExprIf, expect: Option<&str>) -> String {
        if let Expr::Let(l) = &*i.cond {
            return self.err(l, "`if let` is not supported in kernels; use a condition");
        }
        let Some((_, else_e)) = &i.else_branch else {
            return self.err(i, "an `if` used as a value needs an `else` branch");
        };
        let then_tail = (i.then_branch.stmts.len() == 1)
            .then(|| block_tail(&i.then_branch))
            .flatten();
        let else_tail = match &**else_e {
            Expr::Block(b) if b.block.stmts.len() == 1 => block_tail(&b.block),
            _ => None,
        };
        let c = self.expr(&i.cond, Some("bool"));
        if let (Some(a), Some(b)) = (then_tail, else_tail) {
            let t = expect
                .map(String::from)
                .or_else(|| self.static_ty(a))
                .or_else(|| self.static_ty(b))
                .or_else(|| (!is_unsuffixed_lit(a)).then(|| format!("SYMM_TY({})", self.peek(a))))
                .or_else(|| (!is_unsuffixed_lit(b)).then(|| format!("SYMM_TY({})", self.peek(b))));
            let (x, y) = (self.expr(a, t.as_deref()), self.expr(b, t.as_deref()));
            return format!("(({c}) ? ({x}) : ({y}))");
        }
        // General form: an immediately-invoked lambda returning the value.
        let rt = expect
            .map(String::from)
            .or_else(|| block_tail(&i.then_branch).and_then(|t| self.static_ty(t)));
        self.in_lambda += 1;
        let t = self.lambda_body(&i.then_branch, rt.as_deref());
        let e = match &**else_e {
            Expr::Block(b) => self.lambda_body(&b.block, rt.as_deref()),
            other => {
                let v = self.expr(other, rt.as_deref());
                format!("{{ return {v}; }}")
            }
        };
        self.in_lambda -= 1;
        let arrow = rt.map(|t| format!(" -> {t}")).unwrap_or_default();
        format!("([&](){arrow} {{ if ({c}) {t} else {e} }}())")
    }

    fn lambda(&mut self, b: &Block, expect: Option<&str>) -> String {
        let rt = expect
            .map(String::from)
            .or_else(|| block_tail(b).and_then(|t| self.static_ty(t)));
        self.in_lambda += 1;
        let body = self.lambda_body(b, rt.as_deref());
        self.in_lambda -= 1;
        let arrow = rt.map(|t| format!(" -> {t}")).unwrap_or_default();
        format!("([&](){arrow} {body}())")
    }

    fn lambda_body(&mut self, b: &Block, rt: Option<&str>) -> String {
        self.scopes.push(HashMap::new());
        let mut out = String::from("{\n");
        let n = b.stmts.len();
        for (i, s) in b.stmts.iter().enumerate() {
            match s {
                Stmt::Expr(e, None) if i + 1 == n => {
                    let v = self.expr(e, rt);
                    let _ = writeln!(out, "return {v};");
                }
                _ => out += &self.stmt(s),
            }
        }
        if block_tail(b).is_none() {
            self.err(b, "a block used as a value must end with an expression");
        }
        out += "}";
        self.scopes.pop();
        out
    }

    fn call(&mut self, c: &syn::ExprCall, expect: Option<&str>) -> String {
        let Expr::Path(p) = &*c.func else {
            return self.err(&c.func, "only named functions can be called in kernels");
        };
        let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
        let last = match segs.last() {
            Some(l) => *l,
            None => return self.err(p, "empty path"),
        };
        let name = last.ident.to_string();
        // `T::from_f32(x)`, `f32::from_bits(u)`, ...
        if segs.len() == 2 {
            let ty_seg = &segs[0].ident;
            let ty = parse::scalar(&syn::parse_quote!(#ty_seg), &self.sig.generics).ok();
            if let Some(ty) = ty {
                let cty = scalar_cpp(&ty);
                let args: Vec<String> = c.args.iter().map(|a| self.expr(a, None)).collect();
                return match (name.as_str(), args.len()) {
                    ("from_f32", 1) => format!("symm_from_f32<{cty}>({})", args[0]),
                    ("from_bits32", 1) => format!("symm_from_bits32<{cty}>((symm_u32)({}))", args[0]),
                    ("from_bits", 1) => match cty.as_str() {
                        "float" => format!("symm_f32_from_bits((symm_u32)({}))", args[0]),
                        "double" => format!("symm_f64_from_bits((symm_u64)({}))", args[0]),
                        "symm_bf16" => format!("symm_bf16_from_bits((symm_u16)({}))", args[0]),
                        "symm_f16" => format!("symm_f16_from_bits((symm_u16)({}))", args[0]),
                        _ => self.err(c, "`from_bits` exists for f32, f64, bf16 and f16"),
                    },
                    ("zero", 0) => format!("symm_from_f32<{cty}>(0.0f)"),
                    ("one", 0) => format!("symm_from_f32<{cty}>(1.0f)"),
                    _ => self.err(c, format!("`{ty_seg}::{name}` is not supported in kernels; supported: from_f32, from_bits, zero, one")),
                };
            }
        }
        let intrinsic_path = segs.len() == 1
            || segs
                .iter()
                .take(segs.len() - 1)
                .all(|s| s.ident == "symm" || s.ident == "dsl" || s.ident == "crate");
        if intrinsic_path {
            if name == "shared_array" {
                return self.err(c, "`shared_array` must be the whole initialiser of a `let`: `let s = shared_array::<f32, 256>();`");
            }
            if let Some((_, arity, template, _)) = INTRINSICS.iter().find(|i| i.0 == name) {
                if c.args.len() != *arity {
                    return self.err(c, format!("`{name}` takes {arity} argument(s)"));
                }
                // Literal arguments take the type of the first typed argument.
                let typed = c.args.iter().find(|a| !is_unsuffixed_lit(a));
                let t = match typed {
                    Some(a) => self
                        .static_ty(a)
                        .or_else(|| Some(format!("SYMM_TY({})", self.peek(a)))),
                    None => expect.map(String::from),
                };
                let args: Vec<String> = c.args.iter().map(|a| self.expr(a, t.as_deref())).collect();
                return fill(template, &args);
            }
            if name == "fence" {
                let scope = match c.args.first() {
                    Some(a) => self.scope_arg(a),
                    None => return self.err(c, "`fence` takes a scope: `fence(Scope::System)`"),
                };
                return format!("symm_fence<{scope}>()");
            }
        }
        // A device function: its expansion left a module of the same name
        // holding `DEVICE`, which the kernel's source list refers to.
        let mut dep = p.path.clone();
        if let Some(l) = dep.segments.last_mut() {
            l.arguments = syn::PathArguments::None;
        }
        self.deps.push(dep);
        let targs = match &last.arguments {
            syn::PathArguments::AngleBracketed(a) => {
                let mut v = Vec::new();
                for ga in &a.args {
                    v.push(match ga {
                        syn::GenericArgument::Type(t) => match parse::scalar(t, &self.sig.generics)
                        {
                            Ok(s) => scalar_cpp(&s),
                            Err(e) => {
                                // `f::<N>` parses N as a type: treat it as a const.
                                match t {
                                    syn::Type::Path(tp) if tp.path.segments.len() == 1 => {
                                        let e2: Expr = syn::parse_quote!(#tp);
                                        self.const_expr(&e2)
                                    }
                                    _ => {
                                        self.errors.push(e);
                                        "0".into()
                                    }
                                }
                            }
                        },
                        syn::GenericArgument::Const(e) => self.const_expr(e),
                        other => self.err(other, "unsupported generic argument"),
                    });
                }
                format!("<{}>", v.join(", "))
            }
            _ => String::new(),
        };
        let mut args = vec!["__ctx".to_string()];
        for a in &c.args {
            args.push(self.expr(a, None));
        }
        format!("{}{targs}({})", fn_name(&last.ident), args.join(", "))
    }

    fn order_arg(&mut self, e: &Expr, enum_name: &str) -> String {
        if let Expr::Path(p) = strip(e) {
            let segs: Vec<String> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            if segs.len() >= 2 && segs[segs.len() - 2] == enum_name {
                let v = segs[segs.len() - 1].as_str();
                let ok = match enum_name {
                    "LoadOrder" => ["Relaxed", "Acquire", "Volatile"].contains(&v),
                    "StoreOrder" => ["Relaxed", "Release", "Volatile"].contains(&v),
                    _ => ["Relaxed", "Acquire", "Release", "AcqRel"].contains(&v),
                };
                if ok {
                    return match v {
                        "Relaxed" => "SYMM_RELAXED",
                        "Acquire" => "SYMM_ACQUIRE",
                        "Release" => "SYMM_RELEASE",
                        "AcqRel" => "SYMM_ACQ_REL",
                        _ => "SYMM_VOLATILE",
                    }
                    .into();
                }
            }
        }
        self.err(
            e,
            format!(
                "the ordering must be written out as a constant, such as `{enum_name}::Relaxed`"
            ),
        )
    }

    fn scope_arg(&mut self, e: &Expr) -> String {
        if let Expr::Path(p) = strip(e) {
            let segs: Vec<String> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            if segs.len() >= 2 && segs[segs.len() - 2] == "Scope" {
                match segs[segs.len() - 1].as_str() {
                    "Block" => return "SYMM_CTA".into(),
                    "Gpu" => return "SYMM_GPU".into(),
                    "System" => return "SYMM_SYS".into(),
                    _ => {}
                }
            }
        }
        self.err(e, "the scope must be written out as a constant: `Scope::Block`, `Scope::Gpu` or `Scope::System`")
    }

    fn method(&mut self, m: &syn::ExprMethodCall, expect: Option<&str>) -> String {
        let name = m.method.to_string();
        let r = self.expr(&m.receiver, None);
        let n = m.args.len();
        let arity = |want: usize| n == want;
        let turbofish: Option<String> = m
            .turbofish
            .as_ref()
            .map(|t| {
                t.args
                    .iter()
                    .map(|a| match a {
                        syn::GenericArgument::Const(e) => e.clone(),
                        syn::GenericArgument::Type(syn::Type::Path(tp)) => syn::parse_quote!(#tp),
                        _ => syn::parse_quote!(0),
                    })
                    .collect::<Vec<Expr>>()
            })
            .map(|es| {
                es.iter()
                    .map(|e| self.const_expr(e))
                    .collect::<Vec<_>>()
                    .join(", ")
            });
        let a = |t: &mut Self, i: usize, expect: Option<&str>| t.expr(&m.args[i], expect);
        let recv_ty = self
            .static_ty(&m.receiver)
            .unwrap_or_else(|| format!("SYMM_TY({r})"));
        match (name.as_str(), n) {
            ("len", 0) => format!("symm_len({r})"),
            ("is_empty", 0) => format!("(symm_len({r}) == 0)"),
            ("peer", 1) => format!("symm_peer({r}, {})", a(self, 0, Some("symm_u32"))),
            ("local", 0) => format!("symm_local({r})"),
            ("pad", 1) => format!("symm_pad({r}, {})", a(self, 0, Some("symm_u32"))),
            ("rank", 0) => format!("symm_rank({r})"),
            ("world_size", 0) => format!("symm_world({r})"),
            ("put_signal", 2) => format!("symm_dsl_put_signal(__ctx, {r}, {}, {})", a(self, 0, Some("symm_u32")), a(self, 1, Some("symm_u32"))),
            ("wait_signal", 2) => format!("symm_dsl_wait_signal(__ctx, {r}, {}, {})", a(self, 0, Some("symm_u32")), a(self, 1, Some("symm_u32"))),
            ("put_signal_within" | "wait_signal_within", 4) => {
                let (x, c) = (a(self, 0, Some("symm_u32")), a(self, 1, Some("symm_u32")));
                let (t, k) = (a(self, 2, Some("symm_u64")), a(self, 3, Some("symm_u32")));
                format!("symm_dsl_{name}(__ctx, {r}, {x}, {c}, {t}, {k})")
            }
            ("signal_flag" | "wait_flag", 3) => {
                let (x, c, v) = (a(self, 0, Some("symm_u32")), a(self, 1, Some("symm_u32")), a(self, 2, Some("symm_u32")));
                format!("symm_dsl_{name}(__ctx, {r}, {x}, {c}, {v})")
            }
            ("load", 3) => {
                let (i, o, s) = (a(self, 0, Some("symm_u64")), self.order_arg(&m.args[1], "LoadOrder"), self.scope_arg(&m.args[2]));
                format!("symm_dsl_load<{o}, {s}>({r}, {i})")
            }
            ("store", 4) => {
                let (i, v) = (a(self, 0, Some("symm_u64")), a(self, 1, None));
                let (o, s) = (self.order_arg(&m.args[2], "StoreOrder"), self.scope_arg(&m.args[3]));
                format!("symm_dsl_store<{o}, {s}>({r}, {i}, {v})")
            }
            ("atomic_add" | "atomic_exch" | "atomic_max" | "atomic_min", 4) => {
                let (i, v) = (a(self, 0, Some("symm_u64")), a(self, 1, None));
                let (o, s) = (self.order_arg(&m.args[2], "RmwOrder"), self.scope_arg(&m.args[3]));
                format!("symm_dsl_{}<{o}, {s}>({r}, {i}, {v})", &name["atomic_".len()..])
            }
            ("atomic_cas", 5) => {
                let (i, c, v) = (a(self, 0, Some("symm_u64")), a(self, 1, None), a(self, 2, None));
                let (o, s) = (self.order_arg(&m.args[3], "RmwOrder"), self.scope_arg(&m.args[4]));
                format!("symm_dsl_cas<{o}, {s}>({r}, {i}, {c}, {v})")
            }
            ("load_vec" | "load_vec_volatile", 1) => match turbofish {
                Some(t) => {
                    let i = a(self, 0, Some("symm_u64"));
                    format!("symm_dsl_{name}<{t}>({r}, {i})")
                }
                None => self.err(m, format!("write the vector width: `.{name}::<4>(i)`")),
            },
            ("load_vec_ready", 3) => match turbofish {
                Some(t) => {
                    let (i, e, f) = (a(self, 0, Some("symm_u64")), a(self, 1, None), a(self, 2, Some("symm_u32")));
                    format!("symm_dsl_load_vec_ready<{t}>(__ctx, {r}, {i}, {e}, {f})")
                }
                None => self.err(m, "write the vector width: `.load_vec_ready::<8>(i, empty, from)`".to_string()),
            },
            ("gather_ready", 4) => match turbofish {
                Some(t) => {
                    let (i, st) = (a(self, 0, Some("symm_u64")), a(self, 1, Some("symm_u64")));
                    let (rk, e) = (a(self, 2, Some("symm_u32")), a(self, 3, None));
                    format!("symm_dsl_gather_ready<{t}>(__ctx, {r}, {i}, {st}, {rk}, {e})")
                }
                None => self.err(m, "write the vector width: `.gather_ready::<8>(first, stride, ranks, empty)`".to_string()),
            },
            ("gather_tagged2", 4) => {
                let (i, st) = (a(self, 0, Some("symm_u64")), a(self, 1, Some("symm_u64")));
                let (rk, t) = (a(self, 2, Some("symm_u32")), a(self, 3, Some("symm_u32")));
                format!("symm_dsl_gather_tagged2(__ctx, {r}, {i}, {st}, {rk}, {t})")
            }
            ("store_vec" | "store_vec_volatile", 2) => {
                let i = a(self, 0, Some("symm_u64"));
                let v = a(self, 1, None);
                format!("symm_dsl_{name}({r}, {i}, {v})")
            }
            ("to_f32", 0) => format!("symm_to_f32({r})"),
            ("to_bits32", 0) => format!("symm_to_bits32({r})"),
            ("load_tagged2", 3) => {
                let (i, t, f) = (a(self, 0, Some("symm_u64")), a(self, 1, Some("symm_u32")), a(self, 2, Some("symm_u32")));
                format!("symm_dsl_load_tagged2(__ctx, {r}, {i}, {t}, {f})")
            }
            ("load_tagged", 3) => {
                let (i, t, f) = (a(self, 0, Some("symm_u64")), a(self, 1, Some("symm_u32")), a(self, 2, Some("symm_u32")));
                format!("symm_dsl_load_tagged(__ctx, {r}, {i}, {t}, {f})")
            }
            ("to_bits", 0) => format!("symm_to_bits({r})"),
            ("min" | "max", 1) => format!("symm_{name}({r}, {})", a(self, 0, Some(&recv_ty))),
            ("abs", 0) => format!("symm_abs({r})"),
            ("sqrt", 0) => format!("symm_sqrt({r})"),
            ("mul_add" | "fma", 2) => {
                let (b, c) = (a(self, 0, Some(&recv_ty)), a(self, 1, Some(&recv_ty)));
                format!("symm_fma({r}, {b}, {c})")
            }
            ("wrapping_add" | "wrapping_sub" | "wrapping_mul", 1) => {
                let b = a(self, 0, Some(&recv_ty));
                let _ = expect;
                format!("symm_{name}({r}, {b})")
            }
            _ if !arity(usize::MAX) => self.err(&m.method,
                format!("method `{name}` with {n} argument(s) is not supported in kernels; see the symm::dsl docs for the supported methods"),
            ),
            _ => unreachable!(),
        }
    }
}

fn is_control(e: &Expr) -> bool {
    matches!(
        e,
        Expr::If(_)
            | Expr::While(_)
            | Expr::Loop(_)
            | Expr::ForLoop(_)
            | Expr::Block(_)
            | Expr::Return(_)
    )
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        other => other,
    }
}

fn call_name(f: &Expr) -> Option<String> {
    match f {
        Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
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

fn op_str(op: &BinOp) -> &'static str {
    match op {
        BinOp::Add(_) => "+",
        BinOp::Sub(_) => "-",
        BinOp::Mul(_) => "*",
        BinOp::Div(_) => "/",
        BinOp::Rem(_) => "%",
        BinOp::And(_) => "&&",
        BinOp::Or(_) => "||",
        BinOp::BitXor(_) => "^",
        BinOp::BitAnd(_) => "&",
        BinOp::BitOr(_) => "|",
        BinOp::Shl(_) => "<<",
        BinOp::Shr(_) => ">>",
        BinOp::Eq(_) => "==",
        BinOp::Lt(_) => "<",
        BinOp::Le(_) => "<=",
        BinOp::Ne(_) => "!=",
        BinOp::Ge(_) => ">=",
        BinOp::Gt(_) => ">",
        BinOp::AddAssign(_) => "+=",
        BinOp::SubAssign(_) => "-=",
        BinOp::MulAssign(_) => "*=",
        BinOp::DivAssign(_) => "/=",
        BinOp::RemAssign(_) => "%=",
        BinOp::BitXorAssign(_) => "^=",
        BinOp::BitAndAssign(_) => "&=",
        BinOp::BitOrAssign(_) => "|=",
        BinOp::ShlAssign(_) => "<<=",
        BinOp::ShrAssign(_) => ">>=",
        _ => "?",
    }
}

/// Declares every name bound by `pat` (after a rejected pattern).
fn declare_pattern_names(t: &mut Translator, pat: &Pat) {
    match pat {
        Pat::Ident(pi) => {
            t.declare(&pi.ident, None);
        }
        Pat::Tuple(tp) => tp.elems.iter().for_each(|p| declare_pattern_names(t, p)),
        Pat::Type(pt) => declare_pattern_names(t, &pt.pat),
        Pat::Paren(pp) => declare_pattern_names(t, &pp.pat),
        Pat::Reference(r) => declare_pattern_names(t, &r.pat),
        Pat::Slice(sp) => sp.elems.iter().for_each(|p| declare_pattern_names(t, p)),
        Pat::TupleStruct(ts) => ts.elems.iter().for_each(|p| declare_pattern_names(t, p)),
        Pat::Struct(ps) => ps
            .fields
            .iter()
            .for_each(|f| declare_pattern_names(t, &f.pat)),
        _ => {}
    }
}
