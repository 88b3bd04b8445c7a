//! The workspace's module graphs have no cycle (ARCHITECTURE.md's layering):
//! in every module that has submodules (a folder), its own file and its
//! submodules use one another in one direction only. Checked at every level,
//! this is the same as "no cycle among files, and none among the folders
//! that hold them".
//!
//! The one implementation of the check; `scripts/module-graph.py` only runs
//! `print_module_graphs` below. Sources are read as tokens (proc-macro2),
//! and paths are resolved as rustc would, far enough for a dependency graph:
//!
//! - `crate::`, `$crate::`, `self::`, `super::`, `extern crate self as x`'s
//!   `x::`, and names in scope (submodules, items, imports, globs) start a
//!   path; `use` trees are expanded (`use crate::{a::{b, c}, d}`);
//! - a path through a re-export (`crate::Error` where lib.rs has
//!   `pub use error::Error`) is an edge to the file that defines the item;
//!   a module's import of its own submodules' items is no edge by itself
//!   (a facade: what submodules reach through `crate::`), only where the
//!   module's own code uses the name; an import of anything else is;
//! - a glob import counts the names the file uses through it;
//! - `#[cfg(test)]` items (unit tests) and the bodies of `quote!`-like
//!   macros (code for another crate) do not count.
//!
//! A path it cannot resolve to the end counts as a use of the module it
//! reached, so such a miss errs towards a cycle. What it cannot see: a
//! bare name that resolves nowhere, method calls (an `impl` block split
//! across files, as the functional layer's `Collectives` is, calls its
//! methods unseen) and macros in textual scope; those add no edge.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::Path;

/// The crates whose graphs must have no cycle, by directory under the
/// workspace root. Add a crate here once its graph is clean.
const CHECKED: &[&str] = &["symm-runtime", "symm-macros", "symm-abi", "kernels"];

/// Crates only printed (`print_module_graphs`), not yet held to the rule
/// (none today; a crate under restructuring may wait here).
const PENDING: &[&str] = &[];

/// Macros whose bodies are code for another crate: their paths are not
/// this crate's.
const FOREIGN_MACROS: &[&str] = &[
    "quote",
    "quote_spanned",
    "parse_quote",
    "parse_quote_spanned",
];

type ModId = usize;
type FileId = usize;

/// One module: a file, or an inline `mod x { .. }` inside one.
struct Module {
    parent: Option<ModId>,
    file: FileId,
    /// Where its `mod x;` files live.
    dir: String,
    children: BTreeMap<String, ModId>,
    /// Names it defines (functions, types, traits, constants, macros).
    items: BTreeSet<String>,
    imports: Vec<Import>,
}

#[derive(Clone)]
struct Import {
    /// The module whose scope the path is written in.
    ctx: ModId,
    file: FileId,
    line: usize,
    path: Vec<String>,
    /// The name it binds; `None` for a glob.
    name: Option<String>,
    public: bool,
    /// Written inside a function or block: in scope there only.
    nested: bool,
}

/// A path or a bare name used in code.
struct Use {
    ctx: ModId,
    file: FileId,
    line: usize,
    path: Vec<String>,
}

struct SourceFile {
    rel: String,
    /// The module the file is (never an inline one).
    module: ModId,
    lines: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Entity {
    Module(ModId),
    /// An item, by the file that defines it.
    Item(FileId),
    /// Outside the crate (std, dependencies, the prelude).
    External,
}

/// One crate's modules, imports and uses, as read from its sources.
struct Crate {
    name: String,
    files: Vec<SourceFile>,
    mods: Vec<Module>,
    /// `extern crate self as <alias>`: another name of the crate root.
    alias: Option<String>,
    paths: Vec<Use>,
    /// Bare names in code, for the bindings that only they reveal (globs,
    /// a facade's re-exports used by the facade itself).
    words: Vec<Use>,
    /// Files (and folders) of `#[cfg(test)] mod x;`.
    test_only: Vec<String>,
    /// `#[macro_export]` macros, by name and defining file.
    exported: Vec<(String, FileId)>,
    /// [`Crate::lookup`]'s answers: globs that import each other (`use
    /// super::*` below a `pub use child::*`) would otherwise make lookups
    /// exponential. A lookup in progress answers `None` to itself.
    memo: RefCell<HashMap<(ModId, String, bool), Option<Entity>>>,
}

/// An edge's example: where the dependency is written.
#[derive(Clone)]
struct Example {
    file: FileId,
    line: usize,
    path: String,
}

type Edges = BTreeMap<(FileId, FileId), Example>;

fn dir_of(rel: &str) -> String {
    rel.rsplit_once('/')
        .map(|(d, _)| d.to_string())
        .unwrap_or_default()
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Drops `a/../` pairs, for `#[path]`s that climb.
fn normalize(rel: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for part in rel.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                out.pop();
            }
            p => out.push(p),
        }
    }
    out.join("/")
}

