"""The torch baselines' timing, the Rust benchmarks' method
(examples/support/bench.rs): a CUDA graph of 32 back-to-back calls, 11
replays (2 warm-up), ranks aligned by a barrier before each, CUDA events;
median replay / 32 = µs per call.

LEAD_IN > 0 (as `--lead-in` of the Rust programs) puts that many untimed
calls in the graph before the 32 timed ones and times those with events
recorded inside the graph, so the ranks' skew in starting the replay stays
out of the numbers.
"""

import statistics

import torch
import torch.distributed as dist

CALLS = 32
REPLAYS = 9


def time_graph(fn, lead_in=0):
    """Median µs per call of `fn` (a collective every rank calls)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # warm-up outside the graph
    torch.cuda.synchronize()
    # External events become timing nodes of the graph when recorded
    # during capture (the keyword only where needed: older torch lacks it).
    ext = {"external": True} if lead_in else {}
    start = torch.cuda.Event(enable_timing=True, **ext)
    end = torch.cuda.Event(enable_timing=True, **ext)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(lead_in):
            fn()
        if lead_in:
            start.record()
        for _ in range(CALLS):
            fn()
        if lead_in:
            end.record()
    times = []
    for rep in range(REPLAYS + 2):
        dist.barrier()
        torch.cuda.synchronize()
        if not lead_in:
            start.record()
        graph.replay()
        if not lead_in:
            end.record()
        torch.cuda.synchronize()
        if rep >= 2:
            times.append(start.elapsed_time(end) * 1e3 / CALLS)
    return statistics.median(times)
