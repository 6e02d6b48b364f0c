"""The contract: for the same sequence of collectives on a group, every rank makes the same
decision for every call — with probing active, over random ops, sizes, groups with different
roles, sync and async calls, coalesced batches and hints, and with one rank's local timings
skewed on purpose (a slow rank must not change anybody's decisions)."""

import random
import time

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(900)

OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "coalesced")


def _issue(op, group, n, rng_value, async_works):
    ws = dist.get_world_size(group)
    t = torch.full((n,), rng_value)
    if op == "allreduce":
        work = dist.all_reduce(t, group=group, async_op=True)
    elif op == "allgather":
        work = dist.all_gather_into_tensor(torch.empty(n * ws), t, group=group, async_op=True)
    elif op == "reduce_scatter":
        work = dist.reduce_scatter_tensor(torch.empty(n), torch.ones(n * ws), group=group,
                                          async_op=True)
    elif op == "broadcast":
        work = dist.broadcast(t, group_src=0, group=group, async_op=True)
    elif op == "reduce":
        work = dist.reduce(t, group_dst=0, group=group, async_op=True)
    else:
        with dist._coalescing_manager(group=group, async_ops=True) as cm:
            for k in range(3):
                dist.all_reduce(torch.ones(n + k), group=group)
        work = cm
    async_works.append(work)


def random_workload(rank, world, calls, slow_rank):
    import dynamiccl_pg
    # Groups with different roles: world (default), a tp pair, a pp pair, a mesh-style dp group.
    groups = {"world": None}
    for desc, ranks in (("TENSOR_MODEL_PARALLEL_GROUP", [0, 1]),
                        ("TENSOR_MODEL_PARALLEL_GROUP", [2, 3]),
                        ("PIPELINE_MODEL_PARALLEL_GROUP", [0, 2]),
                        ("mesh_dp", [1, 2, 3])):
        g = dist.new_group(ranks, group_desc=desc)
        if rank in ranks:
            groups[f"{desc}{ranks}"] = g
    rng = random.Random(1234)      # shared seed: the same sequence on every rank
    local = random.Random(rank)    # local randomness: only the slow rank's delays
    names = sorted(groups)
    works = []
    for i in range(calls):
        op = rng.choice(OPS)
        # Which group: drawn identically everywhere; ranks outside it skip the call.
        all_names = ["world", "TENSOR_MODEL_PARALLEL_GROUP[0, 1]",
                     "TENSOR_MODEL_PARALLEL_GROUP[2, 3]", "PIPELINE_MODEL_PARALLEL_GROUP[0, 2]",
                     "mesh_dp[1, 2, 3]"]
        gname = rng.choice(all_names)
        n = rng.choice([3, 1000, 40000])
        hint_role = rng.choice([None, None, "dp", "tp"])
        if rng.random() < 0.7:
            # Hot states (world all-reduce, two sizes): enough calls to converge, so that
            # eliminations and switches — the cost-dependent decisions — really happen.
            op, gname, n, hint_role = "allreduce", "world", rng.choice([256, 20000]), None
        sync = rng.random() < 0.5
        if gname not in groups:
            continue
        if rank == slow_rank and local.random() < 0.3:
            time.sleep(local.random() * 0.003)
        with dynamiccl_pg.hint(role=hint_role, bucket=i % 7 if hint_role == "dp" else None):
            _issue(op, groups[gname], n, float(i % 5), works)
        if sync or len(works) > 8:
            for w in works:
                w.wait()
            works.clear()
    for w in works:
        w.wait()
    dist.barrier()
    out = {}
    for name in names:
        g = groups[name]
        out[name] = (dynamiccl_pg.decision_hash(g), dynamiccl_pg.decision_log(g),
                     dynamiccl_pg.stats(g)["rounds_applied"])
    return out


@pytest.mark.parametrize("slow_rank", [-1, 2])
def test_every_rank_decides_identically(slow_rank):
    # The groups mark no steps, so their rounds are steps, and the step-time guard could freeze
    # learning on a slowed rank's noise (16 probes once): kept out, so that probing stays live.
    # So is the do-no-harm budget: every consensus round is charged to learning, and on tiny
    # calls 1% of their time affords a few probes (15 once).
    results = run_ranks(random_workload, 4, 3000, slow_rank,
                        env={"DYNAMICCL_ROUND_CALLS": "8", "DYNAMICCL_STEP_REGRESSION": "1000",
                             "DYNAMICCL_REGRET_BUDGET": "0.25"},
                        timeout=600)
    by_group = {}
    for rank, out in enumerate(results):
        for name, (h, log, rounds) in out.items():
            by_group.setdefault(name, []).append((rank, h, log, rounds))
    probes = 0
    for name, entries in by_group.items():
        _, h0, log0, rounds0 = entries[0]
        assert len(log0) > 50, name
        assert rounds0 > 3, name  # consensus rounds really happened
        for rank, h, log, rounds in entries[1:]:
            if log != log0:
                first = next(i for i, (a, b) in enumerate(zip(log, log0)) if a != b)
                pytest.fail(f"{name}: rank {rank} diverges at entry {first}: {log[first]} vs "
                            f"rank {entries[0][0]}: {log0[first]}")
            assert h == h0, name
        probes += sum(1 for e in log0 if e[7])
    assert probes > 20  # learning was live: probing happened
