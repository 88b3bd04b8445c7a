//! The DSL's intrinsics and methods: how each is checked and spelled in C.
//!
//! Free functions are found by name today ([`lookup`]); a call keeps its
//! path in the IR and its C comes from [`emit`] alone, so that resolving by
//! path (with definitions moved into the runtime) changes only this module.

use super::prim::{CPrim, Scope};

/// A free-function intrinsic.
#[derive(Debug)]
pub struct FnDef {
    /// The Rust name.
    pub name: &'static str,
    /// The number of arguments.
    pub arity: usize,
    /// The C, with `{0}`, `{1}`, ... for the arguments.
    pub template: &'static str,
}

const fn def(name: &'static str, arity: usize, template: &'static str) -> FnDef {
    FnDef {
        name,
        arity,
        template,
    }
}

/// The math builtins: they take arguments of one type, and an unsuffixed
/// literal among them takes the type of the first typed one, as an
/// operator's does (`min(x, 0.5)` with `x: f32` is `symm_min(x, 0.5f)`).
/// That typing is why the macro knows them. Every other free function, the
/// thread-geometry, warp, timer and PDL intrinsics included, is resolved by
/// path: each is defined once in `symm::dsl` (its Rust stub, with its CUDA C
/// beside it in a module of the same name), as a `#[symm_kernel(device)]`
/// function is. (`fence` and `shared_array`, whose arguments are not
/// values, are grammar.)
pub const INTRINSICS: &[FnDef] = &[
    def("min", 2, "symm_min({0}, {1})"),
    def("max", 2, "symm_max({0}, {1})"),
    def("abs", 1, "symm_abs({0})"),
    def("fma", 3, "symm_fma({0}, {1}, {2})"),
];

/// The intrinsic function of this name.
pub fn lookup(name: &str) -> Option<&'static FnDef> {
    INTRINSICS.iter().find(|d| d.name == name)
}

/// A resolved intrinsic call.
#[derive(Clone, Copy, Debug)]
pub enum Intrinsic {
    /// One of [`INTRINSICS`].
    Fn(&'static FnDef),
    /// `fence(scope)`.
    Fence(Scope),
}

/// The C of a call of `intrinsic` with the (emitted) `args`.
pub fn emit(intrinsic: &Intrinsic, args: &[String]) -> String {
    match intrinsic {
        Intrinsic::Fn(d) => {
            let mut s = d.template.to_string();
            for (i, a) in args.iter().enumerate() {
                s = s.replace(&format!("{{{i}}}"), a);
            }
            s
        }
        Intrinsic::Fence(scope) => format!("symm_fence<{scope}>()"),
    }
}

/// How a method's argument is checked and typed.
#[derive(Debug)]
pub enum Arg {
    /// A value; unsuffixed literals in it take this type (`None`: none).
    Value(Option<CPrim>),
    /// A value of the receiver's type.
    LikeRecv,
    /// An ordering constant of the named enum (a template argument).
    Order(&'static str),
    /// A `Scope` constant (a template argument).
    Scope,
}

/// How a method call is written in C.
#[derive(Debug)]
pub enum Shape {
    /// `f<targs>(__ctx?, recv, args...)`.
    Call(&'static str),
    /// `(symm_len(recv) == 0)`.
    LenIsZero,
}

/// A DSL method.
#[derive(Debug)]
pub struct MethodDef {
    /// The Rust name.
    pub name: &'static str,
    /// The C.
    pub shape: Shape,
    /// Whether the C function takes the kernel context first.
    pub ctx: bool,
    /// For methods that need a vector width turbofish: how the error
    /// message shows the call, after the name.
    pub width: Option<&'static str>,
    /// The arguments.
    pub args: &'static [Arg],
    /// The type of the result, when it is fixed.
    pub ret: Option<CPrim>,
    /// For a method that takes an index into its receiver first: how much
    /// it touches there (bounds-checked in a safe launch).
    pub guard: Guard,
}

/// What a method touches at the index it takes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    /// It takes no index.
    None,
    /// One element.
    One,
    /// As many elements as its vector width (its first template argument).
    Width,
    /// This many bytes.
    Bytes(u32),
}

const fn call(name: &'static str, c: &'static str, args: &'static [Arg]) -> MethodDef {
    MethodDef {
        name,
        shape: Shape::Call(c),
        ctx: false,
        width: None,
        args,
        ret: None,
        guard: Guard::None,
    }
}

impl MethodDef {
    const fn ctx(mut self) -> Self {
        self.ctx = true;
        self
    }

    const fn width(mut self, shown: &'static str) -> Self {
        self.width = Some(shown);
        self
    }

    const fn ret(mut self, ty: CPrim) -> Self {
        self.ret = Some(ty);
        self
    }

