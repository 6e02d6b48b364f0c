"""`python -m dynamiccl_pg sim`: run scenarios through the real learner and report.

    python -m dynamiccl_pg sim --scenario benchmarks/scenarios --out benchmarks/sim

For each scenario: a table row on stdout, and under --out: <name>.json (everything, per-step
series included), <name>.png (cost per step), plus results.json (all scenarios and the overall
verdict) and summary.md (the table as Markdown with the command that produced it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from typing import Any

from . import report
from .schema_doc import schema_markdown
from .scenario import Scenario, ScenarioError, check_key, load_scenario, scenario_files

__all__ = ["add_arguments", "main", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The simulator's description and options, on `p` (`python -m dynamiccl_pg sim`'s
    subparser, or this module's own parser when run as `python -m dynamiccl_pg.sim.cli`)."""
    p.description = ("Simulate NCCL collectives with the real learner against NCCL's default "
                     "choice and the oracle.")
    p.add_argument("--scenario", "-s", nargs="+", action="extend", default=[],
                   metavar="PATH", help="scenario JSON file(s) or directories of them")
    p.add_argument("--schema", action="store_true",
                   help="print the scenario keys as a Markdown table (the README's) and exit")
    p.add_argument("--out", "-o", metavar="DIR",
                   help="write <name>.json, <name>.png, results.json and summary.md here")
    p.add_argument("--steps", type=int, metavar="N", help="override every scenario's steps")
    p.add_argument("--prior", metavar="KIND",
                   help="override every scenario's prior: exact (the scenario's topology) or "
                        "described (what the product assumes by itself)")
    p.add_argument("--prior-model", metavar="PATH",
                   help="a learned prior (python -m dynamiccl_pg prior train) ordering and "
                        "pruning every group's arms, as DYNAMICCL_PRIOR does in a job")
    p.add_argument("--policy-out", metavar="DIR",
                   help="write each scenario's learned policy as <name>.policy.json (the "
                        "save_policy format: the training data of a learned prior)")
    p.add_argument("--head", action="append", default=[], metavar="ROLE.KEY=VALUE",
                   help="override a learner head setting, e.g. tp.probe_budget=0.1 "
                        "(ROLE may be 'all'); repeatable")
    p.add_argument("--ablate", metavar="RULE[,RULE]|each",
                   help="run every scenario with the learner's rules all on and with these off "
                        "('each': every rule off on its own) and print the figures side by side "
                        "(under --out: ablation.json and ablation.md); a benchmark setting, not "
                        "the backend's")
    p.add_argument("--no-plot", action="store_true", help="skip the PNGs")
    p.add_argument("--check", action="store_true",
                   help="exit with status 1 when a target is missed")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the table")


def _parse_head(text: str) -> tuple[str, str, Any]:
    try:
        lhs, value = text.split("=", 1)
        role, key = lhs.split(".", 1)
        v = json.loads(value)
    except ValueError:
        raise ValueError(f"--head {text!r}: expected ROLE.KEY=VALUE, e.g. tp.probe_budget=0.1")
    _check_override(f"--head {text!r}", "learner", {role: {key: v}})
    return role, key, v


def _check_override(option: str, key: str, value: Any) -> None:
    """Raises ValueError when a command-line value breaks the scenario key's rule."""
    problems = check_key(key, value)
    if problems:
        raise ValueError(f"{option}: " + "; ".join(problems))


