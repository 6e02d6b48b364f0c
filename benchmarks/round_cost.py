"""What a consensus round's all-reduce costs a job of tiny calls, with plain Gloo only.

A gloo job runs `--calls` 4-byte all-reduces; every `--every` calls it also all-reduces (MIN) a
payload of float64 elements, as dynamiccl's consensus round does (3 x K + 8 words: 56 at
K = 16): on the default group at once, or on a second gloo group, waited for `--every` calls
later (the round's way), whose event-loop thread is its own or the default group's. Each variant
is a job of its own, in rotating order; the cost of a round is the job's extra time over the job
without payload, per payload all-reduce. No dynamiccl code runs here: this isolates what the
round's collective costs on the machine.

    python benchmarks/round_cost.py [--ranks 2] [--calls 8000] [--every 16] [--elements 1 56]
                                    [--repeats 2]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bench_output import WRONG, Column, Report

# Where the payload is all-reduced: on the default group at once, or on a second group waited for
# `--every` calls later, on a device (Gloo's TCP event-loop thread) of its own as new_group makes
# it, or on the default group's device as dynamiccl's control plane is.
PLACES = ("default", "second_group", "second_group_shared_device")


def job(rank: int, world: int, store_path: str, calls: int, every: int, elements: int,
        place: str, results) -> None:
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    second = dist.new_group(backend="gloo")  # made in every variant; idle in the shared one
    if place == "second_group_shared_device":
        engine = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
        opts = dist.ProcessGroupGloo._Options()
        opts._devices = engine.options._devices
        opts._timeout = engine.options._timeout
        second = dist.ProcessGroupGloo(dist.PrefixStore("second/", store), rank, world, opts)
    min_opts = dist.AllreduceOptions()
    min_opts.reduceOp = dist.ReduceOp.MIN
    t = torch.ones(1)
    payload = torch.full((max(elements, 1),), float(rank), dtype=torch.float64)
    dist.barrier()
    start = time.perf_counter()
    pending = None
    for i in range(calls):
        dist.all_reduce(t)
        if elements and (i + 1) % every == 0:
            if place == "default":
                dist.all_reduce(payload, op=dist.ReduceOp.MIN)
            else:
                if pending is not None:
                    pending.wait()
                if place == "second_group":
                    pending = dist.all_reduce(payload, op=dist.ReduceOp.MIN, group=second,
                                              async_op=True)
                else:  # a ProcessGroupGloo of our own, called as dynamiccl calls its engines
                    pending = second.allreduce([payload], min_opts)
    if pending is not None:
        pending.wait()
    wall_us = (time.perf_counter() - start) * 1e6
    wrong = int((payload != 0).sum())  # MIN over ranks 0..world-1 (rank 0's own value is 0)
    if rank == 0:
        results.put((wall_us, wrong))
    dist.destroy_process_group()


def run_job(world: int, calls: int, every: int, elements: int, place: str):
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(job, args=(world, os.path.join(d, "store"), calls, every, elements,
                                      place, results), nprocs=world, start_method="spawn")
    return results.get()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--calls", type=int, default=8000)
    p.add_argument("--every", type=int, default=16, help="calls between payload all-reduces")
    p.add_argument("--elements", type=int, nargs="+", default=[1, 56],
                   help="float64 elements of the payload")
    p.add_argument("--repeats", type=int, default=2, help="jobs per variant")
    args = p.parse_args()
    if args.ranks < 2 or args.calls < args.every or args.every < 1 or args.repeats < 1 or min(
            args.elements) < 1:
        p.error(f"--ranks {args.ranks} --calls {args.calls} --every {args.every} --elements "
                f"{args.elements} --repeats {args.repeats}: accepted: ranks >= 2, every >= 1, "
                "calls >= every, elements >= 1, repeats >= 1")

    variants = [(0, "none")] + [(e, place) for e in args.elements for place in PLACES]
    out = Report()
    out.header("what a round's all-reduce costs a job of 4-byte all-reduces, plain gloo", {
        "ranks": args.ranks, "calls": f"{args.calls} per job",
        "payload": f"every {args.every} calls, float64 MIN, {args.calls // args.every} times",
        "jobs": f"{args.repeats} per variant, in rotating order",
        "cells": "medians over the jobs; per_round_us: the job's time over the job without "
                 "payload of the same repeat, per payload all-reduce"})
    out.columns(Column("elements", "d", 8), Column("place", "s", 26), Column("us/call", ".1f"),
                Column("per_round_us", ".0f", 12), Column(WRONG, "d"))
    walls = {v: [] for v in variants}
    wrong = {v: 0 for v in variants}
    for r in range(args.repeats):
        shift = r % len(variants)
        for elements, place in variants[shift:] + variants[:shift]:
            wall, bad = run_job(args.ranks, args.calls, args.every, elements, place)
            walls[(elements, place)].append(wall)
            wrong[(elements, place)] += bad
    rounds = args.calls // args.every
    base = walls[(0, "none")]
    for v in variants:
        per_round = None if v == (0, "none") else statistics.median(
            (w - b) / rounds for w, b in zip(walls[v], base))
        # The job without payload reduces none: nothing of it is checked.
        out.row(v[0], v[1], statistics.median(walls[v]) / args.calls, per_round, wrong[v],
                checked=args.repeats * v[0])
    sys.exit(out.footer())


if __name__ == "__main__":
    main()
