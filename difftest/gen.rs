//! The corpus generator (run by build.rs): random `#[symm_kernel]` bodies
//! over the DSL's scalar types, each operation one whose result the DSL
//! defines (no overflow, division by zero or over-wide shift, which the
//! emulator's debug build would panic on and C++ leaves undefined).
//!
//! Every kernel has the shape `fn dkNNN(inp: &[u64], out: &mut [u64], ..)`:
//! it decodes typed values from the raw bits of `inp`, computes, and writes
//! each result's bits to a slot of `out`, so that one driver runs every
//! kernel on the emulator, on the host and on a GPU.

use std::fmt::Write;

/// A class of generated code that can be switched on and off. The classes
/// that are off by default are the known divergences of issue #31: switch
/// one on (`SYMM_DIFFTEST_INCLUDE=narrow_int,..`) once the macro is fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Names shaped like the macro's own generated ones (`x_2` beside a
    /// shadowed `x`, `v_x`, `t_i1`, `x_ptr`), reused so that they shadow.
    /// A shadowing `x` becomes `v_x_2`, the C name of a user's `x_2`: in
    /// a nested scope it hides it (a wrong value), in the same one C++
    /// rejects the redeclaration.
    GeneratedNames,
    /// User device functions named `min`, `max`, `abs`, `fma`: the CUDA C
    /// calls the intrinsic (`symm_max`), the emulator the user's function.
    IntrinsicFnNames,
    /// Arithmetic, `!` and shifts on `u8`/`u16`: C++ promotes them to int,
    /// so `a << s` keeps the high bits, and `a % (b | 1)` matches no
    /// `symm_rem` overload (NVRTC rejects it).
    NarrowInt,
    /// A slice parameter `x` beside a scalar parameter `x_len`: the entry
    /// gets two parameters `v_x_len` (NVRTC: duplicate parameter name).
    LenNames,
    /// Non-ASCII identifiers (`é`): NVRTC rejects them ("unrecognized
    /// token"; g++ takes them).
    NonAscii,
    /// Float `min`/`max` with `+0.0` against `-0.0`: the emulator returns
    /// the first operand on a tie, PTX `min`/`max` order -0 below +0 (as
    /// the host shim models them; to be confirmed on a GPU). Off, a `+ 0.0`
    /// on each operand makes every zero +0.
    SignedZeroMinMax,
    /// C/C++/CUDA keywords and builtins as names (`int`, `auto`, `this`).
    Keywords,
    /// Locals named like intrinsics and prelude functions (`min`, `sqrt`,
    /// `symm_cast`).
    IntrinsicLocals,
    /// `fma` on integers and `abs` on unsigned integers: rustc and the
    /// macro accept them, the prelude has no `symm_fma`/`symm_abs` for
    /// them, so NVRTC rejects the kernel.
    IntFmaAbs,
    /// A block value with a `let` (`{ let t = ..; t + 1 }`) anywhere but as
    /// the whole right-hand side of a `let` or assignment (an operand, an
    /// argument, an `if` value's branch): the macro may type the C++ lambda
    /// it becomes with `decltype` of an expression holding another lambda,
    /// which NVRTC rejects ("a lambda is not allowed in an unevaluated
    /// expression").
    NestedBlockValues,
    /// `x.to_bits()` of a float that may be a NaN, into an integer: Rust
    /// leaves a computed NaN's payload unspecified, the CPU propagates an
    /// operand's, PTX gives the canonical one, so the integer differs.
    /// Off, `to_bits` of a float value maps a NaN to one fixed NaN first.
    NanPayloadBits,
    /// Very long expressions: a `^` chain of 450 operands and an `else
    /// if` chain of 300 arms, which plain rustc compiles (the macro
    /// crashed rustc on such chains before it ran on a stack of its own).
    DeepExprs,
    /// A block value whose tail names a local that the block itself
    /// shadows (`let q: i64 = ..; let t = { let q: f32 = 1.5; q };`): the
    /// macro types the block by the outer `q` (a lambda returning
    /// `symm_i64`), so `t` is 1, not 1.5: a wrong value, or an NVRTC error
    /// where the type matters (`symm_to_bits` of an integer). Off, a block
    /// value's local takes a name no visible local has.
    BlockTailShadow,
}

impl Class {
    /// Every class, with its switch name and whether it is on by default.
    pub const ALL: [(Class, &'static str, bool); 13] = [
        (Class::GeneratedNames, "generated_names", true),
        (Class::IntrinsicFnNames, "intrinsic_fn_names", true),
        (Class::NarrowInt, "narrow_int", true),
        (Class::LenNames, "len_names", true),
        (Class::NonAscii, "non_ascii", true),
        (Class::SignedZeroMinMax, "signed_zero_minmax", true),
        (Class::Keywords, "keywords", true),
        (Class::IntrinsicLocals, "intrinsic_locals", true),
        (Class::IntFmaAbs, "int_fma_unsigned_abs", true),
        (Class::NestedBlockValues, "block_values_in_exprs", true),
        (Class::NanPayloadBits, "nan_payload_bits", false),
        (Class::DeepExprs, "deep_exprs", true),
        (Class::BlockTailShadow, "block_tail_shadow", true),
    ];

    /// The classes on: the defaults plus those `list` names (`all`: every
    /// one; `-name` switches a default off).
    pub fn parse_list(list: &str) -> Result<Vec<Class>, String> {
        let mut on: Vec<Class> = Class::ALL.iter().filter(|c| c.2).map(|c| c.0).collect();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "all" {
                on = Class::ALL.iter().map(|c| c.0).collect();
                continue;
            }
            let (off, name) = match item.strip_prefix('-') {
                Some(n) => (true, n),
                None => (false, item),
            };
            let Some(c) = Class::ALL.iter().find(|c| c.1 == name) else {
                let names: Vec<&str> = Class::ALL.iter().map(|c| c.1).collect();
                return Err(format!(
                    "SYMM_DIFFTEST_INCLUDE: unknown class `{name}` (classes: {})",
                    names.join(", ")
                ));
            };
            on.retain(|x| *x != c.0);
            if !off {
                on.push(c.0);
            }
        }
        Ok(on)
    }

    pub fn name(self) -> &'static str {
        Class::ALL.iter().find(|c| c.0 == self).map_or("?", |c| c.1)
    }
}

use crate::common::{Rng, Ty};
use Ty::*;

