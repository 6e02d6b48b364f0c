"""What a group costs to open, per rank: sockets, threads, resident memory, store keys and
creation time, for gloo and dynamiccl, at the world sizes given; and what a consensus round's
all-reduce takes. The measurement behind docs/scale.md.

    python benchmarks/scale_probe.py --ranks 4 8 16 [--repeats 2] [--lazy]

Each job starts N processes on this machine (one TCPStore), times init_process_group plus two
new_group calls (the first and the second half of the ranks), runs one 4-byte all-reduce on each
group a rank is in (dynamiccl in `learn` mode, so everything it opens is open), then counts this
process's sockets (/proc/self/fd), threads and VmRSS. Backends alternate within each size; with
--repeats the best creation time of the repeats is kept (a 2-core machine's noise only adds). The
store's keys after creation are counted on rank 0 (TCPStore.num_keys). --lazy sets
TORCH_GLOO_LAZY_INIT=1 (Gloo connects a pair on its first message). Then the round: 200
all-reduces (MIN) of a round's payload (72 doubles, K = 16) on the world, gloo's own all-reduce
(what a round on a Gloo group of its own ran) against our recursive doubling over the same Gloo
(DYNAMICCL_FORCE=allreduce:rd, what a round runs now), median over calls and ranks. Prints a
Markdown table (medians over ranks, creation time max over ranks).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time
from datetime import timedelta

BACKENDS = ("gloo", "dynamiccl")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return count


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _rank(rank, world, port, backend, env, out):
    os.environ.update(env)
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    if backend == "dynamiccl":
        import dynamiccl_pg  # noqa: F401
    store = dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0,
                          timeout=timedelta(seconds=300))
    before = (_sockets(), _status("Threads"), _status("VmRSS"))
    t0 = time.perf_counter()
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))
    halves = [dist.new_group(list(range(world // 2))),
              dist.new_group(list(range(world // 2, world)))]
    created_s = time.perf_counter() - t0
    t = torch.ones(1)
    dist.all_reduce(t)
    mine = halves[0] if rank < world // 2 else halves[1]
    dist.all_reduce(t, group=mine)
    dist.barrier()
    keys = store.num_keys() if rank == 0 else -1
    after = (_sockets(), _status("Threads"), _status("VmRSS"))
    dist.barrier()
    payload = torch.ones(72, dtype=torch.float64)
    times = []
    for i in range(220):
        t0 = time.perf_counter()
        dist.all_reduce(payload, op=dist.ReduceOp.MIN)
        if i >= 20:
            times.append(time.perf_counter() - t0)
    out.put((rank, created_s, after[0] - before[0], after[1] - before[1],
             (after[2] - before[2]) / 1024, keys, statistics.median(times) * 1e6))
    dist.destroy_process_group()


def job(world: int, backend: str, env: dict) -> dict:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank, args=(r, world, port, backend, env, out))
             for r in range(world)]
    for p in procs:
        p.start()
    rows = [out.get(timeout=600) for _ in range(world)]
    for p in procs:
        p.join()
    _, created, sockets, threads, rss, keys, round_us = zip(*rows)
    return {"created_s": max(created), "sockets": statistics.median(sockets),
            "threads": statistics.median(threads), "rss_mib": statistics.median(rss),
            "keys": max(keys), "round_us": statistics.median(round_us)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--lazy", action="store_true", help="TORCH_GLOO_LAZY_INIT=1")
    args = p.parse_args(argv)
    env = {"DYNAMICCL_MODE": "learn", "DYNAMICCL_FORCE": "allreduce:rd"}
    if args.lazy:
        env["TORCH_GLOO_LAZY_INIT"] = "1"
    here = os.path.dirname(os.path.abspath(__file__))
    # A PYTHONPATH given first: another checkout's package can be probed with this script.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"),
                                                      os.path.dirname(here)]))
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    print(f"| ranks | backend | sockets/rank | threads/rank | RSS MiB/rank | store keys | "
          f"creation s (best of {args.repeats}) | round all-reduce us |")
    print("|---|---|---|---|---|---|---|---|")
    for world in args.ranks:
        best = {}
        for _ in range(args.repeats):
            for backend in BACKENDS:  # alternated
                r = job(world, backend, env)
                if backend not in best or r["created_s"] < best[backend]["created_s"]:
                    best[backend] = r
        for backend in BACKENDS:
            r = best[backend]
            print(f"| {world} | {backend} | {r['sockets']:.0f} | {r['threads']:.0f} | "
                  f"{r['rss_mib']:.0f} | {r['keys']} | {r['created_s']:.2f} | "
                  f"{r['round_us']:.0f} |", flush=True)
        g, d = best["gloo"], best["dynamiccl"]
        print(f"| {world} | dynamiccl - gloo | {d['sockets'] - g['sockets']:+.0f} | "
              f"{d['threads'] - g['threads']:+.0f} | {d['rss_mib'] - g['rss_mib']:+.0f} | "
              f"{d['keys'] - g['keys']:+d} | x{d['created_s'] / g['created_s']:.2f} | "
              f"x{d['round_us'] / g['round_us']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
