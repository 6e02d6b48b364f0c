"""What the learner knows can be saved, loaded warm and run frozen; what it did is visible
(stats as JSON, traces, the summary); hints reject bad values by name."""

import json

import pytest
import torch
import torch.distributed as dist

from dist_harness import run_ranks

pytestmark = pytest.mark.timeout(600)


def _key(state):
    return state["role"], state["op"], state["size_bin"]


def learn_and_save(rank, world, path, calls):
    import dynamiccl_pg
    t = torch.ones(20000)
    for _ in range(calls):
        dist.all_reduce(t)
    dynamiccl_pg.save_policy(path)
    s = dynamiccl_pg.stats()
    json.dumps(s)  # JSON-serialisable as documented
    return {_key(st): st["incumbent"] for st in s["states"]["cpu"]}, s


def run_loaded(rank, world, calls):
    import dynamiccl_pg
    t = torch.ones(20000)
    for _ in range(calls):
        dist.all_reduce(t)
    s = dynamiccl_pg.stats()
    log = dynamiccl_pg.decision_log()
    return ({_key(st): (st["incumbent"], st["phase"]) for st in s["states"]["cpu"]},
            sum(1 for e in log if e[7]), sorted({e[4] for e in log}))


def test_save_load_frozen_round_trip(tmp_path):
    path = str(tmp_path / "policy.json")
    learned, stats = run_ranks(learn_and_save, 2, path, 400,
                               env={"DYNAMICCL_ROUND_CALLS": "8"})[0]
    data = json.load(open(path))
    assert data["format"] == "dynamiccl-policy/4"
    assert data["fingerprint"]["world_size"] == 2
    # It learned: costs were agreed on and every state left warm-up. (Once settled, rounds that
    # measure nothing are skipped, so the count of rounds is not a fixed share of the calls.)
    assert stats["rounds_applied"] > 0
    # What a round costs the job, as the CPU learner prices measuring: what the calls beside the
    # rounds lost and their boundaries took (never below nothing; under a second here, where a
    # call takes well under a millisecond); no NCCL engine, no NCCL price.
    assert 0 <= stats["round_cost_us"]["cpu"] < 1e6 and stats["round_cost_us"]["nccl"] == 0, stats
    assert all(s["phase"] != "warmup" for s in stats["states"]["cpu"]), stats["states"]["cpu"]
    # Frozen with the policy: the saved incumbent runs every call, no probing at all. The
    # all-reduce state's incumbent is rewritten to a non-default arm first, so that running the
    # engine default (what frozen mode does without a policy) cannot pass for loading it.
    from dynamiccl_pg import _C
    (state,) = [s for s in data["groups"]["0"]["engines"]["cpu"]["states"]
                if s["op"] == "allreduce"]
    planted = next(a["name"] for a in state["arms"]
                   if a["name"] not in ("default", state["incumbent"]))
    state["incumbent"] = planted
    json.dump(data, open(path, "w"))
    results = run_ranks(run_loaded, 2, 60,
                        env={"DYNAMICCL_POLICY": path, "DYNAMICCL_MODE": "frozen"})
    for states, probes, arms_used in results:
        for key, incumbent in learned.items():
            want = planted if key[1] == "allreduce" else incumbent
            assert states[key][0] == want, (key, states[key], want)
        assert probes == 0
        assert arms_used == [_C.arm_names(_C.Engine.cpu, "allreduce").index(planted)]
    # Learn mode, warm: the loaded state starts converged (exploit), not in warm-up.
    for states, _, _ in run_ranks(run_loaded, 2, 20, env={"DYNAMICCL_POLICY": path}):
        assert all(phase != "warmup" for _, phase in states.values())


def test_policy_from_elsewhere_starts_cold(tmp_path):
    path = str(tmp_path / "policy.json")
    run_ranks(learn_and_save, 2, path, 100)
    data = json.load(open(path))
    data["fingerprint"]["torch"] = "0.0.1"
    json.dump(data, open(path, "w"))
    for states, _, _ in run_ranks(run_loaded, 2, 3, env={"DYNAMICCL_POLICY": path}):
        assert all(phase == "warmup" for _, phase in states.values())


def traced(rank, world, prefix):
    import dynamiccl_pg
    with dynamiccl_pg.hint(role="tp"):
        dist.all_reduce(torch.ones(10))
    dist.broadcast(torch.ones(5), 0)
    for _ in range(20):  # a state with enough calls to be shown in the summary
        dist.all_reduce(torch.ones(1000))
    # One of our schedules (it completes on the schedule thread, not in an engine callback).
    ring = dist.new_group(backend="dynamiccl",
                          pg_options=dynamiccl_pg.Options(force="allreduce:ring"))
    dist.all_reduce(torch.ones(1000), group=ring)
    # A call's end is recorded by its completion callback, which c10's Future runs just after
    # waking the waiter: give the last ones a moment before writing (the exit-time trace is
    # written long after).
    import time
    from dynamiccl_pg.backend import backends
    deadline = time.monotonic() + 5
    while (any(r[-1] == 0 for pg in backends() for r in pg.trace_records())
           and time.monotonic() < deadline):
        time.sleep(0.01)
    # Its own prefix: the DYNAMICCL_TRACE files are written again at exit, racing a reader.
    files = dynamiccl_pg.write_trace(prefix + "-api")
    summary = dynamiccl_pg.format_summary()
    return files, summary


