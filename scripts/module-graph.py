#!/usr/bin/env python3
"""Prints symm-runtime's module graph (which top-level module uses which) and
fails if it has a cycle. A module is a top-level file or directory of
symm-runtime/src; `crate::x` paths and `use crate::{x, ...}` groups count.

    python3 scripts/module-graph.py [--dot]
"""
import os, re, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "symm-runtime", "src")

def module_of(rel):
    top = rel.split(os.sep)[0]
    return top[:-3] if top.endswith(".rs") else top

def uses(text):
    text = re.sub(r"//[^\n]*", "", text)
    found = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text))
    for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
        for item in group.split(","):
            m = re.match(r"\s*([a-z_][a-z0-9_]*)", item)
            if m:
                found.add(m.group(1))
    return found

def strip_tests(text):
    """Drops `#[cfg(test)] mod x { ... }` blocks: unit tests may reach anywhere."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)

def main():
    files = {}
    for d, _, fs in os.walk(ROOT):
        for f in fs:
            if f.endswith(".rs"):
                p = os.path.join(d, f)
                files[os.path.relpath(p, ROOT)] = open(p).read()
    mods = {module_of(r) for r in files} - {"lib"}
    # `private.rs` is mounted as `__private_<version>`.
    graph = {m: set() for m in mods}
    for rel, text in files.items():
        m = module_of(rel)
        if m == "lib":
            continue
        text = strip_tests(text)
        for u in uses(text):
            u = "private" if u.startswith("__private") else u
            if u in mods and u != m:
                graph[m].add(u)
    if "--dot" in sys.argv:
        print("digraph symm_runtime {")
        for m in sorted(graph):
            for u in sorted(graph[m]):
                print(f"  {m} -> {u};")
        print("}")
    else:
        for m in sorted(graph):
            print(f"{m:18} -> {', '.join(sorted(graph[m])) or '(nothing)'}")
    # Strongly connected components (Tarjan).
    index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop(); on.discard(w); c.append(w)
                if w == v: break
            if len(c) > 1: sccs.append(sorted(c))
    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    if sccs:
        for c in sccs:
            print("cycle among: " + ", ".join(c), file=sys.stderr)
        sys.exit(1)
    print("no cycle", file=sys.stderr)

main()