const NUMERIC: [Ty; 10] = [U8, U16, U32, U64, I32, I64, F32, F64, Bf16, F16];
const ALL_TYS: [Ty; 11] = [U8, U16, U32, U64, I32, I64, F32, F64, Bf16, F16, Bool];

impl Ty {
    fn rust(self) -> &'static str {
        match self {
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            I32 => "i32",
            I64 => "i64",
            F32 => "f32",
            F64 => "f64",
            Bf16 => "bf16",
            F16 => "f16",
            Bool => "bool",
        }
    }
    /// The type's code in the corpus table (`difftest::Ty::from_code`).
    fn code(self) -> u8 {
        ALL_TYS.iter().position(|t| *t == self).unwrap() as u8
    }
    fn is_int(self) -> bool {
        matches!(self, U8 | U16 | U32 | U64 | I32 | I64)
    }
    fn signed(self) -> bool {
        matches!(self, I32 | I64)
    }
    fn bits(self) -> u32 {
        match self {
            U8 => 8,
            U16 | Bf16 | F16 => 16,
            U32 | I32 | F32 => 32,
            _ => 64,
        }
    }
    fn is_float(self) -> bool {
        matches!(self, F32 | F64)
    }
    fn is_half(self) -> bool {
        matches!(self, Bf16 | F16)
    }
    /// Has the `Num` intrinsics (`min`, `max`, `abs`, `fma`).
    fn is_num(self) -> bool {
        !matches!(self, U16 | Bool)
    }
    fn narrow(self) -> bool {
        matches!(self, U8 | U16)
    }
    /// An integer literal of this type.
    fn lit(self, v: i128) -> String {
        if v < 0 {
            format!("(-{}{})", -v, self.rust())
        } else {
            format!("{v}{}", self.rust())
        }
    }
}

const BASE_NAMES: &[&str] = &[
    "a", "b", "c", "d", "e", "x", "y", "z", "acc", "tmp", "val", "res", "sum", "p", "q", "r", "s",
    "t", "u", "w", "m", "lo", "hi", "idx", "cnt",
];
const KEYWORD_NAMES: &[&str] = &[
    "int",
    "float",
    "double",
    "char",
    "auto",
    "register",
    "new",
    "this",
    "class",
    "template",
    "typename",
    "namespace",
    "delete",
    "private",
    "public",
    "protected",
    "volatile",
    "signed",
    "unsigned",
    "long",
    "short",
    "switch",
    "case",
    "default",
    "goto",
    "sizeof",
    "inline",
    "friend",
    "operator",
    "explicit",
    "mutable",
    "export",
    "extern_",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "warpSize",
    "NULL",
    "nullptr",
    "asm",
    "restrict",
    "main",
    "printf",
    "std",
    "not",
    "and",
    "or",
    "xor",
    "bitand",
    "compl",
    "half",
    "dim3",
    "uint",
    "size_t",
    "usize",
    "f32",
    "u64",
    "bf16",
];
const INTRINSIC_LOCAL_NAMES: &[&str] = &[
    "min",
    "max",
    "abs",
    "fma",
    "exp",
    "sqrt",
    "fence",
    "ballot",
    "lane_id",
    "shfl_xor",
    "symm_cast",
    "symm_min",
    "symm_u32",
    "symm_slice",
    "symm_at",
    "fmodf",
];
// Not `__ctx` and the like: the macro refuses names starting with `__`.
const GENERATED_NAMES: &[&str] = &[
    "x_2",
    "x_3",
    "x_1",
    "a_2",
    "t_i1",
    "t_i2",
    "t_1",
    "v_x",
    "v_a",
    "f_h0",
    "x_ptr",
    "x_len",
    "inp_len",
    "out_len",
    "inp_ptr",
    "g_t",
    "k_x",
    "ctx",
    "status",
    "rank",
    "timeout_ns",
];
const NON_ASCII_NAMES: &[&str] = &["é", "naïve", "ñ", "größe", "変数", "δ"];

/// A local in scope.
#[derive(Clone)]
struct Var {
    name: String,
    ty: Ty,
    /// The generator may assign it (a `let mut` it does not use as a loop
    /// counter).
    assignable: bool,
}

/// A device function of the kernel's module.
#[derive(Clone)]
struct Func {
    name: String,
    params: Vec<Ty>,
    ret: Ty,
}

struct Gen<'a> {
    rng: Rng,
    on: &'a [Class],
    scopes: Vec<Vec<Var>>,
    funcs: Vec<Func>,
    /// Classes this kernel uses (for the report).
    used: Vec<Class>,
    /// `out` slots written only inside branches and loops.
    inner_slots: std::ops::Range<usize>,
    /// Each `out` slot's type (one per slot, so NaNs compare by type).
    slot_tys: [Ty; OUT_SLOTS],
    /// Statements left in this kernel's budget.
    budget: usize,
    /// Names no local may take (the kernel's slices).
    reserved: Vec<String>,
    /// How many `if` values and block values enclose the expression being
    /// generated.
    value_depth: usize,
    /// The next `expr` is the whole right-hand side of a `let` or `=`.
    whole_rhs: bool,
}

const OUT_SLOTS: usize = 8;