fn is_punct(t: Option<&TokenTree>, c: char) -> bool {
    matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

fn ident(t: Option<&TokenTree>) -> Option<String> {
    match t {
        Some(TokenTree::Ident(i)) => Some(i.to_string()),
        _ => None,
    }
}

/// `::` at `tts[i]`.
fn is_path_sep(tts: &[TokenTree], i: usize) -> bool {
    matches!(tts.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ':' && p.spacing() == Spacing::Joint)
        && is_punct(tts.get(i + 1), ':')
}

fn line_of(t: &TokenTree) -> usize {
    t.span().start().line
}

/// Whether an attribute's tokens (inside `#[..]`) are `cfg(test)` or
/// `cfg(all(test, ..))`: code that exists only in unit tests.
fn is_test_cfg(attr: &TokenStream) -> bool {
    let tts: Vec<TokenTree> = attr.clone().into_iter().collect();
    if ident(tts.first()).as_deref() != Some("cfg") {
        return false;
    }
    let Some(TokenTree::Group(g)) = tts.get(1) else {
        return false;
    };
    let inner: Vec<TokenTree> = g.stream().into_iter().collect();
    match ident(inner.first()).as_deref() {
        Some("test") => inner.len() == 1,
        Some("all") => match inner.get(1) {
            Some(TokenTree::Group(a)) => a
                .stream()
                .into_iter()
                .any(|t| matches!(&t, TokenTree::Ident(i) if i == "test")),
            _ => false,
        },
        _ => false,
    }
}

/// The index just past the item or statement that starts at `i`.
fn item_end(tts: &[TokenTree], i: usize) -> usize {
    let mut kw = None;
    for t in &tts[i..] {
        if let TokenTree::Ident(id) = t {
            let s = id.to_string();
            if !matches!(s.as_str(), "pub" | "unsafe" | "async" | "extern") {
                kw = Some(s);
                break;
            }
        }
    }
    let to_semicolon = matches!(
        kw.as_deref(),
        Some("use" | "const" | "static" | "type" | "let")
    );
    let mut j = i;
    while j < tts.len() {
        match &tts[j] {
            TokenTree::Punct(p) if p.as_char() == ';' => return j + 1,
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace && !to_semicolon => {
                return j + 1 + usize::from(is_punct(tts.get(j + 1), ';'));
            }
            // `pub(crate)` is no body.
            _ => j += 1,
        }
    }
    j
}

/// The `use` trees of `tts` (a `use` item's tokens, without `use` and `;`),
/// each as (path, bound name or `None` for a glob, line).
fn use_trees(
    tts: &[TokenTree],
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>, usize)>,
) {
    let mut path = prefix.to_vec();
    let mut line = tts.first().map(line_of).unwrap_or(0);
    let mut i = 0;
    if is_path_sep(tts, 0) {
        path.push(String::new());
        i = 2;
    }
    while i < tts.len() {
        match &tts[i] {
            TokenTree::Ident(id) if id == "as" => {
                let name = ident(tts.get(i + 1)).unwrap_or_default();
                out.push((path, Some(name), line));
                return;
            }
            TokenTree::Ident(id) => {
                line = line_of(&tts[i]);
                path.push(id.to_string());
                i += 1;
            }
            TokenTree::Punct(p) if p.as_char() == '$' => {
                // `$crate`
                i += 1;
                if let Some(c) = ident(tts.get(i)) {
                    path.push(format!("${c}"));
                    i += 1;
                }
            }
            TokenTree::Punct(p) if p.as_char() == '*' => {
                out.push((path, None, line));
                return;
            }
            TokenTree::Punct(p) if p.as_char() == ':' => i += 1,
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                for part in inner.split(|t| is_punct(Some(t), ',')) {
                    if !part.is_empty() {
                        use_trees(part, &path, out);
                    }
                }
                return;
            }
            _ => i += 1,
        }
    }
    // `a::b::{self}` binds `b`.
    if path.last().map(String::as_str) == Some("self") {
        path.pop();
    }
    if let Some(name) = path.last().cloned() {
        out.push((path, Some(name), line));
    }
}

/// What kind of token stream a walk is in.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    /// A module's items.
    Module,
    /// A function body, an impl, a type's fields: items here are not the
    /// module's names.
    Nested,
}

impl Crate {
    /// Reads the crate whose `src/` is `src`, from its root (lib.rs or
    /// main.rs), following `mod` declarations.
    fn read(name: &str, src: &Path) -> Crate {
        let root = ["lib.rs", "main.rs"]
            .into_iter()
            .find(|r| src.join(r).exists())
            .unwrap_or_else(|| panic!("{name}: no lib.rs or main.rs in {}", src.display()));
        Crate::parse(name, root, &|rel| {
            std::fs::read_to_string(src.join(rel)).ok()
        })
    }

    /// Parses a crate whose root file is `root`, reading files (by path
    /// relative to `src/`) through `read`.
    fn parse(name: &str, root: &str, read: &dyn Fn(&str) -> Option<String>) -> Crate {
        let mut c = Crate {
            name: name.to_string(),
            files: Vec::new(),
            mods: Vec::new(),
            alias: None,
            paths: Vec::new(),
            words: Vec::new(),
            test_only: Vec::new(),
            exported: Vec::new(),
            memo: RefCell::new(HashMap::new()),
        };
        c.add_file(root, None, read);
        for (name, file) in std::mem::take(&mut c.exported) {
            c.exported_macro(name, file);
        }
        c
    }

