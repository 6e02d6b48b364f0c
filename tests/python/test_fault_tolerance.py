"""Fault tolerance through torch's reconfigure API (torch >= 2.14), each scenario run on gloo and
on dynamiccl with the same assertions, following PyTorch's own test_c10d_fault_tolerance.py:
late join, reconfigure then all-reduce and send/recv, identity, scale down to one then up, split
into two groups then merge, recover after abort, a reused uuid and stale handles rejected with
the engine's error, shrink excluding the last rank; merge_remote_group; and a DDP job that loses
a rank, reconfigures the survivors and trains on to gloo's weights. On dynamiccl the learner
restarts on every new membership: learned calls run between the reconfigures (probing our CPU
schedules), every result is exact, and the ranks of each membership decide alike. The scenarios
run once more on the emulated NCCL, which reconfigures as nccl2 does: the group's handle then
carries both engines', and the CUDA engine's new communicator binds to the group's channel."""

from __future__ import annotations

from datetime import timedelta

import json

import pytest
import torch
import torch.distributed as dist

import dynamiccl_pg
from dist_harness import run_ranks
from test_emulated_nccl import CLUSTER

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not hasattr(dist, "_reconfigure"),
                       reason="torch's reconfigure API arrived in torch 2.14"),
]

RECONFIGURE = {"enable_reconfigure": True}
WORLD = 3


def _store():
    return dist.distributed_c10d._get_default_store()


def _publish(tag: str, original_rank: int) -> None:
    _store().set(f"ft/{tag}/{original_rank}", dist._get_reconfigure_handle())


def _handles(tag: str, original_ranks):
    return [_store().get(f"ft/{tag}/{r}").decode() for r in original_ranks]


def _reconfigure(uuid: int, handles) -> None:
    dist._reconfigure(uuid, handles, timeout=timedelta(seconds=30)).wait()


def _barrier(tag: str, original_rank: int, ranks) -> None:
    store = _store()
    store.set(f"ft/barrier/{tag}/{original_rank}", "1")
    store.wait([f"ft/barrier/{tag}/{r}" for r in ranks])


def _work(tag: str, calls: int = 40):
    """What each membership runs: all-reduces of 64 KiB (learned on dynamiccl: probes of our
    schedules, consensus rounds on the new members) checked exactly, then a ring of send/recv.
    Returns the facts both backends must agree on, and the decision hash (dynamiccl)."""
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.empty(1 << 14)
    wrong = 0
    for _ in range(calls):
        t.fill_(float(rank + 1))
        dist.all_reduce(t)
        wrong += int(not torch.all(t == size * (size + 1) / 2))
    got = -1.0
    if size > 1:
        out, inp = torch.full((4,), float(rank)), torch.empty(4)
        reqs = [dist.isend(out, (rank + 1) % size), dist.irecv(inp, (rank - 1) % size)]
        for r in reqs:
            r.wait()
        got = inp[0].item()
    facts = {"tag": tag, "rank": rank, "size": size, "wrong": wrong, "received": got}
    learned = None
    if dist.get_backend() == "dynamiccl":
        st = dynamiccl_pg.stats()
        # (With a CUDA engine, a membership's first call checks the plugin: it runs natively.)
        learned = {"hash": dynamiccl_pg.decision_hash(),
                   "calls": st["learned_calls"] + ("cuda" in st["engines"]),
                   "probes": sum(s["probes"] for states in st["states"].values()
                                 for s in states)}
    return facts, learned