def _clean(obj: Any) -> Any:
    """JSON has no NaN/inf: write null instead."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def _write_json(path: str, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(_clean(data), f, indent=1)
        f.write("\n")


def run_one(sc: Scenario, prior=None, policy_out: str | None = None) -> dict[str, Any]:
    """Run one validated scenario (with `prior`, a _C.PriorModel, as its learned prior); the
    summary of report.summarize(). With `policy_out`, the learned policy is written there as
    <name>.policy.json."""
    from dynamiccl_pg._C import sim as _sim

    spec = sc.to_spec()
    t0 = time.perf_counter()
    res = _sim.run(spec, prior)
    if policy_out:
        write_sim_policy(os.path.join(policy_out, f"{sc.name}.policy.json"), sc.name, res)
    return report.summarize(sc, res, time.perf_counter() - t0)


def write_sim_policy(path: str, scenario: str, res) -> None:
    """A simulated job's learned policy, in the save_policy format (the NCCL engine's)."""
    from dynamiccl_pg.policy_io import write_policy_file

    groups = {p["group"]: {"group_size": p["group_size"], "nodes": p["nodes"],
                           "group_desc": p["group"], "engines": {"nccl": p["snapshot"]}}
              for p in res.policies}
    write_policy_file(path, {"simulator": scenario}, groups)


def main(argv: list[str]) -> int:
    """`python -m dynamiccl_pg.sim.cli`: `argv` are the simulator's own arguments, as after
    `python -m dynamiccl_pg sim`."""
    argv = list(argv)
    parser = argparse.ArgumentParser(prog="python -m dynamiccl_pg sim")
    add_arguments(parser)
    return run(parser.parse_args(argv), argv, parser)


def run(args: argparse.Namespace, words: list[str], parser: argparse.ArgumentParser) -> int:
    """Runs the parsed command; `words` are its arguments as typed (summary.md and
    results.json record them so a run can be repeated), `parser` reports usage errors."""
    if args.schema:
        print(schema_markdown())
        return 0
    if not args.scenario:  # not argparse's required=True: --schema needs no scenario
        parser.error("--scenario is required")
    ablate_sets = None
    if args.ablate is not None:
        from .ablate import parse_ablate

        try:
            ablate_sets = parse_ablate(args.ablate)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    scenarios = _load(args)
    if scenarios is None:
        return 2
    if ablate_sets is not None:
        return _ablate(scenarios, ablate_sets, args, words)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    summaries = _simulate(scenarios, args)
    if summaries is None:
        return 2
    total = report.overall(summaries)
    print(report.format_table(summaries))
    verdict = _verdict(total)
    print("\n" + verdict)
    if not args.quiet:
        print(f"{total['calls']} simulated calls in {total['wall_s']:.2f} s "
              f"({total['calls'] / max(total['wall_s'], 1e-9) / 1e6:.2f} M calls/s)")
    if args.out:
        command = "python -m dynamiccl_pg sim " + " ".join(shlex.quote(a) for a in words)
        _write_results(args.out, command, summaries, total, verdict)
    missed = not total["met"] or any(not v["met"] for s in summaries
                                     for v in s["targets"].values())
    return 1 if (args.check and missed) else 0


def _ablate(scenarios: list[Scenario], sets: list[list[str]], args: argparse.Namespace,
            words: list[str]) -> int:
    """--ablate: the figures with and without the rules, per scenario (ablate.py)."""
    from . import ablate

    prior = None
    if args.prior_model:
        from dynamiccl_pg import _C
        prior = _C.PriorModel(args.prior_model)
    try:
        result = ablate.run_ablation(scenarios, sets, prior)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(ablate.format_table(result))
    if args.out:
        command = "python -m dynamiccl_pg sim " + " ".join(shlex.quote(a) for a in words)
        ablate.write(args.out, command, result)
    return 0


def _load(args: argparse.Namespace) -> list[Scenario] | None:
    """The scenarios with the command line's overrides applied; None (every problem printed
    first) when an option, a file or a scenario is wrong."""
    try:
        files = scenario_files(args.scenario)
        heads = [_parse_head(h) for h in args.head]
        if args.steps is not None:
            _check_override(f"--steps {args.steps}", "steps", args.steps)
        if args.prior is not None:
            _check_override(f"--prior {args.prior}", "prior", args.prior)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    scenarios, failed = [], False
    for path in files:  # every broken file is named, not just the first
        try:
            scenarios.append(load_scenario(path))
        except ScenarioError as e:
            print(f"error: {e}", file=sys.stderr)
            failed = True
    names = [s.name for s in scenarios]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:  # the outputs are named after the scenarios
        print(f"error: scenario names must be unique, repeated: {', '.join(dup)}",
              file=sys.stderr)
        failed = True
    if failed:
        return None
    if args.steps is not None or heads or args.prior is not None:
        try:
            scenarios = [sc.with_overrides(args.steps, heads, args.prior) for sc in scenarios]
        except ScenarioError as e:  # e.g. a congestion episode past a shortened run
            print(f"error: {e}", file=sys.stderr)
            return None
    return scenarios


def _simulate(scenarios: list[Scenario], args: argparse.Namespace) -> list[dict] | None:
    """Runs each scenario, writing <name>.json (and .png) under --out as it goes; None when
    the C++ side rejects one."""
    summaries = []
    prior = None
    try:
        if args.prior_model:
            from dynamiccl_pg import _C
            prior = _C.PriorModel(args.prior_model)
        if args.policy_out:
            os.makedirs(args.policy_out, exist_ok=True)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    for sc in scenarios:
        if not args.quiet:
            print(f"running {sc.name} ({sc.source}) ...", file=sys.stderr, flush=True)
        try:
            s = run_one(sc, prior, args.policy_out)
        except ValueError as e:  # the C++ side re-validates and names the field
            print(f"error: {sc.source}: {e}", file=sys.stderr)
            return None
        summaries.append(s)
        if args.out:
            _write_json(os.path.join(args.out, f"{sc.name}.json"), s)
            if not args.no_plot:
                from .plot import plot_summary

                plot_summary(s, os.path.join(args.out, f"{sc.name}.png"))
    return summaries


def _write_results(out: str, command: str, summaries: list[dict], total: dict[str, Any],
                   verdict: str) -> None:
    """results.json (all scenarios without their series, and the overall verdict) and
    summary.md (the table as Markdown with the command that produced it)."""
    brief = [{k: v for k, v in s.items() if k not in ("series", "state_detail")}
             for s in summaries]
    _write_json(os.path.join(out, "results.json"),
                {"command": command, "targets": report.TARGETS, "overall": total,
                 "scenarios": brief})
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(f"Command: `{command}`\n\n")
        f.write(report.format_table(summaries, markdown=True) + "\n\n")
        f.write(verdict + "\n")


def _verdict(total: dict[str, Any]) -> str:
    """The run's headline: geometric means over the scenarios where the truth departs from
    NCCL's model."""
    g, c = total["geomean_speedup"], total["geomean_headroom_captured"]
    if g is None or c is None:
        return "no scenario where the truth departs from NCCL's model"
    return (f"where the truth departs from NCCL's model ({total['gain_scenarios']} scenarios), "
            f"geometric means: speedup over NCCL's default {g:.3f}x (target "
            f"{total['target']}x), oracle's headroom captured {100 * c:.1f}% (target "
            f"{100 * total['captured_target']:.0f}%); median calls to converge over all "
            f"scenarios' states {total['calls_to_converge']:.0f} (target "
            f"{total['calls_to_converge_target']}): {'met' if total['met'] else 'MISSED'}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