    fn add_file(
        &mut self,
        rel: &str,
        parent: Option<ModId>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> ModId {
        let text = read(rel).unwrap_or_else(|| panic!("{}: cannot read {rel}", self.name));
        let file = self.files.len();
        let module = self.mods.len();
        let stem = rel.rsplit('/').next().unwrap_or(rel);
        let dir = if matches!(stem, "lib.rs" | "main.rs" | "mod.rs") || parent.is_none() {
            dir_of(rel)
        } else {
            rel.trim_end_matches(".rs").to_string()
        };
        self.files.push(SourceFile {
            rel: rel.to_string(),
            module,
            lines: text.lines().map(str::to_string).collect(),
        });
        self.mods.push(Module {
            parent,
            file,
            dir,
            children: BTreeMap::new(),
            items: BTreeSet::new(),
            imports: Vec::new(),
        });
        let tokens: TokenStream = text
            .parse()
            .unwrap_or_else(|e| panic!("{}: cannot tokenize {rel}: {e:?}", self.name));
        self.walk(tokens, module, Level::Module, read);
        module
    }

    fn root(&self) -> ModId {
        0
    }

    /// Records the modules, items, imports and paths of `tokens`, written
    /// in module `ctx`.
    fn walk(
        &mut self,
        tokens: TokenStream,
        ctx: ModId,
        level: Level,
        read: &dyn Fn(&str) -> Option<String>,
    ) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let file = self.mods[ctx].file;
        let mut path_attr: Option<String> = None;
        let mut exported = false;
        let mut i = 0;
        while i < tts.len() {
            // Attributes: `#[..]`, `#![..]`.
            if is_punct(tts.get(i), '#') {
                let inner = is_punct(tts.get(i + 1), '!');
                let at = i + 1 + usize::from(inner);
                if let Some(TokenTree::Group(g)) = tts.get(at) {
                    if g.delimiter() == Delimiter::Bracket {
                        let attr = g.stream();
                        let words: Vec<TokenTree> = attr.clone().into_iter().collect();
                        match ident(words.first()).as_deref() {
                            Some("path") => {
                                if let Some(TokenTree::Literal(l)) = words.get(2) {
                                    path_attr = Some(l.to_string().trim_matches('"').to_string());
                                }
                            }
                            Some("macro_export") => exported = true,
                            _ => {}
                        }
                        i = at + 1;
                        if is_test_cfg(&attr) && !inner {
                            i = self.skip_test_item(&tts, i, ctx);
                            path_attr = None;
                        }
                        continue;
                    }
                }
            }
            let tt = &tts[i];
            let prev = i.checked_sub(1).and_then(|p| tts.get(p));
            match tt {
                TokenTree::Ident(id) => {
                    let s = id.to_string();
                    let public = matches!(prev, Some(TokenTree::Ident(p)) if p == "pub")
                        || (matches!(prev, Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
                            && i >= 2
                            && ident(tts.get(i - 2)).as_deref() == Some("pub"));
                    match s.as_str() {
                        "use" if !is_punct(prev, '.') => {
                            let end = (i..tts.len())
                                .find(|&j| is_punct(tts.get(j), ';'))
                                .unwrap_or(tts.len());
                            let mut trees = Vec::new();
                            use_trees(&tts[i + 1..end], &[], &mut trees);
                            for (path, name, line) in trees {
                                self.mods[ctx].imports.push(Import {
                                    ctx,
                                    file,
                                    line,
                                    path,
                                    name,
                                    public,
                                    nested: level == Level::Nested,
                                });
                            }
                            i = end + 1;
                            continue;
                        }
                        "mod" if level == Level::Module => {
                            let name = ident(tts.get(i + 1)).unwrap_or_default();
                            match tts.get(i + 2) {
                                Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                                    let m = self.mods.len();
                                    let dir = join(&self.mods[ctx].dir, &name);
                                    self.mods.push(Module {
                                        parent: Some(ctx),
                                        file,
                                        dir,
                                        children: BTreeMap::new(),
                                        items: BTreeSet::new(),
                                        imports: Vec::new(),
                                    });
                                    self.mods[ctx].children.insert(name, m);
                                    self.walk(g.stream(), m, Level::Module, read);
                                    i += 3;
                                }
                                _ => {
                                    let rel = self.mod_file(ctx, &name, path_attr.take(), read);
                                    let m = self.add_file(&rel, Some(ctx), read);
                                    self.mods[ctx].children.insert(name, m);
                                    i += 3;
                                }
                            }
                            continue;
                        }
                        "extern" if ident(tts.get(i + 1)).as_deref() == Some("crate") => {
                            if ident(tts.get(i + 2)).as_deref() == Some("self")
                                && ident(tts.get(i + 3)).as_deref() == Some("as")
                            {
                                self.alias = ident(tts.get(i + 4));
                            }
                            i = item_end(&tts, i);
                            continue;
                        }
                        "macro_rules" if is_punct(tts.get(i + 1), '!') => {
                            if let Some(name) = ident(tts.get(i + 2)) {
                                self.mods[ctx].items.insert(name.clone());
                                if exported {
                                    self.exported.push((name, file));
                                }
                            }
                            exported = false;
                            if let Some(TokenTree::Group(g)) = tts.get(i + 3) {
                                self.walk(g.stream(), ctx, Level::Nested, read);
                            }
                            i += 4;
                            continue;
                        }
                        "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static"
                        | "union"
                            if level == Level::Module && !is_punct(prev, '\'') =>
                        {
                            let mut j = i + 1;
                            if ident(tts.get(j)).as_deref() == Some("mut") {
                                j += 1;
                            }
                            if let Some(name) = ident(tts.get(j)) {
                                if !matches!(name.as_str(), "fn" | "unsafe" | "extern" | "async") {
                                    self.mods[ctx].items.insert(name);
                                }
                            }
                        }
                        m if FOREIGN_MACROS.contains(&m) && is_punct(tts.get(i + 1), '!') => {
                            i += 3;
                            continue;
                        }
                        _ => {}
                    }
                    // A path: `a::b::c`, read whole so that no segment
                    // starts another.
                    if is_path_sep(&tts, i + 1) && !is_punct(prev, '.') {
                        let (path, end) = read_path(&tts, i);
                        self.paths.push(Use {
                            ctx,
                            file,
                            line: line_of(tt),
                            path,
                        });
                        i = end;
                        continue;
                    }
                    let defines = matches!(prev, Some(TokenTree::Ident(p)) if matches!(
                        p.to_string().as_str(),
                        "let" | "mut" | "ref" | "fn" | "struct" | "enum" | "trait" | "type"
                            | "const" | "static" | "mod" | "as" | "union"
                    ));
                    let field = is_punct(tts.get(i + 1), ':') && !is_path_sep(&tts, i + 1);
                    if !defines
                        && !field
                        && !is_punct(prev, '.')
                        && !is_punct(prev, '$')
                        && !is_punct(prev, '\'')
                    {
                        self.words.push(Use {
                            ctx,
                            file,
                            line: line_of(tt),
                            path: vec![s],
                        });
                    }
                    i += 1;
                }
                TokenTree::Punct(p)
                    if p.as_char() == '$' && ident(tts.get(i + 1)).as_deref() == Some("crate") =>
                {
                    let (mut path, end) = read_path(&tts, i + 1);
                    path[0] = "$crate".to_string();
                    self.paths.push(Use {
                        ctx,
                        file,
                        line: line_of(tt),
                        path,
                    });
                    i = end;
                }
                TokenTree::Punct(p)
                    if p.as_char() == ':'
                        && is_path_sep(&tts, i)
                        && ident(tts.get(i + 2)).is_some()
                        && !matches!(prev, Some(TokenTree::Ident(_))) =>
                {
                    // `::x::y`: a crate's name, perhaps the alias.
                    let (mut path, end) = read_path(&tts, i + 2);
                    path.insert(0, String::new());
                    self.paths.push(Use {
                        ctx,
                        file,
                        line: line_of(tt),
                        path,
                    });
                    i = end;
                }
                TokenTree::Punct(p) if p.as_char() == ';' => {
                    path_attr = None;
                    exported = false;
                    i += 1;
                }
                TokenTree::Group(g) => {
                    // Items inside a macro call at module level (`intrinsic! {
                    // fn .. }`) are the module's items.
                    let lvl = if level == Level::Module && is_punct(prev, '!') {
                        Level::Module
                    } else {
                        Level::Nested
                    };
                    self.walk(g.stream(), ctx, lvl, read);
                    i += 1;
                }
                _ => i += 1,
            }
        }
    }

