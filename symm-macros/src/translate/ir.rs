//! The typed IR between lowering and emission.
//!
//! Lowering (`lower`) has already resolved names, literal types, intrinsics
//! and every error; the IR only says what C to write, so that emission
//! (`emit`) cannot fail and types are values, never C text to parse again.

use syn::Ident;

use super::intrinsics::{Intrinsic, MethodDef};
use super::prim::{CPrim, Scope};
use crate::parse::Kind;

/// A C type.
#[derive(Clone, Debug)]
pub enum CType {
    /// A primitive.
    Prim(CPrim),
    /// A type parameter of the function template (`G_T`).
    Generic(Ident),
    /// `symm_slice<E>`: `&[T]`, `&mut [T]` and `Remote<T>`.
    Slice(Box<CType>),
    /// `symm_buf<E>`: `SymmBuf<T>`.
    Buf(Box<CType>),
    /// `symm_array<E, N>`: `[T; N]`.
    Array(Box<CType>, Len),
    /// `symm_array<E, N>&`: a `Shared<T, N>` parameter.
    SharedRef(Box<CType>, Len),
    /// `void`: `()`.
    Void,
    /// `SYMM_TY(e)`: the type of an expression only C++ can tell.
    TypeOf(Box<Expr>),
}

impl CType {
    /// Whether its C holds a lambda (a `SYMM_TY` of a block or `if`
    /// value), which C++17 allows in no `decltype`.
    pub fn has_lambda(&self) -> bool {
        self.to_string().contains("[&]")
    }

    /// The element type of an array type (also of a shared array).
    pub fn array_elem(&self) -> Option<&CType> {
        match self {
            CType::Array(e, _) | CType::SharedRef(e, _) => Some(e),
            _ => None,
        }
    }
}

/// An array length or other compile-time integer (a template argument).
#[derive(Clone, Debug)]
pub enum Len {
    /// An integer literal: its decimal digits.
    Lit(String),
    /// A const generic parameter (`G_N`).
    Generic(Ident),
    /// `(a op b)`, for `+ - * /`.
    Op(Box<Len>, BinOp, Box<Len>),
    /// Stands in after an error (never emitted: errors stop emission).
    Error,
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    BitXor,
    BitAnd,
    BitOr,
    Shl,
    Shr,
    Eq,
    Lt,
    Le,
    Ne,
    Ge,
    Gt,
}

impl BinOp {
    /// The prelude function (`symm_<name>`, and `symm_<name>_assign` for
    /// the compound form) of an arithmetic or bitwise operator; `None` for
    /// comparisons and `&&`/`||`, which C++ computes as Rust does.
    pub fn c_fn(self) -> Option<&'static str> {
        Some(match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::Rem => "rem",
            BinOp::BitXor => "xor",
            BinOp::BitAnd => "and",
            BinOp::BitOr => "or",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
            _ => return None,
        })
    }

    /// The C spelling (expressions emit arithmetic through [`Self::c_fn`]).
    pub fn c(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::BitXor => "^",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Ne => "!=",
            BinOp::Ge => ">=",
            BinOp::Gt => ">",
        }
    }
}

/// A memory ordering, written out as a template argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Relaxed,
    Acquire,
    Release,
    AcqRel,
    Volatile,
}

/// A template argument of a call.
#[derive(Clone, Debug)]
pub enum TemplateArg {
    /// A type (`f::<f32>`).
    Type(CType),
    /// A compile-time integer (`f::<N>`, a vector width).
    Len(Len),
    /// An ordering of an atomic or ordered access.
    Order(Order),
    /// The scope of an atomic, ordered access or fence.
    Scope(Scope),
}

/// A floating-point constant (`f32::INFINITY`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatConst {
    Infinity,
    NegInfinity,
    Nan,
    Max,
    Min,
    Epsilon,
}

/// An associated function of a scalar type (`T::from_f32(x)`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarFn {
    /// `T::from_f32(x)`.
    FromF32,
    /// `T::from_bits32(u)`.
    FromBits32,
    /// `T::from_bits64(u)`.
    FromBits64,
    /// `from_bits` of the float `ty`, whose bits are a `bits` integer.
    FromBits { ty: CPrim, bits: CPrim },
    /// `T::zero()`.
    Zero,
    /// `T::one()`.
    One,
}

/// An expression.
#[derive(Clone, Debug)]
pub struct Expr {
    /// What it computes.
    pub kind: ExprKind,
    /// The C type the macro knows without C++ (`None`: only C++ knows,
    /// and users of the value write `SYMM_TY(e)`).
    pub ty: Option<CType>,
}

