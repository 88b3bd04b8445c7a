#!/usr/bin/env python3
"""Fails on a broken link or include in the book's Markdown sources, with no
mdBook needed (CI would otherwise build mdBook from source, minutes on two
cores). Checks every chapter that book/src/SUMMARY.md lists exists; every
relative link in book/src/*.md names a file that exists, and its #fragment
a heading (as mdBook spells heading ids) or an explicit id in that chapter;
every {{#include path:anchor}} names a file with that ANCHOR. Links inside
code blocks and inline code are ignored. `mdbook build book` followed by
scripts/check-book-links.py checks the built HTML the same way."""

import os
import re
import sys

LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INCLUDE = re.compile(r"\{\{#include\s+([^}\s]+)\s*\}\}")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*(?:\{#([\w-]+)[^}]*\})?\s*$")
EXPLICIT_ID = re.compile(r"""\bid\s*=\s*["']([^"']+)["']""")


def normalize_id(text):
    """mdBook's heading id: markup dropped, lower case, spaces to '-', and
    only alphanumerics, '-' and '_' kept."""
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    out = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def prose_lines(path, keep_code=False):
    """(line number, text) of every line outside fenced code, with inline
    code removed unless `keep_code`."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            m = re.match(r"^\s*(```+|~~~+)", line)
            if m:
                if fence is None:
                    fence = m.group(1)
                elif m.group(1).startswith(fence[0]) and len(m.group(1)) >= len(fence):
                    fence = None
                continue
            if fence is None:
                yield no, line if keep_code else re.sub(r"`[^`]*`", "", line)


def ids_of(path):
    """Every heading id and explicit id in a chapter."""
    ids, seen = set(), {}
    for _, line in prose_lines(path, keep_code=True):
        m = HEADING.match(line)
        if m:
            base = m.group(3) or normalize_id(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            ids.add(base if n == 0 else f"{base}-{n}")
        ids.update(EXPLICIT_ID.findall(line))
    return ids


def main(src):
    bad = []
    summary = os.path.join(src, "SUMMARY.md")
    for no, line in prose_lines(summary):
        for target in LINK.findall(line):
            if target and not os.path.exists(os.path.join(src, target)):
                bad.append(f"{summary}:{no}: chapter {target} does not exist")
    ids = {}
    for name in sorted(os.listdir(src)):
        if not name.endswith(".md"):
            continue
        page = os.path.join(src, name)
        # Includes are read in code blocks too (that is where they stand).
        with open(page, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                for inc in INCLUDE.findall(line):
                    path, _, anchor = inc.partition(":")
                    full = os.path.normpath(os.path.join(src, path))
                    if not os.path.isfile(full):
                        bad.append(f"{page}:{no}: include {path} does not exist")
                        continue
                    if anchor and not anchor.isdigit():
                        text = open(full, encoding="utf-8").read()
                        if f"ANCHOR: {anchor}" not in text or f"ANCHOR_END: {anchor}" not in text:
                            bad.append(f"{page}:{no}: {path} has no ANCHOR {anchor}")
        for no, line in prose_lines(page):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                path, _, frag = target.partition("#")
                full = os.path.normpath(os.path.join(src, path)) if path else page
                if not os.path.exists(full):
                    bad.append(f"{page}:{no}: link {target}: {path} does not exist")
                    continue
                if frag and full.endswith(".md") and os.path.dirname(full) == os.path.normpath(src):
                    if full not in ids:
                        ids[full] = ids_of(full)
                    if frag not in ids[full]:
                        bad.append(f"{page}:{no}: link {target}: no heading or id #{frag}")
    if bad:
        print("\n".join(bad))
        sys.exit(f"{len(bad)} broken link(s) or include(s) in {src}")
    print(f"book sources: every chapter, link and include of {src} resolves")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "book/src")
