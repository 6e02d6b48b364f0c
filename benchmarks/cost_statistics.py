"""Which per-call cost follows the wall clock: one arm forced on every call, the job's wall time
per call against statistics of the calls' per-rank durations.

The learner compares arms by a call's cost: its ranks' durations (issue to completion, each on its
own clock) reduced over ranks, max for our CPU schedules (DYNAMICCL_COST_REDUCE), then a mean
winsorized at 3 robust spreads around the median (policy/arm_slot.h), so that rare slow calls,
which hit whatever arm runs, do not decide. Each job here is one dynamiccl group beside a gloo
default group, its all-reduce pinned to one arm (`default`: Gloo's own algorithm) and nothing
probed, timed back to back on rank 0; every rank's trace (DYNAMICCL_TRACE) gives each call's
durations. Arms run in rotating order, one job each per repeat.

    python benchmarks/cost_statistics.py [--ranks 4] [--bytes 4] [--calls 3000] [--repeats 2]
                                         [--arms default hd tree_s4] [--load 0]

Per arm, medians over the repeats, each against the default's in the same repeat: the wall time per
call, and per call the durations' max over ranks (its median: what a winsorized mean keeps of it
when the tail is heavy; and its mean), their min over ranks (median) and their mean over ranks
(mean: over a back-to-back loop, each rank's durations add up to the wall time less its gaps
between calls). A statistic follows the wall clock where its ratio is on the same side of 1 as the
wall's. Per arm it also notes how much windows of a consensus round's calls (16) vary, and how
many pairs of such windows, the arm's beside the default's, would tell the two apart by wall time:
what a comparison of rounds instead of calls would need. With `--load N`, N processes spin on the
CPU for the whole run (busy_machine.py). After the timed calls one call all-reduces rank-dependent
integers whose sum is exact: #wrong counts the elements that differ.
"""

import argparse
import json
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

from bench_output import WRONG, Column, Report, count_wrong, pattern, summed
from busy_machine import busy_machine

NOTHING_PROBED = "all.max_candidates=1"
WARMUP_CALLS = 200
ROUND_CALLS = _C.backend_defaults()["round_calls"]  # a consensus round's calls: one window


