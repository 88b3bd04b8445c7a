"""Torch baseline for the collectives benchmark
(examples/bench_collectives.rs), timed the same way (bench/torch_timing.py)
over the same sizes: torch.distributed's all_gather_into_tensor,
reduce_scatter_tensor, broadcast, all_to_all_single and all_reduce (MAX,
and the sum of bf16 and float8_e4m3fn for the fp8 table), plus the
torch.ops.symm_mem ops this torch has, probed at run time. Never the
multimem_* ops: NVLink multicast stays off.

Run under torchrun (one process per GPU; one GPU works too):
    torchrun --nproc-per-node N bench/torch_collectives.py OUT.csv \\
        [--lead-in N] [--max-bytes B] [--collectives all_gather,...] [--nvshmem]

--nvshmem times the ops of the NVSHMEM backend instead (nvshmem_all_to_all,
all_to_all_vdev, nvshmem_broadcast): a process picks its symm_mem backend
once, before its first allocation, so they need a run of their own, and a
crash in NVSHMEM then costs only their columns.

Rows are the Rust program's: collective,impl,world,dtype,bytes,us, with
bytes per rank as there. Each symm_mem op's first output is checked
against torch.distributed's (NCCL's) on the same input; an op that fails or
is wrong on any rank gets no row, and the reason goes to stderr.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

from torch_timing import time_graph

COLLECTIVES = ["all_gather", "reduce_scatter", "broadcast", "all_to_all", "all_reduce_max", "all_reduce_fp8"]
NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float8_e4m3fn: "f8e4m3"}


def sizes(max_bytes):
    return [b for b in (1024 << (2 * k) for k in range(9)) if b <= max_bytes]


def symm_op(name):
    """The torch.ops.symm_mem op `name`, or None where this torch lacks it."""
    ops = torch.ops.symm_mem
    return getattr(ops, name) if hasattr(ops, name) else None


def call_by_schema(op, **named):
    """Calls `op` with the arguments its schema names, taken from `named`
    (the NVSHMEM ops' arguments changed between torch versions). Raises
    TypeError when the schema wants one `named` lacks."""
    args = []
    for a in op.default._schema.arguments:
        if a.name in named:
            args.append(named[a.name])
        elif a.has_default_value():
            break
        else:
            raise TypeError(f"{op.default._schema}: no value for {a.name}")
    return op(*args)


class Bench:
    def __init__(self, args):
        self.args = args
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        self.dev = torch.device("cuda", local)
        if args.nvshmem:
            if not (hasattr(symm_mem, "set_backend") and getattr(symm_mem, "is_nvshmem_available", lambda: False)()):
                raise SystemExit("this torch has no NVSHMEM backend for symm_mem")
            symm_mem.set_backend("NVSHMEM")
            torch.empty(1, device=self.dev)  # NVSHMEM allocates on an initialised device
        dist.init_process_group("nccl", device_id=self.dev)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.group = dist.group.WORLD.group_name
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(self.group)
        self.rows = []
        self.broken = set()  # (collective, impl, dtype) that failed: not tried again

    def log(self, msg):
        print(f"[rank {self.rank}] world {self.world} {msg}", file=sys.stderr)

    def symm_empty(self, n, dtype=torch.float32, fill=None):
        t = symm_mem.empty(n, dtype=dtype, device=self.dev)
        if fill is not None:
            t.copy_(fill)
        symm_mem.rendezvous(t, self.group)
        return t

    def measure(self, coll, impl, dtype, nbytes, fn, check=None):
        """Runs `fn` once, checks it (`check()`: None, or what is wrong) on
        every rank, and times it if every rank's check passed."""
        key = (coll, impl, dtype)
        if key in self.broken:
            return
        what = f"{coll} {impl} {NAMES[dtype]} {nbytes} B"
        problem = None
        try:
            fn()
            torch.cuda.synchronize()
            problem = check() if check else None
        except Exception as e:  # an op this torch or backend lacks: report, go on
            problem = f"failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        bad = torch.tensor([0 if problem is None else 1], device=self.dev)
        dist.all_reduce(bad)
        if bad.item():
            if problem:
                self.log(f"{what}: not timed: {problem}")
            self.broken.add(key)
            return
        try:
            us = time_graph(fn, self.args.lead_in)
        except Exception as e:
            self.log(f"{what}: not timed: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            self.broken.add(key)
            return
        if self.rank == 0:
            self.rows.append(f"{coll},{impl},{self.world},{NAMES[dtype]},{nbytes},{us:.3f}")
            print(f"world {self.world} {what}: {us:.2f} us", file=sys.stderr)

    def write(self):
        if self.rank == 0:
            with open(self.args.out, "w") as f:
                f.write("collective,impl,world,dtype,bytes,us\n" + "".join(r + "\n" for r in self.rows))

    def rand(self, n, dtype=torch.float32):
        return (torch.rand(n, device=self.dev, dtype=torch.float32) * 2 - 1).to(dtype)

    # Each collective: torch.distributed (NCCL), then the symm_mem ops.

    def all_gather(self, nbytes):
        if self.args.nvshmem:
            return
        n, w = nbytes // 4, self.world
        inp, out = self.rand(n), torch.empty(w * n, device=self.dev)
        ref = torch.empty_like(out)
        dist.all_gather_into_tensor(ref, inp)
        self.measure("all_gather", "torch_nccl", torch.float32, nbytes, lambda: dist.all_gather_into_tensor(out, inp))
        op = symm_op("_low_contention_all_gather")
        if op is not None:
            t, got = self.symm_empty(n, fill=inp), [None]

            def lc():
                got[0] = op(t, self.group)
                # Joins the copy-engine stream it forked (graph capture needs it).
                torch.ops._c10d_functional.wait_tensor(got[0])

            self.measure("all_gather", "torch_symm_lc", torch.float32, nbytes, lc, lambda: None if torch.equal(got[0], ref) else "differs from NCCL")

    def reduce_scatter(self, nbytes):
        if self.args.nvshmem:
            return
        m, w = nbytes // 4, self.world
        inp, out = self.rand(w * m), torch.empty(m, device=self.dev)
        ref = torch.empty_like(out)
        dist.reduce_scatter_tensor(ref, inp)
        self.measure("reduce_scatter", "torch_nccl", torch.float32, nbytes, lambda: dist.reduce_scatter_tensor(out, inp))
        close = lambda t: None if torch.allclose(t, ref, rtol=1e-5, atol=1e-5 * w) else "differs from NCCL"  # noqa: E731
        op = symm_op("reduce_scatter_out")
        if op is not None:
            # Sum only; it also rewrites its input, which timing may.
            t, o = self.symm_empty(w * m, fill=inp), torch.empty(m, device=self.dev)
            self.measure("reduce_scatter", "torch_symm", torch.float32, nbytes, lambda: op(t, self.group, False, o), lambda: close(o))
        op = symm_op("_low_contention_reduce_scatter")
        if op is not None:
            t, got = self.symm_empty(w * m, fill=inp), [None]

            def lc():
                got[0] = op(t, "sum", self.group)
                torch.ops._c10d_functional.wait_tensor(got[0])

            self.measure("reduce_scatter", "torch_symm_lc", torch.float32, nbytes, lc, lambda: close(got[0]))

    def broadcast(self, nbytes):
        n = nbytes // 4
        inp = self.rand(n)
        ref = inp.clone()
        dist.broadcast(ref, src=0)
        if not self.args.nvshmem:
            t = inp.clone()
            self.measure("broadcast", "torch_nccl", torch.float32, nbytes, lambda: dist.broadcast(t, src=0))
            return
        op = symm_op("nvshmem_broadcast")
        if op is not None:
            t = self.symm_empty(n, fill=inp)
            self.measure("broadcast", "torch_nvshmem", torch.float32, nbytes, lambda: call_by_schema(op, input=t, root=0, group_name=self.group), lambda: None if torch.equal(t, ref) else "differs from NCCL")

    def all_to_all(self, nominal):
        w = self.world
        m = nominal // 4 // w
        if m == 0:
            return
        nbytes = m * w * 4
        inp, out = self.rand(w * m), torch.empty(w * m, device=self.dev)
        ref = torch.empty_like(out)
        dist.all_to_all_single(ref, inp)
        same = lambda t: None if torch.equal(t, ref) else "differs from NCCL"  # noqa: E731
        if not self.args.nvshmem:
            self.measure("all_to_all", "torch_nccl", torch.float32, nbytes, lambda: dist.all_to_all_single(out, inp))
            return
        t, o = self.symm_empty(w * m, fill=inp), self.symm_empty(w * m)
        op = symm_op("nvshmem_all_to_all")
        if op is not None:
            self.measure("all_to_all", "torch_nvshmem", torch.float32, nbytes, lambda: call_by_schema(op, input=t, out=o, group_name=self.group), lambda: same(o))
        op = symm_op("all_to_all_vdev")
        if op is not None:
            # Equal splits in device memory, as symm's all_to_all_v here.
            splits = self.symm_empty(w, torch.int64, fill=torch.full((w,), m, dtype=torch.int64))
            report = self.symm_empty(2 * w, torch.int64).view(2, w)
            o2 = self.symm_empty(w * m)
            self.measure(
                "all_to_all", "torch_a2a_vdev", torch.float32, nbytes,
                lambda: call_by_schema(op, input=t, out=o2, in_splits=splits, out_splits_offsets=report, group_name=self.group),
                lambda: same(o2),
            )

    def all_reduce_max(self, nbytes):
        if self.args.nvshmem:
            return
        n = nbytes // 4
        t = self.rand(n)
        self.measure("all_reduce_max", "torch_nccl", torch.float32, nbytes, lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX))
        # torch's symm_mem all-reduces take "sum" only (so far): tried once,
        # then noted as failing.
        ref = t.clone()
        dist.all_reduce(ref, op=dist.ReduceOp.MAX)
        s = self.symm_empty(n, fill=t)
        for impl, name in (("torch_one_shot", "one_shot_all_reduce"), ("torch_two_shot", "two_shot_all_reduce_")):
            op = symm_op(name)
            if op is not None:
                got = [None]

                def run(op=op, got=got):
                    got[0] = op(s, "max", self.group)

                self.measure("all_reduce_max", impl, torch.float32, nbytes, run, lambda got=got: None if torch.equal(got[0], ref) else "differs from NCCL")

    def all_reduce_fp8(self, nbytes):
        if self.args.nvshmem:
            return
        n = nbytes  # elements: the fp8 message's bytes
        for dtype in (torch.float8_e4m3fn, torch.bfloat16):
            size = n * torch.tensor([], dtype=dtype).element_size()
            t = self.rand(n, dtype)
            # In place: the sums grow to inf or NaN, which costs the same.
            self.measure("all_reduce_fp8", "torch_nccl", dtype, size, lambda t=t: dist.all_reduce(t))
            if dtype != torch.bfloat16:
                continue
            x = self.rand(n, dtype)
            ref = x.float()
            dist.all_reduce(ref)
            close = lambda v: None if torch.allclose(v.float(), ref, rtol=2e-2, atol=2e-2 * self.world) else "differs from NCCL"  # noqa: E731
            s1, s2, got = self.symm_empty(n, dtype, fill=x), self.symm_empty(n, dtype, fill=x), [None]

            def one_shot():
                got[0] = torch.ops.symm_mem.one_shot_all_reduce(s1, "sum", self.group)

            def two_shot():
                torch.ops.symm_mem.two_shot_all_reduce_(s2, "sum", self.group)

            if symm_op("one_shot_all_reduce") is not None:
                self.measure("all_reduce_fp8", "torch_one_shot", dtype, size, one_shot, lambda: close(got[0]))
            if symm_op("two_shot_all_reduce_") is not None:
                self.measure("all_reduce_fp8", "torch_two_shot", dtype, size, two_shot, lambda: close(s2))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="the CSV to write")
    p.add_argument("--lead-in", type=int, default=0, help="untimed calls in each graph first (see bench/torch_timing.py)")
    p.add_argument("--max-bytes", type=int, default=64 << 20, help="the largest per-rank message")
    p.add_argument("--collectives", default=",".join(COLLECTIVES), help="comma-separated, of: " + ", ".join(COLLECTIVES))
    p.add_argument("--nvshmem", action="store_true", help="time the NVSHMEM backend's ops instead")
    args = p.parse_args()
    which = [c for c in args.collectives.split(",") if c]
    unknown = [c for c in which if c not in COLLECTIVES]
    if unknown:
        p.error(f"unknown collectives {unknown}; known: {COLLECTIVES}")
    b = Bench(args)
    for coll in which:
        for nbytes in sizes(args.max_bytes):
            getattr(b, coll)(nbytes)
        b.write()  # after each collective, so that a crash keeps what ran
    b.write()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