    const fn guard(mut self, g: Guard) -> Self {
        self.guard = g;
        self
    }
}

const U32: Arg = Arg::Value(Some(CPrim::U32));
const U64: Arg = Arg::Value(Some(CPrim::U64));
const ANY: Arg = Arg::Value(None);
const RECV: Arg = Arg::LikeRecv;
const SCOPE: Arg = Arg::Scope;
const LOAD: Arg = Arg::Order("LoadOrder");
const STORE: Arg = Arg::Order("StoreOrder");
const RMW: Arg = Arg::Order("RmwOrder");

/// The DSL's methods (of handles and scalars).
pub const METHODS: &[MethodDef] = &[
    call("len", "symm_len", &[]).ret(CPrim::U64),
    MethodDef {
        shape: Shape::LenIsZero,
        ..call("is_empty", "", &[]).ret(CPrim::Bool)
    },
    call("peer", "symm_peer", &[U32]).ctx(),
    call("local", "symm_local", &[]),
    call("pad", "symm_pad", &[U32]).ctx(),
    call("rank", "symm_rank", &[]).ret(CPrim::U32),
    call("world_size", "symm_world", &[]).ret(CPrim::U32),
    call("load", "symm_dsl_load", &[U64, LOAD, SCOPE]).guard(Guard::One),
    call("store", "symm_dsl_store", &[U64, ANY, STORE, SCOPE]).guard(Guard::One),
    call("atomic_add", "symm_dsl_add", &[U64, ANY, RMW, SCOPE]).guard(Guard::One),
    call("atomic_exch", "symm_dsl_exch", &[U64, ANY, RMW, SCOPE]).guard(Guard::One),
    call("atomic_max", "symm_dsl_max", &[U64, ANY, RMW, SCOPE]).guard(Guard::One),
    call("atomic_min", "symm_dsl_min", &[U64, ANY, RMW, SCOPE]).guard(Guard::One),
    call("atomic_cas", "symm_dsl_cas", &[U64, ANY, ANY, RMW, SCOPE]).guard(Guard::One),
    call("load_vec", "symm_dsl_load_vec", &[U64])
        .width("::<4>(i)")
        .guard(Guard::Width),
    call("load_vec_volatile", "symm_dsl_load_vec_volatile", &[U64])
        .width("::<4>(i)")
        .guard(Guard::Width),
    call(
        "load_vec_ready",
        "symm_dsl_load_vec_ready",
        &[U64, ANY, U32],
    )
    .ctx()
    .width("::<8>(i, empty, from)")
    .guard(Guard::Bytes(16)),
    call(
        "gather_ready",
        "symm_dsl_gather_ready",
        &[U64, U64, U32, ANY],
    )
    .ctx()
    .width("::<8>(first, stride, ranks, empty)"),
    call(
        "gather_tagged2",
        "symm_dsl_gather_tagged2",
        &[U64, U64, U32, U32],
    )
    .ctx(),
    call(
        "gather_tagged2_checked",
        "symm_dsl_gather_tagged2_checked",
        &[U64, U64, U32, U32, U32],
    )
    .ctx(),
    call("store_vec", "symm_dsl_store_vec", &[U64, ANY]).guard(Guard::Bytes(16)),
    call(
        "store_vec_volatile",
        "symm_dsl_store_vec_volatile",
        &[U64, ANY],
    )
    .guard(Guard::Bytes(16)),
    call("to_f32", "symm_to_f32", &[]).ret(CPrim::F32),
    call("to_bits32", "symm_to_bits32", &[]),
    call("to_bits64", "symm_to_bits64", &[]).ret(CPrim::U64),
    call("load_tagged2", "symm_dsl_load_tagged2", &[U64, U32, U32])
        .ctx()
        .guard(Guard::Bytes(16)),
    call("load_tagged", "symm_dsl_load_tagged", &[U64, U32, U32])
        .ctx()
        .guard(Guard::Bytes(8)),
    call("load_tagged64", "symm_dsl_load_tagged64", &[U64, U32, U32])
        .ctx()
        .guard(Guard::Bytes(16))
        .ret(CPrim::U64),
    call(
        "gather_tagged64",
        "symm_dsl_gather_tagged64",
        &[U64, U64, U32, U32],
    )
    .ctx(),
    call(
        "store_tagged64",
        "symm_dsl_store_tagged64",
        &[U64, U64, U32],
    )
    .guard(Guard::Bytes(16)),
    call("to_bits", "symm_to_bits", &[]),
    call("min", "symm_min", &[RECV]),
    call("max", "symm_max", &[RECV]),
    call("abs", "symm_abs", &[]),
    call("sqrt", "symm_sqrt", &[]),
    call("mul_add", "symm_fma", &[RECV, RECV]),
    call("fma", "symm_fma", &[RECV, RECV]),
    call("wrapping_add", "symm_wrapping_add", &[RECV]),
    call("wrapping_sub", "symm_wrapping_sub", &[RECV]),
    call("wrapping_mul", "symm_wrapping_mul", &[RECV]),
];

/// The method `name` taking `arity` arguments.
pub fn method(name: &str, arity: usize) -> Option<&'static MethodDef> {
    METHODS
        .iter()
        .find(|d| d.name == name && d.args.len() == arity)
}

/// Whether the table has a method `name`, at any arity.
pub fn has_method(name: &str) -> bool {
    METHODS.iter().any(|d| d.name == name)
}

/// The type a call of method `name` has, when the macro knows it (by name
/// alone, whatever the arguments).
pub fn method_type(name: &str) -> Option<CPrim> {
    METHODS.iter().find(|d| d.name == name).and_then(|d| d.ret)
}

#[cfg(test)]
mod tests {
    /// A method defined by path (`method!` in the runtime's
    /// `dsl/methods.rs`) must not share a name with the table: the table
    /// wins at any arity, so its C would be called where the emulator runs
    /// the Rust stub. The macro cannot see the runtime, so it reads the
    /// file.
    #[test]
    fn methods_by_path_are_not_in_the_table() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../symm-runtime/src/dsl/methods.rs"
        );
        let src = std::fs::read_to_string(path).expect("the runtime's dsl/methods.rs");
        let names: Vec<&str> = src
            .split("pub fn ")
            .skip(1)
            .filter_map(|rest| rest.split_once("(&"))
            .map(|(name, _)| name.trim())
            .filter(|name| name.chars().all(|c| c.is_alphanumeric() || c == '_'))
            .collect();
        assert!(!names.is_empty(), "no method found in {path}");
        for name in names {
            assert!(
                !super::has_method(name),
                "`{name}` is defined by path in {path} and in the macro's table"
            );
        }
    }
}
