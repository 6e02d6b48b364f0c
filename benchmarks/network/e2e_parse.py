"""Turns one examples/train_ddp.py run (rank 0's output, and for dynamiccl its call trace and
--stats-json file) into one JSON line: median step time, the learned-choices table it printed,
the gradient buckets, when learning settled, the step trials' verdicts, each probed arm's costs
and the consensus rounds (how many, and the price the learner read for the last one).

Settling, per learned state (all-reduce size bin): the step from which the exploited arm (the
one non-probe calls ran) never changed again, how many probes came after that step (the
converged budget's occasional runner-up re-checks), and the step of the last probe. A call's
step is its index among the all-reduces divided by the all-reduces per step (DDP issues one per
bucket per step).
"""

import argparse
import json
import math
import os
import re
import statistics

from dynamiccl_pg import _C
from dynamiccl_pg.telemetry import size_label  # a size bin as the summary prints it

STEP_RE = re.compile(r"^(\w+): (\d+) steps on (\d+) ranks in ([\d.]+)s; "
                     r"median step \(second half\) ([\d.]+) ms")
LEARNED_HEADER = "learned (cpu):"


def parse_log(path: str) -> dict:
    out = {"learned": []}
    in_table = False
    with open(path) as f:
        for line in f:
            m = STEP_RE.match(line.strip())
            if m:
                out.update(total_s=float(m.group(4)), median_step_ms=float(m.group(5)),
                           world=int(m.group(3)))
            if line.startswith(LEARNED_HEADER):
                in_table = True
                continue
            if in_table:
                cols = line.split()
                if len(cols) != 12:
                    in_table = False
                    continue
                (role, op, size, exposure, incumbent, phase, calls, probes, dflt, chosen,
                 speedup, budget_used) = cols
                out["learned"].append({
                    "role": role, "op": op, "size": size, "exposure": exposure,
                    "incumbent": incumbent,
                    "phase": phase, "calls": int(calls), "probes": int(probes),
                    # "*": the default's cost before the state's last re-open (the summary's
                    # footnote)
                    "default_us": float(dflt.rstrip("*")), "default_stale": dflt.endswith("*"),
                    "chosen_us": float(chosen), "speedup": speedup,
                    "budget_used": budget_used})
    return out


def read_allreduces(path: str) -> list:
    with open(path) as f:
        calls = [r for r in map(json.loads, f) if r["op"] == "allreduce" and r["group"] == "0"]
    return sorted(calls, key=lambda r: r["seq"])


def learner_costs(path: str, world: int, calls: list) -> list:
    """What the learner charges each CPU call: its duration, max over ranks (ms)."""
    ranks = [calls] + [read_allreduces(path.replace("rank0.", f"rank{r}."))
                       for r in range(1, world)]
    return [max(rk[i]["dur_us"] for rk in ranks) / 1000 for i in range(len(calls))]


def after_probe(calls: list, dur: list) -> dict:
    """The call right after each probe against the others: ranks that finish a probe first wait
    for the others in the next call."""
    after = [dur[i] for i in range(1, len(calls)) if calls[i - 1]["probe"]]
    others = [dur[i] for i in range(1, len(calls))
              if not calls[i]["probe"] and not calls[i - 1]["probe"]]
    typical = statistics.median(others) if others else None
    return {"calls_after_probes": len(after),
            "over_1.5x_other_calls": sum(d > 1.5 * typical for d in after) if typical else None,
            "max_ms": round(max(after), 1) if after else None,
            "other_calls_median_ms": round(typical, 1) if typical else None}


def call_costs(calls: list, dur: list, per_step: int) -> dict:
    """Per half of the run and bucket size, the median of that half's non-probe call costs: beside
    the median step, whether a faster call makes a faster step, and how far an arm drifts. And per
    half, over steps without probes, rank 0's compute: from the last of a step's all-reduces to
    complete (they may complete out of order) to the next step's first one starting (optimizer,
    forward, backward up to the first bucket), so that a step-time difference between runs can
    be put on the calls or on the compute beside them."""
    half = len(calls) // per_step // 2 * per_step
    out = {}
    for name, span in (("first_half", range(half)), ("second_half", range(half, len(calls)))):
        by_bytes = {}
        for i in span:
            if not calls[i]["probe"]:
                by_bytes.setdefault(calls[i]["bytes"], []).append(dur[i])
        out[f"call_ms_{name}"] = {str(b): round(statistics.median(d), 2)
                                  for b, d in sorted(by_bytes.items())}
        # A step's first call: counted from the end, since DDP's first step runs its initial
        # buckets (fewer) before it rebuilds them.
        gaps = [(calls[i]["start_us"] - max(c["start_us"] + c["dur_us"]
                                            for c in calls[i - per_step:i])) / 1e3
                for i in span if i >= per_step and (len(calls) - i) % per_step == 0
                and not any(c["probe"] for c in calls[i - per_step:i + per_step])]
        if gaps:
            out[f"compute_ms_{name}"] = round(statistics.median(gaps), 2)
    return out


