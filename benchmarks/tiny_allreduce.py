"""Per-call cost of a tiny all-reduce (4 bytes, CPU): plain gloo vs dynamiccl off vs dynamiccl
learn (after convergence), in one run, interleaved so machine noise hits all three alike.

    torchrun --standalone --nproc-per-node=4 benchmarks/tiny_allreduce.py [--rounds 30]

Prints the median per-call time of each and the ratios to gloo (target: learn/gloo <= 1.05).
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

import dynamiccl_pg


def per_call_us(group, calls: int) -> float:
    t = torch.ones(1)
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(t, group=group)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=200, help="calls per group per round")
    p.add_argument("--warmup", type=int, default=3000, help="learn-mode calls before measuring")
    args = p.parse_args()

    dist.init_process_group("gloo")
    groups = {
        "gloo": dist.new_group(backend="gloo"),
        "dynamiccl-off": dist.new_group(backend="dynamiccl",
                                        pg_options=dynamiccl_pg.Options(mode="off")),
        "dynamiccl-learn": dist.new_group(backend="dynamiccl",
                                          pg_options=dynamiccl_pg.Options(mode="learn")),
    }
    per_call_us(groups["dynamiccl-learn"], args.warmup)  # learn, then measure the steady state
    per_call_us(groups["gloo"], 500)
    per_call_us(groups["dynamiccl-off"], 500)
    samples = {name: [] for name in groups}
    for _ in range(args.rounds):
        for name, g in groups.items():
            samples[name].append(per_call_us(g, args.calls))
    if dist.get_rank() == 0:
        med = {name: statistics.median(v) for name, v in samples.items()}
        print(f"tiny all-reduce, 4 bytes, {dist.get_world_size()} ranks, {args.rounds} rounds x "
              f"{args.calls} calls, median of per-round means")
        for name, v in med.items():
            print(f"  {name:<16} {v:9.1f} us/call   ratio to gloo {v / med['gloo']:.3f}")
        learned = dynamiccl_pg.stats(groups["dynamiccl-learn"])["states"]["cpu"]
        for st in learned:
            if st["op"] == "allreduce":
                print(f"  learned: {st['op']} size_bin {st['size_bin']} -> {st['incumbent']} "
                      f"({st['phase']}, {st['probes']} probes in {st['calls']} calls)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
