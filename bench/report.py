"""Merges benchmark CSVs (symm + NCCL from the Rust program, torch from the
Python one) into one Markdown table per world size and dtype, with ratios.

    python3 bench/report.py [--lead-in N] bench_symm.csv bench_torch_2.csv ...
"""

import csv
import math
import sys
from collections import defaultdict


def fmt_bytes(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b // div} {unit}"
    return f"{b} B"


def main(args):
    lead_in = 0
    if args[:1] == ["--lead-in"]:
        lead_in, args = int(args[1]), args[2:]
    paths = args
    method = "CUDA graph of 32 calls, median of 9 replays"
    if lead_in:
        method += f"; after {lead_in} untimed calls in the same graph"
    data = defaultdict(dict)  # (world, dtype, bytes) -> impl -> us
    floors = defaultdict(dict)  # world -> floor -> us
    for p in paths:
        with open(p) as f:
            for row in csv.DictReader(f):
                if row["impl"].startswith("floor_"):
                    floors[int(row["world"])][row["impl"]] = float(row["us"])
                    continue
                key = (int(row["world"]), row["dtype"], int(row["bytes"]))
                data[key][row["impl"]] = float(row["us"])
    if floors:
        print(f"\n### Floors (µs per call; {method})\n")
        print("| GPUs | empty kernel | one remote store | LL all-reduce of 16 bytes |")
        print("|---|---|---|---|")
        for world in sorted(floors):
            f = floors[world]
            cells = [f"{f[k]:.2f}" if k in f else "n/a" for k in ("floor_empty_kernel", "floor_remote_store", "floor_ll_16_bytes")]
            print(f"| {world} | " + " | ".join(cells) + " |")
    impls = ["symm", "symm_ll", "symm_lamport", "symm_push", "symm_pull", "symm_two_shot", "symm_lamport_two_shot", "tutorial_naive", "tutorial_vectorized", "torch_one_shot", "torch_two_shot", "torch_nccl", "nccl", "nccl_window"]
    for world, dtype in sorted({(k[0], k[1]) for k in data}):
        print(f"\n### {world} GPUs, {dtype} (µs per call; {method})\n")
        print("| size | " + " | ".join(impls) + " | symm / best torch | symm / best NCCL |")
        print("|---" * (len(impls) + 3) + "|")
        for b in sorted(k[2] for k in data if k[0] == world and k[1] == dtype):
            d = data[(world, dtype, b)]
            cells = [f"{d[i]:.2f}" if i in d and not math.isnan(d[i]) else "n/a" for i in impls]
            torch_best = min((d[i] for i in ("torch_one_shot", "torch_two_shot") if i in d and not math.isnan(d[i])), default=math.nan)
            nccl_best = min((d[i] for i in ("nccl", "nccl_window") if i in d and not math.isnan(d[i])), default=math.nan)
            s = d.get("symm", math.nan)
            print(f"| {fmt_bytes(b)} | " + " | ".join(cells) + f" | {s / torch_best:.2f}× | {s / nccl_best:.2f}× |")


if __name__ == "__main__":
    main(sys.argv[1:])