impl Gen<'_> {
    fn has(&self, c: Class) -> bool {
        self.on.contains(&c)
    }
    fn mark(&mut self, c: Class) {
        if !self.used.contains(&c) {
            self.used.push(c);
        }
    }

    fn name(&mut self) -> String {
        let visible = self.visible();
        if !visible.is_empty() && self.rng.chance(30) {
            let v = self.rng.pick(&visible).name.clone();
            if self.has(Class::GeneratedNames) && self.rng.chance(50) {
                // A name the macro may make from `v` when it shadows `v`
                // (`v_2`), or from a slice `v` (`v_len`).
                self.mark(Class::GeneratedNames);
                let suffix = *self.rng.pick(&["_2", "_3", "_1", "_len", "_ptr"]);
                let n = format!("{v}{suffix}");
                if !self.reserved.contains(&n) {
                    return n;
                }
            } else if !self.reserved.contains(&v) {
                // Shadow a visible name.
                return v;
            }
        }
        let mut pools: Vec<(&[&str], Option<Class>)> = vec![(BASE_NAMES, None)];
        for (c, p) in [
            (Class::Keywords, KEYWORD_NAMES),
            (Class::IntrinsicLocals, INTRINSIC_LOCAL_NAMES),
            (Class::GeneratedNames, GENERATED_NAMES),
            (Class::NonAscii, NON_ASCII_NAMES),
        ] {
            if self.has(c) {
                pools.push((p, Some(c)));
            }
        }
        let idx = if self.rng.chance(55) {
            0
        } else {
            self.rng.below(pools.len())
        };
        let (pool, class) = pools[idx];
        if let Some(c) = class {
            self.mark(c);
        }
        let mut n = (*self.rng.pick(pool)).to_string();
        while self.reserved.contains(&n) {
            n.push_str("_r");
        }
        n
    }

    /// The visible variables (the innermost of each name).
    fn visible(&self) -> Vec<Var> {
        let mut seen: Vec<Var> = Vec::new();
        for scope in self.scopes.iter().rev() {
            for v in scope.iter().rev() {
                if !seen.iter().any(|s| s.name == v.name) {
                    seen.push(v.clone());
                }
            }
        }
        seen
    }
    fn name_visible(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.iter().any(|v| v.name == name))
    }
    fn declare(&mut self, v: Var) {
        self.scopes.last_mut().unwrap().push(v);
    }
    /// Whether the intrinsic `name` is callable here: no local hides it
    /// and no device function of that name replaces it.
    fn intrinsic_ok(&self, name: &str) -> bool {
        !self.name_visible(name) && !self.funcs.iter().any(|f| f.name == name)
    }

    fn var_of(&mut self, ty: Ty) -> Option<String> {
        let vs: Vec<Var> = self.visible().into_iter().filter(|v| v.ty == ty).collect();
        if vs.is_empty() {
            None
        } else {
            Some(self.rng.pick(&vs).name.clone())
        }
    }

    fn literal(&mut self, ty: Ty) -> String {
        match ty {
            Bool => (if self.rng.chance(50) { "true" } else { "false" }).into(),
            F32 | F64 => {
                let t = ty.rust();
                match self.rng.below(12) {
                    0 => format!("{t}::NAN"),
                    1 => format!("{t}::INFINITY"),
                    2 => format!("{t}::NEG_INFINITY"),
                    3 => format!("(-0.0{t})"),
                    4 => format!("{t}::MAX"),
                    5 => format!("{t}::MIN"),
                    6 => format!("{t}::EPSILON"),
                    7 => format!("0.0{t}"),
                    8 => format!("0.1{t}"),
                    _ => {
                        let v = self.rng.below(20001) as f64 / 64.0 - 150.0;
                        if v < 0.0 {
                            format!("(-{:?}{t})", -v)
                        } else {
                            format!("{v:?}{t}")
                        }
                    }
                }
            }
            Bf16 | F16 => {
                let t = ty.rust();
                if self.rng.chance(30) {
                    let bits = *self.rng.pick(&[
                        0x7fc1u16, 0x8000, 0x0001, 0x7f80, 0xff80, 0x7c00, 0x3c00, 0x7e00,
                    ]);
                    format!("{t}::from_bits({bits:#06x}u16)")
                } else {
                    let f = self.literal(F32);
                    format!("{t}::from_f32({f})")
                }
            }
            _ => {
                let t = ty.rust();
                match self.rng.below(8) {
                    0 => format!("{t}::MAX"),
                    1 => format!("{t}::MIN"),
                    2 => ty.lit(0),
                    3 => ty.lit(1),
                    _ => {
                        let max: u128 = if ty.bits() == 64 {
                            u64::MAX as u128
                        } else {
                            (1u128 << ty.bits()) - 1
                        };
                        let raw = (self.rng.next() as u128) & max;
                        let small = self.rng.chance(60);
                        let v = if small {
                            (raw % 300) as i128
                        } else {
                            raw as i128
                        };
                        if ty.signed() {
                            let half = (max >> 1) as i128;
                            let v = if small { v - 150 } else { v.min(half) };
                            ty.lit(v)
                        } else {
                            ty.lit(v)
                        }
                    }
                }
            }
        }
    }

    fn leaf(&mut self, ty: Ty) -> String {
        if self.rng.chance(75) {
            if let Some(v) = self.var_of(ty) {
                return v;
            }
        }
        self.literal(ty)
    }

    /// A mask literal `(1 << bits) - 1` of `ty`.
    fn mask(ty: Ty, bits: u32) -> String {
        format!("{:#x}{}", (1u128 << bits) - 1, ty.rust())
    }

    fn expr(&mut self, ty: Ty, depth: usize) -> String {
        let whole = std::mem::take(&mut self.whole_rhs);
        if depth == 0 || self.rng.chance(20) {
            return self.leaf(ty);
        }
        let d = depth - 1;
        // Forms common to every type.
        match self.rng.below(14) {
            0 => return self.leaf(ty),
            1 => {
                let c = self.expr(Bool, d);
                self.value_depth += 1;
                let a = self.expr(ty, d);
                let b = self.expr(ty, d);
                self.value_depth -= 1;
                return format!("(if {c} {{ {a} }} else {{ {b} }})");
            }
            2 if whole || self.has(Class::NestedBlockValues) => {
                if !whole {
                    self.mark(Class::NestedBlockValues);
                }
                // A block value with a local of its own (shadowing).
                let inner_ty = *self.rng.pick(&NUMERIC);
                let init = self.expr(inner_ty, d);
                self.scopes.push(Vec::new());
                let mut name = self.name();
                if self.name_visible(&name) {
                    if self.has(Class::BlockTailShadow) {
                        self.mark(Class::BlockTailShadow);
                    } else {
                        while self.name_visible(&name) || self.reserved.contains(&name) {
                            name.push_str("_b");
                        }
                    }
                }
                self.declare(Var {
                    name: name.clone(),
                    ty: inner_ty,
                    assignable: false,
                });
                self.value_depth += 1;
                let body = self.expr(ty, d);
                self.value_depth -= 1;
                self.scopes.pop();
                return format!("({{ let {name}: {} = {init}; {body} }})", inner_ty.rust());
            }
            3 => {
                let fs: Vec<Func> = self.funcs.iter().filter(|f| f.ret == ty).cloned().collect();
                if !fs.is_empty() && !self.name_visible(&fs[0].name) {
                    let f = self.rng.pick(&fs).clone();
                    if !self.name_visible(&f.name) {
                        let args: Vec<String> = f.params.iter().map(|p| self.expr(*p, d)).collect();
                        return format!("{}({})", f.name, args.join(", "));
                    }
                }
            }
            4 if ty != Bool => return self.cast_to(ty, d),
            _ => {}
        }
        match ty {
            Bool => self.bool_expr(d),
            F32 | F64 => self.float_expr(ty, d),
            Bf16 | F16 => self.half_expr(ty, d),
            _ => self.int_expr(ty, d),
        }
    }

    fn cast_to(&mut self, ty: Ty, d: usize) -> String {
        let from = *self.rng.pick(&ALL_TYS);
        if from == ty {
            return self.expr(ty, d);
        }
        let e = self.expr(from, d);
        match (from, ty) {
            (Bool, t) if t.is_int() => format!("({e} as {})", t.rust()),
            (Bool, _) => self.leaf(ty),
            (f, t) if f.is_half() && t.is_half() => format!("{}::from_f32({e}.to_f32())", t.rust()),
            (f, t) if f.is_half() => format!("({e}.to_f32() as {})", t.rust()),
            (_, t) if t.is_half() => {
                let f32e = if from == F32 {
                    e
                } else {
                    format!("({e} as f32)")
                };
                format!("{}::from_f32({f32e})", t.rust())
            }
            (_, t) => format!("({e} as {})", t.rust()),
        }
    }

    fn shift_amount(&mut self, ty: Ty, d: usize) -> String {
        let s = self.expr(U32, d.min(1));
        format!("({s} & {}u32)", ty.bits() - 1)
    }

    fn int_expr(&mut self, ty: Ty, d: usize) -> String {
        let narrow = ty.narrow();
        if narrow && !self.has(Class::NarrowInt) {
            // Without the class, narrow values are only made and converted.
            return if self.rng.chance(50) {
                self.cast_to(ty, d)
            } else {
                self.leaf(ty)
            };
        }
        if narrow {
            self.mark(Class::NarrowInt);
        }
        let w = ty.bits();
        let t = ty.rust();
        let a = self.expr(ty, d);
        let b = self.expr(ty, d);
        match self.rng.below(19) {
            0 => format!("{a}.wrapping_add({b})"),
            1 => format!("{a}.wrapping_sub({b})"),
            2 => format!("{a}.wrapping_mul({b})"),
            3 => {
                let m = Gen::mask(ty, w - 2);
                format!("(({a} & {m}) + ({b} & {m}))")
            }
            4 => {
                let m = Gen::mask(ty, w - 2);
                if ty.signed() {
                    format!("(({a} & {m}) - ({b} & {m}))")
                } else {
                    let h = format!("{:#x}{t}", 1u128 << (w - 1));
                    let m1 = Gen::mask(ty, w - 1);
                    format!("(({a} | {h}) - ({b} & {m1}))")
                }
            }
            5 => {
                let m = Gen::mask(ty, w / 2 - 1);
                format!("(({a} & {m}) * ({b} & {m}))")
            }
            6 | 7 => {
                let op = if self.rng.chance(50) { "/" } else { "%" };
                let m = Gen::mask(ty, w - 2);
                if ty.signed() && self.rng.chance(50) {
                    // `| 1` keeps the dividend off MIN, so `/ -1` cannot overflow.
                    format!("(({a} | 1{t}) {op} (-(({b} & {m}) | 1{t})))")
                } else {
                    format!("({a} {op} (({b} & {m}) | 1{t}))")
                }
            }
            8 => format!("({a} & {b})"),
            9 => format!("({a} | {b})"),
            10 => format!("({a} ^ {b})"),
            11 => format!("(!{a})"),
            12 => {
                let s = self.shift_amount(ty, d);
                format!("({a} << {s})")
            }
            13 => {
                let s = self.shift_amount(ty, d);
                format!("({a} >> {s})")
            }
            14 if ty.is_num() => self.num_intrinsic(ty, a, b, d),
            16 if matches!(ty, U32 | U64 | U16) => {
                let f = match ty {
                    U32 => F32,
                    U64 => F64,
                    _ => *self.rng.pick(&[Bf16, F16]),
                };
                let e = self.expr(f, d);
                if self.has(Class::NanPayloadBits) {
                    self.mark(Class::NanPayloadBits);
                    format!("{e}.to_bits()")
                } else {
                    let nan = match f {
                        F32 | F64 => format!("{}::NAN", f.rust()),
                        _ => format!("{}::from_bits(0x7fc0u16)", f.rust()),
                    };
                    format!("(if {e} != {e} {{ {nan} }} else {{ {e} }}).to_bits()")
                }
            }
            _ => format!("{a}.wrapping_add({b})"),
        }
    }

    /// `min`, `max`, `abs` or `fma` as free functions (when no local or
    /// device function hides them).
    fn num_intrinsic(&mut self, ty: Ty, a: String, b: String, d: usize) -> String {
        let mut which = *self.rng.pick(&["min", "max", "abs", "fma"]);
        let missing = (which == "fma" && ty.is_int()) || (which == "abs" && !ty.signed());
        if missing {
            if self.has(Class::IntFmaAbs) {
                self.mark(Class::IntFmaAbs);
            } else {
                which = "max";
            }
        }
        if !self.intrinsic_ok(which) {
            return format!("{a}.wrapping_add({b})").replace(
                ".wrapping_add",
                if ty.is_int() { ".wrapping_add" } else { " + " },
            );
        }
        match which {
            "abs" => format!("abs({a})"),
            "fma" => {
                let c = self.expr(ty, d);
                format!("fma({a}, {b}, {c})")
            }
            m => format!("{m}({a}, {b})"),
        }
    }

    fn float_expr(&mut self, ty: Ty, d: usize) -> String {
        let t = ty.rust();
        let a = self.expr(ty, d);
        let b = self.expr(ty, d);
        match self.rng.below(14) {
            0 => format!("({a} + {b})"),
            1 => format!("({a} - {b})"),
            2 => format!("({a} * {b})"),
            3 => format!("({a} / {b})"),
            4 => format!("({a} % {b})"),
            5 => format!("(-{a})"),
            6 => format!("{a}.sqrt()"),
            7 => {
                let c = self.expr(ty, d);
                format!("{a}.mul_add({b}, {c})")
            }
            8 => self.minmax_or(ty, a, b, d),
            9 => {
                let bits = if ty == F32 { U32 } else { U64 };
                let e = self.expr(bits, d);
                format!("{t}::from_bits({e})")
            }
            10 => {
                let h = *self.rng.pick(&[Bf16, F16]);
                let e = self.expr(h, d);
                if ty == F32 {
                    format!("{e}.to_f32()")
                } else {
                    format!("({e}.to_f32() as f64)")
                }
            }
            _ => format!("({a} * {b} + {a})"),
        }
    }

    /// A float `min`/`max` (free or method), its operands kept apart from
    /// a signed-zero tie unless that class is on; or `abs`/`fma`.
    fn minmax_or(&mut self, ty: Ty, a: String, b: String, d: usize) -> String {
        let which = *self.rng.pick(&["min", "max", "abs", "fma", "min", "max"]);
        match which {
            "abs" if self.intrinsic_ok("abs") => format!("abs({a})"),
            "fma" if self.intrinsic_ok("fma") => {
                let c = self.expr(ty, d);
                format!("fma({a}, {b}, {c})")
            }
            m @ ("min" | "max") => {
                let free = self.intrinsic_ok(m) && self.rng.chance(50);
                let (a, b) = if self.has(Class::SignedZeroMinMax) {
                    self.mark(Class::SignedZeroMinMax);
                    if self.rng.chance(50) {
                        // Zeros of both signs, in either order.
                        let (z, nz) = if ty.is_half() {
                            (
                                format!("{}::from_f32(0.0f32)", ty.rust()),
                                format!("{}::from_f32(-0.0f32)", ty.rust()),
                            )
                        } else {
                            (format!("0.0{}", ty.rust()), format!("(-0.0{})", ty.rust()))
                        };
                        if self.rng.chance(50) {
                            (z, nz)
                        } else {
                            (nz, z)
                        }
                    } else {
                        (a, b)
                    }
                } else {
                    // `+ 0.0` turns -0.0 into +0.0 (and keeps every other
                    // value), so a tie between zeros is always +0 vs +0.
                    let z = if ty.is_half() {
                        format!("{}::from_f32(0.0f32)", ty.rust())
                    } else {
                        format!("0.0{}", ty.rust())
                    };
                    (format!("({a} + {z})"), format!("({b} + {z})"))
                };
                if free {
                    format!("{m}({a}, {b})")
                } else {
                    format!("{a}.{m}({b})")
                }
            }
            _ => format!("({a} - {b})"),
        }
    }

    fn half_expr(&mut self, ty: Ty, d: usize) -> String {
        let t = ty.rust();
        let a = self.expr(ty, d);
        let b = self.expr(ty, d);
        match self.rng.below(9) {
            0 => format!("({a} + {b})"),
            1 => format!("({a} - {b})"),
            2 => format!("({a} * {b})"),
            3 => format!("({a} / {b})"),
            4 => format!("(-{a})"),
            5 => self.minmax_or(ty, a, b, d),
            6 => {
                let e = self.expr(F32, d);
                format!("{t}::from_f32({e})")
            }
            7 => {
                let e = self.expr(U16, d);
                format!("{t}::from_bits({e})")
            }
            _ => format!("({a} * {b} + {a})"),
        }
    }

    fn bool_expr(&mut self, d: usize) -> String {
        match self.rng.below(6) {
            0 => {
                let c = self.expr(Bool, d);
                format!("(!{c})")
            }
            1 => {
                let a = self.expr(Bool, d);
                let b = self.expr(Bool, d);
                let op = if self.rng.chance(50) { "&&" } else { "||" };
                format!("({a} {op} {b})")
            }
            _ => {
                let ty = *self.rng.pick(&NUMERIC);
                let a = self.expr(ty, d);
                let b = self.expr(ty, d);
                let op = *self.rng.pick(&["<", "<=", ">", ">=", "==", "!="]);
                format!("({a} {op} {b})")
            }
        }
    }

    /// `e`'s bits as a `u64` for an `out` slot.
    fn encode(ty: Ty, e: &str) -> String {
        match ty {
            F64 => format!("{e}.to_bits()"),
            F32 | Bf16 | F16 => format!("({e}.to_bits() as u64)"),
            _ => format!("({e} as u64)"),
        }
    }

    fn indent(level: usize) -> String {
        "    ".repeat(level)
    }

    fn stmts(&mut self, out: &mut String, level: usize, n: usize, in_loop: bool, in_kernel: bool) {
        for _ in 0..n {
            if self.budget == 0 {
                return;
            }
            self.budget -= 1;
            self.stmt(out, level, in_loop, in_kernel);
        }
    }

    fn stmt(&mut self, out: &mut String, level: usize, in_loop: bool, in_kernel: bool) {
        let ind = Gen::indent(level);
        let nested = level < 5;
        match self.rng.below(16) {
            0..=4 => {
                let ty = *self.rng.pick(&ALL_TYS);
                self.whole_rhs = true;
                let e = self.expr(ty, 3);
                let name = self.name();
                let mutable = self.rng.chance(40);
                let m = if mutable { "mut " } else { "" };
                if self.rng.chance(50) {
                    let _ = writeln!(out, "{ind}let {m}{name}: {} = {e};", ty.rust());
                } else {
                    let _ = writeln!(out, "{ind}let {m}{name} = {e};");
                }
                self.declare(Var {
                    name,
                    ty,
                    assignable: mutable,
                });
            }
            5..=7 => {
                let vs: Vec<Var> = self
                    .visible()
                    .into_iter()
                    .filter(|v| v.assignable)
                    .collect();
                if vs.is_empty() {
                    return;
                }
                let v = self.rng.pick(&vs).clone();
                self.whole_rhs = true;
                let e = self.expr(v.ty, 2);
                let compound = if v.ty.is_int() && (!v.ty.narrow() || self.has(Class::NarrowInt)) {
                    match self.rng.below(5) {
                        0 => Some(format!("^= {e}")),
                        1 => Some(format!("|= {e}")),
                        2 => Some(format!("&= {e}")),
                        3 => {
                            let s = self.shift_amount(v.ty, 1);
                            Some(format!(">>= {s}"))
                        }
                        _ => None,
                    }
                } else if v.ty.is_float() || v.ty.is_half() {
                    match self.rng.below(4) {
                        0 => Some(format!("+= {e}")),
                        1 => Some(format!("*= {e}")),
                        2 => Some(format!("-= {e}")),
                        _ => None,
                    }
                } else {
                    None
                };
                if v.ty.narrow() && compound.is_some() {
                    self.mark(Class::NarrowInt);
                }
                match compound {
                    Some(c) => {
                        let _ = writeln!(out, "{ind}{} {c};", v.name);
                    }
                    None => {
                        let _ = writeln!(out, "{ind}{} = {e};", v.name);
                    }
                }
            }
            8 if nested => {
                let c = self.expr(Bool, 2);
                let _ = writeln!(out, "{ind}if {c} {{");
                self.block(out, level + 1, in_loop, in_kernel);
                if self.rng.chance(60) {
                    let _ = writeln!(out, "{ind}}} else {{");
                    self.block(out, level + 1, in_loop, in_kernel);
                }
                let _ = writeln!(out, "{ind}}}");
            }
            9 if nested => {
                let k = 1 + self.rng.below(4);
                let name = self.name();
                let _ = writeln!(out, "{ind}for {name} in 0u32..{k}u32 {{");
                self.scopes.push(vec![Var {
                    name,
                    ty: U32,
                    assignable: false,
                }]);
                let n = 1 + self.rng.below(4);
                self.stmts(out, level + 1, n, true, in_kernel);
                if self.rng.chance(25) {
                    let c = self.expr(Bool, 1);
                    let kw = if self.rng.chance(50) {
                        "break"
                    } else {
                        "continue"
                    };
                    let _ = writeln!(out, "{}if {c} {{ {kw}; }}", Gen::indent(level + 1));
                }
                self.scopes.pop();
                let _ = writeln!(out, "{ind}}}");
            }
            10 if nested => {
                // A counted `while` or `loop`; the counter is never assigned
                // by the body, so it terminates.
                let k = 1 + self.rng.below(4);
                let cnt = format!("n{}", self.rng.below(1000));
                let _ = writeln!(out, "{ind}let mut {cnt}: u32 = 0u32;");
                self.declare(Var {
                    name: cnt.clone(),
                    ty: U32,
                    assignable: false,
                });
                let is_loop = self.rng.chance(40);
                if is_loop {
                    let _ = writeln!(out, "{ind}loop {{");
                    let _ = writeln!(
                        out,
                        "{}if {cnt} >= {k}u32 {{ break; }}",
                        Gen::indent(level + 1)
                    );
                } else {
                    let _ = writeln!(out, "{ind}while {cnt} < {k}u32 {{");
                }
                let _ = writeln!(out, "{}{cnt} += 1u32;", Gen::indent(level + 1));
                self.scopes.push(Vec::new());
                let n = 1 + self.rng.below(3);
                self.stmts(out, level + 1, n, true, in_kernel);
                self.scopes.pop();
                let _ = writeln!(out, "{ind}}}");
            }
            11 if nested => {
                let _ = writeln!(out, "{ind}{{");
                self.block(out, level + 1, in_loop, in_kernel);
                let _ = writeln!(out, "{ind}}}");
            }
            12 | 13 if in_kernel && level > 1 && !self.inner_slots.is_empty() => {
                let slot = self.inner_slots.start + self.rng.below(self.inner_slots.len());
                let ty = self.slot_tys[slot];
                let e = self.expr(ty, 2);
                let _ = writeln!(out, "{ind}out[{slot}] = {};", Gen::encode(ty, &e));
            }
            _ => {
                let ty = *self.rng.pick(&ALL_TYS);
                self.whole_rhs = true;
                let e = self.expr(ty, 3);
                let name = self.name();
                let _ = writeln!(out, "{ind}let {name} = {e};");
                self.declare(Var {
                    name,
                    ty,
                    assignable: false,
                });
            }
        }
    }

    fn block(&mut self, out: &mut String, level: usize, in_loop: bool, in_kernel: bool) {
        self.scopes.push(Vec::new());
        let n = 1 + self.rng.below(4);
        self.stmts(out, level, n, in_loop, in_kernel);
        self.scopes.pop();
    }

    fn device_fn(&mut self, out: &mut String, idx: usize) -> Func {
        let ret = *self.rng.pick(&NUMERIC);
        let mut name = format!("h{idx}");
        let mut params: Vec<Ty> = (0..1 + self.rng.below(3))
            .map(|_| *self.rng.pick(&ALL_TYS))
            .collect();
        // First, so that no earlier function calls the intrinsic that this
        // one hides in the whole module.
        if idx == 0 && self.has(Class::IntrinsicFnNames) {
            // A device function of the user's named like a path-resolved
            // intrinsic: Rust calls the user's in this module, so the C must
            // too. (`min`, `max`, `abs`, `fma` are the macro's own and a
            // device function of those names is a compile error.)
            // Always, when the class is on: the repro calls `exp`, whose
            // intrinsic's GPU result may differ in the last place.
            let which = "exp";
            if !self.funcs.iter().any(|f| f.name == which) {
                name = which.to_string();
                let ty = F32;
                params = vec![F32];
                self.mark(Class::IntrinsicFnNames);
                let body = "p0 - 1.0f32".to_string();
                let ps: Vec<String> = params
                    .iter()
                    .enumerate()
                    .map(|(i, t)| format!("p{i}: {}", t.rust()))
                    .collect();
                let _ = writeln!(out, "    #[symm_kernel(device)]\n    pub fn {name}({}) -> {} {{\n        {body}\n    }}\n", ps.join(", "), ty.rust());
                return Func {
                    name,
                    params,
                    ret: ty,
                };
            }
        } else if self.has(Class::Keywords) && self.rng.chance(30) {
            let kw = (*self.rng.pick(KEYWORD_NAMES)).to_string();
            // Not `std` or a type's name (the macro leaves a module of the
            // function's name, which would hide the crate or the type), nor
            // the names the kernel's slices may take.
            if !self.funcs.iter().any(|f| f.name == kw)
                && !["std", "int", "float", "usize", "f32", "u64", "bf16"].contains(&kw.as_str())
            {
                name = kw;
                self.mark(Class::Keywords);
            }
        }
        self.scopes = vec![Vec::new()];
        let mut ps = Vec::new();
        for t in &params {
            let mut n = self.name();
            while self.name_visible(&n) || n == name {
                n = format!("{n}_p");
            }
            ps.push(format!("{n}: {}", t.rust()));
            self.declare(Var {
                name: n,
                ty: *t,
                assignable: false,
            });
        }
        let mut body = String::new();
        self.budget = 6;
        let n = 1 + self.rng.below(4);
        self.stmts(&mut body, 2, n, false, false);
        // The function's own name hides nothing inside it, but a local of
        // that name would hide a recursive call, which is never generated.
        let tail = self.expr(ret, 3);
        let _ = writeln!(
            out,
            "    #[symm_kernel(device)]\n    pub fn {name}({}) -> {} {{\n{body}        {tail}\n    }}\n",
            ps.join(", "),
            ret.rust()
        );
        Func { name, params, ret }
    }
}

