"""Which per-call cost ranks CPU arms the way the user pays for them?

Every CPU arm of all-reduce runs forced (one group per arm, interleaved rounds of back-to-back
calls), with per-call traces. What the user pays is the wall time per call on rank 0; the
candidate yardsticks are computed from the traces of every rank (one host: one clock):

  max    the slowest rank's own duration (what the learner used on CPU before)
  min    the fastest rank's own duration (what it uses for NCCL kernels)
  span   from the last rank's start to the last rank's end (arrival skew is not the arm's fault)

    torchrun --standalone --nproc-per-node=4 benchmarks/yardstick.py [--bytes 4 4194304]

Prints (bench_output.py's format) per size and arm the median of each, its ratio to the default
arm's, and whether the yardstick orders the arms as the wall time does (Kendall's tau over arm
pairs). After a size's rounds (and outside its traces), one untimed call per arm all-reduces
rank-dependent integers whose sum is exact: #wrong counts the elements that differ from it, and
the exit status is 1 if any did.
"""

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

from bench_output import WRONG, Column, Report, count_wrong, pattern, summed

os.environ.setdefault("DYNAMICCL_TRACE", os.path.join(tempfile.mkdtemp(), "yardstick"))
import dynamiccl_pg  # reads DYNAMICCL_TRACE
from dynamiccl_pg import _C
from dynamiccl_pg.backend import backend_of

YARDSTICKS = ("max", "min", "span")


def wall_per_call_us(group, t, calls):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(t, group=group)
    return (time.perf_counter() - start) / calls * 1e6


def yardsticks(per_rank):
    """per_rank[r] = [(seq, start_ns, end_ns)] -> {yardstick: [cost per call, us]}."""
    by_seq = {}
    for calls in per_rank:
        for seq, start, end in calls:
            by_seq.setdefault(seq, []).append((start, end))
    out = {y: [] for y in YARDSTICKS}
    for spans in by_seq.values():
        if len(spans) != len(per_rank) or any(end == 0 for _, end in spans):
            continue  # a rank's completion was not recorded
        durations = [end - start for start, end in spans]
        out["max"].append(max(durations) / 1e3)
        out["min"].append(min(durations) / 1e3)
        out["span"].append((max(end for _, end in spans) - max(s for s, _ in spans)) / 1e3)
    return out


def wrong_elements(group, t) -> int:
    """One call on rank-dependent integers in t: how many elements differ from their exact sum."""
    world = dist.get_world_size()
    t.copy_(pattern(dist.get_rank(), t.numel(), world))
    dist.all_reduce(t, group=group)
    return count_wrong(t, summed(t.numel(), world))


def kendall_tau(a, b):
    pairs = list(itertools.combinations(range(len(a)), 2))
    agree = sum(1 if (a[i] - a[j]) * (b[i] - b[j]) > 0 else -1 for i, j in pairs)
    return agree / len(pairs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bytes", type=int, nargs="+", default=[4, 4 << 20])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--calls", type=int, default=50, help="calls per arm per round")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Report(sys.stdout if rank == 0 else None)
    out.header("which per-call cost orders the CPU all-reduce arms as the wall time does", {
        "ranks": world, "bytes": " ".join(str(b) for b in args.bytes),
        "rounds": f"{args.rounds} x {args.calls} calls per arm, interleaved",
        "columns": "medians in us; /dflt: ratio to the default arm's; wall: rank 0's wall time "
                   "per call; max, min, span: from the traces of every rank",
        "check": "after a size's rounds, one untimed call per arm on rank-dependent integers"})
    arms = _C.arm_names(_C.Engine.cpu, "allreduce")
    groups = {arm: dist.new_group(backend="dynamiccl", pg_options=dynamiccl_pg.Options(
        mode="learn", force=f"allreduce:{arm}")) for arm in arms}
    out.columns(Column("bytes", "d", 9), Column("arm", "s", 8),
                *(Column(n, f, 9) for k in ("wall",) + YARDSTICKS
                  for n, f in ((f"{k}(us)", ".0f"), (f"{k}/dflt", ".2f"))),
                Column(WRONG, "d"))
    total_wrong = 0
    for nbytes in args.bytes:
        t = torch.ones(max(1, nbytes // 4))
        wall = {arm: [] for arm in arms}
        first_seq = {arm: len(backend_of(g).trace_records()) for arm, g in groups.items()}
        for arm, g in groups.items():
            wall_per_call_us(g, t, 5)  # connections, buffers
        for _ in range(args.rounds):
            for arm, g in groups.items():
                wall[arm].append(wall_per_call_us(g, t, args.calls))
        mine = {arm: [(r[0], r[-2], r[-1]) for r in backend_of(g).trace_records()[first_seq[arm]:]]
                for arm, g in groups.items()}
        wrong = torch.tensor([wrong_elements(g, t) for g in groups.values()])
        dist.all_reduce(wrong)  # on the default (plain gloo) group: every rank's count
        total_wrong += int(wrong.sum())
        gathered = [None] * world
        dist.all_gather_object(gathered, mine)
        if rank != 0:
            continue
        rows = {}
        for arm in arms:
            ys = yardsticks([g[arm] for g in gathered])
            rows[arm] = {"wall": statistics.median(wall[arm]),
                         **{y: statistics.median(v) for y, v in ys.items()}}
        base = rows["default"]
        for arm, w in zip(arms, wrong.tolist()):
            cells = [x for k in ("wall",) + YARDSTICKS
                     for x in (rows[arm][k], rows[arm][k] / base[k])]
            out.row(nbytes, arm, *cells, w, checked=world * t.numel())
        truth = [rows[a]["wall"] for a in arms]
        taus = {y: kendall_tau(truth, [rows[a][y] for a in arms]) for y in YARDSTICKS}
        best = {y: min(arms, key=lambda a: rows[a][y]) for y in ("wall",) + YARDSTICKS}
        out.note(f"{nbytes} bytes: order as the wall time (Kendall's tau): " +
                 ", ".join(f"{y} {taus[y]:+.2f}" for y in YARDSTICKS))
        out.note(f"{nbytes} bytes: cheapest arm by: " + ", ".join(f"{y} {best[y]}" for y in best))
    status = out.footer() if rank == 0 else int(total_wrong > 0)
    dist.destroy_process_group()
    sys.exit(status)


if __name__ == "__main__":
    main()