def scenarios(rank, world):
    """PyTorch's scenarios, in sequence on one job (uuids fresh each time)."""
    out = []
    # Late join: rank 0 alone forms a group while ranks 1-2 stay uninitialised, then all join.
    _publish("start", rank)
    if rank == 0:
        _reconfigure(100, _handles("start", [0]))
        out.append(_work("alone"))
    _barrier("alone", rank, range(world))
    _publish("join", rank)
    _reconfigure(101, _handles("join", range(world)))
    out.append(_work("joined"))
    # Identity: the same members again.
    _publish("identity", rank)
    _reconfigure(102, _handles("identity", range(world)))
    out.append(_work("identity"))
    # Scale down to one rank each, then up to all.
    _publish("single", rank)
    _reconfigure(200 + rank, _handles("single", [rank]))
    out.append(_work("single", calls=20))
    _publish("up", rank)
    _reconfigure(210, _handles("up", range(world)))
    out.append(_work("up"))
    # Split into two groups (rank 0; ranks 1-2), then merge.
    _publish("split", rank)
    halves = [[0], [1, 2]]
    mine = halves[0] if rank == 0 else halves[1]
    _reconfigure(300 + mine[0], _handles("split", mine))
    out.append(_work(f"half{mine[0]}"))
    _publish("merge", rank)
    _reconfigure(310, _handles("merge", range(world)))
    out.append(_work("merged"))
    # Stale handles (taken before the last reconfigure): the engine's error; the group goes on as
    # it was (on dynamiccl its learning restarts, on every rank that saw the error).
    try:
        _reconfigure(320, _handles("split", range(world)))
        out.append(("stale", "accepted"))
    except RuntimeError as e:
        out.append(("stale", "not part of the new communicator" in str(e)))
    out.append(_work("after_stale", calls=20))
    # Recover after abort.
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    backend.abort()
    out.append(("error_after_abort", str(backend.get_error())))
    _publish("abort", rank)
    _reconfigure(400, _handles("abort", range(world)))
    out.append(_work("recovered"))
    # A reused uuid is refused (every rank is rank 0 of its own group of one).
    _publish("reuse", rank)
    _reconfigure(500 + rank, _handles("reuse", [rank]))
    _publish("reuse_again", rank)
    try:
        _reconfigure(500 + rank, _handles("reuse_again", [rank]))
        out.append(("reused", "accepted"))
    except RuntimeError as e:
        out.append(("reused", "already used" in str(e)))
    # Shrink, excluding the last rank.
    _publish("shrink", rank)
    if rank < world - 1:
        _reconfigure(600, _handles("shrink", range(world - 1)))
        out.append(_work("shrunk"))
    _barrier("end", rank, range(world))
    return out


def _compare(gloo, ours):
    """Each membership's facts equal gloo's; on dynamiccl, it learned and its ranks agreed."""
    hashes = {}
    for rank, (g, o) in enumerate(zip(gloo, ours)):
        assert len(g) == len(o), rank
        for g_step, o_step in zip(g, o):
            if isinstance(g_step, tuple) and isinstance(g_step[0], str):
                assert g_step == o_step, (rank, g_step, o_step)  # (check, outcome)
                continue
            (g_facts, _), (o_facts, learned) = g_step, o_step
            assert o_facts == g_facts, (rank, o_facts, g_facts)
            assert o_facts["wrong"] == 0, o_facts
            # The learner restarted with the membership: its calls are this membership's only.
            assert learned["calls"] == (20 if o_facts["tag"] in ("single", "after_stale") else 40)
            # (A rank alone is a membership of its own.)
            membership = o_facts["tag"] if o_facts["size"] > 1 else (o_facts["tag"], rank)
            hashes.setdefault(membership, set()).add(learned["hash"])
    for tag, seen in hashes.items():
        assert len(seen) == 1, f"the ranks of membership {tag!r} decided differently"


@pytest.fixture(scope="module")
def gloo_scenarios():
    return run_ranks(scenarios, WORLD, backend="gloo", init_kwargs=RECONFIGURE, timeout=400)


