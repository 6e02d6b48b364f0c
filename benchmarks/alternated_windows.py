"""What an arm saves within one job: windows of calls alternated between the default and the arm.

`cost_statistics.py` forces one arm per job, so its ratios also carry the drift from one job to
the next. A learner compares arms inside one job, where they alternate. Here each job holds two
dynamiccl groups beside the gloo default group: one keeps the default (Gloo's own algorithm),
and one is pinned to the arm. Nothing is probed in either. Windows of W back-to-back calls
alternate between the two groups (the default first in even pairs, the arm first in odd ones),
timed on rank 0. A step trial where rounds are the steps compares exactly such windows, of a
round's 16 calls. Then come lone calls of the arm, each after ROUND_CALLS - 1 of the default's:
a probe as the learner takes it.

    python benchmarks/alternated_windows.py [--ranks 4] [--bytes 4] [--arm tree_s4]
                                            [--windows 16 128 512] [--calls 4096] [--repeats 3]
                                            [--load 0]

Per window length, medians over the repeats of: the arm's window time over the default's (the
ratio of their means), the median of the paired differences and their spread (both relative to
the default's mean window), and the pairs a comparison needs to tell the two apart at 3 standard
errors. Below the table, per repeat: the lone calls' median wall time against the arm's own per
call in its longest windows. With `--load N`, N processes spin on the CPU for the whole run. After
each window length's calls, one call per group all-reduces rank-dependent integers whose sum is
exact: #wrong counts the elements that differ.
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

import dynamiccl_pg
from dynamiccl_pg import _C

from bench_output import WRONG, Column, Report
from busy_machine import busy_machine
from timed_allreduce import wrong_values

NOTHING_PROBED = "all.max_candidates=1"
WARMUP_CALLS = 200
ROUND_CALLS = _C.backend_defaults()["round_calls"]
LONE_CALLS = 200


def timed(group, t, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(t, group=group)
    return (time.perf_counter() - start) * 1e6


def job(rank: int, world: int, arm: str, nbytes: int, calls: int, windows: list, store_path: str,
        results) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world)
    default = dist.new_group(backend="dynamiccl", pg_options=dynamiccl_pg.Options(
        mode="learn", heads=NOTHING_PROBED))
    pinned = dist.new_group(backend="dynamiccl", pg_options=dynamiccl_pg.Options(
        mode="learn", heads=NOTHING_PROBED, force=f"allreduce:{arm}"))
    t = torch.ones(nbytes // 4)
    for group in (default, pinned):
        timed(group, t, WARMUP_CALLS)
    per_window, wrong = {}, {}
    for w in windows:
        pairs = []
        for i in range(calls // w):
            order = (default, pinned) if i % 2 == 0 else (pinned, default)
            times = {g: timed(g, t, w) for g in order}
            pairs.append((times[default], times[pinned]))
        per_window[w] = pairs
        wrong[w] = sum(wrong_values(g, rank, world, nbytes) for g in (default, pinned))
    lone = []
    for _ in range(LONE_CALLS):
        timed(default, t, ROUND_CALLS - 1)
        lone.append(timed(pinned, t, 1))
    if rank == 0:
        results.put((per_window, lone, wrong))
    dist.destroy_process_group()


def run_job(world: int, arm: str, nbytes: int, calls: int, windows: list):
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(job, args=(world, arm, nbytes, calls, windows,
                                      os.path.join(folder, "store"), results),
                           nprocs=world, start_method="spawn")
        return results.get()


def window_figures(pairs: list) -> dict:
    base = statistics.mean(d for d, _ in pairs)
    deltas = [a - d for d, a in pairs]
    mean, sd = statistics.mean(deltas), statistics.stdev(deltas)
    return {
        "ratio": statistics.mean(a for _, a in pairs) / base,
        "median_delta": statistics.median(deltas) / base,
        "spread": sd / base,
        "pairs": 9 * sd ** 2 / mean ** 2 if mean else float("inf"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--bytes", type=int, default=4)
    p.add_argument("--arm", default="tree_s4", help="the all-reduce arm set beside the default")
    p.add_argument("--windows", type=int, nargs="+", default=[16, 128, 512],
                   help="window lengths, in calls")
    p.add_argument("--calls", type=int, default=4096, help="calls per group and window length")
    p.add_argument("--repeats", type=int, default=3, help="jobs")
    p.add_argument("--load", type=int, default=0,
                   help="processes spinning on the CPU for the whole run (a busy machine)")
    args = p.parse_args()
    windows = sorted(set(args.windows))
    if (args.ranks < 2 or args.bytes < 4 or args.bytes % 4 or args.repeats < 1 or args.load < 0
            or windows[0] < 1 or args.calls < 2 * windows[-1]):
        p.error(f"--ranks {args.ranks} --bytes {args.bytes} --windows {args.windows} --calls "
                f"{args.calls} --repeats {args.repeats} --load {args.load}: accepted: ranks >= 2, "
                "bytes a multiple of 4 >= 4, windows >= 1, calls >= twice the longest window, "
                "repeats >= 1, load >= 0")
    known = [a for a in _C.arm_names(_C.Engine.cpu, "allreduce") if a != "default"]
    if args.arm not in known:
        p.error(f"--arm {args.arm}: accepted: {', '.join(known)}")
    out = Report()
    header = {"ranks": args.ranks, "bytes": args.bytes, "arm": args.arm,
              "jobs": f"{args.repeats}, each with every window length, {args.calls} calls per "
                      "group and length",
              "cells": "medians over the repeats; relative to the default's mean window"}
    if args.load:
        header["load"] = f"{args.load} processes spinning on the CPU for the whole run"
    out.header("an arm beside the default in one job: windows of calls alternated", header)
    with busy_machine(args.load):
        jobs = [run_job(args.ranks, args.arm, args.bytes, args.calls, windows)
                for _ in range(args.repeats)]
    out.columns(Column("calls/window", "d", 12), Column("ratio", ".3f"),
                Column("median_delta", "+.3f", 12), Column("spread", ".3f"),
                Column("pairs_3se", ".0f", 9), Column(WRONG, "d"))
    for w in windows:
        figures = [window_figures(j[0][w]) for j in jobs]
        out.row(w, *(statistics.median(f[k] for f in figures)
                     for k in ("ratio", "median_delta", "spread", "pairs")),
                sum(j[2][w] for j in jobs), checked=args.repeats * 2 * args.ranks * args.bytes // 4)
        out.note(f"{w} calls: ratio per repeat " + " ".join(f"{f['ratio']:.3f}" for f in figures)
                 + "; pairs per repeat " + " ".join(f"{f['pairs']:.0f}" for f in figures))
    longest = windows[-1]
    for r, (per_window, lone, _) in enumerate(jobs):
        in_window = statistics.median(a for _, a in per_window[longest]) / longest
        out.note(f"repeat {r}: lone calls of {args.arm} among the default's, median "
                 f"{statistics.median(lone):.0f} us; in its {longest}-call windows "
                 f"{in_window:.0f} us a call")
    sys.exit(out.footer())


if __name__ == "__main__":
    main()
