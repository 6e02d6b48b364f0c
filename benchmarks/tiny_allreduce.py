"""Per-call cost of a tiny all-reduce (4 bytes, CPU): plain gloo, dynamiccl off, dynamiccl learn
(after convergence) and dynamiccl frozen on what learn learned, in one run, interleaved so that
machine noise hits all four alike.

    torchrun --standalone --nproc-per-node=4 benchmarks/tiny_allreduce.py [--rounds 30]

With DYNAMICCL_FORCE=allreduce:ARM, learn and frozen run that arm (off stays a pass-through):
the cost of one of our schedules beside Gloo's own all-reduce, in wall and CPU time.

Prints (bench_output.py's format) the median per-call time of each and its ratios to gloo and
to frozen (targets: learn/gloo <= 1.03, learn/frozen <= 1.01), and rank 0's CPU time per call,
which a machine whose ranks share cores disturbs less than the wall clock, and that CPU time
per thread name: the caller's thread (the interpreter's name), Gloo's workers
(pt_gloo_runloop), Gloo's TCP event loops (gloo_tcp_loop), our schedules (dccl_schedule).
After the timed rounds, one untimed call per group all-reduces rank-dependent integers whose
sum is exact: #wrong counts the elements that differ from it, and the exit status is 1 if any
did.
"""

import argparse
import collections
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import dynamiccl_pg
from dynamiccl_pg.backend import backend_of
from dynamiccl_pg.policy_schema import ENGINES

from bench_output import WRONG, Column, Report, count_wrong, pattern, summed


def cpu_by_thread() -> collections.Counter:
    """CPU seconds so far of this process's threads, summed per thread name (Linux /proc; in
    clock ticks, so only sums over many calls mean anything). Empty where /proc has no tasks."""
    total: collections.Counter = collections.Counter()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return total
    tick = os.sysconf("SC_CLK_TCK")
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        total[name] += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return total


def per_call_us(group, calls: int) -> tuple:
    """Wall time and this process's CPU time (all its threads) per call, µs, and the CPU
    seconds its threads took, per thread name."""
    t = torch.ones(1)
    dist.barrier(group=group)
    threads_before = cpu_by_thread()
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(calls):
        dist.all_reduce(t, group=group)
    wall = (time.perf_counter() - start) / calls * 1e6
    cpu = (time.process_time() - cpu_start) / calls * 1e6
    threads = cpu_by_thread()
    threads.subtract(threads_before)
    return wall, cpu, threads


def wrong_elements(group) -> int:
    """One call on rank-dependent integers: how many elements differ from their exact sum."""
    rank, world = dist.get_rank(), dist.get_world_size()
    t = pattern(rank, 1, world)
    dist.all_reduce(t, group=group)
    return count_wrong(t, summed(1, world))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=200, help="calls per group per round")
    p.add_argument("--warmup", type=int, default=3000, help="learn-mode calls before measuring")
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    out = Report(sys.stdout if rank == 0 else None)
    out.header("tiny all-reduce: per-call time, 4 bytes, CPU", {
        "ranks": world, "size": "4 bytes (1 float32, sum)",
        "rounds": f"{args.rounds} x {args.calls} calls per group, interleaved",
        "warmup": f"{args.warmup} learn-mode calls, then 500 calls per other group",
        "us/call": "median of per-round means; /gloo, /frozen: its ratio to theirs",
        "cpu_us/call": "rank 0's process CPU time (all threads) per call, median of rounds",
        "cpu_over_gloo": "cpu_us/call minus gloo's",
        "cpu by thread": "rank 0's CPU per call and thread name over all rounds (Linux)",
        "check": "after the rounds, one untimed call per group on rank-dependent integers"})
    groups = {
        "gloo": dist.new_group(backend="gloo"),
        "dynamiccl-off": dist.new_group(backend="dynamiccl",
                                        pg_options=dynamiccl_pg.Options(mode="off")),
        "dynamiccl-learn": dist.new_group(backend="dynamiccl",
                                          pg_options=dynamiccl_pg.Options(mode="learn")),
        "dynamiccl-frozen": dist.new_group(backend="dynamiccl",
                                           pg_options=dynamiccl_pg.Options(mode="frozen")),
    }
    per_call_us(groups["dynamiccl-learn"], args.warmup)  # learn, then measure the steady state
    # frozen runs what learn learned, without measuring: the cost of the policy alone. Under
    # DYNAMICCL_FORCE both run the forced arm (and learn has learned nothing).
    learned_policy = backend_of(groups["dynamiccl-learn"]).snapshot(ENGINES["cpu"])
    if learned_policy is not None:
        backend_of(groups["dynamiccl-frozen"]).restore(ENGINES["cpu"], learned_policy)
    for name in ("gloo", "dynamiccl-off", "dynamiccl-frozen"):
        per_call_us(groups[name], 500)
    samples = {name: [] for name in groups}
    threads = {name: collections.Counter() for name in groups}
    for _ in range(args.rounds):
        for name, g in groups.items():
            wall, cpu, by_thread = per_call_us(g, args.calls)
            samples[name].append((wall, cpu))
            threads[name].update(by_thread)
    # What learning settled on, before the checking calls add one call to each state.
    learned = {name: [st for st in dynamiccl_pg.stats(groups[name])["states"]["cpu"]
                      if st["op"] == "allreduce"]
               for name in ("dynamiccl-learn", "dynamiccl-frozen")}
    wrong = torch.tensor([wrong_elements(g) for g in groups.values()])
    dist.all_reduce(wrong)  # on the default (plain gloo) group: every rank's count
    med = {name: statistics.median(wall for wall, _ in v) for name, v in samples.items()}
    cpu = {name: statistics.median(c for _, c in v) for name, v in samples.items()}
    out.columns(Column("group", "s", 16), Column("us/call", ".1f", 9), Column("/gloo", ".3f"),
                Column("/frozen", ".3f"), Column("cpu_us/call", ".1f", 11),
                Column("cpu_over_gloo", "+.1f", 13), Column(WRONG, "d"))
    for (name, v), w in zip(med.items(), wrong.tolist()):
        out.row(name, v, v / med["gloo"], v / med["dynamiccl-frozen"], cpu[name],
                cpu[name] - cpu["gloo"], w, checked=world)
    calls = args.rounds * args.calls
    for name, by_thread in threads.items():
        busy = sorted((t for t in by_thread.items() if t[1] > 0), key=lambda t: -t[1])
        if busy:
            out.note(f"{name}: cpu by thread, us/call: " + ", ".join(
                f"{thread} {seconds / calls * 1e6:.0f}" for thread, seconds in busy))
    for name, states in learned.items():
        for st in states:
            out.note(f"{name}: size_bin {st['size_bin']} -> {st['incumbent']} "
                     f"({st['phase']}, {st['probes']} probes, {st['measured_calls']} of "
                     f"{st['calls']} calls measured)")
    status = out.footer() if rank == 0 else int(wrong.sum() > 0)
    dist.destroy_process_group()
    sys.exit(status)


if __name__ == "__main__":
    main()
