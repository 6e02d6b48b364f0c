"""Hugging Face Accelerate on dynamiccl (examples/train_accelerate.py), 4 CPU ranks: `off` gives
bitwise the parameters of the same job on gloo; `learn` decides identically on every rank.
Skipped when the accelerate package is not installed."""

import os
import sys

import pytest
import torch

from dist_harness import ROOT, run_ranks

pytest.importorskip("accelerate")
pytestmark = pytest.mark.timeout(600)

STEPS = 40


def accelerate_job(rank, world):
    import dynamiccl_pg
    import torch.distributed as dist
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from train_accelerate import train
    params, losses = train(STEPS)
    is_ours = dist.get_backend() == "dynamiccl"
    return (params, losses, dynamiccl_pg.decision_hash() if is_ours else None,
            dynamiccl_pg.stats()["learned_calls"] if is_ours else None)


def test_accelerate_off_is_gloo_bitwise_and_learn_agrees_on_every_rank():
    gloo = run_ranks(accelerate_job, 4, backend="gloo")
    off = run_ranks(accelerate_job, 4, env={"DYNAMICCL_MODE": "off"})
    for g, o in zip(gloo, off):
        assert all(torch.equal(a, b) for a, b in zip(g[0], o[0]))
        assert g[1] == o[1]
    learn = run_ranks(accelerate_job, 4)
    assert len({r[2] for r in learn}) == 1, "ranks decided differently"
    assert learn[0][3] > 0, "no call went through the learner"
    assert learn[0][1][-1] < learn[0][1][0]  # it trains
