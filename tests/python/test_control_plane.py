"""A dynamiccl group opens no connection beyond what its engines open (docs/scale.md): consensus
rounds and our CPU schedules travel on the group's own Gloo, never on a mesh of their own. Counted
per rank against a gloo job doing the same, after the world group and a subgroup have each run
learned calls and consensus rounds; with Gloo's lazy connections, within the 2 log2(N) per group
that our schedules and rounds may add."""

from __future__ import annotations

import math
import os
import sys

import torch
import torch.distributed as dist

from dist_harness import ROOT, run_ranks

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from scale_probe import _sockets  # noqa: E402  the probe's count is the test's

WORLD = 4
CALLS = 64  # four round windows of the default K = 16


def _open_and_call(rank, world, ours):
    sub = dist.new_group([0, 1])
    t = torch.ones(4096)
    for _ in range(CALLS):
        dist.all_reduce(t)
        if rank < 2:
            dist.all_reduce(t, group=sub)
    dist.barrier()
    rounds = None
    if ours:
        import dynamiccl_pg
        rounds = dynamiccl_pg.stats()["rounds_applied"]
    return _sockets(), rounds


def _both(env=None):
    gloo = run_ranks(_open_and_call, WORLD, False, backend="gloo", env=env)
    ours = run_ranks(_open_and_call, WORLD, True, env=env)
    for rank, (_, rounds) in enumerate(ours):
        assert rounds and rounds > 0, (rank, rounds)  # whatever carries rounds was opened
    return [g for g, _ in gloo], [d for d, _ in ours]


def test_a_group_opens_exactly_the_connections_of_its_gloo():
    gloo, ours = _both()
    assert ours == gloo, (ours, gloo)


def test_with_lazy_gloo_our_traffic_adds_at_most_two_log2_n_per_group():
    gloo, ours = _both({"TORCH_GLOO_LAZY_INIT": "1"})
    groups = 2  # every rank is in the world group and one of the halves (or none beyond it)
    bound = groups * 2 * math.ceil(math.log2(WORLD))
    for rank, (g, d) in enumerate(zip(gloo, ours)):
        assert d <= g + bound, (rank, d, g, bound)
