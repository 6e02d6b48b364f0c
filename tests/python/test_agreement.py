"""Ranks that disagree are caught, named and stopped: settings at group creation, decisions in
every consensus round, the calls themselves with DYNAMICCL_CHECK. Never a silently wrong tensor."""

import random

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(600)


def allreduces(rank, world, calls):
    """Async all-reduces of one size (the worst case: a mismatch cannot show as a size error)."""
    out = []
    for i in range(calls):
        t = torch.full((4096,), float(rank + 1 + i))
        dist.all_reduce(t, async_op=True).wait()
        expected = sum(r + 1 + i for r in range(world))
        out.append(bool(torch.all(t == expected)))
    return out


@pytest.mark.parametrize("var,values", [
    ("DYNAMICCL_MODE", ("learn", "off")),
    ("DYNAMICCL_ROUND_CALLS", ("32", "64")),
    ("DYNAMICCL_FORCE", ("allreduce:ring", "allreduce:tree")),
    ("DYNAMICCL_FORCE", ("allreduce:ring", "")),
    ("DYNAMICCL_COST_REDUCE", ("auto", "min")),
    ("DYNAMICCL_REGRET_BUDGET", ("0.01", "0.02")),
    ("DYNAMICCL_CHECK", ("0", "1")),  # one rank would run a check call the other never joins
    ("DYNAMICCL_TEST_ABLATE", ("pair_clip", "")),
])
def test_a_setting_that_differs_fails_group_creation_on_every_rank(var, values):
    res = run_ranks(allreduces, 2, 4, env={var: values[0]}, rank_env={1: {var: values[1]}},
                    pg_timeout_s=20, timeout=120, expect_failure=True)
    for r, err in enumerate(res):
        assert isinstance(err, str), f"rank {r} ran: {err}"
        assert "AgreementError" in err and "must be the same on every rank" in err, err
        # Names the setting and each rank's value.
        key = {"DYNAMICCL_MODE": "mode", "DYNAMICCL_ROUND_CALLS": "round_calls",
               "DYNAMICCL_FORCE": "force", "DYNAMICCL_COST_REDUCE": "cost_reduce",
               "DYNAMICCL_REGRET_BUDGET": "heads", "DYNAMICCL_CHECK": "check_calls",
               "DYNAMICCL_TEST_ABLATE": "ablate"}[var]
        assert f"  {key}: rank 0:" in err and "rank 1:" in err, err


def test_a_policy_file_on_one_rank_only_fails_group_creation(tmp_path):
    import json
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"format": "dynamiccl-policy/4", "fingerprint": {},
                                  "groups": {}}))
    res = run_ranks(allreduces, 2, 4, rank_env={1: {"DYNAMICCL_POLICY": str(policy)}},
                    pg_timeout_s=20, timeout=120, expect_failure=True)
    for err in res:
        assert isinstance(err, str) and "DYNAMICCL_POLICY: rank 0:" in err, err


def hinted_on_one_rank(rank, world, calls=400):
    """Rank 0 tags its all-reduces as tensor-parallel, rank 1 does not: they decide differently."""
    import dynamiccl_pg
    results, error = [], None
    try:
        for i in range(calls):
            t = torch.full((4096,), float(rank + 1 + i))
            if rank == 0:
                with dynamiccl_pg.hint(role="tp"):
                    dist.all_reduce(t)
            else:
                dist.all_reduce(t)
            results.append(bool(torch.all(t == sum(r + 1 + i for r in range(world)))))
    except RuntimeError as e:
        error = f"{type(e).__name__}: {e}"
    return results, error


def test_a_hint_on_one_rank_stops_the_group_with_a_named_error_and_no_wrong_tensor():
    res = run_ranks(hinted_on_one_rank, 2, env={"DYNAMICCL_ROUND_CALLS": "8"}, pg_timeout_s=10,
                    timeout=180)
    for rank, (results, error) in enumerate(res):
        assert error is not None, f"rank {rank} ran every call"
        assert "DistBackendError" in error and "decided differently" in error, error
        assert "role tp" in error and "role default" in error, error
        assert all(results), f"rank {rank} got a wrong tensor before the error"


def test_a_hint_on_one_rank_is_caught_in_frozen_mode_too():
    """Frozen measures nothing, so no round carries costs; one round per 1024 learned calls still
    carries the decision hash."""
    res = run_ranks(hinted_on_one_rank, 2, 1500, env={"DYNAMICCL_ROUND_CALLS": "8",
                                                      "DYNAMICCL_MODE": "frozen"},
                    pg_timeout_s=10, timeout=180)
    for rank, (results, error) in enumerate(res):
        assert error is not None, f"rank {rank} ran every call"
        assert "DistBackendError" in error and "decided differently" in error, error
        assert "role tp" in error and "role default" in error, error
        assert 1024 <= len(results) < 1500 and all(results), (rank, len(results))


def sizes_differ(rank, world):
    """The ranks all-reduce different sizes with one of our schedules forced."""
    t = torch.ones(1024 if rank == 0 else 512)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        return f"{type(e).__name__}: {e}", t.tolist()
    return "no error", t.tolist()


@pytest.mark.parametrize("check", ["0", "1"])
def test_sizes_that_differ_with_a_forced_schedule_fail_on_every_rank(check):
    res = run_ranks(sizes_differ, 2, env={"DYNAMICCL_FORCE": "allreduce:tree",
                                          "DYNAMICCL_CHECK": check},
                    pg_timeout_s=5, timeout=120)
    for rank, (error, values) in enumerate(res):
        assert error != "no error", f"rank {rank}"
        # No rank is left with a half-reduced tensor: it holds its own input.
        assert values == [1.0] * (1024 if rank == 0 else 512), rank
        if check == "1":  # named at once, with each rank's sizes
            assert "issued different collectives" in error, error
            assert "4096 bytes" in error and "2048 bytes" in error, error


def fuzz(rank, world, seed, calls):
    """Random calls, sizes, ops and hints, identical on every rank, with random per-rank delays
    (local timing must never reach a decision): every result right, every rank's decisions
    identical."""
    import time

    import dynamiccl_pg
    rng = random.Random(seed)
    local = random.Random(1000 + rank)
    wrong = 0
    for i in range(calls):
        if local.random() < 0.002:
            time.sleep(local.random() * 0.005)
        size = rng.choice([1, 7, 64, 1000, 5000])
        role = rng.choice([None, None, "tp", "dp"])
        op = rng.choice(["allreduce", "broadcast", "allgather"])
        t = torch.full((size,), float(rank + 1))
        with dynamiccl_pg.hint(role=role):
            if op == "allreduce":
                dist.all_reduce(t)
                wrong += not bool(torch.all(t == world * (world + 1) / 2))
            elif op == "broadcast":
                dist.broadcast(t, src=i % world)
                wrong += not bool(torch.all(t == i % world + 1))
            else:
                out = torch.empty(size * world)
                dist.all_gather_into_tensor(out, t)
                wrong += not bool(torch.equal(out, torch.arange(1, world + 1).float()
                                              .repeat_interleave(size)))
    return wrong, dynamiccl_pg.decision_hash()


def test_fuzz_many_random_calls_agree_and_are_right():
    # 3 ranks x 35,000 random calls each = 105,000 calls through the learner.
    res = run_ranks(fuzz, 3, 11, 35000, env={"DYNAMICCL_ROUND_CALLS": "16"}, timeout=540)
    assert [w for w, _ in res] == [0, 0, 0]
    assert len({h for _, h in res}) == 1
