"""A state is (role, op, size bin, exposure, fused): the exposure class of each kind of traffic, as
the README documents it, reaches the learner's states in real processes; priority hints decide it;
DDP's last bucket marks the steps; and bad hints are refused at the hint(...) call."""

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(600)


def _states(op="allreduce"):
    import dynamiccl_pg
    return [s for s in dynamiccl_pg.stats()["states"]["cpu"] if s["op"] == op]


def ddp_buckets(rank, world):
    import dynamiccl_pg
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 1))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
    dynamiccl_pg.register_ddp_hook(ddp)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for _ in range(6):
        loss = ddp(torch.randn(4, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return ([(s["role"], s["exposure"], s["calls"]) for s in _states()],
            dynamiccl_pg.stats()["steps"], dynamiccl_pg.decision_hash())


def test_ddp_buckets_overlap_but_the_last_is_exposed_and_ends_the_step():
    results = run_ranks(ddp_buckets, 2)
    states, steps, _ = results[0]
    dp = [(exposure, calls) for role, exposure, calls in states if role == "dp"]
    exposures = {e for e, _ in dp}
    assert exposures == {"exposed", "overlapped"}, states
    # One last bucket per step: the exposed state has one call per step, six steps.
    assert sum(c for e, c in dp if e == "exposed") == 6
    # Every last bucket closed a step, which ends at the next collective: five, the sixth
    # waiting for a seventh step.
    assert steps == 5
    assert results[1][0] == states and results[1][2] == results[0][2]


def hinted_calls(rank, world):
    import dynamiccl_pg
    t = torch.ones(1024)
    with dynamiccl_pg.hint(priority=0):
        dist.all_reduce(t, async_op=True).wait()  # background: overlapped
    with dynamiccl_pg.hint(priority=2, bucket=3, is_last=False):
        dist.all_reduce(t, async_op=True).wait()  # critical beats the bucket's overlap
    with dynamiccl_pg.hint(bucket=3, is_last=False):
        dist.all_reduce(t, async_op=True).wait()  # a DDP bucket, not last: overlapped
        dist.all_reduce(t)  # the same, but synchronous: the caller waits on it
    with dynamiccl_pg.hint(role="pp"):
        dist.all_reduce(t, async_op=True).wait()  # pipeline traffic overlaps the stage
    return [(s["role"], s["exposure"], s["fused"], s["calls"]) for s in _states()]


def test_priority_and_context_set_the_exposure():
    states = run_ranks(hinted_calls, 2, env={"DYNAMICCL_MODE": "learn"})[0]
    by_key = {}
    for role, exposure, fused, calls in states:
        by_key[(role, exposure, fused)] = by_key.get((role, exposure, fused), 0) + calls
    assert by_key[("default", "overlapped", False)] == 1  # priority=0
    assert by_key[("dp", "exposed", False)] == 2  # priority=2, and the synchronous call
    assert by_key[("dp", "overlapped", False)] == 1
    assert by_key[("pp", "overlapped", False)] == 1


def slowed_rank_with_exposure(rank, world):
    import time

    import dynamiccl_pg
    t = torch.ones(4096)
    for i in range(300):
        if rank == 1:
            time.sleep(0.0005)  # rank 1 is late: its timings differ, its decisions must not
        with dynamiccl_pg.hint(bucket=i % 3, is_last=i % 3 == 2):
            dist.all_reduce(t, async_op=True).wait()
    return dynamiccl_pg.decision_hash(), dynamiccl_pg.stats()["steps"], sorted(
        (s["exposure"], s["calls"]) for s in _states())


def test_decisions_agree_with_exposure_in_the_state_under_a_slowed_rank():
    results = run_ranks(slowed_rank_with_exposure, 4, env={"DYNAMICCL_ROUND_CALLS": "8"})
    assert len({r[0] for r in results}) == 1
    # One step per is_last=True call, ended at the next collective: the last one waits.
    assert all(r[1] == 99 for r in results)
    assert results[0][2] == [("exposed", 100), ("overlapped", 200)]


@pytest.mark.parametrize("kwargs, error, words", [
    ({"priority": 3}, ValueError, "priority=3 is not accepted; accepted: an integer in 0..2"),
    ({"priority": -1}, ValueError, "priority=-1"),
    ({"priority": "high"}, TypeError, "priority='high' (str)"),
    ({"priority": 1.0}, TypeError, "priority=1.0 (float)"),
    ({"bucket": "0"}, TypeError, "bucket='0' (str)"),
    ({"is_last": 1}, TypeError, "is_last=1 (int) is not accepted; accepted: True, False"),
    ({"direction": "up"}, ValueError, "direction='up'"),
])
def test_bad_hints_are_refused_at_the_hint_call(kwargs, error, words):
    import dynamiccl_pg
    with pytest.raises(error) as info:
        with dynamiccl_pg.hint(**kwargs):
            pass
    assert words in str(info.value)
