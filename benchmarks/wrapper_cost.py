"""What the wrapper costs a call once nothing is learned: dynamiccl groups against plain gloo groups
in one job, windows strictly alternated.

`learning_cost.py` measures from the first call, one group of each kind per job, each job its own
baseline. Here only the settled per-call cost is asked for, with what confounds it removed. Every
job's default group is gloo; it holds two gloo groups and two of the mode measured (`gloo`:
plain gloo again, the method's control; `off`: the wrapper forwarding every call; `measure`:
learning with one arm, so every call is decided, measured and rounded as in `learn` and none
probed). A group keeps its own luck for the whole job (per job, one plain gloo group runs
0.90-1.08x another), so each kind's two groups are used in turn. Windows of W calls alternate
strictly (every window follows one of the other kind): on the 2-core machine a window right after
one on the same group runs 3-6% faster, and a pattern that gives one kind more such windows
reads as that kind's speed. Half the jobs create and warm up the gloo groups first, half the
measured ones; the two orders' medians are combined by their geometric mean. Timed on rank 0.

    python benchmarks/wrapper_cost.py [--ranks 4] [--bytes 4] [--modes gloo off measure]
                                      [--jobs 8] [--windows 40] [--calls 100] [--load 0]

Per mode: the measured groups' time over the gloo groups' in the same job (sums of the
windows), median over the jobs of each creation order, and their geometric mean; rank 0's
process CPU per call the same way. After the windows one call per group all-reduces
rank-dependent integers whose sum is exact: #wrong counts the elements that differ.
"""

import argparse
import math
import os
import statistics
import sys
import tempfile
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bench_output import WRONG, Column, Report
from busy_machine import busy_machine
from learning_cost import dynamiccl_options
from timed_allreduce import timed_window, wrong_values

MODES = ("gloo", "off", "measure")
WARMUP_CALLS = 300
GROUPS_PER_KIND = 2


class Job(NamedTuple):
    wall: float  # the measured groups' wall time over the gloo groups', rank 0
    cpu: float  # the same for rank 0's process CPU time
    gloo_us: float  # a gloo call's wall time
    wrong: int


def new_group(mode: str):
    if mode == "gloo":
        return dist.new_group(backend="gloo")
    return dist.new_group(backend="dynamiccl", pg_options=dynamiccl_options(mode))


def job(rank: int, world: int, mode: str, gloo_first: bool, nbytes: int, windows: int,
        calls: int, store_path: str, results) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world)
    kinds = {}
    for kind in (("gloo", "measured") if gloo_first else ("measured", "gloo")):
        kinds[kind] = [new_group("gloo" if kind == "gloo" else mode)
                       for _ in range(GROUPS_PER_KIND)]
    t = torch.ones(nbytes // 4)
    for groups in kinds.values():  # warmed in the order they were created
        for group in groups:
            timed_window(t, WARMUP_CALLS, group)
    totals = {kind: [0.0, 0.0] for kind in kinds}  # wall us, CPU us
    # Strict alternation, every window after one of the other kind: a window right after one
    # on the same group runs faster, so no kind may have more such windows than the other.
    for w in range(windows):
        for kind in kinds:
            wall, cpu = timed_window(t, calls, kinds[kind][w % GROUPS_PER_KIND])
            totals[kind][0] += wall
            totals[kind][1] += cpu
    wrong = sum(wrong_values(g, rank, world, nbytes) for g in kinds["gloo"] + kinds["measured"])
    if rank == 0:
        results.put(Job(totals["measured"][0] / totals["gloo"][0],
                        totals["measured"][1] / totals["gloo"][1],
                        totals["gloo"][0] / (windows * calls), wrong))
    dist.destroy_process_group()


def run_job(world: int, mode: str, gloo_first: bool, nbytes: int, windows: int, calls: int):
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(job, args=(world, mode, gloo_first, nbytes, windows, calls,
                                      os.path.join(folder, "store"), results),
                           nprocs=world, start_method="spawn")
        return results.get()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--bytes", type=int, default=4)
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    p.add_argument("--jobs", type=int, default=8, help="jobs per mode and creation order")
    p.add_argument("--windows", type=int, default=40, help="timed windows per kind and job")
    p.add_argument("--calls", type=int, default=100, help="calls per window")
    p.add_argument("--load", type=int, default=0,
                   help="processes spinning on the CPU for the whole run (a busy machine)")
    args = p.parse_args()
    if (args.ranks < 2 or args.bytes < 4 or args.bytes % 4 or args.jobs < 1 or args.windows < 2
            or args.calls < 1 or args.load < 0):
        p.error(f"--ranks {args.ranks} --bytes {args.bytes} --jobs {args.jobs} --windows "
                f"{args.windows} --calls {args.calls} --load {args.load}: accepted: ranks >= 2, "
                "bytes a multiple of 4 >= 4, jobs >= 1, windows >= 2, calls >= 1, load >= 0")
    out = Report()
    header = {"ranks": args.ranks, "bytes": args.bytes,
              "jobs": f"{args.jobs} per mode and creation order, in rotating order",
              "windows": f"{args.windows} of {args.calls} calls per kind and job, alternated, "
                         f"{GROUPS_PER_KIND} groups per kind used in turn",
              "cells": "measured over gloo in the same job; medians over the jobs of one "
                       "creation order; both: their geometric mean"}
    if args.load:
        header["load"] = f"{args.load} processes spinning on the CPU for the whole run"
    out.header("what the wrapper costs a call: dynamiccl groups beside gloo groups, windows "
               "alternated", header)
    jobs = {(m, first): [] for m in args.modes for first in (True, False)}
    with busy_machine(args.load):
        for _ in range(args.jobs):
            for key in jobs:  # rotating order: drift of the machine hits every mode alike
                jobs[key].append(run_job(args.ranks, key[0], key[1], args.bytes, args.windows,
                                         args.calls))
    out.columns(Column("mode", "s", 7), Column("gloo_us/call", ".1f", 12),
                Column("gloo_first", ".3f", 10), Column("mode_first", ".3f", 10),
                Column("both", ".3f"), Column("cpu_both", ".3f", 8), Column(WRONG, "d"))
    checked = args.jobs * 2 * 2 * GROUPS_PER_KIND * args.ranks * args.bytes // 4
    for m in args.modes:
        first, second = jobs[(m, True)], jobs[(m, False)]
        wall = [statistics.median(j.wall for j in js) for js in (first, second)]
        cpu = [statistics.median(j.cpu for j in js) for js in (first, second)]
        out.row(m, statistics.median(j.gloo_us for j in first + second), *wall,
                math.sqrt(wall[0] * wall[1]), math.sqrt(cpu[0] * cpu[1]),
                sum(j.wrong for j in first + second), checked=checked)
        for name, js in (("the plain gloo groups", first), (f"the measured {m} groups", second)):
            out.note(f"{m}, {name} created first: per job " + " ".join(f"{j.wall:.3f}" for j in js))
    sys.exit(out.footer())


if __name__ == "__main__":
    main()
