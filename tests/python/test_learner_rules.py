"""Every rule of the learner earns its place (docs/learner.md, "The rules"): switched off in the
simulator, the product's learner does measurably worse on the scenario its ablation names
(benchmarks/sim/ablation.md) or on the socket-transport scenario; the few rules no library
scenario exercises name the GoogleTest case written for them. A rule that no longer pays fails
here, and so does a rule added to the registry without evidence, or missing from the docs' table."""

from __future__ import annotations

import os
import re

import pytest

from dist_harness import ROOT
from dynamiccl_pg import _C
from dynamiccl_pg.sim import ablate, report
from dynamiccl_pg.sim.scenario import load_scenario, parse_scenario
from test_sim_scenarios import SOCKET_TRANSPORT

# Removing the rule costs more than this, in percentage points of the figure (ablate.harm).
MIN_HARM_PP = 0.1

# rule -> (prior, scenario) where switching it off hurts (benchmarks/sim/ablation.md).
HURTS_IN_SIM = {
    "prior_cutoff": ("exact", "fsdp2_prefetch"),
    "first_probes": ("exact", "llm_step_tp_pp_dp"),
    "worth_probing": ("exact", "llm_step_tp_pp_dp"),
    "hopeless": ("exact", "llm_step_tp_pp_dp"),
    "focused_reopen": ("exact", "llm_step_tp_pp_dp"),
    "provisional_switch": ("exact", "congested_inter"),
    "cap_pricing": ("exact", "llm_step_tp_pp_dp"),
    "min_cap_share": ("described", "fsdp2_prefetch"),
    "step_trials": ("exact", "llm_step_tp_pp_dp"),
    "footprint_descent": ("exact", "fsdp2_prefetch"),
    "two_lanes": ("exact", "llm_step_tp_pp_dp"),
    "probe_step_kinds": ("exact", "llm_step_tp_pp_dp"),
    "probed_pairs": ("exact", "llm_step_tp_pp_dp"),
    "futility": ("exact", "llm_step_tp_pp_dp"),
    "step_adopted_free": ("exact", "llm_step_tp_pp_dp"),
}

# Rules that pay on the socket-transport scenario (a disastrous arm among winners): its step.
HURTS_ON_SOCKETS = ("repays", "shared_evidence")

# rule -> the GoogleTest case that fails with the rule off, where no simulator scenario exercises
# it (a learned prior's confidence, a trial on a spent budget, a step holding other work).
GUARDED_BY_TEST = {
    "prior_resolves": "Learner.AConfidentPriorStandsInForRepeatProbesOfAnArmThatCannotWin",
    "trial_pays_back": "StepTrials.AnotherStatesProbeNeitherStopsNorSkewsATrialThatPaysBack",
    "trial_resume": "StepTrials.AFootprintThatDoesNotShortenTheStepKeepsTheDefault",
    "pair_clip": "StepTrials.AStepHoldingOtherWorkIsNoArmsDoing",
}


def _figures(scenario: str, prior: str, rules_off: list[str]):
    sc = load_scenario(os.path.join(ROOT, "benchmarks", "scenarios", f"{scenario}.json"))
    sc = sc.with_overrides(prior=prior)
    return ablate.figures(report.summarize(sc, _C.sim.run(sc.to_spec(), None, rules_off), 0.0))


@pytest.mark.parametrize("rule", sorted(HURTS_IN_SIM))
def test_switching_the_rule_off_costs_where_its_ablation_says(rule):
    prior, scenario = HURTS_IN_SIM[rule]
    with_ = _figures(scenario, prior, [])
    without = _figures(scenario, prior, [rule])
    pp, figure = ablate.harm(with_, without)
    assert pp > MIN_HARM_PP, (rule, scenario, prior, with_, without)
    assert figure is not None


@pytest.mark.parametrize("rule", HURTS_ON_SOCKETS)
def test_switching_the_rule_off_lengthens_the_socket_transport_step(rule):
    sc = parse_scenario(SOCKET_TRANSPORT)

    def step_ratio(rules_off):
        step = report.summarize(sc, _C.sim.run(sc.to_spec(), None, rules_off), 1.0)["step_time"]
        return step["learned_us"] / step["default_us"]

    with_, without = step_ratio([]), step_ratio([rule])
    assert 100 * (without - with_) > MIN_HARM_PP, (rule, with_, without)


