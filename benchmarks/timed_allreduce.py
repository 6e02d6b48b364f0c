"""What the CPU benchmarks that time all-reduce windows share: a timed window of calls, and the
check of an exact rank-dependent sum (bench_output.pattern) on a group."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from bench_output import count_wrong, pattern, summed


def timed_window(t, calls: int, group) -> tuple:
    """(wall µs, process CPU µs) of `calls` all-reduces on `group`, after a barrier on it."""
    dist.barrier(group=group)
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(t, group=group)
    return (time.perf_counter() - start) * 1e6, (time.process_time() - cpu) * 1e6


def wrong_values(group, rank: int, world: int, nbytes: int) -> int:
    """Elements of an exact rank-dependent sum that came out wrong, over all ranks."""
    check = pattern(rank, nbytes // 4, world)
    dist.all_reduce(check, group=group)
    wrong = torch.tensor([count_wrong(check, summed(nbytes // 4, world))])
    dist.all_reduce(wrong)
    return int(wrong.item())