/// One generated kernel's entry in the corpus table.
struct Entry {
    name: String,
    outputs: Vec<Ty>,
    inputs: Vec<Ty>,
    scalars: Vec<Ty>,
    classes: Vec<Class>,
    source: String,
}

fn kernel(rng_seed: u64, idx: usize, on: &[Class]) -> Entry {
    let mut g = Gen {
        rng: Rng(rng_seed),
        on,
        scopes: vec![Vec::new()],
        funcs: Vec::new(),
        used: Vec::new(),
        inner_slots: 6..OUT_SLOTS,
        budget: 0,
        reserved: Vec::new(),
        value_depth: 0,
        whole_rhs: false,
        slot_tys: [Bool; OUT_SLOTS],
    };
    for t in g.slot_tys.iter_mut() {
        *t = ALL_TYS[(g.rng.next() % ALL_TYS.len() as u64) as usize];
    }
    let name = format!("dk{idx:04}");
    let mut src = String::new();
    let nfn = g.rng.below(3);
    for i in 0..nfn {
        let f = g.device_fn(&mut src, i);
        g.funcs.push(f);
    }
    // Parameters: the two slices, then scalars.
    let (inp, outp) = if g.has(Class::LenNames) && g.rng.chance(40) {
        g.mark(Class::LenNames);
        ("x", "y")
    } else if g.has(Class::Keywords) && g.rng.chance(20) {
        ("int", "float")
    } else {
        ("inp", "out")
    };
    g.reserved = vec![inp.to_string(), outp.to_string()];
    let nscalar = g.rng.below(3);
    let mut scalars = Vec::new();
    let mut params = vec![format!("{inp}: &[u64]"), format!("{outp}: &mut [u64]")];
    g.scopes = vec![Vec::new()];
    for i in 0..nscalar {
        let ty = *g.rng.pick(&[U32, I64, F32, U64]);
        let pname = if g.used.contains(&Class::LenNames) && i == 0 {
            format!("{inp}_len")
        } else {
            let mut n = g.name();
            while g.name_visible(&n) || n == inp || n == outp || n == "n" {
                n = format!("{n}_s");
            }
            n
        };
        params.push(format!("{pname}: {}", ty.rust()));
        g.declare(Var {
            name: pname,
            ty,
            assignable: false,
        });
        scalars.push(ty);
    }
    let mut body = String::new();
    // Decode the inputs.
    let ninputs = 4 + g.rng.below(6);
    let mut inputs = Vec::new();
    for k in 0..ninputs {
        let ty = *g.rng.pick(&ALL_TYS);
        let raw = format!("{inp}[{k}]");
        let e = match ty {
            F64 => format!("f64::from_bits({raw})"),
            F32 => format!("f32::from_bits({raw} as u32)"),
            Bf16 | F16 => format!("{}::from_bits({raw} as u16)", ty.rust()),
            Bool => format!("(({raw} & 1u64) == 1u64)"),
            _ => format!("({raw} as {})", ty.rust()),
        };
        let mut n = g.name();
        while n == inp || n == outp {
            n = format!("{n}_i");
        }
        let m = if g.rng.chance(40) { "mut " } else { "" };
        let _ = writeln!(body, "        let {m}{n}: {} = {e};", ty.rust());
        g.declare(Var {
            name: n,
            ty,
            assignable: !m.is_empty(),
        });
        inputs.push(ty);
    }
    if g.has(Class::DeepExprs) && g.rng.chance(4) {
        g.mark(Class::DeepExprs);
        let v = g.leaf(U32);
        // Under the macro's nesting limit (512 levels), which plain rustc
        // also compiles; deeper chains are the macro's spanned error.
        let chain: Vec<String> = (0..450)
            .map(|i| format!("({v} >> {}u32)", i % 32))
            .collect();
        let _ = writeln!(
            body,
            "        {outp}[6] = (({}) as u64);",
            chain.join(" ^ ")
        );
        let mut arms = String::new();
        for i in 0..300 {
            let _ = write!(arms, "if {v} == {i}u32 {{ {i}u64 }} else ");
        }
        let _ = writeln!(body, "        {outp}[7] = {arms}{{ 7u64 }};");
        g.slot_tys[6] = U64;
        g.slot_tys[7] = U64;
        g.inner_slots = 6..6;
    }
    g.budget = 10 + g.rng.below(14);
    let n = g.budget;
    g.stmts(&mut body, 2, n, false, true);
    for slot in 0..6 {
        let ty = g.slot_tys[slot];
        let e = g.expr(ty, 2);
        let _ = writeln!(body, "        {outp}[{slot}] = {};", Gen::encode(ty, &e));
    }
    let body = body.replace("out[", &format!("{outp}["));
    let _ = writeln!(
        src,
        "    #[symm_kernel]\n    pub fn {name}({}) {{\n{body}    }}",
        params.join(", ")
    );
    Entry {
        name,
        outputs: g.slot_tys.to_vec(),
        inputs,
        scalars,
        classes: g.used,
        source: src,
    }
}