def test_every_rule_is_accounted_for_and_in_the_docs_table():
    names = {name for name, _ in _C.learner_rules()}
    evidence = [set(HURTS_IN_SIM), set(HURTS_ON_SOCKETS), set(GUARDED_BY_TEST)]
    assert sum(len(e) for e in evidence) == len(set().union(*evidence)), "a rule counted twice"
    assert names == set().union(*evidence), (
        "rules without evidence:", names - set().union(*evidence),
        "evidence for rules the registry lacks:", set().union(*evidence) - names)
    sources = ""
    for name in ("test_learner.cpp", "test_step_trials.cpp"):
        with open(os.path.join(ROOT, "tests", "cpp", "core", name)) as f:
            sources += f.read()
    for case in GUARDED_BY_TEST.values():
        suite, test = case.split(".")
        assert f"TEST({suite}, {test})" in sources, case
    with open(os.path.join(ROOT, "docs", "learner.md")) as f:
        text = f.read()
    table = text[text.index("## The rules"):text.index("## The thresholds")]
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", table, re.M))
    assert set(rows) == names, (set(rows) ^ names)
    # What each rule does is written once, in the registry; the table mirrors it word for word.
    for name, doc in _C.learner_rules():
        assert rows[name].strip() == doc, (name, rows[name], doc)


def _tuning_constants() -> dict[str, tuple[str, str]]:
    """policy/tuning.h: name -> (value as written, its reason: the comment, continuation lines
    joined)."""
    with open(os.path.join(ROOT, "csrc", "policy", "tuning.h")) as f:
        text = f.read()
    found = {}
    pattern = r"^constexpr \w+ (k\w+) = ([^;]+);\s*// (.*)\n((?:\s+// .*\n)*)"
    for name, value, reason, more in re.findall(pattern, text, re.M):
        lines = [reason] + [line.strip()[3:] for line in more.splitlines()]
        found[name] = (value.strip(), " ".join(lines))
    return found


# Thresholds no GoogleTest case holds yet: moved as in the table, every case still passes.
NO_TEST_YET = {"kLastRungPairsScale"}


def test_every_threshold_is_in_the_docs_table_with_its_reason_and_its_test():
    """docs/learner.md, "The thresholds": one row per constant of policy/tuning.h, its value and
    reason as written there, and the GoogleTest cases that fail when it moves (found by moving
    it); a case named must exist."""
    constants = _tuning_constants()
    assert len(constants) <= 28, ("at most half of the 57 there were", sorted(constants))
    with open(os.path.join(ROOT, "docs", "learner.md")) as f:
        text = f.read()
    table = text[text.index("## The thresholds"):text.index("## In depth")]
    rows = {m[0]: m[1:] for m in re.findall(
        r"^\| `(k\w+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", table, re.M)}
    assert set(rows) == set(constants), set(rows) ^ set(constants)
    sources = ""
    for name in os.listdir(os.path.join(ROOT, "tests", "cpp", "core")):
        with open(os.path.join(ROOT, "tests", "cpp", "core", name)) as f:
            sources += f.read()
    for name, (value, reason) in constants.items():
        doc_value, doc_reason, moved = (cell.strip() for cell in rows[name])
        assert doc_value == value and doc_reason == reason, (name, rows[name], value, reason)
        cases = re.findall(r"`(\w+)\.(\w+)`", moved)
        for suite, test in cases:
            assert f"TEST({suite}, {test})" in sources, (name, suite, test)
        assert bool(cases) != (name in NO_TEST_YET), (name, moved)


def _rules_off(rank, world):
    import torch
    import torch.distributed as dist
    from dynamiccl_pg import telemetry
    t = torch.ones(1024)
    dist.all_reduce(t)
    return telemetry.stats()["rules_off"], telemetry.format_summary().splitlines()[0]


def test_a_job_switches_rules_off_only_through_the_benchmark_variable(monkeypatch):
    """DYNAMICCL_TEST_ABLATE reaches the learner of a real job (stats() and the summary's first
    line say which rules are off); unset, none is; an unknown name is refused naming it."""
    from dist_harness import run_ranks
    from dynamiccl_pg import config
    from dynamiccl_pg.errors import ConfigError
    ablated = {"DYNAMICCL_TEST_ABLATE": "trial_resume,pair_clip"}
    for off, first in run_ranks(_rules_off, 2, env=ablated):
        assert off == ["trial_resume", "pair_clip"] and first.endswith(
            "learner rules off: trial_resume, pair_clip"), (off, first)
    for off, first in run_ranks(_rules_off, 2):
        assert off == [] and "rules off" not in first, (off, first)
    monkeypatch.setenv("DYNAMICCL_TEST_ABLATE", "pair_clip,no_such_rule")
    with pytest.raises(ConfigError, match="'no_such_rule' is not accepted; accepted: "
                                          "prior_cutoff, "):
        config.resolve()
