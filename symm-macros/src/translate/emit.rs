//! Emission: CUDA C text from the IR.
//!
//! Every check happened in lowering, so emission cannot fail; it is
//! `Display` on the IR. The layout (parentheses, line breaks) is fixed by
//! the snapshots under `tests/expand/`.

use std::fmt::{self, Display, Formatter, Write};

use super::intrinsics::{self, Guard, Shape};
use super::ir::{
    Block, CType, Callee, Expr, ExprKind, FloatConst, For, Function, LambdaElse, Len, Order,
    ScalarFn, Stmt, TemplateArg, TemplateParam,
};
use super::prim::{CPrim, Scope};
use super::{fn_name, generic_name, kernel_name};
use crate::parse::Kind;

/// The C++ definition of a translated function (a template when generic).
pub fn function(f: &Function) -> String {
    let mut out = String::new();
    if !f.template.is_empty() {
        let ps: Vec<String> = f
            .template
            .iter()
            .map(|p| match p {
                TemplateParam::Type(id) => format!("typename {}", generic_name(id)),
                TemplateParam::Const(ty, id) => format!("{ty} {}", generic_name(id)),
            })
            .collect();
        let _ = writeln!(out, "template<{}>", ps.join(", "));
    }
    let name = match f.kind {
        Kind::Kernel => kernel_name(&f.name),
        Kind::Device => fn_name(&f.name),
    };
    // A template is emitted only where used; a plain function may not be.
    let quals = if f.template.is_empty() {
        "static __device__ __forceinline__ __attribute__((unused))"
    } else {
        "__device__ __forceinline__"
    };
    let mut params = vec!["const symm_kctx& __ctx".to_string()];
    params.extend(f.params.iter().map(|(ty, name)| format!("{ty} {name}")));
    let _ = write!(
        out,
        "{quals} {} {name}({}) {{\n{}}}\n",
        f.ret,
        params.join(", "),
        Stmts(&f.body)
    );
    out
}

/// Statements, one after another.
struct Stmts<'a>(&'a [Stmt]);

impl Display for Stmts<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|s| write!(f, "{s}"))
    }
}

/// A lambda's body: `{`, the statements, `}` (the call follows it).
struct LambdaBody<'a>(&'a [Stmt]);

impl Display for LambdaBody<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{{\n{}}}", Stmts(self.0))
    }
}

/// ` -> T` of a lambda whose return type is known.
struct Arrow<'a>(&'a Option<CType>);

impl Display for Arrow<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(t) => write!(f, " -> {t}"),
            None => Ok(()),
        }
    }
}

/// An expression as a C macro's argument: parenthesised when it has a comma
/// outside parentheses (`f<A, B>(x)`, `T{{a, b}}`), at which the
/// preprocessor would split it.
struct MacroArg<'a>(&'a Expr);

impl Display for MacroArg<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let text = self.0.to_string();
        let mut depth = 0i32;
        let split = text.chars().any(|c| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            c == ',' && depth == 0
        });
        if split {
            write!(f, "({text})")
        } else {
            f.write_str(&text)
        }
    }
}

/// `a, b, c`.
struct Commas<'a, T>(&'a [T]);

impl<T: Display> Display for Commas<'_, T> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, x) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{x}")?;
        }
        Ok(())
    }
}

impl Display for CPrim {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(self.c_name())
    }
}

impl Display for CType {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            CType::Prim(p) => write!(f, "{p}"),
            CType::Generic(id) => f.write_str(&generic_name(id)),
            CType::Slice(e) => write!(f, "symm_slice<{e}>"),
            CType::Buf(e) => write!(f, "symm_buf<{e}>"),
            CType::Array(e, n) => write!(f, "symm_array<{e}, {n}>"),
            CType::SharedRef(e, n) => write!(f, "symm_array<{e}, {n}>&"),
            CType::Void => f.write_str("void"),
            CType::TypeOf(e) => write!(f, "SYMM_TY({e})"),
        }
    }
}

impl Display for Len {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Len::Lit(digits) => write!(f, "{digits}ULL"),
            Len::Generic(id) => f.write_str(&generic_name(id)),
            Len::Op(l, op, r) => write!(f, "({l} {} {r})", op.c()),
            Len::Error => f.write_str("0"),
        }
    }
}

impl Display for Order {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::Relaxed => "SYMM_RELAXED",
            Order::Acquire => "SYMM_ACQUIRE",
            Order::Release => "SYMM_RELEASE",
            Order::AcqRel => "SYMM_ACQ_REL",
            Order::Volatile => "SYMM_VOLATILE",
        })
    }
}

impl Display for Scope {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Block => "SYMM_CTA",
            Scope::Gpu => "SYMM_GPU",
            Scope::System => "SYMM_SYS",
        })
    }
}

impl Display for TemplateArg {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            TemplateArg::Type(t) => write!(f, "{t}"),
            TemplateArg::Len(n) => write!(f, "{n}"),
            TemplateArg::Order(o) => write!(f, "{o}"),
            TemplateArg::Scope(s) => write!(f, "{s}"),
        }
    }
}

