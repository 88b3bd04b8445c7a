//! Expansion tests and fuzzing of the translator.

use proc_macro2::TokenStream;
use proptest::prelude::*;

use crate::generate::expand;

fn run(attr: &str, item: &str) -> String {
    let attr: TokenStream = attr.parse().expect("attr tokens");
    let item: TokenStream = item.parse().expect("item tokens");
    expand(attr, item).to_string()
}

/// The CUDA text of a successful expansion (the `CUDA_BODY` or `source`
/// string literal), unescaped enough for substring checks.
fn cuda(item: &str) -> String {
    let out = run("", item);
    assert!(!out.contains("compile_error"), "unexpected error: {out}");
    out.replace("\\n", "\n").replace("\\\"", "\"")
}

#[test]
fn literals_take_the_type_of_their_partner() {
    let c = cuda("fn k(x: &mut [u32], n: u32, f: f32) { let a = n + 1; let b = 2.5 * f; x[0] = a; x[1] = b as u32; }");
    assert!(c.contains("auto v_a = (v_n + ((symm_u32)1ULL));"), "{c}");
    assert!(c.contains("auto v_b = (2.5f * v_f);"), "{c}");
    assert!(c.contains("symm_cast<symm_u32>(v_b)"), "{c}");
}

#[test]
fn shadowing_gets_fresh_cpp_names() {
    let c = cuda("fn k(x: &mut [u32], n: u32) { let a = n; let a = a + n; x[0] = a; }");
    assert!(
        c.contains("auto v_a = v_n;")
            && c.contains("auto v_a_2 = (v_a + v_n);")
            && c.contains("v_x[((symm_u64)0ULL)] = v_a_2;"),
        "{c}"
    );
}

#[test]
fn const_generic_loops_unroll_and_arrays_are_symm_arrays() {
    let c = cuda("fn k<const W: usize>(x: &mut [f32]) { let mut acc: [f32; W] = [0.0; W]; for j in 0..W { acc[j] = 1.0; } x[0] = acc[0]; }");
    assert!(c.contains("template<symm_u64 G_W>"), "{c}");
    assert!(
        c.contains("symm_array<float, G_W> v_acc = symm_array_fill<float, G_W>(0.0f);"),
        "{c}"
    );
    assert!(c.contains("#pragma unroll"), "{c}");
}

#[test]
fn intrinsics_orderings_and_operators_translate() {
    let c = cuda(
        "fn k(b: SymmBuf<u32>, x: &mut [u32]) {
            let s = shared_array::<u32, 64>();
            let v = b.peer(1).load(3, LoadOrder::Acquire, Scope::System);
            b.local().store(0, v, StoreOrder::Release, Scope::Gpu);
            s[thread_idx_x()] = !v % 7;
            sync_threads();
            fence(Scope::Block);
            x[0] = shfl_xor(s[0], 1);
        }",
    );
    for needle in [
        "__shared__ symm_array<symm_u32, 64ULL> v_s;",
        "symm_dsl_load<SYMM_ACQUIRE, SYMM_SYS>(symm_peer(v_b, ((symm_u32)1ULL)), ((symm_u64)3ULL))",
        "symm_dsl_store<SYMM_RELEASE, SYMM_GPU>(symm_local(v_b), ((symm_u64)0ULL), v_v)",
        "symm_rem(symm_not(v_v)",
        "__syncthreads()",
        "symm_fence<SYMM_CTA>()",
        "symm_shfl_xor(v_s[((symm_u64)0ULL)], (symm_u32)(",
    ] {
        assert!(c.contains(needle), "missing {needle:?} in {c}");
    }
}

#[test]
fn gathers_translate_with_the_context_and_need_a_width() {
    let c = cuda(
        "fn k(st: SymmBuf<f32>, ll: SymmBuf<u64>, x: &mut [f32], y: &mut [u64]) {
            let g: [[f32; 4]; 8] = st.local().gather_ready::<4>(8u32, 16u32, 6u32, 0.5f32);
            let p: [[u64; 2]; 8] = ll.local().gather_tagged2(0u32, 4u32, 3u32, 7u32);
            x[0] = g[1][2];
            y[0] = p[0][1];
        }",
    );
    for needle in [
        "symm_dsl_gather_ready<4ULL>(__ctx, symm_local(v_st), ((symm_u32)8ULL), ((symm_u32)16ULL), ((symm_u32)6ULL), 0.5f)",
        "symm_dsl_gather_tagged2(__ctx, symm_local(v_ll), ((symm_u32)0ULL), ((symm_u32)4ULL), ((symm_u32)3ULL), ((symm_u32)7ULL))",
        "symm_array<symm_array<float, 4ULL>, 8ULL> v_g",
    ] {
        assert!(c.contains(needle), "missing {needle:?} in {c}");
    }
    let out = run(
        "",
        "fn k(st: SymmBuf<f32>, x: &mut [f32]) { let g: [[f32; 4]; 8] = st.local().gather_ready(0u32, 4u32, 1u32, 0.0f32); x[0] = g[0][0]; }",
    );
    assert!(
        out.contains("write the vector width: `.gather_ready::<8>(first, stride, ranks, empty)`"),
        "{out}"
    );
}

