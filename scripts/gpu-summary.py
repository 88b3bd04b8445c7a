#!/usr/bin/env python3
"""Counts every test of a scripts/gpu-validate.sh log as passed, failed or
skipped, per suite and world size, and prints a Markdown table.

The log is a sequence of sections `=== NAME world=W` (`=== NAME` alone
counts under world "-"), each a libtest binary run for one world size, or
an example:
- A test that printed `CASE test=T world=W` and passed ran at W; one that
  passed without a CASE line had no case at W (or said SKIPPED) and counts
  as skipped; `FAILED` counts as failed; `ignored` is not counted. A test
  that wrote a SKIPPED line past libtest's capture has its verdict (`ok`)
  on the next line of its own.
- `SKIPPED (n): why` counts n skipped tests (a binary that is missing).
- An example run counts as one test: passed if it exited 0.
A binary that exits with anything but 0 or 101 (libtest with failures)
crashed, timed out or was missing: one more failure for its section, so
that it cannot pass unnoticed.
"""
import re
import sys
from collections import defaultdict


def main(path):
    counts = defaultdict(lambda: [0, 0, 0])  # (suite, world) -> pass, fail, skip
    suite, world, cases, results, pending = None, None, set(), [], None

    def close():
        if suite is None:
            return
        for name, ok in results:
            key = (suite, world)
            if not ok:
                counts[key][1] += 1
            elif name in cases:
                counts[key][0] += 1
            else:
                counts[key][2] += 1

    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if suite and suite.startswith("examples/"):
            if line == "=== ok":
                cases.add("example")
                results.append(("example", True))
                continue
            if re.match(r"^=== \S+ exited \d+", line):
                results.append(("example", False))
                continue
        m = re.match(r"^=== \S+ exited (\d+)", line)
        if m:
            if suite is not None and m.group(1) not in ("0", "101"):
                counts[(suite, world)][1] += 1
            continue
        m = re.match(r"^=== (\S+)(?: world=(\d+))?$", line)
        if m:
            close()
            suite, world = m.group(1), m.group(2) or "-"
            cases, results, pending = set(), [], None
            continue
        if suite is None:
            continue
        m = re.match(r"^SKIPPED \((\d+)\): ", line)
        if m:
            counts[(suite, world)][2] += int(m.group(1))
            continue
        m = re.match(r"^CASE test=(\S+) world=(\d+)", line)
        if m:
            cases.add(m.group(1))
            continue
        # A test that wrote past libtest's capture (a loud SKIPPED line)
        # has its verdict on a later line of its own.
        if pending and line in ("ok", "FAILED"):
            results.append((pending, line == "ok"))
            pending = None
            continue
        m = re.match(r"^test (\S+) \.\.\. (.*)$", line)
        if m:
            verdict = m.group(2).strip()
            if verdict.startswith("ignored"):
                continue
            if verdict in ("ok", "FAILED"):
                results.append((m.group(1), verdict == "ok"))
            else:
                pending = m.group(1)
    close()

    print("| suite | world | passed | failed | skipped |")
    print("|---|---|---|---|---|")
    bad = 0
    for (s, w), (p, f, k) in sorted(counts.items(), key=lambda x: (x[0][0], x[0][1])):
        bad += f
        print(f"| {s} | {w} | {p} | {f} | {k} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
