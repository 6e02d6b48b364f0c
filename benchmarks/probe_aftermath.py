"""What a probe costs the calls after it: a learning job's calls grouped by how long after a probe.

One job whose default group is dynamiccl in `learn`, a tiny all-reduce from the first call, each
call timed on rank 0 (wall clock around the call, what the job pays); rank 0's trace
(DYNAMICCL_TRACE, written at exit) says which calls were probes. Calls are grouped by their
distance after the group's last probe, and each group's mean is set against the mean of the calls
long after any probe (65 calls or more, or before the first): the excess of the calls near a
probe is what the probe costs, beside what the learner's ledger (`extra_us`) charged. The same
calls by their offset from the consensus round each probe's window starts (a probe is measured,
so its window of K calls starts a round) say where that excess lands, beside the price the
learner put on a round at the job's end (`stats()["round_cost_us"]`). Repeats are jobs of their
own.

    python benchmarks/probe_aftermath.py [--ranks 4] [--bytes 4] [--calls 8000] [--repeats 2]
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

from bench_output import WRONG, Column, Report, count_wrong, pattern, summed

# Distance after the last probe: (label, first, last) calls; the last group is the baseline.
GROUPS = (("probe", 0, 0), ("1", 1, 1), ("2-4", 2, 4), ("5-16", 5, 16), ("17-64", 17, 64),
          ("65+", 65, None))


def job(rank: int, world: int, store_path: str, nbytes: int, calls: int, out_dir: str) -> None:
    store = dist.FileStore(store_path, world)
    dist.init_process_group("dynamiccl", store=store, rank=rank, world_size=world,
                            pg_options=dynamiccl_pg.Options(mode="learn"))
    t = torch.ones(nbytes // 4)
    dist.barrier()
    walls = []
    for _ in range(calls):
        start = time.perf_counter()
        dist.all_reduce(t)
        walls.append((time.perf_counter() - start) * 1e6)
    stats = dynamiccl_pg.stats()
    ledger = sum(s["extra_us"] for s in stats["states"]["cpu"])
    check = pattern(rank, nbytes // 4, world)
    dist.all_reduce(check)
    wrong = torch.tensor([count_wrong(check, summed(nbytes // 4, world))])
    dist.all_reduce(wrong)
    if rank == 0:
        with open(os.path.join(out_dir, "walls.json"), "w") as f:
            json.dump({"walls": walls, "ledger_us": ledger, "wrong": int(wrong.item()),
                       "price_us": stats["round_cost_us"]["cpu"],
                       "rounds": stats["rounds_applied"],
                       "phases": [s["phase"] for s in stats["states"]["cpu"]]}, f)
    dist.destroy_process_group()


def run_job(world: int, nbytes: int, calls: int) -> dict:
    """Rank 0's call times, ledger and #wrong, with each all-reduce's probe flag from its trace."""
    with tempfile.TemporaryDirectory() as d:
        os.environ["DYNAMICCL_TRACE"] = os.path.join(d, "trace")
        try:
            mp.start_processes(job, args=(world, os.path.join(d, "store"), nbytes, calls, d),
                               nprocs=world, start_method="spawn")
        finally:
            del os.environ["DYNAMICCL_TRACE"]
        with open(os.path.join(d, "walls.json")) as f:
            out = json.load(f)
        with open(os.path.join(d, "trace.rank0.jsonl")) as f:
            records = [json.loads(line) for line in f]
    # The timed calls are the group's first `calls` all-reduces (the check comes after them).
    out["probe"] = [r["probe"] for r in records if r["op"] == "allreduce"][:calls]
    return out


def group_of(since) -> str:
    """The label of GROUPS for a call `since` calls after the last probe (None: before any)."""
    if since is None:
        return GROUPS[-1][0]
    return next(label for label, first, last in GROUPS
                if first <= since and (last is None or since <= last))


def by_distance(walls: list, probes: list) -> dict:
    """Call times (µs) per group of GROUPS, by distance after the last probe."""
    grouped = {label: [] for label, _, _ in GROUPS}
    since = None  # calls since the last probe; None before the first
    for wall, probe in zip(walls, probes):
        since = 0 if probe else (None if since is None else since + 1)
        grouped[group_of(since)].append(wall)
    return grouped


# Calls around the consensus round a probe's window starts, by offset from the call that starts
# it (the window's last): 0, 1, 2, and 3 on, within the window after it.
ROUND_OFFSETS = ("starts it", "1st after", "2nd after", "3rd-Kth after")


def by_round(walls: list, probes: list, k: int) -> dict:
    """Call times (µs) by offset from the call that starts the round of a probe's window (rounds
    close every k learned calls); the probes themselves left out."""
    grouped = {label: [] for label in ROUND_OFFSETS}
    starts = {(i // k + 1) * k - 1 for i, probe in enumerate(probes) if probe}
    for i, (wall, probe) in enumerate(zip(walls, probes)):
        start = (i + 1) // k * k - 1  # the last window's end at or before this call
        if probe or start not in starts:
            continue
        grouped[ROUND_OFFSETS[min(i - start, len(ROUND_OFFSETS) - 1)]].append(wall)
    return grouped


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--bytes", type=int, default=4)
    p.add_argument("--calls", type=int, default=8000)
    p.add_argument("--repeats", type=int, default=2, help="jobs")
    args = p.parse_args()
    if args.bytes < 4 or args.bytes % 4:
        p.error(f"--bytes {args.bytes}: accepted: multiples of 4 (float32 elements), >= 4")
    if args.ranks < 2 or args.repeats < 1 or args.calls < 100:
        p.error(f"--ranks {args.ranks} --repeats {args.repeats} --calls {args.calls}: "
                "accepted: ranks >= 2, repeats >= 1, calls >= 100")

    k = dynamiccl_pg.config.resolve()["round_calls"]  # DYNAMICCL_ROUND_CALLS, or the core's default
    out = Report()
    out.header("what a probe costs the calls after it: a learn job's calls by distance after the "
               "last probe", {
                   "ranks": args.ranks, "bytes": args.bytes, "calls": f"{args.calls} per job",
                   "jobs": args.repeats,
                   "excess": "each group's mean over the mean of the calls 65+ after a probe "
                             "(or before the first), times its calls"})
    out.columns(Column("job", "d", 4), Column("after", "s", 6), Column("calls", "d", 6),
                Column("mean_us", ".1f"), Column("excess_us/call", ".1f", 14),
                Column("excess_ms", ".1f", 10), Column(WRONG, "d"))
    for r in range(args.repeats):
        res = run_job(args.ranks, args.bytes, args.calls)
        grouped = by_distance(res["walls"], res["probe"])
        far = grouped["65+"]
        base = statistics.fmean(far) if far else float("nan")
        near_ms = 0.0
        for label, _, _ in GROUPS:
            walls = grouped[label]
            if not walls:
                continue
            mean = statistics.fmean(walls)
            excess_ms = (mean - base) * len(walls) / 1e3
            if label != "65+":
                near_ms += excess_ms
            out.row(r, label, len(walls), mean, mean - base, excess_ms,
                    res["wrong"] if label == "65+" else 0,
                    checked=args.ranks * args.bytes // 4 if label == "65+" else 0)
        n_probes = len(grouped["probe"])
        windows = len({i // k for i, probe in enumerate(res["probe"]) if probe})
        out.note(f"job {r}: {n_probes} probes in {windows} round windows; calls within 64 after a "
                 "probe, probes included, "
                 f"cost {near_ms:.1f} ms over the baseline ({near_ms * 1e3 / max(n_probes, 1):.0f}"
                 f" µs a probe); the ledger charged {res['ledger_us'] / 1e3:.1f} ms; the state "
                 f"ended {'/'.join(res['phases'])}")
        rounds = by_round(res["walls"], res["probe"], k)
        excess = {label: statistics.fmean(w) - base for label, w in rounds.items() if w}
        out.note(f"job {r}: around the round each probe's window starts, over the baseline: " +
                 ", ".join(f"{label} {e:+.0f} µs" for label, e in excess.items()) +
                 f" a call; the learner priced a round at {res['price_us']:.0f} µs "
                 f"({res['rounds']} rounds)")
    sys.exit(out.footer())


if __name__ == "__main__":
    main()