def job(rank: int, world: int, arm: str, folder: str, nbytes: int, calls: int, results) -> None:
    os.environ["DYNAMICCL_TRACE"] = os.path.join(folder, "trace")
    dist.init_process_group("gloo", store=dist.FileStore(os.path.join(folder, "store"), world),
                            rank=rank, world_size=world)
    group = dist.new_group(backend="dynamiccl", pg_options=dynamiccl_pg.Options(
        mode="learn", heads=NOTHING_PROBED,
        force=None if arm == "default" else f"allreduce:{arm}"))
    t = torch.ones(nbytes // 4)
    for _ in range(WARMUP_CALLS):
        dist.all_reduce(t, group=group)
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(t, group=group)
    wall_us = (time.perf_counter() - start) * 1e6 / calls
    check = pattern(rank, nbytes // 4, world)
    dist.all_reduce(check, group=group)
    wrong = torch.tensor([count_wrong(check, summed(nbytes // 4, world))])
    dist.all_reduce(wrong)
    if rank == 0:
        results.put((wall_us, int(wrong.item())))
    dist.destroy_process_group()


def traced_calls(folder: str, world: int, calls: int) -> list:
    """Per rank, the timed calls' trace records, from the traces the ranks wrote at exit."""
    per_rank = []
    for rank in range(world):
        with open(os.path.join(folder, f"trace.rank{rank}.jsonl")) as f:
            records = [json.loads(line) for line in f]
        mine = [r for r in records if r["op"] == "allreduce"]
        per_rank.append(mine[-calls - 1:-1])  # the timed calls, not the check after them
    return per_rank


def window_times(records: list) -> list:
    """Wall time of each run of ROUND_CALLS consecutive calls, from one rank's call starts (µs)."""
    starts = [r["start_us"] for r in records]
    return [b - a for a, b in zip(starts[::ROUND_CALLS], starts[ROUND_CALLS::ROUND_CALLS])]


def run_job(world: int, arm: str, nbytes: int, calls: int) -> dict:
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(job, args=(world, arm, folder, nbytes, calls, results), nprocs=world,
                           start_method="spawn")
        wall_us, wrong = results.get()
        per_rank = traced_calls(folder, world, calls)
    per_call = [[r["dur_us"] for r in call] for call in zip(*per_rank)]
    windows = window_times(per_rank[0])
    return {
        "wall": wall_us,
        "max_median": statistics.median(max(d) for d in per_call),
        "max_mean": statistics.mean(max(d) for d in per_call),
        "min_median": statistics.median(min(d) for d in per_call),
        "mean_mean": statistics.mean(statistics.mean(d) for d in per_call),
        "window_mean": statistics.mean(windows),
        "window_sd": statistics.stdev(windows),
        "wrong": wrong,
    }


def window_pairs(arm: dict, default: dict) -> float:
    """Pairs of ROUND_CALLS-call windows (the arm's beside the default's) whose mean difference
    stands 3 standard errors clear of zero, from the two jobs' window means and spreads."""
    gap = arm["window_mean"] - default["window_mean"]
    spread = arm["window_sd"] ** 2 + default["window_sd"] ** 2
    return 9 * spread / gap ** 2 if gap else float("inf")


STATISTICS = ("wall", "max_median", "max_mean", "min_median", "mean_mean")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--bytes", type=int, default=4)
    p.add_argument("--calls", type=int, default=3000, help="timed calls per job")
    p.add_argument("--repeats", type=int, default=2, help="jobs per arm")
    p.add_argument("--arms", nargs="+", default=["default", "hd", "tree_s4"],
                   help="all-reduce arms (`python -m dynamiccl_pg actions`); default: Gloo's own")
    p.add_argument("--load", type=int, default=0,
                   help="processes spinning on the CPU for the whole run (a busy machine)")
    args = p.parse_args()
    if (args.ranks < 2 or args.bytes < 4 or args.bytes % 4 or args.calls < 10
            or args.repeats < 1 or args.load < 0):
        p.error(f"--ranks {args.ranks} --bytes {args.bytes} --calls {args.calls} --repeats "
                f"{args.repeats} --load {args.load}: accepted: ranks >= 2, bytes a multiple of 4 "
                ">= 4, calls >= 10, repeats >= 1, load >= 0")
    known = _C.arm_names(_C.Engine.cpu, "allreduce")
    for arm in args.arms:
        if arm not in known:
            p.error(f"--arms {arm}: accepted: {', '.join(known)}")
    arms = ["default"] + [a for a in args.arms if a != "default"]
    out = Report()
    header = {"ranks": args.ranks, "bytes": args.bytes,
              "jobs": f"{args.repeats} per arm, in rotating order, {args.calls} timed calls each",
              "cells": "medians over the repeats; ratios to the default's job of the same repeat"}
    if args.load:
        header["load"] = f"{args.load} processes spinning on the CPU for the whole run"
    out.header("which per-call cost follows the wall clock: one arm forced on every call", header)
    with busy_machine(args.load):
        runs = {a: [] for a in arms}
        for r in range(args.repeats):
            shift = r % len(arms)
            for arm in arms[shift:] + arms[:shift]:
                runs[arm].append(run_job(args.ranks, arm, args.bytes, args.calls))
    out.columns(Column("arm", "s", 8), Column("us/call", ".1f"),
                *(Column(s, ".3f", 10) for s in STATISTICS), Column(WRONG, "d"))
    for arm in arms:
        ratios = [statistics.median(j[s] / d[s] for j, d in zip(runs[arm], runs["default"]))
                  for s in STATISTICS]
        out.row(arm, statistics.median(j["wall"] for j in runs[arm]), *ratios,
                sum(j["wrong"] for j in runs[arm]),
                checked=args.repeats * args.ranks * args.bytes // 4)
        out.note(f"{arm}: wall per repeat " + " ".join(f"{j['wall']:.0f}" for j in runs[arm])
                 + " us; durations' max over ranks, median per repeat "
                 + " ".join(f"{j['max_median']:.0f}" for j in runs[arm]) + " us")
        cv = " ".join(f"{j['window_sd'] / j['window_mean']:.2f}" for j in runs[arm])
        pairs = "" if arm == "default" else (
            "; pairs of windows beside the default's that tell them apart at 3 standard errors, "
            "per repeat " + " ".join(f"{window_pairs(j, d):.0f}"
                                     for j, d in zip(runs[arm], runs["default"])))
        out.note(f"{arm}: windows of {ROUND_CALLS} calls (a consensus round's), spread / mean per "
                 f"repeat {cv}{pairs}")
    sys.exit(out.footer())


if __name__ == "__main__":
    main()
