"""Times every CPU arm of the dynamiccl backend, per op and message size, on the current world.

Run one process per rank with the usual env:// variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT); run.sh starts them inside the emulated cluster's namespaces. Rank 0 appends one
JSON line per (op, arm, size) to --out.

How an arm is pinned: one "dynamiccl" group per arm index i, created with
Options(force="allreduce:<arm i>;allgather:<arm i>;..."), so a forced call never learns and runs
exactly that schedule ("default" = Gloo's own algorithm, through the same backend wrapper).

How a call is timed: all ranks share this machine's monotonic clock, so after a Gloo barrier
each rank records (start, end) of one call; the call's time is max(end) - max(start) over ranks,
i.e. from the moment the last rank entered to the moment the last rank left. Arms take turns
inside each repetition, so slow drifts of the machine hit every arm alike. Reported: median
and quartiles over repetitions, after warm-up calls that are not timed.

Sizes are the op's full buffer: the all-reduced / broadcast tensor, the all-gather output, the
reduce-scatter input (rounded up to a multiple of 4 bytes x ranks for the last two).

How results are checked: the timed calls move zeros; after them, one untimed call per arm moves
rank-dependent integers (bench_output.pattern) whose result is exactly known, and #wrong counts
the elements, over all ranks, that differ from it. Rank 0 prints bench_output.py's format (a
header, one row per op, size and arm, a closing line with the totals); the exit status is 1 if
any element was wrong, after every JSON line was written.
"""

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import dynamiccl_pg
from dynamiccl_pg import _C

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_output import WRONG, Column, Report, count_wrong, pattern, summed  # noqa: E402

OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall")


def reps_for(nbytes: int, scale: float) -> tuple:
    """(warm-up, timed) calls: many for latency-bound sizes, few where one call takes ~1 s."""
    if nbytes <= 64 << 10:
        warm, reps = 3, 25
    elif nbytes <= 1 << 20:
        warm, reps = 2, 12
    elif nbytes <= 4 << 20:
        warm, reps = 1, 7
    elif nbytes <= 16 << 20:
        warm, reps = 1, 5
    else:
        warm, reps = 1, 3
    return warm, max(3, int(round(reps * scale)))