@pytest.mark.parametrize("emulated", [False, True], ids=["cpu", "emulated_nccl"])
def test_reconfigure_scenarios_match_gloo(gloo_scenarios, emulated, tmp_path):
    gloo = gloo_scenarios
    env = {"DYNAMICCL_ROUND_CALLS": "4"}
    if emulated:  # one node of three GPUs: CPU tensors take the NCCL branch
        path = tmp_path / "cluster.json"
        path.write_text(json.dumps(dict(CLUSTER, topology=dict(CLUSTER["topology"], nodes=1,
                                                                gpus_per_node=WORLD))))
        env["DYNAMICCL_EMULATE_NCCL"] = str(path)
    ours = run_ranks(scenarios, WORLD, init_kwargs=RECONFIGURE, timeout=400, env=env)
    _compare(gloo, ours)
    for rank_steps in gloo:
        assert ("stale", True) in rank_steps and ("reused", True) in rank_steps
        assert ("error_after_abort", "ErrorType.SUCCESS") in rank_steps
    # Some membership probed our schedules: learning ran between the reconfigures.
    assert any(learned["probes"] > 0 for steps in ours for step in steps
               if not isinstance(step[0], str) for learned in [step[1]])


def remote_merge(rank, world):
    """Two halves of the world, each its own group, merged through merge_remote_group."""
    halves = [dist.new_group([0, 1]), dist.new_group([2, 3])]  # (every rank makes both)
    group = halves[rank // 2]
    store = dist.PrefixStore("merge", _store())
    merged = group.merge_remote_group(store, world, timedelta(seconds=30), "merged_pg")
    t = torch.full((1024,), float(rank + 1))
    merged.allreduce([t]).wait()
    return merged.rank(), merged.size(), t[0].item(), type(merged._get_backend(
        torch.device("cpu"))).__name__


@pytest.mark.skipif(not hasattr(dist.ProcessGroup, "merge_remote_group"),
                    reason="merge_remote_group is not in this torch")
def test_merge_remote_group_matches_gloo():
    gloo = run_ranks(remote_merge, 4, backend="gloo")
    ours = run_ranks(remote_merge, 4)
    assert sorted(r[0] for r in ours) == [0, 1, 2, 3]
    for g, o in zip(sorted(gloo), sorted(ours)):
        assert o[1:3] == g[1:3] == (4, 10.0)
        assert o[3] == "ProcessGroupDynamicCCL", o


def ddp_losing_a_rank(rank, world, lost, steps):
    """DDP trains; rank `lost` leaves after `steps` steps; the survivors reconfigure among
    themselves and train `steps` more steps on a new DDP over the same (reconfigured) group."""
    _publish("create", rank)
    _reconfigure(699, _handles("create", range(world)))
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256, bias=False)

    def train(ddp, data_rank):
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        for step in range(steps):
            g = torch.Generator().manual_seed(1000 * step + data_rank)
            loss = ddp(torch.randn(16, 256, generator=g)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    train(torch.nn.parallel.DistributedDataParallel(model), rank)
    _publish("survivors", rank)
    if rank == lost:
        _barrier("left", rank, range(world))
        return None
    survivors = [r for r in range(world) if r != lost]
    _reconfigure(700, _handles("survivors", survivors))
    assert dist.get_world_size() == len(survivors)
    train(torch.nn.parallel.DistributedDataParallel(model), rank)
    hash_ = dynamiccl_pg.decision_hash() if dist.get_backend() == "dynamiccl" else None
    _barrier("left", rank, range(world))
    return model.weight.detach().clone(), hash_


def test_ddp_losing_a_rank_trains_on_to_the_weights_gloo_reaches():
    args = (1, 12)
    gloo = run_ranks(ddp_losing_a_rank, WORLD, *args, backend="gloo", init_kwargs=RECONFIGURE)
    ours = run_ranks(ddp_losing_a_rank, WORLD, *args, init_kwargs=RECONFIGURE)
    assert gloo[1] is None and ours[1] is None
    for g, o in zip(gloo, ours):
        if g is None:
            continue
        assert torch.allclose(o[0], g[0], atol=1e-6), (o[0] - g[0]).abs().max()
    assert len({o[1] for o in ours if o is not None}) == 1, "the survivors decided differently"