    /// `#[macro_export]` puts a macro at the root: bound there as if
    /// imported from the file that defines it (once every module is known).
    fn exported_macro(&mut self, name: String, file: FileId) {
        let root = self.root();
        let defining = self.files[file].module;
        if defining != root {
            let mut path = vec!["crate".to_string()];
            path.extend(self.module_path(defining));
            path.push(name.clone());
            let root_file = self.mods[root].file;
            self.mods[root].imports.push(Import {
                ctx: root,
                file: root_file,
                line: 0,
                path,
                name: Some(name),
                public: true,
                nested: false,
            });
        }
    }

    /// Skips a `#[cfg(test)]` item at `i`, remembering the file of a
    /// `mod x;` so that it is not reported as unread.
    fn skip_test_item(&mut self, tts: &[TokenTree], i: usize, ctx: ModId) -> usize {
        let end = item_end(tts, i);
        let toks = &tts[i..end];
        if let Some(at) = toks
            .iter()
            .position(|t| matches!(t, TokenTree::Ident(x) if x == "mod"))
        {
            if let Some(name) = ident(toks.get(at + 1)) {
                if is_punct(toks.get(at + 2), ';') {
                    let dir = &self.mods[ctx].dir;
                    self.test_only.push(join(dir, &format!("{name}.rs")));
                    self.test_only.push(join(dir, &name) + "/");
                }
            }
        }
        end
    }

    /// The file of `mod name;` declared in `ctx`.
    fn mod_file(
        &self,
        ctx: ModId,
        name: &str,
        path_attr: Option<String>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> String {
        if let Some(p) = path_attr {
            let base = dir_of(&self.files[self.mods[ctx].file].rel);
            return normalize(&join(&base, &p));
        }
        let dir = &self.mods[ctx].dir;
        let flat = join(dir, &format!("{name}.rs"));
        if read(&flat).is_some() {
            flat
        } else {
            join(dir, &format!("{name}/mod.rs"))
        }
    }

    /// The names from the root down to `m`.
    fn module_path(&self, m: ModId) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = m;
        while let Some(p) = self.mods[cur].parent {
            let name = self.mods[p]
                .children
                .iter()
                .find(|(_, &c)| c == cur)
                .map(|(n, _)| n.clone())
                .unwrap_or_default();
            out.push(name);
            cur = p;
        }
        out.reverse();
        out
    }