def parse_trace(path: str, steps: int, world: int) -> dict:
    names = _C.arm_names(_C.Engine.cpu, "allreduce")
    calls = read_allreduces(path)
    per_step = max(1, round(len(calls) / steps))
    by_bin = {}
    for i, r in enumerate(calls):
        by_bin.setdefault(int(math.log2(max(1, r["bytes"]))), []).append((i // per_step + 1, r))
    states = []
    for b, rows in sorted(by_bin.items()):
        last_probe = max((s for s, r in rows if r["probe"]), default=0)
        exploited = [(s, r["arm"]) for s, r in rows if not r["probe"]]
        final_arm = exploited[-1][1] if exploited else rows[-1][1]["arm"]
        settled = 1
        for s, arm in exploited:
            if arm != final_arm:
                settled = s + 1
        states.append({"size_bin": f">={size_label(b)}", "calls": len(rows),
                       "probes": sum(1 for _, r in rows if r["probe"]),
                       "last_probe_step": last_probe, "final_arm": names[final_arm],
                       "final_arm_from_step": settled,
                       "probes_after": sum(1 for s, r in rows if r["probe"] and s >= settled)})
    bucket_bytes = sorted({r["bytes"] for r in calls[-per_step:]})
    dur = learner_costs(path, world, calls)
    return {"allreduces_per_step": per_step, "bucket_bytes": bucket_bytes, "states": states,
            "after_probe": after_probe(calls, dur), **call_costs(calls, dur, per_step)}


# What a state's events say about its step trials (the state keeps its last few events).
TRIAL_EVENTS = ("trial", "adopted", "rejected", "no effect", "stopped")


def trial_evidence(event: dict) -> str:
    """A step trial's verdict: its pairs and the step's mean change, challenger minus incumbent."""
    if "pairs" not in event:
        return ""
    return (f" ({event['pairs']} pairs, {event['mean_delta_us'] / 1000:+.2f} ± "
            f"{event['stderr_us'] / 1000:.2f} ms a step)")


def load_stats(path: str) -> dict | None:
    """The learner's stats() from a --stats-json file (None where the run wrote none)."""
    with open(path) as f:
        return json.load(f)["stats"]


def parse_stats(stats: dict | None) -> list:
    """Per all-reduce state: its step trials and verdicts, in order ("step trial: default -> rd",
    "rejected: longer steps", "adopted: shorter steps: default -> rd")."""
    out = []
    for s in stats["states"]["cpu"] if stats else []:
        trials = [e["what"] + (f": {e['from']} -> {e['to']}" if e["from"] != e["to"] else "") +
                  trial_evidence(e)
                  for e in s["events"] if any(word in e["what"] for word in TRIAL_EVENTS)]
        if s["op"] == "allreduce" and trials:
            out.append({"size_bin": f">={size_label(s['size_bin'])}", "exposure": s["exposure"],
                        "trials": trials})
    return out


def parse_arms(stats: dict | None) -> list:
    """Per all-reduce state that ran more than its warm-up: each arm's costs (all, and since the
    state's last re-open), median and the centre the learner compares arms by (current regime),
    and whether it was eliminated (why a state probes on: which arms are still alive at the end),
    and the state's recent events (switches, cross-checks, trials: "call what from->to")."""
    out = []
    for s in stats["states"]["cpu"] if stats else []:
        if s["op"] == "allreduce" and s["probes"] > 0:
            out.append({"size_bin": f">={size_label(s['size_bin'])}", "exposure": s["exposure"],
                        "arms": [{"name": a["name"], "samples": a["samples"],
                                  "regime_samples": a["regime_samples"],
                                  "median_us": round(a["median_us"], 1),
                                  "center_us": round(a["center_us"], 1),
                                  "eliminated": a["eliminated"]} for a in s["arms"]],
                        "events": [f"{e['call']} {e['what']} {e['from']}->{e['to']}" +
                                   trial_evidence(e) for e in s.get("events", [])]})
    return out


def parse_rounds(stats: dict | None) -> dict:
    """The group's consensus rounds: how many were applied, and the last one's price as the CPU
    learner reads it (its control all-reduce's duration, max over ranks:
    stats()["round_cost_us"])."""
    return {"applied": stats["rounds_applied"],
            "last_price_us": round(stats["round_cost_us"]["cpu"], 1)} if stats else {}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--log", required=True)
    p.add_argument("--trace", default="")
    p.add_argument("--stats", default="", help="the run's --stats-json file")
    p.add_argument("--config", required=True)
    p.add_argument("--args", default="")
    p.add_argument("--backend", required=True)
    p.add_argument("--run", type=int, default=0)
    p.add_argument("--steps", type=int, required=True)
    a = p.parse_args()
    rec = {"config": a.config, "args": a.args, "backend": a.backend, "run": a.run,
           "steps": a.steps}
    rec.update(parse_log(a.log))
    if "median_step_ms" not in rec:
        raise SystemExit(f"{a.log}: no 'median step' line; did the run fail?")
    traced = a.backend.startswith(("dynamiccl", "forced:"))
    if traced and a.trace and os.path.exists(a.trace):
        rec["trace"] = parse_trace(a.trace, a.steps, rec["world"])
    if a.backend.startswith("dynamiccl") and a.stats and os.path.exists(a.stats):
        stats = load_stats(a.stats)
        rec["step_trials"] = parse_stats(stats)
        rec["arms"] = parse_arms(stats)
        rec["rounds"] = parse_rounds(stats)
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
