"""What learning costs on the wall clock, from the first call, with only the groups a real job has:
the default group (plain gloo, the baseline) and one dynamiccl group in `learn`. Windows of
calls alternate between the two, so machine noise hits both alike.

    torchrun --standalone --nproc-per-node=4 benchmarks/learning_cost.py [--bytes 4 4194304]

For each size: the whole run's time on dynamiccl over gloo's (every window from the first call:
what the job pays for learning), the same once settled (the last third of the windows), the
wall-clock excess (dynamiccl's total minus gloo's, rank 0's clock, µs) and what the learner's
ledger charged for it (`extra_us` of the group's states, summed). Targets: whole run <= 1.03,
settled <= 1.01, ledger within 25% of the excess. One untimed call per group then all-reduces
rank-dependent integers whose sum is exact: #wrong counts the elements that differ.
"""

import argparse
import statistics
import sys
import time

import torch
import torch.distributed as dist

import dynamiccl_pg

from bench_output import WRONG, Column, Report, count_wrong, pattern, summed


def window_us(group, t: torch.Tensor, calls: int) -> float:
    """The wall time of `calls` all-reduces on `group`, from a barrier to the last completion."""
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(t, group=group)
    return (time.perf_counter() - start) * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bytes", type=int, nargs="+", default=[4, 4 << 20])
    p.add_argument("--windows", type=int, default=8, help="windows per group and size")
    p.add_argument("--calls", type=int, default=1000, help="calls per window at 4 bytes "
                   "(fewer for larger sizes: the same bytes per window, at least 20 calls)")
    args = p.parse_args()
    for b in args.bytes:
        if b < 4 or b % 4:
            p.error(f"--bytes {b}: accepted: multiples of 4 (float32 elements), >= 4")

    dist.init_process_group("gloo")  # the default group: what the job would run without us
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Report(sys.stdout if rank == 0 else None)
    out.header("what learning costs on the wall clock: dynamiccl learn vs gloo", {
        "ranks": world, "sizes": ", ".join(f"{b} bytes" for b in args.bytes),
        "windows": f"{args.windows} per group and size, alternated, from the first call",
        "settled": "the last third of the windows",
        "ledger": "sum of the states' extra_us (stats()), against the wall-clock excess"})
    out.columns(Column("bytes", "d", 9), Column("calls", "d", 7), Column("whole", ".3f"),
                Column("settled", ".3f"), Column("excess_us", ".0f", 10),
                Column("ledger_us", ".0f", 10), Column("ledger/excess", ".2f", 13),
                Column(WRONG, "d"))
    gloo = dist.group.WORLD
    wrong_total = 0
    for nbytes in args.bytes:
        # A fresh dynamiccl group per size: each learns from its first call.
        learn = dist.new_group(backend="dynamiccl", pg_options=dynamiccl_pg.Options(mode="learn"))
        calls = max(20, args.calls * 4 // nbytes) if nbytes > 4 else args.calls
        t = torch.ones(nbytes // 4)
        ours, theirs = [], []
        for _ in range(args.windows):
            theirs.append(window_us(gloo, t, calls))
            ours.append(window_us(learn, t, calls))
        states = dynamiccl_pg.stats(learn)["states"]["cpu"]
        ledger = sum(st["extra_us"] for st in states)
        check = pattern(rank, nbytes // 4, world)
        dist.all_reduce(check, group=learn)
        wrong = torch.tensor([count_wrong(check, summed(nbytes // 4, world))])
        dist.all_reduce(wrong)
        wrong_total += int(wrong.item())
        settled = args.windows - max(1, args.windows // 3)
        excess = sum(ours) - sum(theirs)
        out.row(nbytes, calls * args.windows, sum(ours) / sum(theirs),
                statistics.median(o / g for o, g in zip(ours[settled:], theirs[settled:])),
                excess, ledger, ledger / excess if excess > 0 else float("nan"),
                int(wrong.item()), checked=world * nbytes // 4)
        for st in states:
            if st["op"] == "allreduce":
                out.note(f"{nbytes} bytes: size_bin {st['size_bin']} -> {st['incumbent']} "
                         f"({st['phase']}, {st['probes']} probes, {st['measured_calls']} of "
                         f"{st['calls']} calls measured, extra_us {st['extra_us']:.0f})")
        dist.destroy_process_group(learn)
    status = out.footer() if rank == 0 else int(wrong_total > 0)
    dist.destroy_process_group()
    sys.exit(status)


if __name__ == "__main__":
    main()
