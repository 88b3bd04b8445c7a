#!/usr/bin/env python3
"""torch's MoE exchange, the column beside bench_moe: all_to_all_vdev_2d
(dispatch: rows sorted by global expert in, expert-major rows out, aligned)
and all_to_all_vdev_2d_offset (combine: the rows back), on NVSHMEM
symmetric memory, one process per GPU.

torch 2.11's op takes fewer than 16 experts a rank ("Number of experts
must be smaller than NUM_TILES"), so the default is 16 experts (8 a rank
at 2 GPUs); run bench_moe with the same --experts beside it.

Timed: the two exchanges only (the caller's sort into expert order, the
counts and the weighted sum are left out, which favours torch against
bench_moe's step, whose layout, pack and sum kernels are in its time), by
torch_timing.time_graph (a CUDA graph of 32 steps, median of 9 replays),
or, where the exchange cannot be captured, 32 steps between events. bench_moe's other
sizes: hidden 7168, top-8, bf16, 128 and 4096 tokens a rank, a random
routing of distinct experts a token.

    python3 bench/torch_moe.py --world 2
"""
import argparse
import os
import statistics

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from torch_timing import time_graph


def worker(rank, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=args.world, device_id=dev)
    import torch.distributed._symmetric_memory as symm_mem

    symm_mem.set_backend("NVSHMEM")
    group = dist.group.WORLD.group_name
    world, e, k, h = args.world, args.experts, args.top_k, args.hidden
    if rank == 0:
        print("method: torch all_to_all_vdev_2d + all_to_all_vdev_2d_offset (NVSHMEM), "
              "the exchanges only\n")
        print("| tokens a rank | dispatch + combine µs a step | timed | MB to peers a step |")
        print("|---|---|---|---|")
    for tokens in args.tokens:
        g = torch.Generator(device="cpu").manual_seed(11 + rank)
        experts = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(tokens)]).flatten()
        experts = experts.to(dev)
        pairs = tokens * k
        # Rows in global expert order (so by destination rank), as the op
        # takes them.
        counts = torch.bincount(experts, minlength=e).to(torch.int64)
        max_out = world * pairs + (e // world) * args.align
        inp = symm_mem.empty((pairs, h), dtype=torch.bfloat16, device=dev).normal_()
        out = symm_mem.empty((max_out, h), dtype=torch.bfloat16, device=dev)
        back = symm_mem.empty((pairs, h), dtype=torch.bfloat16, device=dev)
        in_splits = symm_mem.empty(e, dtype=torch.int64, device=dev).copy_(counts)
        out_so = symm_mem.empty((2, e), dtype=torch.int64, device=dev)
        back_so = symm_mem.empty((2, e), dtype=torch.int64, device=dev)
        symm_mem.rendezvous(inp, group)
        symm_mem.rendezvous(out, group)
        symm_mem.rendezvous(back, group)

        def step():
            torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, in_splits, out_so, group, major_align=args.align)
            torch.ops.symm_mem.all_to_all_vdev_2d_offset(out, back, out_so, back_so, group)

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        try:
            us, how = time_graph(step), "graph of 32"
        except Exception as err:  # not capturable: eager steps instead
            if rank == 0:
                print(f"(graph capture failed: {err})")
            torch.cuda.synchronize()
            times = []
            for _ in range(9):
                dist.barrier()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(32):
                    step()
                b.record()
                torch.cuda.synchronize()
                times.append(a.elapsed_time(b) * 1e3 / 32)
            us, how = statistics.median(times), "32 eager steps"
        local = e // world
        to_peers = int((experts // local != rank).sum().item())
        if rank == 0:
            print(f"| {tokens} | {us:.1f} | {how} | {to_peers * 4 * h / 1e6:.2f} |")
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=torch.cuda.device_count())
    p.add_argument("--tokens", type=lambda s: [int(x) for x in s.split(",")], default=[128, 4096])
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--align", type=int, default=16)
    args = p.parse_args()
    if args.world < 2:
        print("SKIPPED: torch_moe needs 2 or more GPUs")
        return
    if args.experts % args.world:
        p.error(f"--experts {args.experts}: a multiple of --world {args.world}")
    mp.spawn(worker, args=(args,), nprocs=args.world)


if __name__ == "__main__":
    main()
