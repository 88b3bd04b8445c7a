//! Lowering calls: scalar associated functions, intrinsics, device
//! functions and methods.

use syn::Expr as SynExpr;

use super::syntax::{is_unsuffixed_lit, lit_only, strip};
use super::{scalar_type, Lowerer};
use crate::parse;
use crate::translate::intrinsics::{self, Arg, Intrinsic};
use crate::translate::ir::{CType, Callee, Expr, ExprKind, Len, Order, ScalarFn, TemplateArg};
use crate::translate::prim::{CPrim, Scope};

/// A float type for `from_bits`, and the integer type of its bits.
fn float_bits(ty: &CType) -> Option<(CPrim, CPrim)> {
    let CType::Prim(p) = ty else { return None };
    let bits = match p {
        CPrim::F32 => CPrim::U32,
        CPrim::F64 => CPrim::U64,
        CPrim::Bf16 | CPrim::F16 => CPrim::U16,
        CPrim::F8e4m3 | CPrim::F8e5m2 => CPrim::U8,
        _ => return None,
    };
    Some((*p, bits))
}

/// What a kernel writes instead of a standard-library function named
/// `name` (`std::cmp::min`, `f32::sqrt`, ...), where the DSL has one.
fn dsl_form(name: &str) -> Option<&'static str> {
    Some(match name {
        "min" => "`min(a, b)` (or `a.min(b)`)",
        "max" => "`max(a, b)` (or `a.max(b)`)",
        "clamp" => "`min(max(x, lo), hi)`",
        "abs" => "`abs(x)` (or `x.abs()`)",
        "sqrt" => "`x.sqrt()`",
        "mul_add" | "fma" => "`fma(a, b, c)` (or `a.mul_add(b, c)`)",
        "fence" => "`fence(Scope::System)` (or `Scope::Gpu`, `Scope::Block`)",
        "wrapping_add" => "`a.wrapping_add(b)`",
        "wrapping_sub" => "`a.wrapping_sub(b)`",
        "wrapping_mul" => "`a.wrapping_mul(b)`",
        "to_bits" => "`x.to_bits()`",
        "to_f32" => "`x.to_f32()`",
        _ => return None,
    })
}

/// Whether the path `segs` names a standard-library function, which
/// kernels cannot call: any path from `std`, `core` or `alloc`, and
/// `cmp::min`, `Ord::max` and the like (after `use std::cmp;`; a module of
/// the user's named `cmp` may hold other functions).
fn is_std_path(segs: &[&syn::PathSegment], name: &str) -> bool {
    let root = segs[0].ident.to_string();
    segs.len() > 1
        && (["std", "core", "alloc"].contains(&root.as_str())
            || (["cmp", "Ord", "PartialOrd"].contains(&root.as_str())
                && ["min", "max", "clamp"].contains(&name)))
}

