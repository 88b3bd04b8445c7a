//! The runtime's top-level modules form no import cycle (ARCHITECTURE.md's
//! layering): each module uses only modules below it. A module is a file or
//! directory directly under `src/`; `crate::x` paths and `use crate::{x, ..}`
//! groups count, unit tests (`#[cfg(test)] mod`) do not.
//! `scripts/module-graph.py` prints the same graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `text` without `//` comments and without `#[cfg(test)] mod x { .. }`.
fn code(text: &str) -> String {
    let no_comments: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::new();
    let mut rest = no_comments.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let is_mod = after["#[cfg(test)]".len()..]
            .trim_start()
            .starts_with("mod ");
        match (is_mod, after.find('{')) {
            (true, Some(open)) => {
                let mut depth = 0;
                let mut end = after.len();
                for (i, c) in after[open..].char_indices() {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                rest = &after[end..];
            }
            _ => {
                out.push_str("#[cfg(test)]");
                rest = &after["#[cfg(test)]".len()..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level modules `text` refers to.
fn uses(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let tail = &text[at + "crate::".len()..];
        if let Some(group) = tail.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            found.extend(group.split(',').map(|i| ident(i.trim())));
        } else {
            found.insert(ident(tail));
        }
    }
    found
}

/// The name `private.rs` is mounted under: `__private_<version>`.
fn private_module() -> String {
    format!(
        "__private_{}",
        env!("CARGO_PKG_VERSION").replace(['.', '-', '+'], "_")
    )
}

#[test]
fn the_runtime_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let module_of = |p: &Path| -> String {
        let rel = p.strip_prefix(&src).expect("under src");
        let top = rel.components().next().expect("a component");
        let top = top.as_os_str().to_string_lossy();
        let m = top.trim_end_matches(".rs").to_string();
        // `private.rs` is mounted as `__private_<version>`.
        if m == "private" {
            private_module()
        } else {
            m
        }
    };
    let modules: BTreeSet<String> = files.iter().map(|p| module_of(p)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &files {
        let m = module_of(p);
        if m == "lib" {
            continue;
        }
        let text = code(&std::fs::read_to_string(p).expect("read a source file"));
        let edges = graph.entry(m.clone()).or_default();
        for u in uses(&text) {
            if u != m && modules.contains(&u) && u != "lib" {
                edges.insert(u);
            }
        }
    }
    assert!(graph.len() > 10, "found only {:?}", graph.keys());
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import cycle among symm-runtime's modules: {}",
            cycle.join(" -> ")
        );
    }
}

type Graph = BTreeMap<String, BTreeSet<String>>;

/// A cycle of `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    // Depth-first search for a back edge, naming the cycle it closes.
    fn visit(
        m: &str,
        graph: &Graph,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut cycle = path[at..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for u in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(u, graph, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut done, &mut Vec::new()))
}

/// The check can fail: uses are found (unit tests left out), and a cycle is
/// caught and named.
#[test]
fn uses_are_found_and_a_cycle_is_named() {
    let a = code("use crate::b::X;\n#[cfg(test)]\nmod tests { use crate::c::Y; }\n");
    assert_eq!(uses(&a), BTreeSet::from(["b".to_string()]));
    let g = uses("use crate::{a, b::Z};\nfn f() { crate::d::g() }");
    assert_eq!(g, ["a", "b", "d"].iter().map(|s| s.to_string()).collect());
    let edge = |a: &str, b: &str| (a.to_string(), BTreeSet::from([b.to_string()]));
    let acyclic: Graph = [edge("a", "b"), edge("b", "c")].into();
    assert_eq!(find_cycle(&acyclic), None);
    let cyclic: Graph = [edge("a", "b"), edge("b", "c"), edge("c", "a")].into();
    assert_eq!(
        find_cycle(&cyclic).map(|c| c.join(" -> ")),
        Some("a -> b -> c -> a".to_string())
    );
}
