//! Expansion snapshots: the unit cases below and every `#[symm_kernel]` item
//! in the workspace's sources (see `snapshot` for blessing).

use std::path::Path;

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::visit_mut::{self, VisitMut};

use super::snapshot::{expansion, Snapshots};

/// Records the snapshots of one expansion under `stem` (`.cu.snap` and
/// `.expanded.rs.snap`, or `.errors` when the macro rejected the item). The
/// `.snap` ending keeps generated code out of source tools' view (a copy
/// finder would report every expansion against every other).
fn record(snaps: &mut Snapshots, stem: &str, origin: &str, attr: TokenStream, item: TokenStream) {
    let x = expansion(attr, item);
    if !x.errors.is_empty() {
        let mut text = format!("// Errors of #[symm_kernel] on {origin}, in order.\n");
        for e in &x.errors {
            text += &format!("error: {e}\n");
        }
        snaps.check(&format!("{stem}.errors"), &text);
    } else {
        let mut cu = format!(
            "// CUDA C of #[symm_kernel] on {origin}.\n// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.\n\n"
        );
        cu += x
            .cuda
            .as_deref()
            .unwrap_or("// (no CUDA C found in the expansion)\n");
        if let Some(w) = &x.wrapper {
            cu += "\n// The extern \"C\" entry ($...$ are filled at instantiation):\n";
            cu += w;
        }
        snaps.check(&format!("{stem}.cu.snap"), &cu);
    }
    snaps.check(&format!("{stem}.expanded.rs.snap"), &x.rust);
}

