"""What the step trials of one learned state chose, across recorded end-to-end runs.

For every e2e.jsonl under the folders given (one row per record folder), the step-aware
dynamiccl runs of one configuration: how many adopted an arm by a step trial, in how many the
arm asked about was trialled and adopted, in how many it ended with few costs (its first probes
only), its centre per call over the default's at the end in the runs that never trialled it
(what the tie trial ranked it by: kTieRatio in csrc/policy/policy_state.h), and the median step
of the runs whose state ended on it against the others' (with the number of runs).

    python benchmarks/network/trial_census.py benchmarks/network/reruns \\
        --config example_defaults --size-bin '>=512KiB' --arm hd
"""
import argparse
import glob
import json
import os
import statistics

FEW_COSTS = 16  # a handful of probes, no trial: a trial's pairs bring dozens


def step_aware_runs(path: str, config: str):
    with open(path) as f:
        for r in map(json.loads, f):
            if r["config"] == config and r["backend"] == "dynamiccl":
                yield r


def trial_verdicts(events: list) -> list:
    """(challenger, verdict) per trial in a state's recent events: an opening ("tie trial:
    default -> hd") and the event after it (its verdict; "running" when none came yet)."""
    out = []
    for i, e in enumerate(events):
        head, _, pair = e.partition(": ")
        if head.endswith(" trial") and " -> " in pair:
            verdict = events[i + 1] if i + 1 < len(events) else "running"
            out.append((pair.split(" -> ")[1], verdict))
    return out


def census(path: str, config: str, size_bin: str, arm: str) -> dict:
    row = {"runs": 0, "adopted": 0, "trialled": 0, "arm_adopted": 0, "few": 0, "ratios": [],
           "steps_on_arm": [], "steps_else": []}
    for r in step_aware_runs(path, config):
        states = [s for s in r.get("arms", []) if s["size_bin"] == size_bin]
        if not states:  # recorded since da3f2a4
            continue
        arms = {a["name"]: a for a in states[0]["arms"]}
        events = [e for s in r.get("step_trials", []) if s["size_bin"] == size_bin
                  for e in s["trials"]]
        trials = trial_verdicts(events)
        mine = [verdict for challenger, verdict in trials if challenger == arm]
        row["runs"] += 1
        ends_on = [s["incumbent"] for s in r["learned"] if s["size"] == size_bin]
        row["steps_on_arm" if ends_on == [arm] else "steps_else"].append(r["median_step_ms"])
        row["adopted"] += any(v.startswith("adopted") for _, v in trials)
        row["trialled"] += bool(mine)
        row["arm_adopted"] += any(v.startswith("adopted") for v in mine)
        a, d = arms.get(arm, {}), arms["default"]
        row["few"] += a.get("samples", 0) <= FEW_COSTS
        key = "center_us" if "center_us" in d else "median_us"  # older records: median only
        if not mine and a.get(key) and d[key]:
            row["ratios"].append(a[key] / d[key])
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="+")
    p.add_argument("--config", default="example_defaults")
    p.add_argument("--size-bin", default=">=512KiB")
    p.add_argument("--arm", default="hd")
    a = p.parse_args()
    print(f"| record | runs | an arm adopted by a step trial | {a.arm} trialled | {a.arm} adopted "
          f"| {a.arm} with <= {FEW_COSTS} costs | {a.arm} / default per call, not trialled "
          f"| step ending on {a.arm}, median ms | step ending elsewhere |")
    print("|---" * 9 + "|")
    total = None
    for folder in a.folders:
        for path in sorted(glob.glob(os.path.join(folder, "**", "e2e.jsonl"), recursive=True)):
            row = census(path, a.config, a.size_bin, a.arm)
            if not row["runs"]:
                continue
            total = row if total is None else {k: total[k] + row[k] for k in row}
            print(f"| {os.path.dirname(path)} | " + format_row(row))
    if total:
        print("| all | " + format_row(total))


def format_row(row: dict) -> str:
    ratios = ", ".join(f"{x:.2f}" for x in sorted(row["ratios"])) or "-"
    steps = [f"{statistics.median(v):.1f} ({len(v)})" if v else "-"
             for v in (row["steps_on_arm"], row["steps_else"])]
    return (f"{row['runs']} | {row['adopted']} | {row['trialled']} | {row['arm_adopted']} | "
            f"{row['few']} | {ratios} | {steps[0]} | {steps[1]} |")


if __name__ == "__main__":
    main()
