//! Expansion snapshots, error tests and fuzzing of the translator.

mod expand;
mod snapshot;

use proc_macro2::TokenStream;
use proptest::prelude::*;

use crate::generate::expand;

fn run(attr: &str, item: &str) -> String {
    let attr: TokenStream = attr.parse().expect("attr tokens");
    let item: TokenStream = item.parse().expect("item tokens");
    expand(attr, item).to_string()
}

#[test]
fn gathers_need_a_width() {
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

/// `max_threads`: the values it takes and refuses, and the other options'
/// mistakes, each its own error.
#[test]
fn max_threads_takes_a_block_size() {
    let k = "fn k(x: &mut [f32]) { x[0] = 1.0f32; }";
    for ok in [
        "max_threads = 1024",
        "max_threads = 32",
        "max_threads = 0x400",
        "max_threads = 256u32",
    ] {
        let out = run(ok, k);
        assert!(!out.contains("compile_error"), "{ok}: {out}");
        assert!(out.contains("__launch_bounds__"), "{ok}: {out}");
        assert!(out.contains("with_max_threads"), "{ok}: {out}");
    }
    let out = run("", k);
    assert!(
        !out.contains("__launch_bounds__") && !out.contains("with_max_threads"),
        "{out}"
    );
    for bad in [
        "max_threads = 0",
        "max_threads = 1000",
        "max_threads = 2048",
        "max_threads = -32",
        "max_threads = \"64\"",
        "max_threads = 64.0",
    ] {
        let out = run(bad, k);
        assert!(
            out.contains("`max_threads` takes an integer literal"),
            "{bad}: {out}"
        );
    }
    for (bad, says) in [
        ("max_threads", "`max_threads` takes a value"),
        ("max_threads(1024)", "`max_threads` takes a value"),
        (
            "max_threads = 64, max_threads = 128",
            "`max_threads` is given twice",
        ),
        ("device, device", "`device` is given twice"),
        ("device = true", "`device` takes no value"),
        (
            "device, max_threads = 256",
            "`max_threads` is a kernel's option",
        ),
        (
            "max_threads = 256, device",
            "`max_threads` is a kernel's option",
        ),
        ("global", "unknown option `global`"),
        ("1", "expected `#[symm_kernel]`"),
    ] {
        let out = run(bad, k);
        assert!(out.contains(says), "{bad}: {out}");
    }
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
    "kernel_assert",
    "assert",
    "\"msg\"",
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

#[test]
fn standard_library_paths_name_the_dsl_form() {
    let out = run(
        "",
        "fn k(x: &mut [u32], n: u32) { x[0] = cmp::min(x[1], n); }",
    );
    assert!(
        out.contains("`cmp::min` is not available in kernels") && out.contains("write `min(a, b)`"),
        "{out}"
    );
    let out = run(
        "",
        "fn k(x: &mut [u32]) { x[0] = ::core::mem::take(x[1]); }",
    );
    assert!(
        out.contains("`::core::mem::take` is not available"),
        "{out}"
    );
    // A module of the user's that shares a name with one of std's is not std.
    let out = run("", "fn k(x: &mut [u32]) { x[0] = mem::load(x[1]); }");
    assert!(!out.contains("compile_error"), "{out}");
}

#[test]
fn arrays_take_the_type_of_their_first_typed_element() {
    let out = run(
        "",
        "fn k(x: &[f32], y: &mut [f32]) { let v = [x[0], x[1]]; y[0] = v[1]; }",
    );
    assert!(!out.contains("compile_error"), "{out}");
    let out = run(
        "",
        "fn k(x: &[f32], y: &mut [f32]) { let v = [1.0, x[1] as f32]; y[0] = v[0]; }",
    );
    assert!(!out.contains("compile_error"), "{out}");
    for body in [
        "let v = [if x[0] > 0.0f32 { 1.0f32 } else { 2.0f32 }, 3.0]; y[0] = v[0];",
        "y.store_vec(0u32, [1.0, 2.0, 3.0, 4.0]);",
    ] {
        let out = run("", &format!("fn k(x: &[f32], y: &mut [f32]) {{ {body} }}"));
        assert!(
            out.contains("cannot infer this array's element type") && out.contains("let v: [f32; "),
            "{body}: {out}"
        );
    }
}

/// `check_kernels!` names each instantiation as written, moves its generic
/// arguments onto `compile_for`, and defines a test that is also built
/// outside `cfg(test)`.
#[test]
fn check_kernels_expands_to_one_test() {
    let out = crate::check::expand(
        "#[ignore] fn mine; a::ring::<symm::bf16, 8, 2>, plain, k<{ 1 << 20 }>,"
            .parse()
            .expect("tokens"),
    )
    .to_string();
    for want in [
        "# [ignore] # [cfg_attr (test , test)] # [allow (dead_code)] fn mine ()",
        "check_kernels (\"mine\" , & [",
        "name : \"a::ring::<symm::bf16, 8, 2>\"",
        "unchecked : a :: ring :: compile_for :: < symm :: bf16 , 8 , 2 >",
        "checked : a :: ring :: compile_checked_for :: < symm :: bf16 , 8 , 2 >",
        "name : \"plain\" , unchecked : plain :: compile_for ,",
        "name : \"k<{1<<20}>\" , unchecked : k :: compile_for :: < { 1 << 20 } >",
    ] {
        assert!(out.contains(want), "no {want:?} in {out}");
    }
    let default = crate::check::expand("k".parse().expect("tokens")).to_string();
    assert!(
        default.contains("fn kernels_compile_with_nvrtc ()"),
        "{default}"
    );
}

#[test]
fn check_kernels_rejects_misplaced_generics_and_empty_lists() {
    for (input, want) in [
        (
            "a::<f32>::k",
            "only the kernel (the path's last name) takes generic arguments",
        ),
        ("", "list the kernels to compile"),
        ("fn t;", "list the kernels to compile"),
        ("#[ignore] k", "attributes go on a named test"),
    ] {
        let out = crate::check::expand(input.parse().expect("tokens")).to_string();
        assert!(out.contains("compile_error"), "{input}: {out}");
        assert!(out.contains(want), "{input}: no {want:?} in {out}");
    }
}