/// Unit cases: (snapshot name, attribute, item).
const CASES: &[(&str, &str, &str)] = &[
    (
        "literals_take_the_type_of_their_partner",
        "",
        "fn k(x: &mut [u32], n: u32, f: f32) { let a = n + 1; let b = 2.5 * f; x[0] = a; x[1] = b as u32; }",
    ),
    (
        "shadowing_gets_fresh_cpp_names",
        "",
        "fn k(x: &mut [u32], n: u32) { let a = n; let a = a + n; x[0] = a; }",
    ),
    (
        "const_generic_loops_unroll_and_arrays_are_symm_arrays",
        "",
        "fn k<const W: usize>(x: &mut [f32]) { let mut acc: [f32; W] = [0.0; W]; for j in 0..W { acc[j] = 1.0; } x[0] = acc[0]; }",
    ),
    (
        "intrinsics_orderings_and_operators_translate",
        "",
        "fn k(b: SymmBuf<u32>, x: &mut [u32]) {
            let s = shared_array::<u32, 64>();
            let v = b.peer(1).load(3, LoadOrder::Acquire, Scope::System);
            b.local().store(0, v, StoreOrder::Release, Scope::Gpu);
            s[thread_idx_x()] = !v % 7;
            sync_threads();
            fence(Scope::Block);
            x[0] = shfl_xor(s[0], 1);
        }",
    ),
    (
        "gathers_translate_with_the_context",
        "",
        "fn k(st: SymmBuf<f32>, ll: SymmBuf<u64>, x: &mut [f32], y: &mut [u64]) {
            let g: [[f32; 4]; 8] = st.local().gather_ready::<4>(8u32, 16u32, 6u32, 0.5f32);
            let p: [[u64; 2]; 8] = ll.local().gather_tagged2(0u32, 4u32, 3u32, 7u32);
            x[0] = g[1][2];
            y[0] = p[0][1];
        }",
    ),
    (
        "helpers_are_called_with_the_context_and_listed_as_dependencies",
        "",
        "fn k(x: &mut [f32]) { x[0] = norm::<f32>(x[1]); }",
    ),
    (
        "device_functions_are_templates_with_a_source_static",
        "device",
        "fn norm<T: DslFloat>(a: T) -> T { a * a }",
    ),
    (
        "if_values_become_ternaries_or_lambdas",
        "",
        "fn k(x: &mut [i32], n: i32) { let a = if n > 0 { n } else { -n }; let b: i32 = if n > 1 { let t = n * 2; t } else { 0 }; x[0] = a + b; }",
    ),
    (
        "constants_and_scalar_conversions",
        "",
        "fn k<T: DslFloat>(x: &mut [f32], w: &mut [f64], y: &mut [u64], b: &mut [u32], t: &mut [T]) {
            x[0] = f32::INFINITY + f32::MIN + f32::NAN + f32::from_bits(b[0]);
            w[0] = f64::NEG_INFINITY + f64::MAX + f64::EPSILON + f64::from_bits(y[0]);
            let h = i64::MIN;
            let i = i32::MIN;
            let j = u8::MAX as u64 + u16::MAX as u64 + usize::MAX as u64 + isize::MAX as u64 + h as u64 + i as u64;
            y[1] = j;
            let o = bf16::from_bits(3u16);
            let p = f16::from_bits(4u16);
            t[0] = T::zero() + T::one() + T::from_f32(x[1]) + T::from_bits32(b[1]);
            x[2] = o.to_f32() + p.to_f32() + t[1].to_f32();
            b[2] = t[2].to_bits32() + x[3].to_bits();
        }",
    ),
    (
        "loops_blocks_and_statements",
        "",
        "fn k(x: &mut [u32], n: u32, m: u64) {
            for i in 0..=n { x[i as usize] = i; }
            for _ in (0u32..n).step_by(2) { x[0] += 1; }
            for j in (m..x.len() as u64).step_by(32) { x[j as usize] <<= 1; }
            for k in 1..x.len() { x[k] >>= 2u32; }
            let mut c = 0u32;
            while c < n { c += 1; if c == 3 { continue; } }
            loop { c -= 1; if c == 0 { break; } }
            let v = { let t = x[0]; t };
            let w: u32 = { let t = x[1]; t * 2 };
            let _ = x.len();
            let z: u32;
            let a = [1u32, 2, 3];
            let g: [[f32; 2]; 3] = [[0.0; 2]; 3];
            let e = [0u64; 4];
            if x.is_empty() { return; } else if n > 4 { x[1] = v; } else { x[2] = w; }
            x[3] = a[1] + (e[2] as u32) + (g[0][1] as u32);
        }",
    ),
    (
        "device_helpers_take_shared_remote_and_arrays",
        "device",
        "fn helper<const N: usize>(s: Shared<f32, 256>, r: Remote<f32>, v: Slice<f32>, a: [f32; N]) -> [f32; 4] {
            let q = inner::<N>(a[0]) + inner::<{ N + 1 }>(s[0]) + r.load(0, LoadOrder::Relaxed, Scope::System) + v[0];
            if q > 0.0 { return [q; 4]; }
            if q < 1.0 { [1.0, 2.0, 3.0, q] } else { [q, q, q, q] }
        }",
    ),
    (
        "vector_tagged_and_atomic_methods",
        "",
        "fn k(b: SymmBuf<u64>, x: &mut [u64]) {
            let p = b.peer(1);
            let v = p.load_vec_volatile::<2>(0);
            let w = p.load_vec_ready::<4>(8, 0u64, 1u32);
            let t = p.load_tagged(0, 7, 1);
            let t2 = p.load_tagged2(0, 7, 1);
            b.local().store_vec(0, v);
            let a = p.atomic_max(3, 1, RmwOrder::AcqRel, Scope::Gpu) + p.atomic_min(3, 1, RmwOrder::Relaxed, Scope::Block);
            b.put_signal(1, 0);
            b.wait_signal(1, 0);
            let q = b.pad(1);
            x[0] = a + w[0] + t + t2[1] + q.len() + x[1].min(3).max(1).wrapping_sub(2).wrapping_add(x[2]);
            x[1] = fma(1.0f32, 2.0, 3.0) as u64 + max(x[3], 1) + abs(1i64) as u64 + globaltimer();
            let l = ballot(lane_id() < 4);
            x[2] = (l as u64) << 3;
            grid_dependency_wait();
            launch_dependents();
            fence(Scope::System);
        }",
    ),
    (
        "types_of_blocks_are_taken_from_their_translation",
        "",
        "fn k(x: &mut [u32], n: u32) {
            x[0] = min({ let t = n; t }, 3);
            for i in 0..({ let u = n; u }) { x[i as usize] = if i > 2 { { let s = i; s } } else { 4 }; }
        }",
    ),
    (
        "methods_by_path_on_every_handle",
        "",
        "fn k(buf: SymmBuf<u32>, out: &mut [u32], s: u32) {
            let b = buf;
            let r = buf.peer(1);
            out[0] = b.ring_peer(s) + 1;
            out[1] = r.frob::<u32, 4>(s);
            out[2] = buf.pad(0).frob(1, 2u32 << 3);
            out[3] = out.frob();
        }",
    ),
    (
        "methods_by_path_check_their_arguments",
        "",
        "fn k(buf: SymmBuf<u32>, out: &mut [u32]) {
            out[0] = buf.ring_peer((1 << 31) >> 30);
            out[1] = buf.peer().rank();
        }",
    ),
    (
        "every_error_is_collected_in_order",
        "",
        "fn k(x: &mut [f32], n: u32) {
            let v = match 1 { _ => 2.0f32 };
            let (a, b) = (1, 2);
            let c = 0;
            x[0] = a + b + c + v + y;
            n.frobnicate(1);
            'outer: loop { break 'outer; }
            let s: [f32; q] = [0.0; q];
            let t = x[0..2];
            let u = |z: f32| z;
            let w = u32::BOGUS;
            let o = n.load(0, LoadOrder::SeqCst, Scope::Cluster);
            fence(Scope::Gpu, 1);
            x[1] = f32::from_bits32(n) + q::<u32, [u8; 2]>(n) + missing_fn(n).field;
        }",
    ),
    (
        "kernel_asserts_are_numbered_and_keep_their_messages_on_the_host",
        "",
        "fn k(x: &mut [f32], n: u32) {
            kernel_assert!(n > 0, \"n must be positive\");
            if n > 2 { kernel_assert!(x[1] < 1.0f32) }
            let v = { kernel_assert!(x.len() as u32 >= n,); x[0] };
            for i in 0..({ kernel_assert!(n < 9); n }) { x[i as usize] = v; }
            symm::dsl::kernel_assert!(v == v);
        }",
    ),
    (
        "device_functions_list_their_kernel_asserts",
        "device",
        "fn half_of(v: u32) -> u32 { kernel_assert!(v % 2 == 0, \"odd\"); v / 2 }",
    ),
    (
        "kernel_assert_forms_are_checked",
        "",
        "fn k(x: &mut [u32], n: u32) {
            kernel_assert!();
            kernel_assert!(n > 0, n);
            kernel_assert!(n > 0, \"n = {}\", n);
            kernel_assert!(n > 0, \"n is {n}\");
            kernel_assert!(n > 0 \"a comma missing\");
            let v = kernel_assert!(n > 1);
            x[0] = if n > 2 { kernel_assert!(n > 3) } else { 1 };
            x[1] = 1 + kernel_assert!(n > 3);
            assert!(n > 0);
            assert_eq!(n, 1);
            debug_assert_ne!(n, 2);
            panic!(\"no\");
            println!(\"{}\", n);
        }",
    ),
    (
        "cpu_body_rewrites_indexing",
        "",
        "fn k(x: &mut [f32], y: &[f32]) { x[0] += y[1]; x[2] = 3.0; }",
    ),
];

#[test]
fn unit_expansions_match_their_snapshots() {
    let mut snaps = Snapshots::default();
    for (name, attr, item) in CASES {
        let attr: TokenStream = attr.parse().expect("attr tokens");
        let item: TokenStream = item.parse().expect("item tokens");
        record(
            &mut snaps,
            &format!("unit/{name}"),
            &format!("the unit case `{name}`"),
            attr,
            item,
        );
    }
    snaps.finish("unit");
}

/// Workspace sources whose `#[symm_kernel]` items are snapshotted: the
/// built-in kernels, the runtime's signal kernels, signal protocol, signal
/// methods and back-to-back pieces, the examples and the
/// tests (the UI cases included: their errors are snapshotted).
const CORPUS: &[&str] = &[
    "kernels/src",
    "symm-runtime/src/signal.rs",
    "symm-runtime/src/dsl/sync.rs",
    "symm-runtime/src/dsl/protocol.rs",
    "symm-runtime/src/dsl/methods.rs",
    "examples",
    "tests",
];

/// Collects `#[symm_kernel]` items (at any depth), without the attribute.
#[derive(Default)]
struct Finder {
    found: Vec<(String, TokenStream, TokenStream)>,
}

impl Finder {
    /// Takes the `#[symm_kernel]` attribute off `attrs`: its arguments.
    fn take(attrs: &mut Vec<syn::Attribute>) -> Option<TokenStream> {
        let i = attrs.iter().position(|a| {
            a.path()
                .segments
                .last()
                .is_some_and(|s| s.ident == "symm_kernel")
        })?;
        Some(match attrs.remove(i).meta {
            syn::Meta::List(l) => l.tokens,
            _ => TokenStream::new(),
        })
    }
}

impl VisitMut for Finder {
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        let (attrs, name) = match item {
            syn::Item::Fn(f) => (&mut f.attrs, f.sig.ident.to_string()),
            syn::Item::Struct(s) => (&mut s.attrs, s.ident.to_string()),
            syn::Item::Enum(e) => (&mut e.attrs, e.ident.to_string()),
            _ => return visit_mut::visit_item_mut(self, item),
        };
        if let Some(attr) = Self::take(attrs) {
            self.found.push((name, attr, item.to_token_stream()));
        }
        visit_mut::visit_item_mut(self, item);
    }

    fn visit_impl_item_fn_mut(&mut self, f: &mut syn::ImplItemFn) {
        // Rejected (no `self` in kernels), but its errors are snapshotted.
        if let Some(attr) = Self::take(&mut f.attrs) {
            self.found
                .push((f.sig.ident.to_string(), attr, f.to_token_stream()));
        }
        visit_mut::visit_impl_item_fn_mut(self, f);
    }
}

#[test]
fn workspace_kernels_match_their_snapshots() {
    // The corpus has bodies hundreds of levels deep (tests/deep_expressions.rs),
    // which rustc's proc-macro calls get a large stack for.
    crate::on_big_stack(workspace_snapshots);
}

fn workspace_snapshots() {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in CORPUS {
        let p = ws.join(c);
        if p.is_dir() {
            super::snapshot::walk(&p, &mut files);
        } else {
            files.push(p);
        }
    }
    let mut snaps = Snapshots::default();
    let mut items = 0;
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(f).expect("read a source file");
        if !text.contains("symm_kernel") {
            continue;
        }
        let rel = f
            .strip_prefix(&ws)
            .expect("under the workspace")
            .to_string_lossy()
            .replace('\\', "/");
        let mut file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let mut finder = Finder::default();
        finder.visit_file_mut(&mut file);
        let dir = format!("workspace/{}", rel.trim_end_matches(".rs"));
        let mut names: Vec<String> = Vec::new();
        for (name, attr, item) in finder.found {
            // Names repeat where tests declare kernels inside functions.
            let n = names.iter().filter(|m| **m == name).count();
            names.push(name.clone());
            let stem = if n == 0 {
                name.clone()
            } else {
                format!("{name}_{}", n + 1)
            };
            record(
                &mut snaps,
                &format!("{dir}/{stem}"),
                &format!("`{name}` in {rel}"),
                attr,
                item,
            );
            items += 1;
        }
    }
    assert!(
        items > 50,
        "found only {items} #[symm_kernel] items; is the workspace there?"
    );
    snaps.finish("workspace");
}
