"""Step-time figures of the scenarios with compute: NCCL's default, the per-call learner (every
call judged by its own duration: the learner is not told where steps end), the step-aware learner
(overlapped calls judged by step trials) and the step-time oracle, on the same noise draws.

    python benchmarks/sim/step_time.py [--steps N] [--prior KIND] [--seeds N] [SCENARIO.json ...]

Prints a Markdown table (mean µs per step over the whole run, and the share of the oracle's
headroom over the default that each learner captured, over the whole run and, for the step-aware
learner, over the run's last quarter: once it has settled), then each scenario's step noise.
With `--seeds N` each scenario runs with seeds 1..N instead of its own, and each cell is the
median over them, the share captured followed by its range."""

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


def _captured(learned: float, default: float, oracle: float) -> float:
    """The share of the oracle's headroom captured; without headroom, the learner's step over the
    default's, less one."""
    if default - oracle > 1e-9 * default:
        return (default - learned) / (default - oracle)
    return (learned - default) / default


def _cell(values: list[float], headroom: bool) -> str:
    """The median of `values` as a share captured, or against the default; with its range when
    there are several."""
    text = (lambda v: f"{v:.0%}") if headroom else (lambda v: f"{v:+.2%}")
    cell = text(statistics.median(values))
    if len(values) > 1:
        cell += f" ({text(min(values))} to {text(max(values))})"
    return cell if headroom else cell + " vs default"


def _figures(sc: Scenario) -> dict[str, float]:
    """One run of each learner on the same noise draws: mean µs per step, and shares."""
    per_call = _run(sc, False)
    aware = _run(sc, True)
    d = statistics.fmean(aware.step_time_default_us)
    o = statistics.fmean(aware.step_time_oracle_us)
    p = statistics.fmean(per_call.step_time_learned_us)
    a = statistics.fmean(aware.step_time_learned_us)
    last = len(aware.step_time_learned_us) * 3 // 4
    d4, o4, a4 = (statistics.fmean(series[last:]) for series in (
        aware.step_time_default_us, aware.step_time_oracle_us, aware.step_time_learned_us))
    steps = aware.step_time_default_us
    return {"default": d, "per_call": p, "aware": a, "oracle": o, "headroom": (d - o) / d,
            "per_call_captured": _captured(p, d, o), "aware_captured": _captured(a, d, o),
            "aware_last": _captured(a4, d4, o4),
            # What a step trial's pair of steps differs by with nothing changed.
            "noise": statistics.pstdev(b - a for a, b in zip(steps, steps[1:]))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--prior", default=None,
                        help="every scenario's prior, as `python -m dynamiccl_pg sim --prior`")
    parser.add_argument("--seeds", type=int, default=None,
                        help="run each scenario with seeds 1..N (default: its own seed, once)")
    args = parser.parse_args()
    if args.seeds is not None and args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: expected a count of seeds, 1 or more")
    seeds = list(range(1, args.seeds + 1)) if args.seeds else [None]
    paths = args.scenarios or [os.path.join(SCENARIOS, f"{n}.json") for n in DEFAULT]
    print("| scenario | default µs/step | per-call learner | step-aware learner | step oracle | "
          "headroom | per-call captured | step-aware captured | step-aware, last quarter |")
    print("|---|---|---|---|---|---|---|---|---|")
    noise = []
    for path in paths:
        if not os.path.exists(path):
            print(f"| {os.path.basename(path)} | (no such scenario) ||||||||")
            continue
        try:
            sc = load_scenario(path).with_overrides(args.steps, [], args.prior)
        except ScenarioError as e:
            parser.error(str(e))
        runs = [_figures(sc.with_overrides(seed=seed)) for seed in seeds]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        headroom = med["default"] - med["oracle"] > 1e-9 * med["default"]
        shares = [_cell([r[k] for r in runs], headroom)
                  for k in ("per_call_captured", "aware_captured", "aware_last")]
        print(f"| {sc.name} | {med['default']:.1f} | {med['per_call']:.1f} | {med['aware']:.1f} | "
              f"{med['oracle']:.1f} | {med['headroom']:.2%} | " + " | ".join(shares) + " |")
        noise.append(f"{sc.name} {min(r['noise'] for r in runs):.0f}-"
                     f"{max(r['noise'] for r in runs):.0f}")
    print("\nStep noise under NCCL's default (standard deviation of successive steps' difference, "
          "µs, over the seeds): " + ", ".join(noise))
    return 0


if __name__ == "__main__":
    sys.exit(main())