/// The minimal repro of each class that is on and has one: a fixed kernel
/// (`dr_<class>`) that diverges as long as the class's bug is there, so
/// switching a class on always tests its known case, besides the random
/// ones. All inputs and outputs are `u64`s (the slots' bits).
fn repros(on: &[Class]) -> Vec<Entry> {
    let all: &[(Class, &str, usize, &[Ty], &str)] = &[
        (
            Class::GeneratedNames,
            "dr_generated_names",
            1,
            &[],
            // The inner `x` becomes `v_x_2`, the C name of the user's `x_2`,
            // which it hides: out[0] is 2 on the GPU.
            "let x_2: u64 = inp[0];\n        let x: u64 = 1u64;\n        {\n            let x: u64 = x + 1u64;\n            out[0] = x_2;\n            out[1] = x;\n        }",
        ),
        (
            Class::IntrinsicFnNames,
            "dr_intrinsic_fn_names",
            2,
            &[],
            // The module's own `lane_id`, not the intrinsic: the C must
            // call it, as Rust does.
            "out[0] = lane_id() as u64;\n        out[1] = lane_id().wrapping_add(inp[0] as u32) as u64;",
        ),
        (
            Class::NarrowInt,
            "dr_narrow_int",
            3,
            &[],
            // C++ promotes u8/u16 to int: the shift and `!` are not cut back.
            "let a: u8 = inp[0] as u8;\n        let b: u16 = inp[1] as u16;\n        out[0] = (a << ((inp[2] as u32) & 7u32)) as u64;\n        out[1] = (!a) as u64;\n        out[2] = ((b << 8u32) >> 8u32) as u64;",
        ),
        (
            Class::NarrowInt,
            "dr_narrow_int_rem",
            2,
            &[],
            // `a % (b | 1)` on u8: no symm_rem overload takes (u8, int).
            "let a: u8 = inp[0] as u8;\n        let b: u8 = inp[1] as u8;\n        out[0] = (a % (b | 1u8)) as u64;",
        ),
        (
            Class::LenNames,
            "dr_len_names",
            1,
            &[U32],
            // The entry's parameters: v_inp_ptr, v_inp_len, .., v_inp_len.
            "out[0] = inp[0].wrapping_add(inp_len as u64);",
        ),
        (
            Class::NonAscii,
            "dr_non_ascii",
            1,
            &[],
            "let é: u64 = inp[0];\n        out[0] = é;",
        ),
        (
            Class::SignedZeroMinMax,
            "dr_signed_zero_minmax",
            0,
            &[],
            // Emulator: the first operand on a tie; PTX: -0 below +0.
            "out[0] = min(0.0f32, -0.0f32).to_bits() as u64;\n        out[1] = max(-0.0f32, 0.0f32).to_bits() as u64;",
        ),
        (
            Class::IntFmaAbs,
            "dr_int_fma_unsigned_abs",
            3,
            &[],
            "let a = inp[0] as u32;\n        out[0] = fma(a, inp[1] as u32, inp[2] as u32) as u64;\n        out[1] = abs(a) as u64;",
        ),
        (
            Class::NestedBlockValues,
            "dr_block_values_in_exprs",
            1,
            &[],
            "let w = bf16::from_bits(inp[0] as u16);\n        let v = max(({ let t: i64 = 0i64; bf16::from_bits(0x3f80u16) }) + bf16::from_f32(0.0f32), w);\n        out[0] = v.to_bits() as u64;",
        ),
        (
            Class::BlockTailShadow,
            "dr_block_tail_shadow",
            1,
            &[],
            // C++: the block returns symm_i64 (the outer q's type), so t is 1.
            "let q: i64 = inp[0] as i64;\n        let t = ({ let q: f32 = 1.5f32; q });\n        out[0] = (t * 2.0f32).to_bits() as u64;\n        out[1] = q as u64;",
        ),
        (
            Class::NanPayloadBits,
            "dr_nan_payload_bits",
            0,
            &[],
            // half keeps the payload (0x7fc1); PTX's cvt gives 0x7fff.
            "out[0] = bf16::from_f32(f32::from_bits(0x7fc12345u32)).to_bits() as u64;",
        ),
    ];
    let mut v = Vec::new();
    for (class, name, ninputs, scalars, body) in all {
        if !on.contains(class) {
            continue;
        }
        let params: String = scalars
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if *class == Class::LenNames && i == 0 {
                    format!(", inp_len: {}", t.rust())
                } else {
                    format!(", s{i}: {}", t.rust())
                }
            })
            .collect();
        let source = format!(
            "    #[symm_kernel]\n    pub fn {name}(inp: &[u64], out: &mut [u64]{params}) {{\n        {body}\n    }}\n"
        );
        let source = if *class == Class::IntrinsicFnNames {
            format!("    #[symm_kernel(device)]\n    pub fn lane_id() -> u32 {{\n        7u32\n    }}\n\n{source}")
        } else {
            source
        };
        v.push(Entry {
            name: name.to_string(),
            outputs: vec![U64; OUT_SLOTS],
            inputs: vec![U64; *ninputs],
            scalars: scalars.to_vec(),
            classes: vec![*class],
            source,
        });
    }
    v
}

