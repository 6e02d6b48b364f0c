"""The GPU proof (benchmarks/gpu/run.sh): what only a machine with an NVIDIA GPU can show about the
NCCL branch. Each stage runs its ranks as separate processes (a real FileStore) and writes one JSON
result; ``report`` turns a folder of them into results.md.

    python benchmarks/gpu/gpu_proof.py preflight     --out F   device and versions (fails
                                                               without one)
    python benchmarks/gpu/gpu_proof.py collectives   --out F   (a) every collective at world size 1
                                                               on CUDA tensors, against `nccl`
    python benchmarks/gpu/gpu_proof.py ddp           --out F   (b) a DDP step loop, against `nccl`
    python benchmarks/gpu/gpu_proof.py multi_rank    --out F   (c) two ranks on one GPU: which way
                                                               NCCL accepts it, collectives checked
    python benchmarks/gpu/gpu_proof.py arm_sweep     --out F   (d) every NCCL all-reduce arm forced;
                                                               the profiler plugin says what ran
    python benchmarks/gpu/gpu_proof.py learn_vs_nccl --out F   (e) DDP: `dynamiccl` learning
                                                               vs `nccl`
    python benchmarks/gpu/gpu_proof.py overlap       --out F   (f) DDP with compute in flight:
                                                               each channel-cap arm's step time,
                                                               and the step-aware learner's
    python benchmarks/gpu/gpu_proof.py report --dir D --results results.md

Stages (d), (e) and (f) need two ranks, so they run on the first way of (c) that worked
(``--multi-rank``: its result file); NCCL runs no algorithm at world size 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RANK_TIMEOUT_S = int(os.environ.get("RANK_TIMEOUT", "240"))  # run.sh documents it

# Ways to put two ranks on one GPU (stage c), tried in order. NCCL refuses two ranks of one
# communicator on one GPU ("Duplicate GPU"); a different NCCL_HOSTID per rank makes NCCL see two
# hosts joined by its socket transport; NCCL >= 2.30 accepts NCCL_MULTI_RANK_GPU_ENABLE=1.
MULTI_RANK_WAYS = {
    "plain": lambda rank: {},
    "NCCL_HOSTID per rank": lambda rank: {"NCCL_HOSTID": f"dynamiccl-proof-host{rank}",
                                          "NCCL_SOCKET_IFNAME": "lo"},
    "NCCL_MULTI_RANK_GPU_ENABLE=1": lambda rank: {"NCCL_MULTI_RANK_GPU_ENABLE": "1"},
}


# ---- running ranks --------------------------------------------------------------------------

def run_ranks(fn: str, world: int, env_of_rank=lambda rank: {}, args=None) -> list:
    """Runs ``fn(rank, world, args)`` of this module in ``world`` processes joined by a FileStore;
    returns per rank {"ok": result} or {"error": text}. A rank past RANK_TIMEOUT_S is killed."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for rank in range(world):
            env = dict(os.environ,
                       PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
            env.update(env_of_rank(rank))
            out = os.path.join(tmp, f"rank{rank}.json")
            cmd = [sys.executable, __file__, "_rank", fn, str(rank), str(world),
                   os.path.join(tmp, "store"), out, json.dumps(args or {})]
            procs.append((subprocess.Popen(cmd, env=env), out))
        deadline = time.monotonic() + RANK_TIMEOUT_S
        results = []
        for proc, out in procs:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for p, _ in procs:
                    p.kill()
                results.append({"error": f"timed out after {RANK_TIMEOUT_S} s"})
                continue
            if os.path.exists(out):
                results.append(json.load(open(out)))
            else:
                results.append({"error": f"exited with {proc.returncode} without a result"})
        return results


def _rank_main(fn: str, rank: int, world: int, store_path: str, out: str, args: str) -> None:
    import traceback
    try:
        result = {"ok": globals()[fn](rank, world, store_path, json.loads(args))}
    except BaseException as e:  # every failure is a finding: keep its last line
        traceback.print_exc()
        last = str(e).strip().splitlines()[-1] if str(e).strip() else ""
        result = {"error": f"{type(e).__name__}: {last}"[:400]}
    with open(out, "w") as f:
        json.dump(result, f)


def _init(rank: int, world: int, store_path: str, backend: str = "dynamiccl", device="cuda"):
    import torch
    import torch.distributed as dist
    import dynamiccl_pg  # noqa: F401  registers "dynamiccl"
    if device == "cuda":  # every rank on the one GPU (stage c decides whether NCCL accepts it)
        torch.cuda.set_device(0)
    dist.init_process_group(backend, store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    return torch, dist


def _median_us(torch, fn, calls: int = 50, repeats: int = 5) -> float:
    """Median over repeats of the mean time per call of ``calls`` back-to-back calls (CUDA
    events)."""
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop) * 1e3 / calls)
    return statistics.median(samples)