/// `<a, b>`, when the call has template arguments.
struct Targs<'a>(&'a Option<Vec<TemplateArg>>);

impl Display for Targs<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(ts) => write!(f, "<{}>", Commas(ts)),
            None => Ok(()),
        }
    }
}

/// The bits of a float constant of `f32` (`false`) or `f64` (`true`).
fn float_bits(value: FloatConst, double: bool) -> &'static str {
    let (single, dbl) = match value {
        FloatConst::Infinity => ("0x7f800000", "0x7ff0000000000000"),
        FloatConst::NegInfinity => ("0xff800000", "0xfff0000000000000"),
        FloatConst::Nan => ("0x7fc00000", "0x7ff8000000000000"),
        FloatConst::Max => ("0x7f7fffff", "0x7fefffffffffffff"),
        FloatConst::Min => ("0xff7fffff", "0xffefffffffffffff"),
        FloatConst::Epsilon => ("0x34000000", "0x3cb0000000000000"),
    };
    if double {
        dbl
    } else {
        single
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)
    }
}

impl Display for ExprKind {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            ExprKind::Int { digits, ty } => match ty {
                Some(t) => write!(f, "(({t}){digits}ULL)"),
                None => f.write_str(digits),
            },
            ExprKind::Float { digits, ty } => match ty {
                Some(CType::Prim(CPrim::F32)) => write!(f, "{digits}f"),
                Some(t) => write!(f, "(({t}){digits})"),
                None => f.write_str(digits),
            },
            ExprKind::Bool(b) => write!(f, "{b}"),
            ExprKind::Var(name) => f.write_str(name),
            ExprKind::ConstGeneric(id) => f.write_str(&generic_name(id)),
            ExprKind::IntLimit { ty, max } => match ty.int_limits() {
                Some((_, hi)) if *max => write!(f, "(({ty}){hi}ULL)"),
                Some((lo, _)) if lo.starts_with('(') => write!(f, "(({ty}){lo})"),
                Some((lo, _)) => write!(f, "(({ty})({lo}LL))"),
                None => f.write_str("0"),
            },
            ExprKind::FloatConst { ty, value } => {
                let double = *ty == CPrim::F64;
                let bits = float_bits(*value, double);
                let suffix = if double { "ULL" } else { "u" };
                write!(f, "symm_{}_from_bits({bits}{suffix})", ty.rust_name())
            }
            ExprKind::Paren(e) => write!(f, "({e})"),
            ExprKind::Neg(e) => write!(f, "symm_neg({e})"),
            ExprKind::Not(e) => write!(f, "symm_not({e})"),
            // Arithmetic goes through the prelude's functions, which keep
            // Rust's types and wrapping where C++ would promote to `int`.
            ExprKind::Binary { op, lhs, rhs } => match op.c_fn() {
                Some(func) => write!(f, "symm_{func}({lhs}, {rhs})"),
                None => write!(f, "({lhs} {} {rhs})", op.c()),
            },
            ExprKind::Assign { place, op, value } => match op.and_then(|o| o.c_fn()) {
                Some(func) => write!(f, "symm_{func}_assign({place}, {value})"),
                None => write!(f, "{place} = {value}"),
            },
            ExprKind::Cast { ty, expr } => write!(f, "symm_cast<{ty}>({expr})"),
            ExprKind::Index { base, index, line } => {
                write!(
                    f,
                    "SYMM_AT(__ctx, {}, {}, {line})",
                    MacroArg(base),
                    MacroArg(index)
                )
            }
            ExprKind::Method {
                def,
                recv,
                targs,
                args,
                line,
            } => match def.shape {
                Shape::LenIsZero => write!(f, "(symm_len({recv}) == 0)"),
                Shape::Call(c) => {
                    write!(f, "{c}{}(", Targs(targs))?;
                    if def.ctx {
                        f.write_str("__ctx, ")?;
                    }
                    // A method that takes an index: the receiver and the
                    // index go through the bounds check of a safe launch
                    // (exactly `recv` and `index` in an unchecked one; the
                    // index is evaluated once either way).
                    let extent = match def.guard {
                        Guard::None => None,
                        Guard::One => Some(("1".to_string(), "0".to_string())),
                        Guard::Width => Some((
                            targs
                                .as_ref()
                                .and_then(|t| t.first())
                                .map_or("1".to_string(), |t| t.to_string()),
                            "0".to_string(),
                        )),
                        Guard::Bytes(b) => Some(("0".to_string(), b.to_string())),
                    };
                    match (extent, args.split_first()) {
                        (Some((elems, bytes)), Some((index, rest))) => {
                            write!(
                                f,
                                "SYMM_SLICE_AT(__ctx, {}, {}, {elems}, {bytes}, {line}), SYMM_SLICE_INDEX({})",
                                MacroArg(recv),
                                MacroArg(index),
                                MacroArg(index)
                            )?;
                            rest.iter().try_for_each(|a| write!(f, ", {a}"))?;
                        }
                        _ => {
                            write!(f, "{recv}")?;
                            args.iter().try_for_each(|a| write!(f, ", {a}"))?;
                        }
                    }
                    f.write_str(")")
                }
            },
            ExprKind::Call {
                callee,
                target,
                args,
            } => match target {
                Callee::Intrinsic(i) => {
                    let args: Vec<String> = args.iter().map(Expr::to_string).collect();
                    f.write_str(&intrinsics::emit(i, &args))
                }
                Callee::Device { index, targs } => {
                    // The runtime defines `d<i>` as the unique C name it gave
                    // the function (see `symm::dsl::DeviceFn`); the comment
                    // names it for the reader.
                    let name = callee
                        .segments
                        .last()
                        .map(|s| s.ident.to_string())
                        .unwrap_or_default();
                    let name = name.trim_start_matches("r#");
                    let name = if name.is_ascii() { name } else { "" };
                    write!(f, "d{index}/*{name}*/{}(__ctx", Targs(targs))?;
                    args.iter().try_for_each(|a| write!(f, ", {a}"))?;
                    f.write_str(")")
                }
            },
            ExprKind::ScalarFn { ty, func, args } => {
                let a = args.first().map(Expr::to_string).unwrap_or_default();
                match func {
                    ScalarFn::FromF32 => write!(f, "symm_from_f32<{ty}>({a})"),
                    ScalarFn::FromBits32 => write!(f, "symm_from_bits32<{ty}>((symm_u32)({a}))"),
                    ScalarFn::FromBits64 => write!(f, "symm_from_bits64<{ty}>((symm_u64)({a}))"),
                    ScalarFn::FromBits { ty, bits } => {
                        write!(f, "symm_{}_from_bits(({bits})({a}))", ty.rust_name())
                    }
                    ScalarFn::Zero => write!(f, "symm_from_f32<{ty}>(0.0f)"),
                    ScalarFn::One => write!(f, "symm_from_f32<{ty}>(1.0f)"),
                }
            }
            ExprKind::Ternary { cond, then, els } => write!(f, "(({cond}) ? ({then}) : ({els}))"),
            ExprKind::IfLambda {
                ret,
                cond,
                then,
                els,
            } => {
                write!(
                    f,
                    "([&](){} {{ if ({cond}) {} else ",
                    Arrow(ret),
                    LambdaBody(then)
                )?;
                match els {
                    LambdaElse::Body(b) => write!(f, "{}", LambdaBody(b))?,
                    LambdaElse::Value(v) => write!(f, "{{ return {v}; }}")?,
                }
                f.write_str(" }())")
            }
            ExprKind::BlockLambda { ret, body } => {
                write!(f, "([&](){} {}())", Arrow(ret), LambdaBody(body))
            }
            ExprKind::Array { elem, elems } => write!(
                f,
                "symm_array<{elem}, {}ULL>{{{{{}}}}}",
                elems.len(),
                Commas(elems)
            ),
            ExprKind::Repeat { elem, len, value } => {
                write!(f, "symm_array_fill<{elem}, {len}>({value})")
            }
            ExprKind::Error => f.write_str("0"),
        }
    }
}