    /// What `path`, written in module `ctx`, names.
    fn resolve(&self, ctx: ModId, path: &[String], depth: usize) -> Entity {
        if depth > 40 || path.is_empty() {
            return Entity::External;
        }
        let first = path[0].as_str();
        let (mut at, mut rest) = match first {
            "crate" | "$crate" => (Entity::Module(self.root()), &path[1..]),
            a if self.alias.as_deref() == Some(a) => (Entity::Module(self.root()), &path[1..]),
            "" => match path.get(1) {
                Some(a) if self.alias.as_ref() == Some(a) => {
                    (Entity::Module(self.root()), &path[2..])
                }
                _ => return Entity::External,
            },
            "self" => (Entity::Module(ctx), &path[1..]),
            "super" => {
                let mut m = ctx;
                let mut k = 0;
                while path.get(k).map(String::as_str) == Some("super") {
                    m = self.mods[m].parent.unwrap_or(m);
                    k += 1;
                }
                (Entity::Module(m), &path[k..])
            }
            name => match self.lookup(ctx, name, true, depth + 1) {
                Some(e) => (e, &path[1..]),
                None => return Entity::External,
            },
        };
        while let (Entity::Module(m), Some(seg)) = (at, rest.first()) {
            at = self
                .lookup(m, seg, false, depth + 1)
                // Not found (a macro's item, an enum's variant through a
                // glob): the path still reached `m`.
                .unwrap_or(Entity::Item(self.mods[m].file));
            rest = &rest[1..];
        }
        at
    }

    /// What `name` means in module `m`: a submodule, an item, an import
    /// (those in blocks only when `inside`), or a name through a glob.
    fn lookup(&self, m: ModId, name: &str, inside: bool, depth: usize) -> Option<Entity> {
        let key = (m, name.to_string(), inside);
        if let Some(&known) = self.memo.borrow().get(&key) {
            return known;
        }
        self.memo.borrow_mut().insert(key.clone(), None);
        let found = self.lookup_from(m, name, inside, depth, &mut Vec::new());
        self.memo.borrow_mut().insert(key, found);
        found
    }

    /// `lookup`, through globs not yet in `seen` (globs may import each
    /// other).
    fn lookup_from(
        &self,
        m: ModId,
        name: &str,
        inside: bool,
        depth: usize,
        seen: &mut Vec<ModId>,
    ) -> Option<Entity> {
        if depth > 40 || seen.contains(&m) {
            return None;
        }
        seen.push(m);
        let module = &self.mods[m];
        if let Some(&c) = module.children.get(name) {
            return Some(Entity::Module(c));
        }
        if module.items.contains(name) {
            return Some(Entity::Item(module.file));
        }
        let visible = |i: &&Import| inside || !i.nested;
        if let Some(imp) = module
            .imports
            .iter()
            .filter(visible)
            .find(|i| i.name.as_deref() == Some(name))
        {
            return Some(self.resolve(imp.ctx, &imp.path, depth + 1));
        }
        for imp in module
            .imports
            .iter()
            .filter(visible)
            .filter(|i| i.name.is_none())
        {
            if let Entity::Module(g) = self.resolve(imp.ctx, &imp.path, depth + 1) {
                if let Some(e) = self.lookup_from(g, name, false, depth + 1, seen) {
                    return Some(e);
                }
            }
        }
        None
    }

    fn file_of(&self, e: Entity) -> Option<FileId> {
        match e {
            Entity::Module(m) => Some(self.mods[m].file),
            Entity::Item(f) => Some(f),
            Entity::External => None,
        }
    }

    /// Whether file module `inner` is `outer` or below it.
    fn within(&self, inner: ModId, outer: ModId) -> bool {
        let mut cur = Some(inner);
        while let Some(c) = cur {
            if c == outer {
                return true;
            }
            cur = self.mods[c].parent;
        }
        false
    }