# ---- (a) and (c): every collective, checked against nccl ------------------------------------

def _collectives(torch, dist):
    """name -> fn(group, rank, world) -> list of output tensors."""
    R = dist.ReduceOp

    def t(rank, n=4099, dtype=None):
        return (torch.arange(n, device="cuda", dtype=dtype or torch.float32) % 97) + rank

    def allreduce(op, dtype=None):
        def fn(g, rank, world):
            x = t(rank, dtype=dtype)
            dist.all_reduce(x, op=op, group=g)
            return [x]
        return fn

    def broadcast(g, rank, world):
        x = t(rank)
        dist.broadcast(x, src=0, group=g)
        return [x]

    def reduce(g, rank, world):
        x = t(rank)
        dist.reduce(x, dst=0, group=g)
        return [x] if rank == 0 else []

    def all_gather(g, rank, world):
        out = [torch.empty(4099, device="cuda") for _ in range(world)]
        dist.all_gather(out, t(rank), group=g)
        return out

    def all_gather_into_tensor(g, rank, world):
        out = torch.empty(4096 * world, device="cuda")
        dist.all_gather_into_tensor(out, t(rank, 4096), group=g)
        return [out]

    def reduce_scatter_tensor(g, rank, world):
        out = torch.empty(4096, device="cuda")
        dist.reduce_scatter_tensor(out, t(rank, 4096 * world), group=g)
        return [out]

    def reduce_scatter(g, rank, world):
        out = torch.empty(4099, device="cuda")
        dist.reduce_scatter(out, [t(rank + i) for i in range(world)], group=g)
        return [out]

    def all_to_all_single(g, rank, world):
        out = torch.empty(1024 * world, device="cuda")
        dist.all_to_all_single(out, t(rank, 1024 * world), group=g)
        return [out]

    def coalesced(g, rank, world):
        xs = [t(rank, 1000 + i) for i in range(3)]
        with dist._coalescing_manager(group=g, device=torch.device("cuda")):
            for x in xs:
                dist.all_reduce(x, group=g)
        return xs

    def barrier(g, rank, world):
        dist.barrier(group=g)
        return []

    return {"all_reduce sum": allreduce(R.SUM), "all_reduce avg": allreduce(R.AVG),
            "all_reduce max": allreduce(R.MAX), "all_reduce bf16": allreduce(R.SUM, torch.bfloat16),
            "broadcast": broadcast, "reduce": reduce, "all_gather": all_gather,
            "all_gather_into_tensor": all_gather_into_tensor,
            "reduce_scatter_tensor": reduce_scatter_tensor, "reduce_scatter": reduce_scatter,
            "all_to_all_single": all_to_all_single, "coalesced all_reduce": coalesced,
            "barrier": barrier}


def rank_collectives(rank, world, store_path, args):
    torch, dist = _init(rank, world, store_path)
    import dynamiccl_pg
    ref = dist.new_group(backend="nccl")
    checks = {}
    for name, fn in _collectives(torch, dist).items():
        print(f"[rank {rank}] {name}", file=sys.stderr, flush=True)  # which one, should it crash
        try:
            got, want = fn(None, rank, world), fn(ref, rank, world)
            torch.cuda.synchronize()
            checks[name] = "ok" if all(torch.equal(a, b) for a, b in zip(got, want)) else "MISMATCH"
        except Exception as e:  # recorded, not hidden
            checks[name] = f"error: {type(e).__name__}: {e}"[:300]
    # Pass-through cost per call against torch's default `nccl`, alternated: a group in mode
    # `off` and the world (learn) once its state has settled on a warm-up.
    off = dist.new_group(pg_options=dynamiccl_pg.Options(mode="off"))
    timing = {}
    for label, numel in (("4KiB", 1 << 10), ("4MiB", 1 << 20), ("64MiB", 1 << 24)):
        x = torch.ones(numel, device="cuda")
        try:
            for _ in range(2000):  # the learned state's warm-up and probes
                dist.all_reduce(x)
            runs = {"nccl": [], "off": [], "learn": []}
            for _ in range(3):
                runs["nccl"].append(_median_us(torch, lambda: dist.all_reduce(x, group=ref)))
                runs["off"].append(_median_us(torch, lambda: dist.all_reduce(x, group=off)))
                runs["learn"].append(_median_us(torch, lambda: dist.all_reduce(x)))
            timing[label] = {k: statistics.median(v) for k, v in runs.items()}
        except Exception as e:  # the checks above are still worth reporting
            timing[label] = {"error": f"{type(e).__name__}: {e}"[:300]}
    stats = dynamiccl_pg.stats()
    phases = sorted({st["phase"] for st in stats["states"].get("nccl", [])})
    dist.destroy_process_group()
    return {"checks": checks, "allreduce": timing, "learn_phases": phases,
            "nccl_plugin": stats["nccl_plugin"]}


