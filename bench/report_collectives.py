"""Merges the collectives benchmark's CSVs (symm and NCCL from
examples/bench_collectives.rs, torch from bench/torch_collectives.py) into
one Markdown table per collective and world size: µs per call of every
implementation, symm against the best NCCL (plain or window) and the best
torch of the same element type, and bus bandwidth by nccl-tests' rules.

    python3 bench/report_collectives.py [--lead-in N] symm.csv torch_2.csv ...
"""

import csv
import math
import sys
from collections import defaultdict

DSIZE = {"f32": 4, "bf16": 2, "f8e4m3": 1}
# The element type a table's symm column and ratios are of; its sizes are
# that type's bytes.
PRIMARY = {"all_reduce_fp8": "f8e4m3"}
NOTES = {
    "all_gather": "size: each rank's input; the output is world × it",
    "reduce_scatter": "size: each rank's output; the input is world × it; sum",
    "broadcast": "size: the message; root 0",
    "all_to_all": "size: each rank's send buffer, world equal splits",
    "all_reduce_max": "size: the message; max",
    "all_reduce_fp8": "size: the fp8 message (element count); bf16 moves twice the bytes; sum",
}
ORDER = list(NOTES)


def fmt_bytes(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def bus_bw(coll, world, nbytes, us):
    """GB/s by nccl-tests: the size is world × the per-rank bytes for
    all-gather and reduce-scatter, the per-rank bytes otherwise; the factor
    (n-1)/n for those and all-to-all, 2(n-1)/n for all-reduce, 1 for
    broadcast. None where it is 0 (one rank) or the time is missing."""
    n = world
    if coll in ("all_gather", "reduce_scatter"):
        size, factor = nbytes * n, (n - 1) / n
    elif coll == "all_to_all":
        size, factor = nbytes, (n - 1) / n
    elif coll == "broadcast":
        size, factor = nbytes, 1.0
    else:
        size, factor = nbytes, 2 * (n - 1) / n
    if factor == 0 or us is None or math.isnan(us):
        return None
    return size / (us * 1e-6) / 1e9 * factor


def rank(impl):
    """Column order: symm, then NCCL, then torch."""
    for i, p in enumerate(("symm", "nccl", "torch")):
        if impl.startswith(p):
            return (i, impl != p, impl)
    return (3, True, impl)


def main(args):
    lead_in = 0
    if args[:1] == ["--lead-in"]:
        lead_in, args = int(args[1]), args[2:]
    method = "CUDA graph of 32 calls, median of 9 replays"
    if lead_in:
        method += f"; after {lead_in} untimed calls in the same graph"
    data = defaultdict(dict)  # (coll, world) -> (impl, dtype, elems) -> us
    for p in args:
        with open(p) as f:
            for r in csv.DictReader(f):
                us = float(r["us"])
                if math.isnan(us):
                    continue
                d = r["dtype"]
                data[(r["collective"], int(r["world"]))][(r["impl"], d, int(r["bytes"]) // DSIZE.get(d, 4))] = us
    for coll, world in sorted(data, key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else len(ORDER), k[1])):
        d = data[(coll, world)]
        primary = PRIMARY.get(coll, "f32")
        dtypes = sorted({k[1] for k in d}, key=lambda t: (t != primary, t))
        cols = sorted({(k[0], k[1]) for k in d}, key=lambda c: (dtypes.index(c[1]), rank(c[0])))
        label = (lambda c: f"{c[0]} {c[1]}") if len(dtypes) > 1 else (lambda c: c[0])

        def best(elems, dtype, prefix):
            v = [us for (i, t, e), us in d.items() if i.startswith(prefix) and t == dtype and e == elems]
            return min(v) if v else None

        ratios = []
        for t in dtypes:
            ratios += [f"symm / best NCCL {t}", f"symm / best torch {t}"]
        ratios += [f"symm / symm {t}" for t in dtypes[1:]]
        print(f"\n### {coll}, {world} GPUs (µs per call; {method})\n")
        print(NOTES.get(coll, "") + "\n")
        head = [label(c) for c in cols] + ratios + ["symm busbw GB/s", "best NCCL busbw GB/s"]
        print("| size | " + " | ".join(head) + " |")
        print("|---" * (len(head) + 1) + "|")
        for e in sorted({k[2] for k in d}):
            nbytes = e * DSIZE.get(primary, 4)
            cells = [f"{d[(i, t, e)]:.2f}" if (i, t, e) in d else "n/a" for i, t in cols]
            s = d.get(("symm", primary, e))

            def ratio(a, b):
                return f"{a / b:.2f}×" if a is not None and b is not None else "n/a"

            for t in dtypes:
                cells += [ratio(s, best(e, t, "nccl")), ratio(s, best(e, t, "torch"))]
            cells += [ratio(s, d.get(("symm", t, e))) for t in dtypes[1:]]
            for us in (s, best(e, primary, "nccl")):
                bw = bus_bw(coll, world, nbytes, us)
                cells.append("n/a" if bw is None else f"{bw:.1f}")
            print(f"| {fmt_bytes(nbytes)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
