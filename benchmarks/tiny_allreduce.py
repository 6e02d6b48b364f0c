"""Per-call cost of a tiny all-reduce (4 bytes, CPU): plain gloo, dynamiccl off, dynamiccl learn
(after convergence) and dynamiccl frozen on what learn learned, in one run, interleaved so that
machine noise hits all four alike.

    torchrun --standalone --nproc-per-node=4 benchmarks/tiny_allreduce.py [--rounds 30]

Prints the median per-call time of each and its ratios to gloo and to frozen (targets:
learn/gloo <= 1.03, learn/frozen <= 1.01).
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

import dynamiccl_pg
from dynamiccl_pg.backend import backend_of
from dynamiccl_pg.policy_schema import ENGINES


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
        "dynamiccl-frozen": dist.new_group(backend="dynamiccl",
                                           pg_options=dynamiccl_pg.Options(mode="frozen")),
    }
    per_call_us(groups["dynamiccl-learn"], args.warmup)  # learn, then measure the steady state
    # frozen runs what learn learned, without measuring: the cost of the policy alone.
    learn, frozen = backend_of(groups["dynamiccl-learn"]), backend_of(groups["dynamiccl-frozen"])
    frozen.restore(ENGINES["cpu"], learn.snapshot(ENGINES["cpu"]))
    for name in ("gloo", "dynamiccl-off", "dynamiccl-frozen"):
        per_call_us(groups[name], 500)
    samples = {name: [] for name in groups}
    for _ in range(args.rounds):
        for name, g in groups.items():
            samples[name].append(per_call_us(g, args.calls))
    if dist.get_rank() == 0:
        med = {name: statistics.median(v) for name, v in samples.items()}
        print(f"tiny all-reduce, 4 bytes, {dist.get_world_size()} ranks, {args.rounds} rounds x "
              f"{args.calls} calls, median of per-round means")
        for name, v in med.items():
            print(f"  {name:<16} {v:9.1f} us/call   ratio to gloo {v / med['gloo']:.3f}   "
                  f"to frozen {v / med['dynamiccl-frozen']:.3f}")
        for name in ("dynamiccl-learn", "dynamiccl-frozen"):
            for st in dynamiccl_pg.stats(groups[name])["states"]["cpu"]:
                if st["op"] == "allreduce":
                    print(f"  {name}: size_bin {st['size_bin']} -> {st['incumbent']} "
                          f"({st['phase']}, {st['probes']} probes, {st['measured_calls']} of "
                          f"{st['calls']} calls measured)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
