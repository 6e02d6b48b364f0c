"""What learning costs on the wall clock, from the first call, with only the groups a real job has.

Each measurement is a job of its own (fresh processes, a fresh store) whose default group is the
backend measured, with no other group alive: plain gloo (what the job runs without us), dynamiccl
`learn` (the product), dynamiccl `off` (the wrapper alone, so learning's own cost is learn minus
off) and `measure` (learn with every head limited to the default arm: calls measured and rounds
run as in learn, nothing probed, so probing's own cost is learn minus measure). Jobs of one size
run in rotating order, so drift of the machine hits every backend alike.

With `--paired`, each dynamiccl backend is instead a second group of a job whose default group is
gloo (the two groups a job running dynamiccl beside its default group has), and the two groups'
windows alternate (gloo first in even pairs, second in odd ones): each job is its own baseline,
and drift of the machine over seconds, which moves one job against another by more than the
targets on a shared 2-core machine, cancels within it. The gloo row is then the method's control:
a second plain gloo group beside the default one, measured the same way, so that what being the
second group of a job costs is not read as the wrapper's or the learner's (`vs_control`: each
backend's median over the control's).

    python benchmarks/learning_cost.py [--ranks 4] [--bytes 4 4194304] [--repeats 3] [--paired]
                                       [--load 0]

With `--load N`, N processes spin on the CPU for the whole run: a machine whose cores are busy
with other work, as a CPU job's are with its compute.

Per size and backend, medians over the repeats of: the wall time per call and rank 0's process
CPU time per call (all its threads), the whole run's time over gloo's in the same repeat (every
window from the first call: what the job pays), the same once settled (the last third of the
windows), the wall-clock excess over gloo (µs, rank 0's clock) and what the learner's ledger
charged for it (`extra_us` of the group's states, summed). Targets for `learn`: whole run <=
1.03, settled <= 1.01, ledger within 25% of the excess. After the timed windows one call
all-reduces rank-dependent integers whose sum is exact: #wrong counts the elements that differ.
With `--paired`, a note per backend gives its windows' spread against the gloo windows beside
them and, for dynamiccl, the windows grouped by the probes the learner took in them: a window's
probes are read against what windows without one show.
"""

import argparse
import os
import statistics
import sys
import tempfile
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import dynamiccl_pg

from bench_output import WRONG, Column, Report, count_wrong, pattern, summed
from busy_machine import busy_machine
from timed_allreduce import timed_window

BACKENDS = ("gloo", "learn", "off", "measure")  # a plain gloo job, then dynamiccl's modes
# `measure`: learning with nothing to choose from, so that every call takes the default.
NOTHING_PROBED = "all.max_candidates=1"


class Job(NamedTuple):
    window_us: list  # wall time of each window of the backend measured, rank 0
    cpu_us: float  # rank 0's process CPU time over those windows
    ledger_us: float  # what the learner charged (extra_us summed over states)
    wrong: int
    notes: list
    gloo_us: list  # --paired: the gloo windows alternated with them in the same job
    window_probes: list  # probes the learner took in each window (dynamiccl backends)


def probed_arms(state):
    """', probed arms' median costs 2.1-8.7x the default's' (what one probe costs), or ''."""
    arms = {a["name"]: a for a in state["arms"] if a["samples"]}
    default = arms.pop("default", None)
    if not arms or not default or default["median_us"] <= 0:
        return ""
    ratios = [a["median_us"] / default["median_us"] for a in arms.values()]
    return f", probed arms' median costs {min(ratios):.1f}-{max(ratios):.1f}x the default's"


def by_window(jobs) -> str:
    """Each window against the gloo window beside it, over all jobs: their spread, and where the
    learner probed, the windows grouped by the probes taken in them ('0 probes 1.004 (0.88-1.15,
    20)': median, range, count). What a window's probes cost is read against what windows without
    one show."""
    ratios = [(m / g, j.window_probes[i] if j.window_probes else 0)
              for j in jobs for i, (m, g) in enumerate(zip(j.window_us, j.gloo_us))]
    text = f"ratio to gloo's, standard deviation {statistics.pstdev(r for r, _ in ratios):.3f}"
    if not any(n for _, n in ratios):
        return text
    for label, lo, hi in (("0 probes", 0, 0), ("1-3", 1, 3), ("4+", 4, None)):
        group = [r for r, n in ratios if n >= lo and (hi is None or n <= hi)]
        if group:
            text += (f"; {label} {statistics.median(group):.3f} ({min(group):.2f}-"
                     f"{max(group):.2f}, {len(group)})")
    return text


