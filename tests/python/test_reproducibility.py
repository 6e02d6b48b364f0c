"""What is reproducible, run to run: `frozen` with a saved policy runs the same arm for every call,
so two runs give bitwise-equal training; `off` is exactly gloo. (`learn` is not: which arm runs
depends on measured time, and arms sum in different orders.)"""

import json

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(600)


def train(rank, world, steps):
    """A DDP model on seeded, rank-dependent data; returns its parameters and the arms run."""
    import dynamiccl_pg
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.Tanh(),
                                    torch.nn.Linear(512, 64)), bucket_cap_mb=0.05)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1000 + rank)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(32, 64, generator=gen)).square().mean().backward()
        opt.step()
    arms = []
    if dist.get_backend() == "dynamiccl":  # the arms the all-reduces (DDP's buckets) ran
        allreduce = dynamiccl_pg._C.vocabulary()["ops"].index("allreduce")
        arms = sorted({e[4] for e in dynamiccl_pg.decision_log()
                       if e[1] in (allreduce, "allreduce")})
    return [p.detach().clone() for p in model.parameters()], arms


def save_after_learning(rank, world, path):
    import dynamiccl_pg
    train(rank, world, 60)
    dynamiccl_pg.save_policy(path)


def test_two_frozen_runs_from_one_policy_are_bitwise_equal(tmp_path):
    path = str(tmp_path / "policy.json")
    run_ranks(save_after_learning, 4, path, env={"DYNAMICCL_ROUND_CALLS": "4"})
    # Every all-reduce state runs a schedule of ours that sums in its own order ("rd"), so that
    # "the same result" cannot come from Gloo's native arm alone.
    data = json.load(open(path))
    for state in data["groups"]["0"]["engines"]["cpu"]["states"]:
        if state["op"] == "allreduce":
            state["incumbent"] = "rd"
    json.dump(data, open(path, "w"))
    env = {"DYNAMICCL_POLICY": path, "DYNAMICCL_MODE": "frozen"}
    first = run_ranks(train, 4, 20, env=env)
    second = run_ranks(train, 4, 20, env=env)
    from dynamiccl_pg import _C
    rd = _C.arm_names(_C.Engine.cpu, "allreduce").index("rd")
    for (params_a, arms_a), (params_b, arms_b) in zip(first, second):
        assert arms_a == arms_b == [rd]
        assert all(torch.equal(a, b) for a, b in zip(params_a, params_b))
    # Replicas agree within each run too (every rank reduced to the same bits).
    assert all(torch.equal(a, b) for a, b in zip(first[0][0], first[3][0]))


def test_off_is_bitwise_gloo():
    ours = run_ranks(train, 4, 10, env={"DYNAMICCL_MODE": "off"})
    gloo = run_ranks(train, 4, 10, backend="gloo")
    for (a, _), (b, _) in zip(ours, gloo):
        assert all(torch.equal(x, y) for x, y in zip(a, b))