#[test]
fn helpers_are_called_with_the_context_and_listed_as_dependencies() {
    let out = run("", "fn k(x: &mut [f32]) { x[0] = norm::<f32>(x[1]); }");
    assert!(out.contains("f_norm<float>(__ctx, v_x"), "{out}");
    assert!(out.contains("norm :: DEVICE"), "{out}");
    let dev = run("device", "fn norm<T: DslFloat>(a: T) -> T { a * a }");
    assert!(
        dev.contains("pub static DEVICE") && dev.contains("template<typename G_T>"),
        "{dev}"
    );
    assert!(dev.contains("return (v_a * v_a);"), "{dev}");
}

#[test]
fn if_values_become_ternaries_or_lambdas() {
    let c = cuda("fn k(x: &mut [i32], n: i32) { let a = if n > 0 { n } else { -n }; let b: i32 = if n > 1 { let t = n * 2; t } else { 0 }; x[0] = a + b; }");
    assert!(
        c.contains("auto v_a = (((v_n > ((symm_i32)0ULL))) ? (v_n) : ((-v_n)));"),
        "{c}"
    );
    assert!(c.contains("symm_i32 v_b = ([&]() -> symm_i32"), "{c}");
}

#[test]
fn errors_are_spanned_and_keep_the_item() {
    let out = run(
        "",
        "fn k(x: &mut [f32]) { let v = match 1 { _ => 2.0f32 }; x[0] = v; }",
    );
    assert!(out.contains("compile_error"), "{out}");
    assert!(
        out.contains("`match` is not supported in kernels; use `if`/`else`"),
        "{out}"
    );
    assert!(
        out.contains("mod k"),
        "a stand-in for the item must be emitted: {out}"
    );
    let out = run("", "fn k(x: &mut [f32]) { let a = 0; x[0] = a as f32; }");
    assert!(out.contains("cannot infer this literal's type"), "{out}");
    let out = run("bogus", "fn k() {}");
    assert!(out.contains("unknown option `bogus`"), "{out}");
    let out = run("", "struct S;");
    assert!(out.contains("goes on a function"), "{out}");
}

#[test]
fn cpu_body_rewrites_indexing() {
    let out = run(
        "",
        "fn k(x: &mut [f32], y: &[f32]) { x[0] += y[1]; x[2] = 3.0; }",
    );
    assert!(out.contains("__dsl_get"), "{out}");
    assert!(out.contains("__dsl_set"), "{out}");
    assert!(out.contains("pub fn cpu"), "{out}");
    assert!(out.contains(":: symm :: dsl :: SliceMut < f32 >"), "{out}");
}

const VOCAB: &[&str] = &[
    "let",
    "mut",
    "x",
    "y",
    "n",
    "a",
    "=",
    ";",
    "+",
    "-",
    "*",
    "/",
    "%",
    "<<",
    ">>",
    "&",
    "|",
    "^",
    "!",
    "==",
    "<",
    ">",
    "&&",
    "||",
    "if",
    "else",
    "while",
    "loop",
    "for",
    "in",
    "..",
    "..=",
    "break",
    "continue",
    "return",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    ".",
    "::",
    "as",
    "f32",
    "u32",
    "0",
    "1",
    "2.5",
    "1u32",
    "true",
    "match",
    "=>",
    "|",
    "'a",
    "thread_idx_x",
    "load",
    "store",
    "LoadOrder",
    "Acquire",
    "Scope",
    "System",
    "peer",
    "len",
    "shared_array",
    "<",
    "f32",
    "64",
    ">",
    "step_by",
    "min",
    "abs",
    "unsafe",
    "async",
    "move",
    "ref",
    "Some",
    "#",
    "!",
    "?",
    "@",
    "$",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(VOCAB), 0..40).prop_map(|v| v.join(" "))
}

/// Random expressions from a grammar of (mostly) supported constructs.
fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("x[0]".to_string()),
        Just("n".to_string()),
        Just("1u32".to_string()),
        Just("7".to_string()),
        Just("(thread_idx_x() as u32)".to_string()),
        Just("y.len() as u32".to_string()),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(&["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"][..]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| format!("(if {c} > 3 {{ {a} }} else {{ {b} }})")),
            inner.clone().prop_map(|a| format!("min({a}, n)")),
            inner.clone().prop_map(|a| format!("({a}).wrapping_mul(3)")),
            inner
                .clone()
                .prop_map(|a| format!("{{ let t = {a}; t + 1 }}")),
            inner.prop_map(|a| format!("!({a})")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Arbitrary token soup in a kernel body: errors only, never a panic.
    #[test]
    fn token_soup_never_panics(body in soup()) {
        let item = format!("fn k(x: &mut [u32], y: &[f32], n: u32) {{ {body} }}");
        if let Ok(ts) = item.parse::<TokenStream>() {
            let _ = expand(TokenStream::new(), ts);
        }
    }

    /// Grammar-built bodies: either a spanned error or CUDA text, never a panic.
    #[test]
    fn grammar_bodies_translate_or_error(e in expr(), f in expr()) {
        let item = format!("fn k(x: &mut [u32], y: &[f32], n: u32) {{ let v: u32 = {e}; x[1] = v ^ ({f}); }}");
        let out = expand(TokenStream::new(), item.parse().expect("valid tokens")).to_string();
        prop_assert!(out.contains("CUDA_BODY") || out.contains("compile_error"));
    }
}