def stage_collectives(args):
    return {"world": 1, "ranks": run_ranks("rank_collectives", 1)}


def stage_multi_rank(args):
    ways = {}
    for way, env in MULTI_RANK_WAYS.items():
        ranks = run_ranks("rank_collectives", 2, env)
        ways[way] = ranks
        if _way_error(ranks) is None:
            return {"world": 2, "ways": ways, "working": way}
    return {"world": 2, "ways": ways, "working": None}


class StageSkipped(Exception):
    """A stage that cannot run here; recorded with its reason."""


def _two_ranks_env(args):
    """The env of the first way of stage (c) that worked; StageSkipped, saying why, when none
    did."""
    path = args.multi_rank
    working = json.load(open(path)).get("working") if path and os.path.exists(path) else None
    if working is None:
        raise StageSkipped("needs two ranks on this GPU, and stage multi_rank found no way "
                           f"(see {path or 'its result'}): run it first")
    return working, MULTI_RANK_WAYS[working]


# ---- (b) and (e): DDP step loops ------------------------------------------------------------

def rank_ddp(rank, world, store_path, args):
    """Trains the same seeded model on the dynamiccl group and, when asked, on an nccl group;
    returns median step times and whether the two replicas stayed identical."""
    torch, dist = _init(rank, world, store_path, args.get("backend", "dynamiccl"))
    import dynamiccl_pg
    from torch.nn.parallel import DistributedDataParallel as DDP

    def train(group):
        torch.manual_seed(0)
        layers = [torch.nn.Linear(args["width"], args["width"]) for _ in range(args["depth"])]
        model = DDP(torch.nn.Sequential(*layers).cuda(), process_group=group)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        gen = torch.Generator(device="cuda").manual_seed(rank)
        times = []
        for _ in range(args["steps"]):
            x = torch.randn(64, args["width"], device="cuda", generator=gen)
            start = time.perf_counter()
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        tail = times[len(times) // 2:]  # after learning had its first half
        return model, statistics.median(tail)

    model, step_ms = train(None)
    out = {"step_ms": step_ms}
    if args.get("compare"):
        ref_model, out["nccl_step_ms"] = train(dist.new_group(backend="nccl"))
        out["replicas_identical"] = all(torch.equal(a, b) for a, b in
                                        zip(model.parameters(), ref_model.parameters()))
    if args.get("backend", "dynamiccl") == "dynamiccl":
        st = dynamiccl_pg.stats()
        out["nccl_plugin"] = st["nccl_plugin"]
        out["incumbents"] = {f"{s['op']}/{s['size_bin']}": s["incumbent"]
                             for s in st["states"].get("nccl", [])}
        out["decision_hash"] = dynamiccl_pg.decision_hash()
    dist.destroy_process_group()
    return out


DDP_SHAPE = {"width": 2048, "depth": 8, "steps": 200}  # 33.6M parameters: a few 25 MB buckets


def stage_ddp(args):
    return {"world": 1, "ranks": run_ranks("rank_ddp", 1, args={**DDP_SHAPE, "compare": True})}


def stage_learn_vs_nccl(args):
    way, env = _two_ranks_env(args)
    shape = dict(DDP_SHAPE, steps=400)
    return {"world": 2, "way": way,
            "nccl": run_ranks("rank_ddp", 2, env, {**shape, "backend": "nccl"}),
            "dynamiccl": run_ranks("rank_ddp", 2, env, shape)}


# ---- (d) every NCCL arm forced, checked by the profiler plugin --------------------------------

SWEEP_BYTES = (64 << 10, 16 << 20)


def rank_arm_sweep(rank, world, store_path, args):
    torch, dist = _init(rank, world, store_path)
    import dynamiccl_pg
    from dynamiccl_pg import _C
    algos, protos = _C.vocabulary()["nccl_algos"], _C.vocabulary()["nccl_protos"]
    allreduce = 4  # DYNAMICCL_NCCL_COLL_ALLREDUCE
    last = max([r["id"] for r in _C.nccl_profiler_records(0)], default=0)
    rows = []
    for arm in _C.arm_names(_C.Engine.nccl, "allreduce"):
        if arm == "default":
            continue
        group = dist.new_group(backend="dynamiccl",
                               pg_options=dynamiccl_pg.Options(force=f"allreduce:{arm}"))
        # A group's first NCCL call runs NCCL's own choice (it creates the communicator): not
        # part of the sweep.
        dist.all_reduce(torch.ones(1, device="cuda"), group=group)
        torch.cuda.synchronize()
        last = max([r["id"] for r in _C.nccl_profiler_records(last)] + [last])
        for nbytes in SWEEP_BYTES:
            x = torch.ones(nbytes // 4, device="cuda")
            before = dict(_C.nccl_counters())
            us = _median_us(torch, lambda: dist.all_reduce(x, group=group), calls=20, repeats=3)
            after = _C.nccl_counters()
            records = [r for r in _C.nccl_profiler_records(last) if r["coll"] == allreduce]
            last = max([r["id"] for r in records] + [last])
            ran = sorted({(algos[r["algo"]] if r["algo"] >= 0 else "?",
                           protos[r["proto"]] if r["proto"] >= 0 else "?", r["nchannels"])
                          for r in records})
            rows.append({"arm": arm, "bytes": nbytes, "us": us, "ran": ran,
                         "kernel_us": statistics.median([r["kernel_us"] for r in records
                                                         if r["kernel_us"] > 0] or [-1]),
                         "applied": after["applied"] - before["applied"],
                         "unavailable": after["unavailable"] - before["unavailable"]})
        dist.destroy_process_group(group)
    counters = _C.nccl_counters()
    dist.destroy_process_group()
    return {"rows": rows, "profiler_loaded_by_nccl": counters["profiler_loaded_by_nccl"]}


def stage_arm_sweep(args):
    from dynamiccl_pg import _C
    way, env = _two_ranks_env(args)
    plugin = _C.nccl_plugin_path()
    return {"world": 2, "way": way,
            "ranks": run_ranks("rank_arm_sweep", 2,
                               lambda rank: dict(env(rank), NCCL_PROFILER_PLUGIN=plugin))}


def arm_verdict(arm: str, row: dict) -> str:
    """Whether what NCCL ran (profiler records) is the arm that was forced."""
    if row["unavailable"] > 0:
        return "unavailable here (NCCL marked it; dropped)"
    if not row["ran"]:
        return "NO PROFILER RECORDS"
    algo, proto, *cap = arm.split("/")
    limit = int(cap[0][1:]) if cap else None
    ok = all(a == algo and p == proto and (limit is None or n <= limit) for a, p, n in row["ran"])
    return "ran as forced" if ok else "DIFFERENT: " + ", ".join(
        f"{a}/{p}/c{n}" for a, p, n in row["ran"])


# ---- (f) compute in flight: what each channel-cap arm costs the DDP step ---------------------

# The all-reduce arms NCCL can run over the socket transport (LL128 and NVLS need NVLink; ring/LL
# takes over half a second per 16 MiB there), uncapped and capped.
OVERLAP_ARMS = ("ring/Simple", "ring/Simple/c4", "ring/Simple/c8",
                "tree/Simple", "tree/Simple/c4", "tree/Simple/c8")
# 33.6M parameters (134 MB of gradients in 25 MiB buckets) and a batch whose backward computes
# about as long as the buckets take over the loopback sockets, so the two overlap.
OVERLAP_SHAPE = {"width": 2048, "depth": 8, "batch": 8192, "bucket_mb": 25, "warmup": 5,
                 "steps": 30, "passes": 2, "learn_steps": 400}


def rank_overlap(rank, world, store_path, args):
    """Per configuration (the reference backend, each forced arm), the same seeded DDP model
    trained ``steps`` steps in ``passes`` interleaved passes (the second in reverse order, so that
    drift cancels); then the step-aware learner from scratch. Returns median step times, the
    bucket all-reduce's own time on each group, and what NCCL ran (profiler plugin)."""
    device = args.get("device", "cuda")
    torch, dist = _init(rank, world, store_path, device=device)
    import dynamiccl_pg
    from dynamiccl_pg import _C
    from torch.nn.parallel import DistributedDataParallel as DDP
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    width = args["width"]

    def model():
        torch.manual_seed(0)
        layers = []
        for _ in range(args["depth"]):
            layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers).to(dev)

    x = torch.randn(args["batch"], width, device=dev,
                    generator=torch.Generator(device=dev).manual_seed(rank))

    def step_times(net, steps):
        opt = torch.optim.SGD(net.parameters(), lr=1e-6)
        times = []
        for _ in range(steps):
            sync()
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            net(x).square().mean().backward()
            opt.step()
            sync()
            times.append((time.perf_counter() - start) * 1e3)
        return times

    def bucket_ms(group, calls=5, repeats=3):
        t = torch.ones(args["bucket_mb"] << 18, device=dev)  # bucket_mb MiB of float32
        dist.all_reduce(t, group=group)
        sync()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(t, group=group)
            sync()
            samples.append((time.perf_counter() - start) * 1e3 / calls)
        return statistics.median(samples)

    allreduce = 4  # DYNAMICCL_NCCL_COLL_ALLREDUCE
    algos, protos = _C.vocabulary()["nccl_algos"], _C.vocabulary()["nccl_protos"]
    last = [max([r["id"] for r in _C.nccl_profiler_records(0)], default=0)]

    def ran_since():
        records = [r for r in _C.nccl_profiler_records(last[0]) if r["coll"] == allreduce]
        last[0] = max([r["id"] for r in records] + [last[0]])
        return sorted({f"{algos[r['algo']] if r['algo'] >= 0 else '?'}/"
                       f"{protos[r['proto']] if r['proto'] >= 0 else '?'}/c{r['nchannels']}"
                       for r in records})

    compute_only = step_times(model(), args["warmup"] + args["steps"])[args["warmup"]:]
    dist.barrier()
    reference = "nccl" if dev.type == "cuda" else "gloo"
    groups, refused = {reference: dist.new_group(backend=reference)}, {}
    for arm in args.get("arms", OVERLAP_ARMS):
        try:  # a cap beyond the group's channels is refused at creation, on every rank
            groups[arm] = dist.new_group(backend="dynamiccl",
                                         pg_options=dynamiccl_pg.Options(force=f"allreduce:{arm}"))
        except ValueError as e:
            refused[arm] = str(e).splitlines()[0][:200]
    rows = {name: {"step_ms": [], "bucket_ms": [], "ran": set()} for name in groups}
    for p in range(args["passes"]):
        for name in (list(groups) if p % 2 == 0 else list(reversed(groups))):
            g, row = groups[name], rows[name]
            net = DDP(model(), process_group=g, bucket_cap_mb=args["bucket_mb"])
            if name != reference:
                dynamiccl_pg.register_ddp_hook(net, g)
            ran_since()
            row["step_ms"] += step_times(net, args["warmup"] + args["steps"])[args["warmup"]:]
            row["bucket_ms"].append(bucket_ms(g))
            row["ran"].update(ran_since())
            del net
    out = {"compute_only_ms": statistics.median(compute_only),
           "configs": {name: {"step_ms": statistics.median(r["step_ms"]),
                              "bucket_ms": statistics.median(r["bucket_ms"]),
                              "ran": sorted(r["ran"])} for name, r in rows.items()},
           "refused": refused}
    for g in groups.values():
        dist.destroy_process_group(g)

    learner = dist.new_group(backend="dynamiccl")
    net = DDP(model(), process_group=learner, bucket_cap_mb=args["bucket_mb"])
    dynamiccl_pg.register_ddp_hook(net, learner)  # bucket hints: exposure, step boundaries
    times = step_times(net, args["learn_steps"])
    st = dynamiccl_pg.stats(learner)
    out["learn"] = {"step_ms_last_third": statistics.median(times[-(len(times) // 3):]),
                    "step_ms_first_third": statistics.median(times[:len(times) // 3]),
                    "states": st["states"].get("nccl", []),  # arms, events, step trial
                    "steps_seen": st["steps"], "nccl_plugin": st["nccl_plugin"],
                    "round_cost_us": st["round_cost_us"]["nccl"],  # what a probe is priced
                    "decision_hash": dynamiccl_pg.decision_hash(learner)}
    dist.destroy_process_group()
    return out


def stage_overlap(args):
    shape = dict(OVERLAP_SHAPE, **json.loads(args.shape or "{}"), device=args.device)
    if args.device == "cuda":
        from dynamiccl_pg import _C
        way, env = _two_ranks_env(args)
        plugin = _C.nccl_plugin_path()
        env_of_rank = lambda rank: dict(env(rank), NCCL_PROFILER_PLUGIN=plugin)  # noqa: E731
    else:  # a dry run of the stage itself: the emulated NCCL the caller set up, gloo as reference
        way, env_of_rank = "emulated NCCL on CPU (a dry run)", lambda rank: {}
    # NCCL's channel bounds, where set, decide which caps bind (over sockets NCCL runs 2 channels
    # unless NCCL_MIN_NCHANNELS asks for more); the report names them.
    from dynamiccl_pg.config import NCCL_CHANNEL_BOUNDS
    bounds = {v: os.environ[v] for v in NCCL_CHANNEL_BOUNDS.values() if os.environ.get(v)}
    return {"world": 2, "way": way, "shape": shape, "nccl_channel_env": bounds,
            "ranks": run_ranks("rank_overlap", 2, env_of_rank, shape)}


# ---- preflight and report ---------------------------------------------------------------------

def stage_preflight(args):
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("gpu_proof: no CUDA device is visible (torch.cuda.is_available() is "
                         "False); this proof needs an NVIDIA GPU")
    nccl = torch.cuda.nccl.version()
    return {"device": torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count(),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl),
            "date": datetime.date.today().isoformat()}


def _fmt(x, unit=""):
    return f"{x:.1f}{unit}" if isinstance(x, (int, float)) else str(x)


def _rank_error(ranks):
    errors = [r["error"] for r in ranks if "error" in r]
    return errors[0] if errors else None


def _way_error(ranks):
    """Why a way of stage (c) does not work: a rank failed, or one of its collective checks did."""
    for r in ranks:
        if "error" in r:
            return r["error"]
        for name, verdict in r["ok"].get("checks", {}).items():
            if verdict != "ok":
                return f"{name}: " + " ".join(verdict.split())[:240]
    return None


def report(stages: dict) -> str:
    """results.md from the stage results (missing or timed-out stages say so)."""
    pre = stages.get("preflight", {})
    lines = ["# GPU proof of the NCCL branch", "",
             f"Produced by `benchmarks/gpu/run.sh` on {pre.get('date', '?')}: "
             f"{pre.get('device', '?')} (x{pre.get('gpus', '?')}), torch {pre.get('torch', '?')}, "
             f"CUDA {pre.get('cuda', '?')}, NCCL {pre.get('nccl', '?')}.", ""]

    def section(title, key):
        lines.extend([f"## {title}", ""])
        s = stages.get(key)
        if s is None:
            lines.extend(["not run", ""])
        elif "timed_out" in s:
            lines.extend([f"timed out after {s['timed_out']} s", ""])
        elif "error" in s:
            lines.extend([f"failed: {s['error']}", ""])
        elif "skipped" in s:
            lines.extend([f"skipped: {s['skipped']}", ""])
        return s if s and not {"timed_out", "error", "skipped"} & set(s) else None

    def checks_table(ranks):
        err = _rank_error(ranks)
        if err:
            lines.extend([f"failed: {err}", ""])
            return
        r0 = ranks[0]["ok"]
        lines.extend(["| collective | result (every rank) |", "|---|---|"])
        for name in r0["checks"]:
            verdicts = {r["ok"]["checks"][name] for r in ranks}
            lines.append(f"| {name} | {' / '.join(sorted(verdicts))} |")
        lines.extend(["", "All-reduce, median per call against torch's default `nccl` (dynamiccl "
                          f"`off`, and `learn` after 2,000 calls: states {r0['learn_phases']}):",
                      "", "| size | nccl | off | learn | off / nccl | learn / nccl |",
                      "|---|---|---|---|---|---|"])
        for label, t in r0["allreduce"].items():
            if "error" in t:
                lines.append(f"| {label} | failed: {t['error']} | | | | |")
                continue
            lines.append(f"| {label} | {_fmt(t['nccl'], ' µs')} | {_fmt(t['off'], ' µs')} | "
                         f"{_fmt(t['learn'], ' µs')} | {t['off'] / t['nccl']:.3f} | "
                         f"{t['learn'] / t['nccl']:.3f} |")
        lines.extend(["", f"Plugin: {r0['nccl_plugin']}", ""])

    s = section("(a) every collective at world size 1, CUDA tensors, against `nccl`", "collectives")
    if s:
        checks_table(s["ranks"])
    s = section("(b) DDP step loop at world size 1, against `nccl`", "ddp")
    if s:
        err = _rank_error(s["ranks"])
        r = s["ranks"][0].get("ok", {})
        lines.extend([f"failed: {err}" if err else
                      f"median step {_fmt(r['step_ms'], ' ms')} (dynamiccl) vs "
                      f"{_fmt(r['nccl_step_ms'], ' ms')} "
                      f"(nccl); replicas identical after training: {r['replicas_identical']}", ""])
    s = section("(c) two ranks on one GPU", "multi_rank")
    if s:
        for way, ranks in s["ways"].items():
            err = _way_error(ranks)
            lines.append(f"- {way}: " + (f"refused: {err}" if err else "works"))
        lines.append("")
        if s["working"]:
            checks_table(s["ways"][s["working"]])
    s = section("(d) every NCCL all-reduce arm forced; what NCCL ran (profiler plugin)",
                "arm_sweep")
    if s:
        err = _rank_error(s["ranks"])
        if err:
            lines.extend([f"failed: {err}", ""])
        else:
            r0 = s["ranks"][0]["ok"]
            lines.extend([f"On {s['way']}; profiler loaded by NCCL: "
                          f"{r0['profiler_loaded_by_nccl']}.", "",
                          "| arm | bytes | µs per call | kernel µs | NCCL ran |",
                          "|---|---|---|---|---|"])
            for row in r0["rows"]:
                lines.append(f"| {row['arm']} | {row['bytes']} | {_fmt(row['us'])} | "
                             f"{_fmt(row['kernel_us'])} | {arm_verdict(row['arm'], row)} |")
            lines.append("")
    s = section("(e) DDP, `dynamiccl` learning vs `nccl`, two ranks", "learn_vs_nccl")
    if s:
        err = _rank_error(s["nccl"]) or _rank_error(s["dynamiccl"])
        if err:
            lines.extend([f"failed: {err}", ""])
        else:
            ours = max(r["ok"]["step_ms"] for r in s["dynamiccl"])
            base = max(r["ok"]["step_ms"] for r in s["nccl"])
            hashes = {r["ok"]["decision_hash"] for r in s["dynamiccl"]}
            lines.extend([f"On {s['way']}: median step (second half, slowest rank) nccl "
                          f"{_fmt(base, ' ms')}, dynamiccl {_fmt(ours, ' ms')}: "
                          f"{base / ours:.3f}x; "
                          f"ranks agree on every decision: {len(hashes) == 1}; learned: "
                          f"{s['dynamiccl'][0]['ok']['incumbents']}", ""])
    s = section("(f) DDP with compute in flight: each channel-cap arm's step time, and the "
                "step-aware learner", "overlap")
    if s:
        err = _rank_error(s["ranks"])
        if err:
            lines.extend([f"failed: {err}", ""])
        else:
            lines.extend(overlap_report(s))
    return "\n".join(lines)


def overlap_report(s) -> list:
    """Stage (f)'s lines: per configuration the slowest rank's median step and the bucket
    all-reduce's own time, each against the reference backend; then the learner's run."""
    ranks = [r["ok"] for r in s["ranks"]]
    shape, configs = s["shape"], ranks[0]["configs"]
    ref = next(iter(configs))

    def worst(name, key):
        return max(r["configs"][name][key] for r in ranks)

    step0, call0 = worst(ref, "step_ms"), worst(ref, "bucket_ms")
    way = s["way"] + "".join(f", {k}={v}" for k, v in s.get("nccl_channel_env", {}).items())
    lines = [f"On {way}: {shape['depth']} layers of {shape['width']}x{shape['width']}, "
             f"batch {shape['batch']}, {shape['bucket_mb']} MiB buckets; per configuration the "
             f"median of {shape['steps'] * shape['passes']} steps in {shape['passes']} interleaved "
             f"passes (slowest rank). Compute alone, no communication: "
             f"{_fmt(max(r['compute_only_ms'] for r in ranks), ' ms')} per step.", "",
             f"| configuration | step ms | step vs {ref} | {shape['bucket_mb']} MiB all-reduce "
             f"alone, ms | per call vs {ref} | NCCL ran |", "|---|---|---|---|---|---|"]
    for name in configs:
        step, call = worst(name, "step_ms"), worst(name, "bucket_ms")
        lines.append(f"| {name} | {_fmt(step)} | {step / step0:.3f}x | {_fmt(call)} | "
                     f"{call / call0:.3f}x | {', '.join(configs[name]['ran']) or '-'} |")
    lines.extend(f"| {arm} | refused: {why} | | | | |" for arm, why in ranks[0]["refused"].items())
    learn = [r["learn"] for r in ranks]
    first = max(r["step_ms_first_third"] for r in learn)
    last = max(r["step_ms_last_third"] for r in learn)
    states = ", ".join(f"{x['op']}/{x['size_bin']} {x['exposure']}{'+f' if x['fused'] else ''}: "
                       f"{x['incumbent']}" for x in learn[0]["states"])
    lines.extend(["", f"Step-aware learner from scratch, {shape['learn_steps']} steps: median step "
                      f"{_fmt(first, ' ms')} in the first third, {_fmt(last, ' ms')} in the last "
                      f"({last / step0:.3f}x {ref} above); steps seen {learn[0]['steps_seen']}; "
                      f"ranks agree on every decision: "
                      f"{len({r['decision_hash'] for r in learn}) == 1}; learned: {states}", ""])
    for x in learn[0]["states"]:
        if x["op"] != "allreduce":
            continue
        arms = ", ".join(f"{a['name']} {a['samples']}x {_fmt(a['median_us'] / 1e3)} ms"
                         for a in x["arms"] if a["samples"])
        # A candidate the learner never ran says as much as one it measured: a winning arm left
        # untried is how a stall shows (the budget line says whether the budget held it back).
        never = ", ".join(a["name"] for a in x["arms"] if not a["calls"]) or "none"
        trial = x.get("step_trial")
        lines.append(f"- allreduce/{x['size_bin']} {x['exposure']}: measured {arms}; never run: "
                     f"{never}; learning's extra {_fmt(x['extra_us'] / 1e3)} ms against a "
                     f"do-no-harm budget of {_fmt(x['budget_us'] / 1e3)} ms" +
                     (f"; last step trial: {trial['challenger']}, {trial['pairs']} pairs, "
                      f"{_fmt(trial['mean_delta_us'] / 1e3)} ms a step: {trial['verdict']}"
                      if trial else ""))
    if learn[0].get("round_cost_us") is not None:
        lines.append(f"- the last consensus round cost the caller "
                     f"{_fmt(learn[0]['round_cost_us'] / 1e3, ' ms')} (rank 0), the price the "
                     f"learner puts on measuring")
    lines.append("")
    return lines


STAGES = {"preflight": stage_preflight, "collectives": stage_collectives, "ddp": stage_ddp,
          "multi_rank": stage_multi_rank, "arm_sweep": stage_arm_sweep,
          "learn_vs_nccl": stage_learn_vs_nccl, "overlap": stage_overlap}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_rank"]:
        _rank_main(argv[1], int(argv[2]), int(argv[3]), argv[4], argv[5], argv[6])
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("stage", choices=[*STAGES, "report"])
    p.add_argument("--out", help="where a stage writes its JSON result")
    p.add_argument("--multi-rank",
                   help="the multi_rank stage's result (for arm_sweep, learn_vs_nccl)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="overlap: cpu is a dry run of the stage on the emulated NCCL")
    p.add_argument("--shape", help="overlap: JSON overriding OVERLAP_SHAPE's fields")
    p.add_argument("--dir", help="report: the folder of stage results")
    p.add_argument("--results", help="report: the markdown file to write")
    args = p.parse_args(argv)
    if args.stage == "report":
        stages = {}
        for name in STAGES:
            path = os.path.join(args.dir, f"{name}.json")
            if os.path.exists(path):
                stages[name] = json.load(open(path))
        text = report(stages)
        with open(args.results, "w") as f:
            f.write(text + "\n")
        print(text)
        return 0
    try:
        result = STAGES[args.stage](args)
    except SystemExit:
        raise
    except StageSkipped as e:
        result = {"skipped": str(e)}
    except Exception as e:  # a stage that fails is recorded as failed
        result = {"error": f"{type(e).__name__}: {e}"}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result)[:2000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