/// The corpus as Rust source: a module per kernel and the table
/// `KERNELS` of `difftest::Kernel`s.
pub fn corpus(seed: u64, count: usize, on: &[Class]) -> String {
    let mut rng = Rng(seed ^ 0x5eed_d1ff_7e57);
    let mut out = String::new();
    let on_names: Vec<&str> = on.iter().map(|c| c.name()).collect();
    let _ = writeln!(
        out,
        "/// The seed the corpus was generated from.\npub const SEED: u64 = {seed};"
    );
    let _ = writeln!(
        out,
        "/// The classes switched on.\npub const CLASSES_ON: &[&str] = &{on_names:?};"
    );
    let mut entries = repros(on);
    for e in &entries {
        let _ = writeln!(
            out,
            "#[allow(unused, non_snake_case, clippy::all)]\npub mod m_{} {{\n    use symm::dsl::*;\n    use symm::symm_kernel;\n\n{}}}\n",
            e.name, e.source
        );
    }
    for i in 0..count {
        let e = kernel(rng.next(), i, on);
        let _ = writeln!(
            out,
            "#[allow(unused, non_snake_case, unused_parens, unused_braces, unused_comparisons, invalid_nan_comparisons, clippy::all)]\npub mod m_{} {{\n    use symm::dsl::*;\n    use symm::symm_kernel;\n\n{}}}\n",
            e.name, e.source
        );
        entries.push(e);
    }
    let _ = writeln!(
        out,
        "/// Every kernel of the corpus.\npub static KERNELS: &[Kernel] = &["
    );
    for e in &entries {
        let ins: Vec<u8> = e.inputs.iter().map(|t| t.code()).collect();
        let scs: Vec<u8> = e.scalars.iter().map(|t| t.code()).collect();
        let outs: Vec<u8> = e.outputs.iter().map(|t| t.code()).collect();
        let s = if e.scalars.is_empty() { "_s" } else { "s" };
        let cls: Vec<&str> = e.classes.iter().map(|c| c.name()).collect();
        let sargs: String = e
            .scalars
            .iter()
            .enumerate()
            .map(|(i, t)| match t {
                F32 => format!(", f32::from_bits(s[{i}] as u32)"),
                U64 => format!(", s[{i}]"),
                _ => format!(", s[{i}] as {}", t.rust()),
            })
            .collect();
        let _ = writeln!(
            out,
            "    Kernel {{\n        name: {name:?},\n        source: {src:?},\n        inputs: &{ins:?},\n        scalars: &{scs:?},\n        outputs: &{outs:?},\n        classes: &{cls:?},\n        launch: |c, i, o, {s}| m_{name}::{name}::launch(c, symm::LaunchConfig::linear(1, 1), i, o{sargs}),\n        cuda: m_{name}::{name}::cuda_source_for,\n        compile: m_{name}::{name}::compile_for,\n    }},",
            name = e.name,
            src = e.source,
        );
    }
    let _ = writeln!(out, "];");
    out
}