    /// Every file-to-file dependency, with where it is written.
    fn edges(&self) -> Edges {
        let mut edges = Edges::new();
        let mut add = |from: FileId, to: Option<FileId>, line: usize, path: String| {
            if let Some(to) = to {
                if to != from {
                    edges.entry((from, to)).or_insert(Example {
                        file: from,
                        line,
                        path,
                    });
                }
            }
        };
        // Names whose import is no edge by itself: globs, and a facade's
        // imports of its own submodules' items; a word of the file may use
        // them.
        let mut through: BTreeMap<(ModId, String), Vec<Entity>> = BTreeMap::new();
        let mut globs: BTreeMap<ModId, Vec<(Import, ModId)>> = BTreeMap::new();
        for module in &self.mods {
            for imp in &module.imports {
                if imp.line == 0 {
                    continue; // a `#[macro_export]` binding
                }
                let shown = format!("use {}", show_path(&imp.path, imp.name.as_deref()));
                let target = self.resolve(imp.ctx, &imp.path, 0);
                let home = self.files[imp.file].module;
                // Any import of a submodule's item, private ones too: a
                // private `use` in a parent is visible to every submodule.
                let facade = self.file_of(target).is_some_and(|f| {
                    self.files[f].module != home && self.within(self.files[f].module, home)
                });
                match (&imp.name, target) {
                    (None, Entity::Module(g)) if !imp.public || facade => {
                        globs.entry(imp.ctx).or_default().push((imp.clone(), g));
                    }
                    (Some(name), _) if facade => {
                        through
                            .entry((imp.ctx, name.clone()))
                            .or_default()
                            .push(target);
                    }
                    _ => add(imp.file, self.file_of(target), imp.line, shown),
                }
            }
        }
        for u in &self.paths {
            let target = self.resolve(u.ctx, &u.path, 0);
            add(u.file, self.file_of(target), u.line, u.path.join("::"));
        }
        let mut glob_used: BTreeSet<(ModId, usize)> = BTreeSet::new();
        for w in &self.words {
            let name = &w.path[0];
            for target in through.get(&(w.ctx, name.clone())).into_iter().flatten() {
                add(
                    w.file,
                    self.file_of(*target),
                    w.line,
                    format!("{name} (re-exported here)"),
                );
            }
            let module = &self.mods[w.ctx];
            let bound = module.children.contains_key(name)
                || module.items.contains(name)
                || module
                    .imports
                    .iter()
                    .any(|i| i.name.as_deref() == Some(name.as_str()));
            if bound {
                continue;
            }
            for (k, (imp, g)) in globs.get(&w.ctx).into_iter().flatten().enumerate() {
                if let Some(e) = self.lookup(*g, name, false, 0) {
                    glob_used.insert((w.ctx, k));
                    add(
                        w.file,
                        self.file_of(e),
                        w.line,
                        format!("{name} (through use {})", show_path(&imp.path, None)),
                    );
                    break;
                }
            }
        }
        // A private glob none of whose names was seen still depends on its
        // module.
        for (&ctx, list) in &globs {
            for (k, (imp, g)) in list.iter().enumerate() {
                if !imp.public && !glob_used.contains(&(ctx, k)) {
                    add(
                        imp.file,
                        Some(self.mods[*g].file),
                        imp.line,
                        format!("use {}", show_path(&imp.path, None)),
                    );
                }
            }
        }
        edges
    }

    /// The node of file `f` at the level of module `m` (whose folder holds
    /// its own file and its submodules): `None` when `f` is outside `m`,
    /// `Some(m)` for `m`'s own file, else the submodule of `m` holding `f`.
    fn node_at(&self, f: FileId, m: ModId) -> Option<ModId> {
        let mut cur = self.files[f].module;
        if cur == m {
            return Some(m);
        }
        while let Some(p) = self.mods[cur].parent {
            if p == m {
                return Some(cur);
            }
            cur = p;
        }
        None
    }

    /// A node's name: a file, or a folder when it has submodules.
    fn node_name(&self, level: ModId, n: ModId) -> String {
        let rel = &self.files[self.mods[n].file].rel;
        let has_files = self.files.iter().any(|f| {
            f.module != n
                && self.mods[f.module]
                    .parent
                    .is_some_and(|p| self.within(p, n))
        });
        if n != level && has_files {
            format!("{}/", self.mods[n].dir)
        } else {
            rel.clone()
        }
    }

    /// The folders: file modules with submodules in files of their own.
    fn levels(&self) -> Vec<ModId> {
        let mut out: Vec<ModId> = self
            .files
            .iter()
            .filter_map(|f| self.mods[f.module].parent)
            .map(|p| self.files[self.mods[p].file].module)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        out.sort_by_key(|&m| self.files[self.mods[m].file].rel.clone());
        out
    }

    /// The graph among the nodes of folder `level`, each edge with one
    /// example.
    fn level_graph(&self, level: ModId, edges: &Edges) -> BTreeMap<(ModId, ModId), Example> {
        let mut g = BTreeMap::new();
        for (&(from, to), ex) in edges {
            if let (Some(a), Some(b)) = (self.node_at(from, level), self.node_at(to, level)) {
                if a != b {
                    g.entry((a, b)).or_insert_with(|| ex.clone());
                }
            }
        }
        g
    }

    fn show_example(&self, ex: &Example) -> String {
        let f = &self.files[ex.file];
        let src = f
            .lines
            .get(ex.line.saturating_sub(1))
            .map(|l| l.trim())
            .unwrap_or("");
        let src: String = src.chars().take(100).collect();
        format!("{}:{}: {src}    [{}]", f.rel, ex.line, ex.path)
    }