impl Lowerer<'_> {
    /// A call of a free or associated function.
    pub(super) fn call(&mut self, c: &syn::ExprCall, expect: Option<&CType>) -> ExprKind {
        let SynExpr::Path(p) = &*c.func else {
            return self.reject(&c.func, "only named functions can be called in kernels");
        };
        let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
        let Some(last) = segs.last().copied() else {
            return self.reject(p, "empty path");
        };
        let name = last.ident.to_string();
        // `std::cmp::min(a, b)` would reach rustc as a device function
        // `std::cmp::min::DEVICE`, whose error ("cannot find `min` in
        // `cmp`") says nothing about kernels.
        if is_std_path(&segs, &name) {
            let shown = path_text(&p.path);
            let msg = match dsl_form(&name) {
                Some(instead) => format!(
                    "`{shown}` is not available in kernels (they run without the standard library); write {instead}, from `symm::dsl`"
                ),
                None => format!(
                    "`{shown}` is not available in kernels (they run without the standard library); kernels call `symm::dsl` intrinsics and `#[symm_kernel(device)]` functions"
                ),
            };
            return self.reject(p, msg);
        }
        // `T::from_f32(x)`, `f32::from_bits(u)`, ...
        if segs.len() == 2 {
            let ty_seg = &segs[0].ident;
            if let Ok(ty) = parse::scalar(&syn::parse_quote!(#ty_seg), &self.sig.generics) {
                let ty = scalar_type(&ty);
                let args: Vec<Expr> = c.args.iter().map(|a| self.expr(a, None)).collect();
                let func = match (name.as_str(), args.len()) {
                    ("from_f32", 1) => ScalarFn::FromF32,
                    ("from_bits32", 1) => ScalarFn::FromBits32,
                    ("from_bits64", 1) => ScalarFn::FromBits64,
                    ("from_bits", 1) => match float_bits(&ty) {
                        Some((ty, bits)) => ScalarFn::FromBits { ty, bits },
                        None => {
                            return self.reject(
                                c,
                                "`from_bits` exists for f32, f64, bf16, f16, f8e4m3 and f8e5m2",
                            )
                        }
                    },
                    ("zero", 0) => ScalarFn::Zero,
                    ("one", 0) => ScalarFn::One,
                    _ => {
                        let instead = dsl_form(&name)
                            .map(|f| format!("; for `{name}` write {f}"))
                            .unwrap_or_default();
                        return self.reject(p, format!("`{ty_seg}::{name}` is not supported in kernels; supported: from_f32, from_bits, from_bits32, from_bits64, zero, one{instead}"));
                    }
                };
                return ExprKind::ScalarFn { ty, func, args };
            }
        }
        let intrinsic_path = segs.len() == 1
            || segs
                .iter()
                .take(segs.len() - 1)
                .all(|s| s.ident == "symm" || s.ident == "dsl" || s.ident == "crate");
        if intrinsic_path {
            if name == "shared_array" {
                return self.reject(c, "`shared_array` must be the whole initialiser of a `let`: `let s = shared_array::<f32, 256>();`");
            }
            if let Some(def) = intrinsics::lookup(&name) {
                if c.args.len() != def.arity {
                    return self.reject(c, format!("`{name}` takes {} argument(s)", def.arity));
                }
                // Literal arguments take the type of the first typed argument.
                let t = match c.args.iter().find(|a| !is_unsuffixed_lit(a)) {
                    Some(a) => self.static_ty(a).or_else(|| Some(self.type_of(a))),
                    None => expect.cloned(),
                };
                let args = c.args.iter().map(|a| self.expr(a, t.as_ref())).collect();
                return ExprKind::Call {
                    callee: p.path.clone(),
                    target: Callee::Intrinsic(Intrinsic::Fn(def)),
                    args,
                };
            }
            if name == "fence" {
                let Some(a) = c.args.first() else {
                    return self.reject(c, "`fence` takes a scope: `fence(Scope::System)`");
                };
                return match self.scope_arg(a) {
                    Some(scope) => ExprKind::Call {
                        callee: p.path.clone(),
                        target: Callee::Intrinsic(Intrinsic::Fence(scope)),
                        args: vec![],
                    },
                    None => ExprKind::Error,
                };
            }
        }
        // A device function: its expansion left a module of the same name
        // holding `DEVICE`, which the kernel's source list refers to.
        let own = segs.len() == 1 || (segs.len() == 2 && segs[0].ident == "self");
        if own && last.ident == self.sig.name {
            return self.reject(
                c,
                "device functions cannot call themselves: recursion is not supported in kernels (a GPU thread's stack is small and fixed); write a loop",
            );
        }
        let mut dep = p.path.clone();
        if let Some(l) = dep.segments.last_mut() {
            l.arguments = syn::PathArguments::None;
        }
        let index = self.dep_index(dep);
        let targs = match &last.arguments {
            syn::PathArguments::AngleBracketed(a) => Some(self.template_args(&a.args)),
            _ => None,
        };
        let args = c.args.iter().map(|a| self.expr(a, None)).collect();
        ExprKind::Call {
            callee: p.path.clone(),
            target: Callee::Device { index, targs },
            args,
        }
    }

    /// The index of the device function `dep` among the kernel's
    /// dependencies (its C calls the `i`th as `d<i>`), added if new.
    fn dep_index(&mut self, dep: syn::Path) -> usize {
        let key = quote::quote!(#dep).to_string();
        match self
            .deps
            .iter()
            .position(|d| quote::quote!(#d).to_string() == key)
        {
            Some(i) => i,
            None => {
                self.deps.push(dep);
                self.deps.len() - 1
            }
        }
    }

    /// The template arguments of a device function call.
    fn template_args(
        &mut self,
        args: &syn::punctuated::Punctuated<syn::GenericArgument, syn::Token![,]>,
    ) -> Vec<TemplateArg> {
        args.iter().map(|ga| self.template_arg(ga)).collect()
    }

    /// A template argument of a device function call.
    fn template_arg(&mut self, ga: &syn::GenericArgument) -> TemplateArg {
        match ga {
            syn::GenericArgument::Type(t) => match parse::scalar(t, &self.sig.generics) {
                Ok(s) => TemplateArg::Type(scalar_type(&s)),
                // `f::<N>` parses N as a type: treat it as a const.
                Err(e) => match t {
                    syn::Type::Path(tp) if tp.path.segments.len() == 1 => {
                        let e2: SynExpr = syn::parse_quote!(#tp);
                        TemplateArg::Len(self.len(&e2))
                    }
                    _ => {
                        self.errors.push(e);
                        TemplateArg::Len(Len::Error)
                    }
                },
            },
            syn::GenericArgument::Const(e) => TemplateArg::Len(self.len(e)),
            other => {
                self.err(other, "unsupported generic argument");
                TemplateArg::Len(Len::Error)
            }
        }
    }

    /// An ordering argument: a constant of `enum_name`.
    fn order_arg(&mut self, e: &SynExpr, enum_name: &str) -> Option<Order> {
        if let Some(v) = enum_const(e, enum_name) {
            let allowed: &[&str] = match enum_name {
                "LoadOrder" => &["Relaxed", "Acquire", "Volatile"],
                "StoreOrder" => &["Relaxed", "Release", "Volatile"],
                _ => &["Relaxed", "Acquire", "Release", "AcqRel"],
            };
            let v = v.as_str();
            if allowed.contains(&v) {
                return Some(match v {
                    "Relaxed" => Order::Relaxed,
                    "Acquire" => Order::Acquire,
                    "Release" => Order::Release,
                    "AcqRel" => Order::AcqRel,
                    _ => Order::Volatile,
                });
            }
        }
        self.err(
            e,
            format!(
                "the ordering must be written out as a constant, such as `{enum_name}::Relaxed`"
            ),
        );
        None
    }

    /// A scope argument: a constant of `Scope`.
    fn scope_arg(&mut self, e: &SynExpr) -> Option<Scope> {
        if let Some(v) = enum_const(e, "Scope") {
            match v.as_str() {
                "Block" => return Some(Scope::Block),
                "Gpu" => return Some(Scope::Gpu),
                "System" => return Some(Scope::System),
                _ => {}
            }
        }
        self.err(e, "the scope must be written out as a constant: `Scope::Block`, `Scope::Gpu` or `Scope::System`");
        None
    }

    /// A method call: one of the DSL's [`intrinsics::METHODS`].
    pub(super) fn method(&mut self, m: &syn::ExprMethodCall) -> ExprKind {
        let name = m.method.to_string();
        let recv = self.expr(&m.receiver, None);
        // A name the table has (at any arity) is the table's, so that a
        // wrong argument count is the macro's one clear error.
        if !intrinsics::has_method(&name) && self.is_handle(&m.receiver) {
            return self.method_by_path(m, recv);
        }
        // Every turbofish is checked, though only vector widths use theirs.
        let turbofish: Option<Vec<TemplateArg>> = m.turbofish.as_ref().map(|t| {
            t.args
                .iter()
                .map(|a| {
                    let e: SynExpr = match a {
                        syn::GenericArgument::Const(e) => e.clone(),
                        syn::GenericArgument::Type(syn::Type::Path(tp)) => syn::parse_quote!(#tp),
                        _ => syn::parse_quote!(0),
                    };
                    TemplateArg::Len(self.len(&e))
                })
                .collect()
        });
        let Some(def) = intrinsics::method(&name, m.args.len()) else {
            return self.reject(&m.method,
                format!("method `{name}` with {} argument(s) is not supported in kernels; see the symm::dsl docs for the supported methods", m.args.len()),
            );
        };
        self.check_width(m);
        let mut targs = None;
        if let Some(shown) = def.width {
            match turbofish {
                Some(t) => targs = Some(t),
                None => return self.reject(m, format!("write the vector width: `.{name}{shown}`")),
            }
        }
        let mut args = Vec::new();
        let mut ok = true;
        for (arg, e) in def.args.iter().zip(&m.args) {
            let t = match arg {
                Arg::Value(t) => t.map(CType::Prim),
                Arg::LikeRecv => Some(Self::type_or_typeof(&recv)),
                Arg::Order(enum_name) => {
                    let o = self.order_arg(e, enum_name);
                    ok &= o.is_some();
                    targs
                        .get_or_insert_with(Vec::new)
                        .extend(o.map(TemplateArg::Order));
                    continue;
                }
                Arg::Scope => {
                    let s = self.scope_arg(e);
                    ok &= s.is_some();
                    targs
                        .get_or_insert_with(Vec::new)
                        .extend(s.map(TemplateArg::Scope));
                    continue;
                }
            };
            args.push(self.expr(e, t.as_ref()));
        }
        if !ok {
            return ExprKind::Error;
        }
        ExprKind::Method {
            def,
            recv: Box::new(recv),
            targs,
            args,
            line: self.line_of(m),
        }
    }
}

impl Lowerer<'_> {
    /// Whether `e` is a handle: a slice or `SymmBuf` parameter, a local
    /// bound to a handle, or a `Remote` from `peer`, `local` or `pad`.
    pub(super) fn is_handle(&self, e: &SynExpr) -> bool {
        match strip(e) {
            SynExpr::Path(p) if p.path.segments.len() == 1 => self
                .lookup(&p.path.segments[0].ident.to_string())
                .is_some_and(|l| l.handle),
            SynExpr::MethodCall(m) => {
                ["peer", "local", "pad"].iter().any(|h| m.method == h)
                    && self.is_handle(&m.receiver)
            }
            _ => false,
        }
    }

    /// A handle's method that the table does not list: a call of the
    /// device function `::symm::dsl::methods::<name>` (defined with its
    /// Rust stub in the runtime), with the handle as its first argument.
    /// rustc checks the method against the stub in the CPU body, and its
    /// path (spanned at the name) against the runtime's definitions.
    ///
    /// Its parameters' types are C++'s alone, so an argument computed from
    /// unsuffixed literals only (`(1 << 31) >> 30`) would be `int`
    /// arithmetic there and the parameter's type in Rust: it must name its
    /// type. A single literal converts alike in both.
    fn method_by_path(&mut self, m: &syn::ExprMethodCall, recv: Expr) -> ExprKind {
        let name = &m.method;
        let dep: syn::Path = syn::parse_quote_spanned!(name.span()=> ::symm::dsl::methods::#name);
        let index = self.dep_index(dep.clone());
        let targs = m.turbofish.as_ref().map(|t| self.template_args(&t.args));
        let mut args = vec![recv];
        for a in &m.args {
            if lit_only(a) && !is_unsuffixed_lit(a) {
                self.err(a, "this argument is computed from literals alone, whose type only the method's Rust definition fixes; add a suffix (`1u32 << 31`) or a cast");
            }
            args.push(self.expr(a, None));
        }
        ExprKind::Call {
            callee: dep,
            target: Callee::Device { index, targs },
            args,
        }
    }
}

/// The vector methods, whose width times the element size must be 16.
const VECTOR_METHODS: &[&str] = &[
    "load_vec",
    "load_vec_volatile",
    "load_vec_ready",
    "gather_ready",
    "store_vec",
    "store_vec_volatile",
];

impl Lowerer<'_> {
    /// A vector method whose width (a literal turbofish, or the length of
    /// an array literal stored) and receiver's element type (a parameter's,
    /// or a `SymmBuf` parameter's through `peer`/`local`) are both written
    /// out must move 16 bytes: otherwise an error at the width, rather
    /// than rustc's at the instantiation (which names the call only in a
    /// note) or NVRTC's.
    fn check_width(&mut self, m: &syn::ExprMethodCall) {
        let name = m.method.to_string();
        if !VECTOR_METHODS.contains(&name.as_str()) {
            return;
        }
        let Some(elem) = self.handle_elem(&m.receiver) else {
            return;
        };
        let int = |e: &SynExpr| match strip(e) {
            SynExpr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse::<u64>().ok(),
            _ => None,
        };
        let from_turbofish = m.turbofish.as_ref().and_then(|t| {
            let a = t.args.first()?;
            let n = match a {
                syn::GenericArgument::Const(e) => int(e),
                _ => None,
            }?;
            Some((n, quote::quote!(#a)))
        });
        let from_value = || {
            let v = m.args.iter().nth(1).filter(|_| name.starts_with("store"))?;
            let n = match strip(v) {
                SynExpr::Array(a) => Some(a.elems.len() as u64),
                SynExpr::Repeat(r) => int(&r.len),
                _ => None,
            }?;
            Some((n, quote::quote!(#v)))
        };
        let Some((n, at)) = from_turbofish.or_else(from_value) else {
            return;
        };
        let size = elem_size(elem);
        if n * size != 16 {
            let ty = elem.rust_name();
            self.err(
                at,
                format!(
                    "`{name}::<{n}>` on `{ty}` elements moves {} bytes; vector accesses move exactly 16 bytes: write `{name}::<{}>`",
                    n * size,
                    16 / size
                ),
            );
        }
    }

    /// The element type of a handle written as a parameter (`x`), or as a
    /// `SymmBuf` parameter's `peer(r)` or `local()`, when it is a
    /// primitive.
    fn handle_elem(&self, e: &SynExpr) -> Option<CPrim> {
        let local = |e: &SynExpr| match strip(e) {
            SynExpr::Path(p) if p.path.segments.len() == 1 => self
                .lookup(&p.path.segments[0].ident.to_string())
                .and_then(|l| l.ty.clone()),
            _ => None,
        };
        let ty = match strip(e) {
            SynExpr::MethodCall(m) if m.method == "peer" || m.method == "local" => {
                match local(&m.receiver)? {
                    CType::Buf(t) => *t,
                    _ => return None,
                }
            }
            other => match local(other)? {
                CType::Slice(t) => *t,
                _ => return None,
            },
        };
        match ty {
            CType::Prim(p) => Some(p),
            _ => None,
        }
    }
}

/// The size of an element type, in bytes.
fn elem_size(p: CPrim) -> u64 {
    match p {
        CPrim::U8 | CPrim::Bool | CPrim::F8e4m3 | CPrim::F8e5m2 => 1,
        CPrim::U16 | CPrim::Bf16 | CPrim::F16 => 2,
        CPrim::F32 | CPrim::U32 | CPrim::I32 => 4,
        CPrim::F64 | CPrim::U64 | CPrim::I64 => 8,
    }
}

/// The variant `V` of `e` when it is a path ending in `enum_name::V`.
fn enum_const(e: &SynExpr, enum_name: &str) -> Option<String> {
    let SynExpr::Path(p) = strip(e) else {
        return None;
    };
    let segs: Vec<&syn::Ident> = p.path.segments.iter().map(|s| &s.ident).collect();
    match segs[..] {
        [.., ty, v] if ty == enum_name => Some(v.to_string()),
        _ => None,
    }
}

/// `path` as written, `a::b::c` (without generic arguments).
fn path_text(path: &syn::Path) -> String {
    let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let lead = if path.leading_colon.is_some() {
        "::"
    } else {
        ""
    };
    format!("{lead}{}", segs.join("::"))
}