/// What an expression computes.
#[derive(Clone, Debug)]
pub enum ExprKind {
    /// An integer literal and the type it takes, when known.
    Int { digits: String, ty: Option<CType> },
    /// A float literal (with a `.`) and the type it takes, when known.
    Float { digits: String, ty: Option<CType> },
    /// `true` or `false`.
    Bool(bool),
    /// A local or parameter, by its C name.
    Var(String),
    /// A const generic parameter.
    ConstGeneric(Ident),
    /// `u32::MAX`, `i64::MIN`, ...
    IntLimit { ty: CPrim, max: bool },
    /// `f32::INFINITY`, ... (`ty` is `F32` or `F64`).
    FloatConst { ty: CPrim, value: FloatConst },
    /// `(e)`, as the user wrote it.
    Paren(Box<Expr>),
    /// `-e`.
    Neg(Box<Expr>),
    /// `!e` (logical or bitwise, as the operand's type says).
    Not(Box<Expr>),
    /// `a op b` (`%` is `symm_rem`, which floats need: C has no float `%`).
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `place = value`, or `place op= value`.
    Assign {
        place: Box<Expr>,
        op: Option<BinOp>,
        value: Box<Expr>,
    },
    /// `e as T`.
    Cast { ty: CType, expr: Box<Expr> },
    /// `base[index]` of a slice, a `SymmBuf` view, or a register or shared
    /// array: written `SYMM_AT(__ctx, (base), (index), line)`, which a
    /// checked instantiation bounds-checks (see `cuda/symm.cuh`).
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
        /// The Rust line of the index, relative to the line of the
        /// function's name (so that the CUDA C does not change when the
        /// function moves in its file); the runtime adds that line back.
        line: u32,
    },
    /// A DSL method of a handle or scalar.
    Method {
        def: &'static MethodDef,
        recv: Box<Expr>,
        /// `<...>` (written even when empty, as in `f::<>()`).
        targs: Option<Vec<TemplateArg>>,
        args: Vec<Expr>,
        /// The Rust line of the call, relative as an [`ExprKind::Index`]'s
        /// (for the bounds check of a method that takes an index).
        line: u32,
    },
    /// A call of a free function: an intrinsic or a device function.
    Call {
        /// The function as the user wrote it.
        callee: syn::Path,
        target: Callee,
        args: Vec<Expr>,
    },
    /// `T::from_f32(x)`, ...
    ScalarFn {
        ty: CType,
        func: ScalarFn,
        args: Vec<Expr>,
    },
    /// `((c) ? (a) : (b))`: an `if` value whose branches are one expression.
    Ternary {
        cond: Box<Expr>,
        then: Box<Expr>,
        els: Box<Expr>,
    },
    /// Any other `if` value: an immediately-invoked lambda.
    IfLambda {
        ret: Option<CType>,
        cond: Box<Expr>,
        then: Vec<Stmt>,
        els: LambdaElse,
    },
    /// A block value: an immediately-invoked lambda.
    BlockLambda { ret: Option<CType>, body: Vec<Stmt> },
    /// `[a, b, c]`.
    Array { elem: CType, elems: Vec<Expr> },
    /// `[v; N]`.
    Repeat {
        elem: CType,
        len: Len,
        value: Box<Expr>,
    },
    /// Stands in after an error (never emitted: errors stop emission).
    Error,
}

/// The `else` of an [`ExprKind::IfLambda`].
#[derive(Clone, Debug)]
pub enum LambdaElse {
    /// A block, whose tail is returned.
    Body(Vec<Stmt>),
    /// An `else if` chain, returned as one value.
    Value(Box<Expr>),
}

/// The function a [`ExprKind::Call`] calls.
#[derive(Clone, Debug)]
pub enum Callee {
    /// A DSL intrinsic.
    Intrinsic(Intrinsic),
    /// A `#[symm_kernel(device)]` function or path-resolved intrinsic: the
    /// `index`th of the caller's dependencies, with its template arguments
    /// when the call names them.
    Device {
        index: usize,
        targs: Option<Vec<TemplateArg>>,
    },
}

/// A statement.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `let` with a value; `ty: None` declares `auto`.
    Let {
        ty: Option<CType>,
        name: String,
        init: Expr,
    },
    /// `let x: T;`
    Decl { ty: CType, name: String },
    /// `let s = shared_array::<T, N>();`: a `__shared__` array.
    Shared { ty: CType, name: String },
    /// `let _ = e;`
    Discard(Expr),
    /// An expression evaluated for its effect.
    Expr(Expr),
    /// `return`, with the value of a device function.
    Return(Option<Expr>),
    /// `break`.
    Break,
    /// `continue`.
    Continue,
    /// `while cond { body }`.
    While { cond: Expr, body: Block },
    /// `loop { body }`.
    Loop(Block),
    /// `{ ... }`.
    Block(Block),
    /// `if cond { then } else ...`; `els` is a block or another `if`.
    If {
        cond: Expr,
        then: Block,
        els: Option<Box<Stmt>>,
    },
    /// `for i in a..b { ... }`.
    For(Box<For>),
    /// `kernel_assert!(cond, ..)`: the function's assertion number `index`
    /// (its message and place stay on the host).
    Assert { cond: Expr, index: u32 },
}

/// A block of statements with its own scope.
#[derive(Clone, Debug)]
pub struct Block(pub Vec<Stmt>);

/// A `for` loop over a range.
#[derive(Clone, Debug)]
pub struct For {
    /// The type of the counter and bounds.
    pub ty: CType,
    /// The C name of the end bound, evaluated once.
    pub end_name: String,
    /// The end bound.
    pub end: Expr,
    /// Whether the bounds are compile-time constants (`#pragma unroll`).
    pub unroll: bool,
    /// The C name of the counter.
    pub var: String,
    /// The start bound.
    pub start: Expr,
    /// `a..=b` rather than `a..b`.
    pub inclusive: bool,
    /// `step_by`'s argument (else 1).
    pub step: Option<Expr>,
    /// The loop body.
    pub body: Block,
}

/// A parameter of the function template.
#[derive(Clone, Debug)]
pub enum TemplateParam {
    /// A type parameter.
    Type(Ident),
    /// A const generic with its C type.
    Const(CType, Ident),
}

/// A translated function.
#[derive(Clone, Debug)]
pub struct Function {
    /// A kernel's body or a device function.
    pub kind: Kind,
    /// The Rust name.
    pub name: Ident,
    /// Template parameters (the Rust generics).
    pub template: Vec<TemplateParam>,
    /// Parameters: C type and C name.
    pub params: Vec<(CType, String)>,
    /// The return type.
    pub ret: CType,
    /// The body; a tail value is already a `return`.
    pub body: Vec<Stmt>,
}
