"""Step-time figures of the scenarios with compute: NCCL's default, the per-call learner (every
call judged by its own duration: the learner is not told where steps end), the step-aware learner
(overlapped calls judged by step trials) and the step-time oracle, on the same noise draws.

    python benchmarks/sim/step_time.py [--steps N] [--prior KIND] [SCENARIO.json ...]

Prints a Markdown table (mean µs per step over the whole run, and the share of the oracle's
headroom over the default that each learner captured, over the whole run and, for the step-aware
learner, over the run's last quarter: once it has settled)."""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys

from dynamiccl_pg._C import sim as _sim
from dynamiccl_pg.sim.scenario import Scenario, ScenarioError, load_scenario

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "..", "scenarios")
DEFAULT = ["ddp_overlapped_buckets", "defaults_right_ddp_overlapped", "fsdp2_prefetch",
           "defaults_right_fsdp2_prefetch", "llm_step_tp_pp_dp", "defaults_right_llm_step"]


def _run(sc: Scenario, mark_steps: bool):
    data = copy.deepcopy(sc.data)
    data["compute"]["mark_steps"] = mark_steps
    return _sim.run(_sim.spec_from_dict(data))


def _captured(learned: float, default: float, oracle: float) -> str:
    """The share of the oracle's headroom captured; without headroom, the learner against the
    default."""
    if default - oracle > 1e-9 * default:
        return f"{(default - learned) / (default - oracle):.0%}"
    return f"{(learned - default) / default:+.2%} vs default"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--prior", default=None,
                        help="every scenario's prior, as `python -m dynamiccl_pg sim --prior`")
    args = parser.parse_args()
    paths = args.scenarios or [os.path.join(SCENARIOS, f"{n}.json") for n in DEFAULT]
    print("| scenario | default µs/step | per-call learner | step-aware learner | step oracle | "
          "headroom | per-call captured | step-aware captured | step-aware, last quarter |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        if not os.path.exists(path):
            print(f"| {os.path.basename(path)} | (no such scenario) ||||||||")
            continue
        try:
            sc = load_scenario(path).with_overrides(args.steps, [], args.prior)
        except ScenarioError as e:
            parser.error(str(e))
        per_call = _run(sc, False)
        aware = _run(sc, True)
        d = statistics.fmean(aware.step_time_default_us)
        o = statistics.fmean(aware.step_time_oracle_us)
        p = statistics.fmean(per_call.step_time_learned_us)
        a = statistics.fmean(aware.step_time_learned_us)
        head = (d - o) / d
        last = len(aware.step_time_learned_us) * 3 // 4
        d4, o4, a4 = (statistics.fmean(series[last:]) for series in (
            aware.step_time_default_us, aware.step_time_oracle_us, aware.step_time_learned_us))
        print(f"| {sc.name} | {d:.1f} | {p:.1f} | {a:.1f} | {o:.1f} | {head:.2%} | "
              f"{_captured(p, d, o)} | {_captured(a, d, o)} | {_captured(a4, d4, o4)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