    /// Every cycle, one per strongly connected set, at every folder, as
    /// text.
    fn cycles(&self) -> Vec<String> {
        let edges = self.edges();
        let mut out = Vec::new();
        for level in self.levels() {
            let g = self.level_graph(level, &edges);
            let mut adj: BTreeMap<ModId, Vec<ModId>> = BTreeMap::new();
            for &(a, b) in g.keys() {
                adj.entry(a).or_default().push(b);
            }
            for scc in strongly_connected(&adj) {
                let cycle = shortest_cycle(&adj, &scc);
                let folder = self.files[self.mods[level].file].rel.clone();
                let mut s = format!(
                    "{}: cycle in the folder of {folder} ({} nodes tangled: {}):\n",
                    self.name,
                    scc.len(),
                    scc.iter()
                        .map(|&n| self.node_name(level, n))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                for w in cycle.windows(2) {
                    let ex = &g[&(w[0], w[1])];
                    let _ = writeln!(
                        s,
                        "  {} -> {}\n      {}",
                        self.node_name(level, w[0]),
                        self.node_name(level, w[1]),
                        self.show_example(ex)
                    );
                }
                out.push(s);
            }
        }
        out
    }

    /// Each folder's graph, as text or as Graphviz.
    fn render(&self, dot: bool, verbose: bool) -> String {
        let edges = self.edges();
        let mut s = String::new();
        for level in self.levels() {
            let g = self.level_graph(level, &edges);
            let folder = self.files[self.mods[level].file].rel.clone();
            let mut nodes: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (m, module) in self.mods.iter().enumerate() {
                if self.files[module.file].module == m
                    && (m == level
                        || module
                            .parent
                            .is_some_and(|p| self.files[self.mods[p].file].module == level))
                {
                    nodes.entry(self.node_name(level, m)).or_default();
                }
            }
            for (&(a, b), ex) in &g {
                nodes
                    .entry(self.node_name(level, a))
                    .or_default()
                    .push(self.node_name(level, b));
                if verbose {
                    let _ = writeln!(
                        s,
                        "  # {} -> {}: {}",
                        self.node_name(level, a),
                        self.node_name(level, b),
                        self.show_example(ex)
                    );
                }
            }
            if dot {
                let _ = writeln!(s, "digraph \"{}:{folder}\" {{", self.name);
                for (a, bs) in &nodes {
                    let _ = writeln!(s, "  \"{a}\";");
                    for b in bs {
                        let _ = writeln!(s, "  \"{a}\" -> \"{b}\";");
                    }
                }
                s.push_str("}\n");
            } else {
                let _ = writeln!(s, "{}: the folder of {folder}", self.name);
                for (a, bs) in &nodes {
                    let _ = writeln!(
                        s,
                        "  {a:28} -> {}",
                        if bs.is_empty() {
                            "(nothing)".to_string()
                        } else {
                            bs.join(", ")
                        }
                    );
                }
            }
        }
        s
    }

    /// Files under `src` that no `mod` reaches: the check would not see
    /// them.
    fn unread(&self, src: &Path) -> Vec<String> {
        let mut all = Vec::new();
        rust_files(src, src, &mut all);
        all.into_iter()
            .filter(|r| !self.files.iter().any(|f| &f.rel == r))
            .filter(|r| {
                !self
                    .test_only
                    .iter()
                    .any(|t| r == t || (t.ends_with('/') && r.starts_with(t.as_str())))
            })
            .collect()
    }
}

fn show_path(path: &[String], name: Option<&str>) -> String {
    let mut s = path.join("::");
    if path.is_empty() {
        return s;
    }
    match name {
        None => s.push_str("::*"),
        Some(n) if Some(n) != path.last().map(String::as_str) => {
            let _ = write!(s, " as {n}");
        }
        _ => {}
    }
    s
}

/// `a::b::c` from `tts[i]` (an identifier); stops before `::<` or `::{`.
fn read_path(tts: &[TokenTree], i: usize) -> (Vec<String>, usize) {
    let mut path = vec![ident(tts.get(i)).unwrap_or_default()];
    let mut j = i + 1;
    while is_path_sep(tts, j) {
        match ident(tts.get(j + 2)) {
            Some(s) => {
                path.push(s);
                j += 3;
            }
            None => break,
        }
    }
    (path, j)
}

fn rust_files(dir: &Path, src: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).expect("read a source folder") {
        let p = e.expect("a folder entry").path();
        if p.is_dir() {
            rust_files(&p, src, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(src).expect("under src");
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The strongly connected sets of more than one node (Tarjan).
fn strongly_connected(adj: &BTreeMap<ModId, Vec<ModId>>) -> Vec<Vec<ModId>> {
    struct State<'a> {
        adj: &'a BTreeMap<ModId, Vec<ModId>>,
        index: BTreeMap<ModId, usize>,
        low: BTreeMap<ModId, usize>,
        stack: Vec<ModId>,
        on: BTreeSet<ModId>,
        out: Vec<Vec<ModId>>,
    }
    fn visit(v: ModId, s: &mut State) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for &w in s.adj.get(&v).into_iter().flatten() {
            if !s.index.contains_key(&w) {
                visit(w, s);
                let lw = s.low[&w];
                let lv = s.low.get_mut(&v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(&v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[&v] == s.index[&v] {
            let mut c = Vec::new();
            loop {
                let w = s.stack.pop().expect("on the stack");
                s.on.remove(&w);
                c.push(w);
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                s.out.push(c);
            }
        }
    }
    let mut s = State {
        adj,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in adj.keys() {
        if !s.index.contains_key(&v) {
            visit(v, &mut s);
        }
    }
    s.out
}

/// A shortest cycle through the first node of `scc`, closed (first node
/// again at the end).
fn shortest_cycle(adj: &BTreeMap<ModId, Vec<ModId>>, scc: &[ModId]) -> Vec<ModId> {
    let start = scc[0];
    let mut prev: BTreeMap<ModId, ModId> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in adj.get(&v).into_iter().flatten() {
            if !scc.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![start, v];
                let mut cur = v;
                while cur != start {
                    cur = prev[&cur];
                    path.push(cur);
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = prev.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    scc.to_vec()
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
}

fn read_crate(dir: &str) -> (Crate, Vec<String>) {
    let src = workspace().join(dir).join("src");
    let c = Crate::read(dir, &src);
    let unread = c.unread(&src);
    (c, unread)
}

#[test]
fn the_modules_form_no_cycle() {
    let mut failures = Vec::new();
    for dir in CHECKED {
        let (c, unread) = read_crate(dir);
        assert!(
            c.files.len() > 1 || *dir == "symm-abi",
            "{dir}: read only {} files",
            c.files.len()
        );
        assert!(
            unread.is_empty(),
            "{dir}: files no `mod` reaches: {unread:?}"
        );
        failures.extend(c.cycles());
    }
    assert!(
        failures.is_empty(),
        "import cycles (ARCHITECTURE.md: each folder's files use one another in one direction only):\n\n{}",
        failures.join("\n")
    );
}

/// Prints every folder's graph of every crate, pending ones too, and their
/// cycles; never fails on a cycle. `scripts/module-graph.py` runs it;
/// `SYMM_MODULE_GRAPH=dot` prints Graphviz.
#[test]
#[ignore = "a printer: scripts/module-graph.py"]
fn print_module_graphs() {
    let dot = std::env::var("SYMM_MODULE_GRAPH").is_ok_and(|v| v == "dot");
    let verbose = std::env::var("SYMM_MODULE_GRAPH").is_ok_and(|v| v == "lines");
    for dir in CHECKED.iter().chain(PENDING) {
        let (c, unread) = read_crate(dir);
        print!("{}", c.render(dot, verbose));
        if !dot {
            for cycle in c.cycles() {
                println!("{cycle}");
            }
            if !unread.is_empty() {
                println!("{dir}: files no `mod` reaches: {unread:?}");
            }
            println!();
        }
    }
}

/// A crate from `(path, source)` pairs.
fn fake(files: &[(&str, &str)]) -> Crate {
    let files: BTreeMap<String, String> = files
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect();
    Crate::parse("fake", "lib.rs", &|rel| files.get(rel).cloned())
}

fn edge_names(c: &Crate) -> BTreeSet<(String, String)> {
    c.edges()
        .keys()
        .map(|&(a, b)| (c.files[a].rel.clone(), c.files[b].rel.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// A path through the root's re-export is an edge to the defining file,
/// and the re-export itself is none: the `error` <-> `status` cycle that
/// `crate::Error` once hid.
#[test]
fn a_reexport_is_seen_through() {
    let c = fake(&[
        ("lib.rs", "mod error; mod status; pub use error::Error;"),
        (
            "error.rs",
            "use crate::status::Status; pub enum Error { A(Status) }",
        ),
        (
            "status.rs",
            "pub struct Status; fn f() -> crate::Error { todo!() }",
        ),
    ]);
    assert_eq!(
        edge_names(&c),
        pairs(&[("error.rs", "status.rs"), ("status.rs", "error.rs")])
    );
    let cycles = c.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(cycles[0].contains("error.rs -> status.rs"), "{}", cycles[0]);
    assert!(
        cycles[0].contains("status.rs:1: pub struct Status; fn f() -> crate::Error"),
        "{}",
        cycles[0]
    );
}

/// Siblings in a folder: `super::`, `self::`, nested groups, a parent's
/// private re-export, and unit tests left out.
#[test]
fn a_folder_is_checked_file_by_file() {
    let c = fake(&[
        ("lib.rs", "mod memory; mod dsl;"),
        ("memory/mod.rs", "mod buffer; mod pool; mod symmetric; pub use pool::Pool;"),
        ("memory/buffer.rs", "use crate::{dsl::{Slice, Remote}, memory::{symmetric::Symm}}; pub struct Buf;"),
        ("memory/pool.rs", "use super::buffer::Buf; pub struct Pool;\n#[cfg(test)]\nmod tests { use crate::memory::symmetric::Symm; }"),
        ("memory/symmetric.rs", "pub struct Symm; fn f() { let _ = self::g(); super::Pool::new(); }\nfn g() {}"),
        ("dsl.rs", "pub struct Slice; pub struct Remote;"),
    ]);
    assert_eq!(
        edge_names(&c),
        pairs(&[
            ("memory/buffer.rs", "dsl.rs"),
            ("memory/buffer.rs", "memory/symmetric.rs"),
            ("memory/pool.rs", "memory/buffer.rs"),
            ("memory/symmetric.rs", "memory/pool.rs"),
        ])
    );
    let cycles = c.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].contains("the folder of memory/mod.rs (3 nodes"),
        "{}",
        cycles[0]
    );
    // The top level has none: memory -> dsl only.
    let top = c.level_graph(c.root(), &c.edges());
    assert_eq!(top.len(), 1);
}

/// Globs count the names used through them; `$crate` and the crate's
/// own alias are the root; `quote!` bodies are another crate's code.
#[test]
fn globs_macros_and_aliases() {
    let c = fake(&[
        ("lib.rs", "mod a; mod b; mod c; extern crate self as me;"),
        ("a.rs", "use crate::b::*; fn f() { helper(); }"),
        (
            "b.rs",
            "pub fn helper() {} macro_rules! m { () => { $crate::c::x() } }",
        ),
        (
            "c.rs",
            "pub fn x() {} fn g() { quote! { crate::a::f() }; me::b::helper(); }",
        ),
    ]);
    assert_eq!(
        edge_names(&c),
        pairs(&[("a.rs", "b.rs"), ("b.rs", "c.rs"), ("c.rs", "b.rs")])
    );
}