def make_call(op: str, nbytes: int, world: int, group):
    """(call, check): a closure issuing one call of `op` on `nbytes` of float32, with its buffers
    made once (zeros), and one that fills them with rank-dependent integers, issues one call and
    returns (wrong elements, elements checked) of this rank's output."""
    rank = dist.get_rank()
    if op in ("allgather", "reduce_scatter", "alltoall"):
        per_rank = max(1, -(-nbytes // (4 * world)))
        full = torch.zeros(per_rank * world)
        part = torch.zeros(per_rank)
        if op == "alltoall":  # nbytes: each rank's whole input, one equal block per rank
            out = torch.zeros_like(full)

            def check_alltoall():
                full.copy_(pattern(rank, full.numel(), world))  # block q: rank q's
                out.fill_(-1)
                dist.all_to_all_single(out, full, group=group)
                want = torch.cat([pattern(q, per_rank, world, rank * per_rank)
                                  for q in range(world)])
                return count_wrong(out, want), out.numel()
            return lambda: dist.all_to_all_single(out, full, group=group), check_alltoall
        if op == "allgather":
            def check_allgather():
                part.copy_(pattern(rank, per_rank, world))
                full.fill_(-1)
                dist.all_gather_into_tensor(full, part, group=group)
                want = torch.cat([pattern(q, per_rank, world) for q in range(world)])
                return count_wrong(full, want), full.numel()
            return lambda: dist.all_gather_into_tensor(full, part, group=group), check_allgather

        def check_reduce_scatter():
            full.copy_(pattern(rank, full.numel(), world))
            part.fill_(-1)
            dist.reduce_scatter_tensor(part, full, group=group)
            return count_wrong(part, summed(per_rank, world, rank * per_rank)), part.numel()
        return lambda: dist.reduce_scatter_tensor(part, full, group=group), check_reduce_scatter
    t = torch.zeros(max(1, nbytes // 4))
    if op == "allreduce":
        def check_allreduce():
            t.copy_(pattern(rank, t.numel(), world))
            dist.all_reduce(t, group=group)
            return count_wrong(t, summed(t.numel(), world)), t.numel()
        return lambda: dist.all_reduce(t, group=group), check_allreduce

    def check_broadcast():
        t.copy_(pattern(rank, t.numel(), world))
        dist.broadcast(t, src=0, group=group)
        return count_wrong(t, pattern(0, t.numel(), world)), t.numel()
    return lambda: dist.broadcast(t, src=0, group=group), check_broadcast


def effective_bytes(op: str, nbytes: int, world: int) -> int:
    if op in ("allgather", "reduce_scatter", "alltoall"):
        return max(1, -(-nbytes // (4 * world))) * world * 4
    return max(1, nbytes // 4) * 4


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--sizes", default="4,16,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M",
                   help="bytes, with K/M suffixes (powers of 1024)")
    p.add_argument("--reps-scale", type=float, default=1.0, help="scale the timed repetitions")
    p.add_argument("--profile", default="", help="label stored with every result")
    p.add_argument("--out", required=True, help="JSON-lines file rank 0 appends to")
    args = p.parse_args()

    ops = [o for o in args.ops.split(",") if o]
    units = {"K": 1 << 10, "M": 1 << 20}
    sizes = [int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)
             for s in args.sizes.split(",")]

    dist.init_process_group("gloo", timeout=timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    report = Report(sys.stdout if rank == 0 else None)
    report.header("every CPU arm of the dynamiccl backend, per op and size", {
        "profile": args.profile or "(none)", "ranks": world, "ops": " ".join(ops),
        "sizes": args.sizes, "reps-scale": args.reps_scale, "out": args.out,
        "time": "from the last rank's start to the last rank's end; median and quartiles (us) "
                "over reps; /best: median over the size's best arm's",
        "check": "after the timed calls, one untimed call per arm on rank-dependent integers"})
    arms = {op: _C.arm_names(_C.Engine.cpu, op) for op in ops}
    groups = []
    for i in range(max(len(a) for a in arms.values())):
        force = ";".join(f"{op}:{a[i] if i < len(a) else 'default'}" for op, a in arms.items())
        groups.append(dist.new_group(backend="dynamiccl", timeout=timedelta(minutes=10),
                                     pg_options=dynamiccl_pg.Options(force=force)))
    report.columns(Column("op", "s", 14), Column("size(B)", "d", 8), Column("arm", "s", 8),
                   Column("reps", "d"), Column("median(us)", ".1f"), Column("q1(us)", ".1f", 8),
                   Column("q3(us)", ".1f", 8), Column("/best", ".2f"), Column(WRONG, "d"),
                   Column("elapsed(s)", ".0f"))

    t_start = time.perf_counter()
    total_wrong = 0
    for op in ops:
        for nbytes in sizes:
            calls, checks = zip(*(make_call(op, nbytes, world, groups[i])
                                  for i in range(len(arms[op]))))
            warm, reps = reps_for(nbytes, args.reps_scale)
            for call in calls:
                for _ in range(warm):
                    call()
            stamps = torch.zeros(reps, len(calls), 2, dtype=torch.float64)
            for r in range(reps):
                for i, call in enumerate(calls):
                    dist.barrier()
                    t0 = time.perf_counter()
                    call()
                    stamps[r, i, 0], stamps[r, i, 1] = t0, time.perf_counter()
            checked = torch.tensor([check() for check in checks])  # [arms, (wrong, checked)]
            dist.all_reduce(checked)  # every rank's counts, on the default (plain gloo) group
            total_wrong += int(checked[:, 0].sum())
            everyone = [torch.zeros_like(stamps) for _ in range(world)]
            dist.all_gather(everyone, stamps)
            if rank != 0:
                continue
            latest = torch.stack(everyone).amax(dim=0)  # [reps, arms, (start, end)]
            times_us = ((latest[..., 1] - latest[..., 0]) * 1e6).tolist()
            medians = [statistics.median(row[i] for row in times_us) for i in range(len(calls))]
            with open(args.out, "a") as f:
                for i, arm in enumerate(arms[op]):
                    xs = [row[i] for row in times_us]
                    q = statistics.quantiles(xs, n=4)
                    f.write(json.dumps({
                        "profile": args.profile, "world": world, "op": op, "arm": arm,
                        "bytes": effective_bytes(op, nbytes, world),
                        "median_us": round(statistics.median(xs), 1),
                        "q1_us": round(q[0], 1), "q3_us": round(q[2], 1), "reps": reps}) + "\n")
                    wrong, n = checked[i].tolist()
                    report.row(op, effective_bytes(op, nbytes, world), arm, reps,
                               round(medians[i], 1), round(q[0], 1), round(q[2], 1),
                               medians[i] / min(medians), wrong,
                               time.perf_counter() - t_start, checked=n)
    for g in groups:
        dist.destroy_process_group(g)
    status = report.footer() if rank == 0 else int(total_wrong > 0)
    dist.destroy_process_group()
    sys.exit(status)


if __name__ == "__main__":
    main()
