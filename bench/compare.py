"""Compares benchmark CSVs of two binaries run alternately (old_1.csv,
new_1.csv, old_2.csv, ...): per row, every run's µs and the change of the
median and of the minimum (which a run's occasional 0.2 µs step, seen on
one H200, does not move), then per implementation the range of both
changes. Prints only rows both sides have.

    python3 bench/compare.py DIR [IMPL_PREFIX ...]
"""

import csv
import glob
import os
import statistics
import sys
from collections import defaultdict


def main(args):
    folder, prefixes = args[0], tuple(args[1:]) or ("floor", "symm")
    runs = defaultdict(lambda: defaultdict(list))  # row -> side -> [us]
    for path in sorted(glob.glob(os.path.join(folder, "*_*.csv"))):
        side = os.path.basename(path).split("_")[0]
        with open(path) as f:
            for r in csv.DictReader(f):
                # The collectives benchmark's rows name their collective.
                key = (r["impl"], int(r["world"]), r["dtype"], int(r["bytes"]), r.get("collective", ""))
                runs[key][side].append(float(r["us"]))
    fmt = lambda v: " ".join(f"{x:.2f}" for x in v)  # noqa: E731
    print("| impl | GPUs | dtype | bytes | old | new | change of median | change of min |")
    print("|---|---|---|---|---|---|---|---|")
    per_impl = defaultdict(list)
    for key in sorted(runs, key=lambda k: (k[4], k[:4])):
        old, new = runs[key].get("old"), runs[key].get("new")
        if not (old and new) or not key[0].startswith(prefixes):
            continue
        d = statistics.median(new) - statistics.median(old)
        m = min(new) - min(old)
        impl = f"{key[4]} {key[0]}" if key[4] else key[0]
        per_impl[(impl, key[1])].append((d, m))
        print(f"| {impl} | {key[1]} | {key[2]} | {key[3]} | {fmt(old)} | {fmt(new)} | {d:+.2f} | {m:+.2f} |")
    print()
    # The mean over an implementation's rows reads a change of a few
    # hundredths that no single row resolves (bench/NOTES.md v32).
    print("| impl | GPUs | change of median | change of min | mean change of min |")
    print("|---|---|---|---|---|")
    for (impl, world), ds in sorted(per_impl.items()):
        med = [d for d, _ in ds]
        mins = [m for _, m in ds]
        print(
            f"| {impl} | {world} | {min(med):+.2f} to {max(med):+.2f} | {min(mins):+.2f} to {max(mins):+.2f} "
            f"| {statistics.mean(mins):+.3f} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