def test_trace_and_summary(tmp_path):
    prefix = str(tmp_path / "trace")
    results = run_ranks(traced, 2, prefix, env={"DYNAMICCL_TRACE": prefix})
    for rank, (files, summary) in enumerate(results):
        jsonl, chrome = files
        records = [json.loads(line) for line in open(jsonl)]
        ops = [(r["op"], r["role"]) for r in records]
        assert ("allreduce", "tp") in ops and ("broadcast", "default") in ops
        assert any(r["group"] != "0" and r["arm"] != 0 for r in records)  # the ring call
        assert all(r["dur_us"] is not None and r["dur_us"] >= 0 for r in records), records
        events = json.load(open(chrome))["traceEvents"]
        assert len(events) == len(records)
        # The summary lists the repeated all-reduce's state and hides the one-off tp call's.
        learned_rows = [line.split() for line in summary.splitlines()
                        if line.startswith(" ") and "allreduce" in line]
        assert [row[:3] for row in learned_rows] == [["default", "allreduce", ">=2KiB"]], summary
        assert "states with fewer than 16 calls and no probes not shown" in summary, summary
        # Written again at exit, after the group is gone: still under this process's rank.
        exit_records = [json.loads(line) for line in open(f"{prefix}.rank{rank}.jsonl")]
        assert len(exit_records) == len(records)


def test_hint_rejects_bad_values():
    import dynamiccl_pg
    with pytest.raises(ValueError, match="role='warp'.*accepted: default, dp"):
        with dynamiccl_pg.hint(role="warp"):
            pass
    with pytest.raises(ValueError, match="bucket=-3"):
        with dynamiccl_pg.hint(bucket=-3):
            pass
    with pytest.raises(ValueError, match="direction='up'"):
        with dynamiccl_pg.hint(direction="up"):
            pass
    with dynamiccl_pg.hint(role="pp", stage=2, direction="backward"):
        assert dynamiccl_pg._C.get_hint()[:5] == (5, -1, -1, 2, 1)
    assert dynamiccl_pg._C.get_hint() == (-1,) * 6  # restored on exit


def test_summary_marks_a_default_parked_by_a_re_open(monkeypatch):
    """A focused re-open parks the arms it does not re-probe, the default too: with no cost since,
    the summary shows the default's last centre (what the ledger reckons against), marked, and
    the speedup from it, not 0 and '-'."""
    from dynamiccl_pg import telemetry

    def state(regime_samples):
        return {"role": "dp", "op": "allreduce", "size_bin": 16, "exposure": "exposed",
                "fused": False, "incumbent": "rd", "phase": "settled", "frozen": False,
                "calls": 1199, "probes": 53, "extra_us": 0.0, "budget_us": 1.0e6,
                "reference_us": 40000.0,
                "arms": [{"name": "default", "regime_samples": regime_samples,
                          "center_us": 41000.0 if regime_samples else 0.0},
                         {"name": "rd", "regime_samples": 30, "center_us": 20000.0}]}

    def summary(regime_samples):
        monkeypatch.setattr(telemetry, "stats", lambda group=None: {
            "group": "0", "group_desc": "default_pg", "group_role": "dp", "mode": "learn",
            "learned_calls": 1199, "rounds_applied": 40, "calls": [],
            "engines": {"cpu": "gloo (ProcessGroupGloo)"}, "rules_off": [],
            "states": {"cpu": [state(regime_samples)]}})
        return [line.split() for line in telemetry.format_summary().splitlines()
                if line.strip().startswith(("dp", "*"))]

    parked = summary(0)
    assert parked[0][8:11] == ["40000.0*", "20000.0", "2.00x"], parked
    assert parked[1][0] == "*", parked
    measured = summary(7)
    assert measured[0][8:11] == ["41000.0", "20000.0", "2.05x"] and len(measured) == 1, measured


def test_summary_says_each_states_last_step_trial(monkeypatch):
    """Under the learned table, a line per state that ran a step trial: the arm tried, the
    verdict, the step it came in (from the state's event of it) and what it rests on."""
    from dynamiccl_pg import telemetry
    trial = {"challenger": "rd", "verdict": "adopted: shorter steps", "pairs": 6,
             "mean_delta_us": -1840.4, "stderr_us": 310.2}
    state = {"role": "dp", "op": "allreduce", "size_bin": 19, "exposure": "overlapped",
             "fused": False, "incumbent": "rd", "phase": "exploit", "frozen": False,
             "calls": 598, "probes": 76, "extra_us": 0.0, "budget_us": 1.0e6,
             "reference_us": 13000.0, "step_trial": trial,
             "events": [{"call": 90, "step": 45, "what": "step trial", "from": "default",
                         "to": "rd"},
                        {"call": 114, "step": 57, "what": "adopted: shorter steps",
                         "from": "default", "to": "rd", "pairs": 6, "mean_delta_us": -1840.4,
                         "stderr_us": 310.2}],
             "arms": [{"name": "default", "regime_samples": 9, "center_us": 13106.8},
                      {"name": "rd", "regime_samples": 30, "center_us": 7314.8}]}
    monkeypatch.setattr(telemetry, "stats", lambda group=None: {
        "group": "0", "group_desc": "default_pg", "group_role": "dp", "mode": "learn",
        "learned_calls": 598, "rounds_applied": 40, "calls": [], "states": {"cpu": [state]},
        "engines": {"cpu": "gloo (ProcessGroupGloo)"}, "rules_off": []})
    lines = telemetry.format_summary().splitlines()
    assert lines[-1] == ("last step trial (cpu): dp allreduce >=512KiB overlapped: rd, adopted: "
                         "shorter steps at step 57 (-1840 +- 310 us a step, 6 pairs)"), lines
    state["events"] = state["events"][:1]  # the verdict's event no longer kept: no step said
    assert telemetry.format_summary().splitlines()[-1].endswith(
        "rd, adopted: shorter steps (-1840 +- 310 us a step, 6 pairs)")
