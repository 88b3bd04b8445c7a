"""Compares benchmark CSVs of two binaries run alternately (old_1.csv,
new_1.csv, old_2.csv, ...): per row, every run's µs and the change of the
median. Prints only rows both sides have.

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
    print("| impl | GPUs | dtype | bytes | old | new | change of median |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(runs, key=lambda k: (k[4], k[:4])):
        old, new = runs[key].get("old"), runs[key].get("new")
        if not (old and new) or not key[0].startswith(prefixes):
            continue
        d = statistics.median(new) - statistics.median(old)
        impl = f"{key[4]} {key[0]}" if key[4] else key[0]
        print(f"| {impl} | {key[1]} | {key[2]} | {key[3]} | {fmt(old)} | {fmt(new)} | {d:+.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
