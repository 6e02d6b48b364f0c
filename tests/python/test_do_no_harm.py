"""Do no harm: learning never adopts an arm that is slower than the default, and what it spends
finding that out stays within the regret budget. One schedule is made slow on purpose (the
test-only DYNAMICCL_TEST_SLOW_ARM delays every call run on it) on real ranks."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import dynamiccl_pg
from dist_harness import run_ranks

SLOW_ARM, DELAY_US = "rd", 20000  # rd wins at these sizes on loopback (main job): not any more
CALLS = 400


def _learn_next_to_a_slow_arm(rank, size):
    wrong = 0
    for _ in range(CALLS):
        t = torch.ones(64 * 1024)  # 256 KiB
        dist.all_reduce(t)
        wrong += int(not torch.equal(t, torch.full_like(t, size)))
    st = [s for s in dynamiccl_pg.stats()["states"]["cpu"] if s["op"] == "allreduce"]
    arms = dynamiccl_pg._C.arm_names(dynamiccl_pg._C.Engine.cpu, "allreduce")
    log = dynamiccl_pg.decision_log()
    return st, arms, log, dynamiccl_pg.decision_hash(), wrong


def test_a_slow_arm_never_becomes_the_incumbent_and_probing_stays_within_budget():
    results = run_ranks(_learn_next_to_a_slow_arm, 4, env={
        "DYNAMICCL_TEST_SLOW_ARM": f"{SLOW_ARM}:{DELAY_US}"}, timeout=400)
    states, arms, log, _, wrong = results[0]
    assert all(r[3] == results[0][3] for r in results), "decisions differ across ranks"
    assert all(r[4] == 0 for r in results)  # every call still gave the right answer
    slow = {i for i, name in enumerate(arms) if name.split("_")[0] == SLOW_ARM}  # rd, rd_s4, ...
    assert slow, arms
    [state] = states
    # Never the incumbent: every call that ran a slow arm was a probe, and it is not chosen now.
    slow_calls = [entry for entry in log if entry[4] in slow]
    assert slow_calls, "the slow arm was never tried: the test shows nothing"  # its prior is good
    assert all(entry[7] for entry in slow_calls), "a slow arm ran as the incumbent"
    assert state["incumbent"] not in {arms[i] for i in slow}
    # One surprise at most per arm: a probe is committed on the prior's expectation, and no more
    # are committed on an arm until its first cost is back; a slow arm's shows it hopeless (where
    # costs have heavy tails an elimination on one cost is confirmed by one more probe).
    assert len(slow_calls) <= 2 * len(slow), slow_calls
    # Within budget: what learning cost over the default is bounded by the budget plus, per arm
    # tried, the one surprise that no prior could foresee: its first cost over the default's (the
    # slow arm's about DELAY_US; on a 2-core host other schedules can cost twice the default too).
    default = next(a for a in state["arms"] if a["name"] == "default")
    surprises = sum(max(0.0, a["mean_us"] - default["center_us"])
                    for a in state["arms"] if a["name"] != "default" and a["samples"] > 0)
    assert state["extra_us"] <= state["budget_us"] + 1.5 * surprises, (surprises, state)


def _init_only(rank, size):
    return True


@pytest.mark.parametrize("value, message", [
    ("rd", "ARM:MICROSECONDS"),
    ("rd:0", "1..10000000 microseconds"),
    ("warp:100", "'warp', which is not one of our CPU schedules; accepted: ring"),
])
def test_bad_slow_arm_is_a_named_error(value, message):
    errors = run_ranks(_init_only, 2, env={"DYNAMICCL_TEST_SLOW_ARM": value},
                       expect_failure=True)
    assert all(message in str(e) for e in errors), errors