def dynamiccl_options(backend: str):
    if backend == "measure":
        return dynamiccl_pg.Options(mode="learn", heads=NOTHING_PROBED)
    return dynamiccl_pg.Options(mode=backend)


def job(rank: int, world: int, backend: str, paired: bool, store_path: str, nbytes: int,
        windows: int, calls: int, results) -> None:
    """One job: `windows` windows of `calls` all-reduces on the backend measured, timed on rank 0:
    its default group, or with `paired` a dynamiccl group beside a gloo default group whose
    windows alternate with its own (gloo first in even pairs, second in odd ones)."""
    store = dist.FileStore(store_path, world)
    measured, gloo = None, None
    if backend == "gloo" or paired:
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
        gloo = dist.group.WORLD
        if paired and backend == "gloo":  # the control: a second plain gloo group
            measured = dist.new_group(backend="gloo")
        elif paired:
            measured = dist.new_group(backend="dynamiccl", pg_options=dynamiccl_options(backend))
    else:
        dist.init_process_group("dynamiccl", store=store, rank=rank, world_size=world,
                                pg_options=dynamiccl_options(backend))
    measured = measured or dist.group.WORLD
    t = torch.ones(nbytes // 4)
    window_us, gloo_us, cpu = [], [], {"measured": 0.0, "gloo": 0.0}

    def window(name, group, walls):
        wall, used = timed_window(t, calls, group)
        walls.append(wall)
        cpu[name] += used

    def probes_so_far():
        return sum(st["probes"] for st in dynamiccl_pg.stats(measured)["states"]["cpu"])

    window_probes, probed = [], 0
    for w in range(windows):
        if paired and w % 2 == 0:
            window("gloo", gloo, gloo_us)
        window("measured", measured, window_us)
        if backend != "gloo":
            window_probes.append(probes_so_far() - probed)
            probed += window_probes[-1]
        if paired and w % 2 == 1:
            window("gloo", gloo, gloo_us)
    ledger, notes = 0.0, []
    if backend != "gloo":
        stats = dynamiccl_pg.stats(measured)
        for st in stats["states"]["cpu"]:
            ledger += st["extra_us"]
            if st["op"] == "allreduce":
                notes.append(f"size_bin {st['size_bin']} -> {st['incumbent']} ({st['phase']}, "
                             f"{st['probes']} probes, {st['measured_calls']} of {st['calls']} "
                             f"calls measured, extra_us {st['extra_us']:.0f}"
                             f"{probed_arms(st)}); {stats['rounds_applied']} consensus "
                             f"rounds, the last priced {stats['round_cost_us']['cpu']:.0f} us")
    check = pattern(rank, nbytes // 4, world)
    dist.all_reduce(check, group=measured)
    wrong = torch.tensor([count_wrong(check, summed(nbytes // 4, world))])
    dist.all_reduce(wrong)
    if rank == 0:
        results.put(Job(window_us, cpu["measured"], ledger, int(wrong.item()), notes, gloo_us,
                        window_probes))
    dist.destroy_process_group()


def run_job(world: int, backend: str, paired: bool, nbytes: int, windows: int, calls: int):
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(job, args=(world, backend, paired, os.path.join(d, "store"), nbytes,
                                      windows, calls, results), nprocs=world, start_method="spawn")
    return results.get()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--bytes", type=int, nargs="+", default=[4, 4 << 20])
    p.add_argument("--repeats", type=int, default=3, help="jobs per backend and size")
    p.add_argument("--windows", type=int, default=8, help="timed windows per job")
    p.add_argument("--calls", type=int, default=1000, help="calls per window below 1 MiB")
    p.add_argument("--big-calls", type=int, default=200, help="calls per window from 1 MiB")
    p.add_argument("--paired", action="store_true",
                   help="each dynamiccl backend as a second group of a gloo job, its windows "
                        "alternated with the gloo group's (drift of the machine cancels within "
                        "a job)")
    p.add_argument("--load", type=int, default=0,
                   help="processes spinning on the CPU for the whole run (a busy machine)")
    args = p.parse_args()
    for b in args.bytes:
        if b < 4 or b % 4:
            p.error(f"--bytes {b}: accepted: multiples of 4 (float32 elements), >= 4")
    if args.ranks < 2 or args.repeats < 1 or args.windows < 3 or args.load < 0:
        p.error(f"--ranks {args.ranks} --repeats {args.repeats} --windows {args.windows} "
                f"--load {args.load}: accepted: ranks >= 2, repeats >= 1, windows >= 3, load >= 0")
    with busy_machine(args.load):
        sys.exit(measure_all(args))


def measure_all(args) -> int:
    """The report; its exit status (non-zero on a wrong value)."""
    out = Report()
    first_settled = args.windows - max(1, args.windows // 3)
    header = {
        "ranks": args.ranks, "sizes": ", ".join(f"{b} bytes" for b in args.bytes),
        "jobs": f"{args.repeats} per backend and size, in rotating order",
        "windows": f"{args.windows} per job from the first call; settled: the last "
                   f"{args.windows - first_settled}",
        "cells": "medians over the repeats; ratios to " + (
            "the gloo windows of the same job; gloo: a second plain gloo group (the control); "
            "vs_control: whole over the control's" if args.paired
            else "gloo's job of the same repeat"),
    }
    if args.load:
        header["load"] = f"{args.load} processes spinning on the CPU for the whole run"
    out.header("what learning costs on the wall clock: " + (
        "a dynamiccl group beside a gloo default group, windows alternated" if args.paired
        else "one job per backend, default group"), header)
    out.columns(Column("bytes", "d", 9), Column("backend", "s", 7), Column("calls", "d", 6),
                Column("us/call", ".1f"), Column("cpu_us/call", ".1f"), Column("whole", ".3f"),
                Column("settled", ".3f"), Column("excess_us", ".0f", 10),
                Column("ledger_us", ".0f", 10), Column("ledger/excess", ".2f", 13),
                Column("vs_control", ".3f", 10), Column(WRONG, "d"))
    for nbytes in args.bytes:
        calls = args.calls if nbytes < (1 << 20) else args.big_calls
        total = calls * args.windows
        runs = {b: [] for b in BACKENDS}
        for r in range(args.repeats):
            shift = r % len(BACKENDS)
            for backend in BACKENDS[shift:] + BACKENDS[:shift]:
                runs[backend].append(run_job(args.ranks, backend, args.paired, nbytes,
                                             args.windows, calls))
        checked = args.repeats * args.ranks * nbytes // 4
        gloo_jobs = runs["gloo"]
        if not args.paired:  # gloo's own row: its job of each repeat, every other's baseline
            out.row(nbytes, "gloo", total, statistics.median(sum(g.window_us) / total
                                                             for g in gloo_jobs),
                    statistics.median(j.cpu_us / total for j in gloo_jobs), None, None, None,
                    None, None, None, sum(j.wrong for j in gloo_jobs), checked=checked)
        whole = {}
        for backend in BACKENDS if args.paired else BACKENDS[1:]:
            jobs = runs[backend]
            # Each job's baseline: its own gloo windows (--paired), or gloo's job of the repeat.
            base = [j.gloo_us for j in jobs] if args.paired else [g.window_us for g in gloo_jobs]
            whole[backend] = [sum(j.window_us) / sum(g) for j, g in zip(jobs, base)]
            tail = [sum(j.window_us[first_settled:]) / sum(g[first_settled:])
                    for j, g in zip(jobs, base)]
            ex = statistics.median(sum(j.window_us) - sum(g) for j, g in zip(jobs, base))
            led = statistics.median(j.ledger_us for j in jobs)
            vs_control = (statistics.median(whole[backend]) / statistics.median(whole["gloo"])
                          if args.paired else None)
            out.row(nbytes, backend, total, statistics.median(sum(j.window_us) / total
                                                              for j in jobs),
                    statistics.median(j.cpu_us / total for j in jobs),
                    statistics.median(whole[backend]), statistics.median(tail),
                    ex, led if backend != "gloo" else None,
                    led / ex if ex > 0 and backend != "gloo" else None, vs_control,
                    sum(j.wrong for j in jobs), checked=checked)
            out.note(f"{nbytes} bytes, {backend}: whole per repeat "
                     + " ".join(f"{w:.3f}" for w in whole[backend]))
            for note in jobs[-1].notes:
                out.note(f"{nbytes} bytes, {backend}, last job: {note}")
            if args.paired:
                out.note(f"{nbytes} bytes, {backend}, windows: " + by_window(jobs))
        # Learning's cost split per repeat: the wrapper (off, above), measuring and its rounds
        # (measure over off), probing (learn over measure).
        for what, a, b in (("measuring", "measure", "off"), ("probing", "learn", "measure")):
            split = [x / y for x, y in zip(whole[a], whole[b])]
            out.note(f"{nbytes} bytes, {what}: {a} / {b} median {statistics.median(split):.3f}, "
                     "per repeat " + " ".join(f"{w:.3f}" for w in split))
    return out.footer()


if __name__ == "__main__":
    main()
