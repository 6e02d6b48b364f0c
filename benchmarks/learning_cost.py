"""What learning costs on the wall clock, from the first call, with only the groups a real job has.

Each measurement is a job of its own (fresh processes, a fresh store) whose default group is the
backend measured, with no other group alive: plain gloo (what the job runs without us), dynamiccl
`learn` (the product) and dynamiccl `off` (the wrapper alone, so learning's own cost is learn
minus off). Jobs of one size run in rotating order, so drift of the machine hits every backend
alike.

    python benchmarks/learning_cost.py [--ranks 4] [--bytes 4 4194304] [--repeats 3]

Per size and backend, medians over the repeats of: the wall time per call and rank 0's process
CPU time per call (all its threads), the whole run's time over gloo's in the same repeat (every
window from the first call: what the job pays), the same once settled (the last third of the
windows), the wall-clock excess over gloo (µs, rank 0's clock) and what the learner's ledger
charged for it (`extra_us` of the group's states, summed). Targets for `learn`: whole run <=
1.03, settled <= 1.01, ledger within 25% of the excess. After the timed windows one call
all-reduces rank-dependent integers whose sum is exact: #wrong counts the elements that differ.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import dynamiccl_pg

from bench_output import WRONG, Column, Report, count_wrong, pattern, summed

BACKENDS = ("gloo", "learn", "off")  # a plain gloo job, then dynamiccl's modes


class Job(NamedTuple):
    window_us: list  # wall time of each window, rank 0
    cpu_us: float  # rank 0's process CPU time over the windows
    ledger_us: float  # what the learner charged (extra_us summed over states)
    wrong: int
    notes: list


def probed_arms(state):
    """', probed arms' median costs 2.1-8.7x the default's' (what one probe costs), or ''."""
    arms = {a["name"]: a for a in state["arms"] if a["samples"]}
    default = arms.pop("default", None)
    if not arms or not default or default["median_us"] <= 0:
        return ""
    ratios = [a["median_us"] / default["median_us"] for a in arms.values()]
    return f", probed arms' median costs {min(ratios):.1f}-{max(ratios):.1f}x the default's"


def job(rank: int, world: int, backend: str, store_path: str, nbytes: int, windows: int,
        calls: int, results) -> None:
    """One job: `windows` windows of `calls` all-reduces on the default group, timed on rank 0."""
    store = dist.FileStore(store_path, world)
    if backend == "gloo":
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    else:
        dist.init_process_group("dynamiccl", store=store, rank=rank, world_size=world,
                                pg_options=dynamiccl_pg.Options(mode=backend))
    t = torch.ones(nbytes // 4)
    window_us = []
    cpu_start = time.process_time()
    for _ in range(windows):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(t)
        window_us.append((time.perf_counter() - start) * 1e6)
    cpu_us = (time.process_time() - cpu_start) * 1e6
    ledger, notes = 0.0, []
    if backend != "gloo":
        stats = dynamiccl_pg.stats()
        for st in stats["states"]["cpu"]:
            ledger += st["extra_us"]
            if st["op"] == "allreduce":
                notes.append(f"size_bin {st['size_bin']} -> {st['incumbent']} ({st['phase']}, "
                             f"{st['probes']} probes, {st['measured_calls']} of {st['calls']} "
                             f"calls measured, extra_us {st['extra_us']:.0f}"
                             f"{probed_arms(st)}); {stats['rounds_applied']} consensus rounds")
    check = pattern(rank, nbytes // 4, world)
    dist.all_reduce(check)
    wrong = torch.tensor([count_wrong(check, summed(nbytes // 4, world))])
    dist.all_reduce(wrong)
    if rank == 0:
        results.put(Job(window_us, cpu_us, ledger, int(wrong.item()), notes))
    dist.destroy_process_group()


def run_job(world: int, backend: str, nbytes: int, windows: int, calls: int):
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(job, args=(world, backend, os.path.join(d, "store"), nbytes, windows,
                                      calls, results), nprocs=world, start_method="spawn")
    return results.get()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--bytes", type=int, nargs="+", default=[4, 4 << 20])
    p.add_argument("--repeats", type=int, default=3, help="jobs per backend and size")
    p.add_argument("--windows", type=int, default=8, help="timed windows per job")
    p.add_argument("--calls", type=int, default=1000, help="calls per window below 1 MiB")
    p.add_argument("--big-calls", type=int, default=200, help="calls per window from 1 MiB")
    args = p.parse_args()
    for b in args.bytes:
        if b < 4 or b % 4:
            p.error(f"--bytes {b}: accepted: multiples of 4 (float32 elements), >= 4")
    if args.ranks < 2 or args.repeats < 1 or args.windows < 3:
        p.error(f"--ranks {args.ranks} --repeats {args.repeats} --windows {args.windows}: "
                "accepted: ranks >= 2, repeats >= 1, windows >= 3")

    out = Report()
    first_settled = args.windows - max(1, args.windows // 3)
    out.header("what learning costs on the wall clock: one job per backend, default group", {
        "ranks": args.ranks, "sizes": ", ".join(f"{b} bytes" for b in args.bytes),
        "jobs": f"{args.repeats} per backend and size, in rotating order",
        "windows": f"{args.windows} per job from the first call; settled: the last "
                   f"{args.windows - first_settled}",
        "cells": "medians over the repeats; ratios to gloo's job of the same repeat",
    })
    out.columns(Column("bytes", "d", 9), Column("backend", "s", 7), Column("calls", "d", 6),
                Column("us/call", ".1f"), Column("cpu_us/call", ".1f"), Column("whole", ".3f"),
                Column("settled", ".3f"), Column("excess_us", ".0f", 10),
                Column("ledger_us", ".0f", 10), Column("ledger/excess", ".2f", 13),
                Column(WRONG, "d"))
    for nbytes in args.bytes:
        calls = args.calls if nbytes < (1 << 20) else args.big_calls
        total = calls * args.windows
        runs = {b: [] for b in BACKENDS}
        for r in range(args.repeats):
            for backend in BACKENDS[r % 3:] + BACKENDS[:r % 3]:
                runs[backend].append(run_job(args.ranks, backend, nbytes, args.windows, calls))
        gloo = runs["gloo"]
        for backend in BACKENDS:
            jobs = runs[backend]
            per_call = statistics.median(sum(j.window_us) / total for j in jobs)
            cpu = statistics.median(j.cpu_us / total for j in jobs)
            wrong = sum(j.wrong for j in jobs)
            checked = args.repeats * args.ranks * nbytes // 4
            if backend == "gloo":  # the baseline: no ratios to itself
                out.row(nbytes, backend, total, per_call, cpu, None, None, None, None, None,
                        wrong, checked=checked)
                continue
            whole = [sum(j.window_us) / sum(g.window_us) for j, g in zip(jobs, gloo)]
            tail = [sum(j.window_us[first_settled:]) / sum(g.window_us[first_settled:])
                    for j, g in zip(jobs, gloo)]
            ex = statistics.median(sum(j.window_us) - sum(g.window_us) for j, g in zip(jobs, gloo))
            led = statistics.median(j.ledger_us for j in jobs)
            out.row(nbytes, backend, total, per_call, cpu, statistics.median(whole),
                    statistics.median(tail), ex, led, led / ex if ex > 0 else None, wrong,
                    checked=checked)
            out.note(f"{nbytes} bytes, {backend}: whole per repeat "
                     + " ".join(f"{w:.3f}" for w in whole))
            for note in jobs[-1].notes:
                out.note(f"{nbytes} bytes, {backend}, last job: {note}")
    sys.exit(out.footer())


if __name__ == "__main__":
    main()
