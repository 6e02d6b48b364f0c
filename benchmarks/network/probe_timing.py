"""What each probe of one learned all-reduce state cost against the default beside it.

Reads the call traces that `run.sh --keep-traces` keeps (OUT/traces/CONFIG-VARIANT-REP/, every
rank's file). Per run and arm: the steps of its probes and each probe's cost (what the learner
charges: the call's duration, max over ranks) over the median of the default's unprobed calls
of the same state within WINDOW steps, the median of its first min_samples probes (what its
first ranking rests on) against that of all its probes, what the step's smaller bucket ran
at the same time (`*`: a probe), and, for an arm that a step or tie trial ran, the step its trial
began (its first call not a probe) and the median of its probes before then (what the trial was
chosen on). The step of a call: its position among the state's calls, divided by the calls the
state has per step.

    python benchmarks/network/probe_timing.py DIR/traces/example_defaults-dynamiccl-0 \\
        --min-bytes 524288 --calls-per-step 2 --beside-min-bytes 65536
"""
import argparse
import os
import statistics
from collections import defaultdict

from dynamiccl_pg import _C, trace_report

WINDOW = 25  # steps either side: the default's cost drifts over a run (1st / 2nd half ~5%)
FIRST = int(_C.default_heads()["dp"]["min_samples"])  # the costs a first ranking rests on


def calls_of(folder: str) -> list:
    """The default group's all-reduce calls in issue order, each with its cost (max over ranks,
    as the product's report joins them)."""
    return [c for c in trace_report.load(os.path.join(folder, "trace"))
            if c["group"] == "0" and c["op"] == "allreduce"]


def probe_rows(calls: list, lo: int, hi: int, per_step: int, beside_lo: int) -> dict:
    names = _C.arm_names(_C.Engine.cpu, "allreduce")
    state = [c for c in calls if lo <= c["bytes"] < hi]
    beside = {i: c for i, c in enumerate(c for c in calls if beside_lo <= c["bytes"] < lo)}
    default = [(i // per_step, c["cost_us"]) for i, c in enumerate(state)
               if c["arm"] == 0 and not c["probe"]]
    rows = defaultdict(list)
    trial_steps = {}
    for i, c in enumerate(state):
        if c["arm"] != 0 and not c["probe"]:
            trial_steps.setdefault(names[c["arm"]], i // per_step)
        if not c["probe"] or c["arm"] == 0:
            continue
        step = i // per_step
        ref = [v for s, v in default if abs(s - step) <= WINDOW]
        if not ref:
            continue
        other = beside.get(step)
        ran = names[other["arm"]] + ("*" if other["probe"] else "") if other else "-"
        rows[names[c["arm"]]].append((step, c["cost_us"] / statistics.median(ref), ran))
    return rows, trial_steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="+")
    p.add_argument("--min-bytes", type=int, default=512 * 1024)
    p.add_argument("--max-bytes", type=int, default=1 << 62)
    p.add_argument("--calls-per-step", type=int, default=2)
    p.add_argument("--beside-min-bytes", type=int, default=64 * 1024)
    a = p.parse_args()
    print("| run | arm | probes | first probes' steps | their cost / the default's | "
          f"median of the first {FIRST} | median of all | beside it | trialled from step | "
          "median of its probes before |")
    print("|---" * 10 + "|")
    for folder in a.folders:
        rows, trial_steps = probe_rows(calls_of(folder), a.min_bytes, a.max_bytes,
                                       a.calls_per_step, a.beside_min_bytes)
        for arm, v in sorted(rows.items()):
            first = v[:FIRST]
            trial = trial_steps.get(arm)
            before = [r for s, r, _ in v if trial is not None and s < trial]
            print(f"| {os.path.basename(folder.rstrip('/'))} | {arm} | {len(v)} | "
                  f"{', '.join(str(s) for s, _, _ in first)} | "
                  f"{', '.join(f'{r:.2f}' for _, r, _ in first)} | "
                  f"{statistics.median(r for _, r, _ in first):.2f} | "
                  f"{statistics.median(r for _, r, _ in v):.2f} | "
                  f"{', '.join(x for _, _, x in first)} | "
                  f"{'-' if trial is None else trial} | "
                  f"{f'{statistics.median(before):.2f}' if before else '-'} |")


if __name__ == "__main__":
    main()
