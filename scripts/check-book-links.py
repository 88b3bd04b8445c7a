#!/usr/bin/env python3
"""Fails on a broken link in the built book: every relative href and src in
book/book/**/*.html must name a file that exists, and every #fragment an id
in that file. Run after `mdbook build book`."""

import html.parser
import os
import sys
import urllib.parse


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k == "id" and v:
                self.ids.add(v)
            if k in ("href", "src") and v:
                self.links.append(v)


def parse(path):
    p = Links()
    with open(path, encoding="utf-8") as f:
        p.feed(f.read())
    return p


def main(root):
    pages, bad = {}, []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".html"):
                pages[os.path.normpath(os.path.join(d, f))] = None
    if not pages:
        sys.exit(f"no HTML under {root}: run `mdbook build` first")
    for page in pages:
        parsed = pages[page] = pages[page] or parse(page)
        for link in parsed.links:
            u = urllib.parse.urlparse(link)
            if u.scheme or link.startswith("//") or link.startswith("mailto:"):
                continue
            target = os.path.normpath(os.path.join(os.path.dirname(page), urllib.parse.unquote(u.path))) if u.path else page
            if not os.path.exists(target):
                bad.append(f"{page}: {link} (no {target})")
                continue
            if u.fragment and target.endswith(".html"):
                t = pages.get(target) or parse(target)
                pages[target] = t
                if u.fragment not in t.ids:
                    bad.append(f"{page}: {link} (no id {u.fragment!r} in {target})")
    for b in bad:
        print("broken link:", b)
    print(f"{len(pages)} pages checked, {len(bad)} broken links")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "book/book")