impl Display for Block {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{{\n{}}}\n", Stmts(&self.0))
    }
}

impl Display for Stmt {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Stmt::Let { ty, name, init } => match ty {
                Some(t) => writeln!(f, "{t} {name} = {init};"),
                None => writeln!(f, "auto {name} = {init};"),
            },
            Stmt::Decl { ty, name } => writeln!(f, "{ty} {name};"),
            Stmt::Shared { ty, name } => writeln!(f, "__shared__ {ty} {name};"),
            Stmt::Discard(e) => writeln!(f, "(void)({e});"),
            Stmt::Expr(e) => writeln!(f, "{e};"),
            Stmt::Return(Some(e)) => writeln!(f, "return {e};"),
            Stmt::Return(None) => writeln!(f, "return;"),
            Stmt::Break => writeln!(f, "break;"),
            Stmt::Continue => writeln!(f, "continue;"),
            Stmt::While { cond, body } => write!(f, "while ({cond}) {body}"),
            Stmt::Loop(body) => write!(f, "while (true) {body}"),
            Stmt::Block(b) => write!(f, "{b}"),
            Stmt::If { cond, then, els } => {
                write!(f, "if ({cond}) {then}")?;
                match els {
                    Some(e) => write!(f, "else {e}"),
                    None => Ok(()),
                }
            }
            Stmt::For(l) => write!(f, "{l}"),
            Stmt::Assert { cond, index } => writeln!(
                f,
                "if (!({cond})) symm_assert_failed(__ctx, SYMM_SITE_FN, {index}u);"
            ),
        }
    }
}

impl Display for For {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let For {
            ty,
            end_name,
            end,
            unroll,
            var,
            start,
            inclusive,
            step,
            body,
        } = self;
        let cmp = if *inclusive { "<=" } else { "<" };
        let pragma = if *unroll { "#pragma unroll\n" } else { "" };
        let step = step
            .as_ref()
            .map_or_else(|| "1".to_string(), Expr::to_string);
        writeln!(f, "{{\nconst {ty} {end_name} = {end};")?;
        writeln!(
            f,
            "{pragma}for ({ty} {var} = {start}; {var} {cmp} {end_name}; {var} += {step}) {body}}}"
        )
    }
}
