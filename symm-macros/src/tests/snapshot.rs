//! Golden snapshots of expansions: the generated CUDA C (`.cu.snap`), the Rust
//! expansion (`.expanded.rs.snap`) and, for rejected items, the error messages
//! (`.errors`), under `symm-macros/tests/expand/`.
//!
//! A snapshot that differs, is missing or is no longer produced fails the
//! test with a diff; `SYMM_BLESS=1 cargo test -p symm-macros` rewrites them,
//! so that changes to generated code are reviewed as diffs of these files.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

use crate::generate::expand;

/// Root of the snapshot files.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expand")
}

fn blessing() -> bool {
    std::env::var_os("SYMM_BLESS").is_some_and(|v| v != "0" && !v.is_empty())
}

/// What one expansion produced, as text.
pub struct Expansion {
    /// The translated function (`CUDA_BODY` or a device function's `source`).
    pub cuda: Option<String>,
    /// A kernel's `extern "C"` entry (`WRAPPER`).
    pub wrapper: Option<String>,
    /// `compile_error!` messages, in order.
    pub errors: Vec<String>,
    /// The Rust expansion, laid out one statement a line.
    pub rust: String,
}

/// Expands `#[symm_kernel(attr)] item`.
pub fn expansion(attr: TokenStream, item: TokenStream) -> Expansion {
    let out = expand(attr, item);
    let mut x = Expansion {
        cuda: string_after(&out, &["CUDA_BODY"]).or_else(|| string_after(&out, &["SOURCE"])),
        wrapper: string_after(&out, &["WRAPPER"]),
        errors: vec![],
        rust: String::new(),
    };
    errors(&out, &mut x.errors);
    let long: Vec<&str> = [&x.cuda, &x.wrapper]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let mut p = Pretty {
        out: String::new(),
        depth: 0,
        inline: 0,
        fresh: true,
        long: &long,
    };
    p.stream(out, true);
    x.rust = p.out.trim_end().to_string() + "\n";
    x
}

/// The value of the first string literal after the first of `idents`.
fn string_after(ts: &TokenStream, idents: &[&str]) -> Option<String> {
    let mut armed = false;
    for tt in ts.clone() {
        match tt {
            TokenTree::Ident(i) if idents.iter().any(|n| i == n) => armed = true,
            TokenTree::Literal(l) if armed => {
                if let Ok(s) = syn::parse2::<syn::LitStr>(TokenTree::Literal(l).into()) {
                    return Some(s.value());
                }
            }
            TokenTree::Group(g) => {
                if let Some(s) = string_after(&g.stream(), idents) {
                    return Some(s);
                }
            }
            _ => {}
        }
    }
    None
}

/// The messages of every `compile_error!` in `ts`.
fn errors(ts: &TokenStream, out: &mut Vec<String>) {
    let mut armed = false;
    for tt in ts.clone() {
        match tt {
            TokenTree::Ident(i) => armed = i == "compile_error",
            TokenTree::Group(g) if armed => {
                if let Ok(s) = syn::parse2::<syn::LitStr>(g.stream()) {
                    out.push(s.value());
                }
                armed = false;
            }
            TokenTree::Group(g) => errors(&g.stream(), out),
            TokenTree::Punct(p) if p.as_char() == '!' => {}
            _ => armed = false,
        }
    }
}

/// A readable layout of tokens: braces open indented blocks and `;` ends a
/// line, so that a change to the expansion is a small diff.
struct Pretty<'a> {
    out: String,
    depth: usize,
    /// Open `(...)`/`[...]` groups: no line breaks inside them.
    inline: usize,
    fresh: bool,
    /// String values shown only as a reference to the `.cu` snapshot.
    long: &'a [&'a str],
}

