"""Torch baseline for the all-reduce benchmark, timed exactly like
examples/bench_all_reduce.rs (bench/torch_timing.py): a CUDA graph of 32
back-to-back calls, 11 replays (2 warm-up), ranks aligned by a barrier
before each, CUDA events; median replay / 32 = µs per call.

Run under torchrun (one process per GPU):
    torchrun --nproc-per-node 2 bench/torch_all_reduce.py out.csv [LEAD_IN]

LEAD_IN > 0 (as `--lead-in` of the Rust program) puts that many untimed
calls in the graph before the 32 timed ones and times those with events
recorded inside the graph, so the ranks' skew in starting the replay
stays out of the numbers.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from torch_timing import time_graph

LEAD_IN = int(sys.argv[2]) if len(sys.argv) > 2 else 0


def main():
    out = sys.argv[1]
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD.group_name
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group)
    dev = torch.device("cuda", local)
    rows = []
    for dtype, name in [(torch.bfloat16, "bf16"), (torch.float32, "f32")]:
        for k in range(9):
            nbytes = 1024 << (2 * k)
            n = nbytes // torch.tensor([], dtype=dtype).element_size()
            t = symm_mem.empty(n, dtype=dtype, device=dev)
            t.copy_(torch.rand(n, device=dev, dtype=torch.float32).to(dtype) * 2 - 1)
            symm_mem.rendezvous(t, group)
            plain = torch.rand(n, device=dev, dtype=torch.float32).to(dtype)

            def one_shot():
                torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group)

            def two_shot():
                torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", group)

            def nccl():
                dist.all_reduce(plain)

            for impl, fn in [("torch_one_shot", one_shot), ("torch_two_shot", two_shot), ("torch_nccl", nccl)]:
                try:
                    us = time_graph(fn, LEAD_IN)
                except Exception as e:  # report, keep going
                    if rank == 0:
                        print(f"{impl} {name} {nbytes}: {e}", file=sys.stderr)
                    us = float("nan")
                if rank == 0:
                    rows.append(f"{impl},{world},{name},{nbytes},{us:.3f}")
                    print(f"world {world} {name} {nbytes:>9} B: {impl} {us:.2f} us", file=sys.stderr)
    if rank == 0:
        with open(out, "w") as f:
            f.write("impl,world,dtype,bytes,us\n" + "\n".join(rows) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