impl Pretty<'_> {
    fn word(&mut self, s: &str, space_before: bool) {
        if self.fresh {
            self.out.push_str(&"    ".repeat(self.depth));
        } else if space_before {
            self.out.push(' ');
        }
        self.out.push_str(s);
        self.fresh = false;
    }

    fn newline(&mut self) {
        if !self.fresh && self.inline == 0 {
            self.out.push('\n');
            self.fresh = true;
        }
    }

    /// Lays out `ts`; `space`: whether its first token is set apart.
    fn stream(&mut self, ts: TokenStream, mut space: bool) {
        let mut after_ident = false;
        let mut after_hash = false;
        for tt in ts {
            let was_ident = std::mem::replace(&mut after_ident, matches!(tt, TokenTree::Ident(_)));
            let was_hash = std::mem::replace(
                &mut after_hash,
                matches!(&tt, TokenTree::Punct(p) if p.as_char() == '#'),
            );
            match tt {
                TokenTree::Group(g) => match g.delimiter() {
                    Delimiter::Brace => {
                        self.word("{", space);
                        self.newline();
                        self.depth += 1;
                        self.stream(g.stream(), true);
                        self.depth -= 1;
                        self.newline();
                        self.word("}", true);
                        self.newline();
                        space = true;
                    }
                    d => {
                        let (open, close) = match d {
                            Delimiter::Parenthesis => ("(", ")"),
                            Delimiter::Bracket => ("[", "]"),
                            _ => ("", ""),
                        };
                        self.word(open, space);
                        self.inline += 1;
                        self.stream(g.stream(), false);
                        self.inline -= 1;
                        self.word(close, false);
                        // An outer attribute gets its own line.
                        if was_hash && d == Delimiter::Bracket && self.inline == 0 {
                            self.newline();
                        }
                        space = true;
                    }
                },
                TokenTree::Punct(p) => {
                    let c = p.as_char();
                    self.word(&c.to_string(), space && !(c == '!' && was_ident));
                    if c == ';' && self.inline == 0 {
                        self.newline();
                    }
                    space = p.spacing() == Spacing::Alone && !matches!(c, '#' | '!' | '&');
                }
                TokenTree::Literal(l) => {
                    let shown =
                        match syn::parse2::<syn::LitStr>(TokenTree::Literal(l.clone()).into()) {
                            Ok(s) if self.long.iter().any(|c| s.value().contains(c)) => {
                                "\"(CUDA C: see the .cu snapshot)\"".to_string()
                            }
                            _ => l.to_string(),
                        };
                    self.word(&shown, space);
                    space = true;
                }
                TokenTree::Ident(i) => {
                    self.word(&i.to_string(), space);
                    space = true;
                }
            }
        }
    }
}

/// A line diff (longest common subsequence) with three lines of context.
pub fn diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // Edit script: (tag, line), tag one of ' ', '-', '+'.
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    let near_change = |k: usize| {
        let lo = k.saturating_sub(3);
        let hi = (k + 3).min(ops.len() - 1);
        ops[lo..=hi].iter().any(|(t, _)| *t != ' ')
    };
    let mut out = String::new();
    let mut skipping = false;
    for (k, (tag, line)) in ops.iter().enumerate() {
        if near_change(k) {
            let _ = writeln!(out, "{tag}{line}");
            skipping = false;
        } else if !skipping {
            out.push_str("   ...\n");
            skipping = true;
        }
    }
    out
}

/// Checks (or, when blessing, writes) snapshots and reports every problem
/// at once.
#[derive(Default)]
pub struct Snapshots {
    seen: BTreeSet<PathBuf>,
    problems: Vec<String>,
}

impl Snapshots {
    /// Compares `actual` to the snapshot at `rel` (relative to [`root`]).
    pub fn check(&mut self, rel: &str, actual: &str) {
        let path = root().join(rel);
        assert!(self.seen.insert(path.clone()), "two snapshots named {rel}");
        let expected = std::fs::read_to_string(&path).ok();
        if expected.as_deref() == Some(actual) {
            return;
        }
        if blessing() {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).expect("create the snapshot folder");
            }
            std::fs::write(&path, actual).expect("write the snapshot");
            return;
        }
        self.problems.push(match expected {
            None => format!("missing snapshot {rel}; its expansion:\n{actual}"),
            Some(old) => format!(
                "snapshot {rel} differs (- snapshot, + now):\n{}",
                diff(&old, actual)
            ),
        });
    }

    /// Fails on stale files under `dir` (relative to [`root`]) that no
    /// check produced (blessing deletes them), then on every problem found.
    pub fn finish(mut self, dir: &str) {
        let mut files = Vec::new();
        walk(&root().join(dir), &mut files);
        for f in files {
            if !self.seen.contains(&f) {
                if blessing() {
                    std::fs::remove_file(&f).expect("remove a stale snapshot");
                } else {
                    self.problems.push(format!(
                        "stale snapshot {} (nothing produces it)",
                        f.display()
                    ));
                }
            }
        }
        assert!(
            self.problems.is_empty(),
            "{}\n\n{} snapshot problem(s); if the changes are intended, rerun with SYMM_BLESS=1 and review the diff",
            self.problems.join("\n\n"),
            self.problems.len()
        );
    }
}

/// Every file under `dir`, recursively, sorted.
pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}
