"""What DynamICCL chose and why: stats(), decision_log(), the summary table, traces."""

from __future__ import annotations

import atexit
import json
import os
import sys
from typing import List, Optional

from . import _C
from . import groups as _groups
from .config import ENV_VARS

ENGINES = _C.Engine.__members__  # name -> engine, in the core's order


def stats(group=None) -> dict:
    """Per state of the group's learners: role, op, size bin, exposure, fused, incumbent, calls,
    probes, the step trial of an overlapped state, per-arm counts, mean/median cost and the
    prior it was ordered by (µs), alarms, frozen; plus the per-collective call summary and the
    NCCL plugin's counters. JSON-serialisable."""
    pg = _groups.backend_of(group)
    return {
        "group": pg.group_name_at_creation,
        "group_desc": pg.group_desc,
        "group_role": pg.group_role,
        "mode": pg.mode,
        # Learner rules switched off (DYNAMICCL_TEST_ABLATE, benchmarks only): normally none.
        "rules_off": list(pg.rules_off),
        # The engines the group's calls run on, per device: torch's name and class.
        "engines": {device: e for device, e in pg.inner_engines.items() if e},
        "prior": pg.prior_path or "analytic",  # what ordered and pruned the arms probed
        "learned_calls": pg.learned_calls,
        # Step boundaries: DDP's last bucket, or step(), or while neither comes each round's.
        "steps": pg.steps,
        "rounds_applied": pg.rounds_applied,
        # What the last round cost, as each engine's learner prices measuring (µs).
        "round_cost_us": {name: pg.round_cost_us(e) for name, e in ENGINES.items()},
        "epochs": {name: pg.epoch(e) for name, e in ENGINES.items()},
        "states": {name: pg.stats(e) for name, e in ENGINES.items()},
        "calls": pg.call_summary(),
        "nccl_plugin": dict(_C.nccl_counters(), tuning_active=pg.nccl_tuning_active),
        "nccl_topology": pg.nccl_topology,
        # The scenario file of the emulated NCCL, if NCCL is emulated (DYNAMICCL_EMULATE_NCCL).
        "nccl_emulated": pg.nccl_emulated,
    }


def decision_log(group=None) -> List[tuple]:
    """Per learned or forced call (oldest first, bounded by DYNAMICCL_DECISION_LOG):
    (seq, op, bytes, state_id, arm, epoch, engine, probe, forced). Identical on every rank."""
    return _groups.backend_of(group).decision_log()


def decision_hash(group=None) -> int:
    """A hash over every decision of the group so far: compare it across ranks."""
    return _groups.backend_of(group).decision_hash()


def size_label(bin_: int) -> str:
    """A size bin as people read it: its smallest byte count, e.g. 64KiB."""
    b = 1 << bin_
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024:
            return f"{b}{unit}"
        b //= 1024
    return f"{b}TiB"


_MIN_SHOWN_CALLS = 16  # learned states with fewer calls and no probes are left out of the summary


def format_summary(group=None) -> str:
    """The table the main job prints: per collective and size, calls and mean time; then per
    learned state, what was learned and how it compares with the engine default."""
    s = stats(group)
    engines = ", ".join(f"{device} on {e}" for device, e in s["engines"].items())
    lines = [f"dynamiccl summary: group {s['group']} ({s['group_desc']}, role {s['group_role']}), "
             f"mode {s['mode']}, {s['learned_calls']} learned calls, "
             f"{s['rounds_applied']} consensus rounds; {engines}"
             + (f"; learner rules off: {', '.join(s['rules_off'])}" if s["rules_off"] else ""),
             f"{'engine':<6} {'op':<15} {'size':>9} {'calls':>8} {'mean_us':>10}"]
    for row in sorted(s["calls"], key=lambda r: (r["engine"], r["op"], r["size_bin"])):
        mean = f"{row['mean_us']:.1f}" if row["mean_us"] >= 0 else "-"
        lines.append(f"{row['engine']:<6} {row['op']:<15} {'>=' + size_label(row['size_bin']):>9} "
                     f"{row['calls']:>8} {mean:>10}")
    for engine, all_states in s["states"].items():
        if not all_states:
            continue
        # One-off calls (set-up broadcasts, DDP's parameter check) never leave warm-up: skip them.
        states = [st for st in all_states if st["probes"] > 0 or st["calls"] >= _MIN_SHOWN_CALLS]
        lines.append("")
        if len(states) < len(all_states):
            lines.append(f"({len(all_states) - len(states)} {engine} states with fewer than "
                         f"{_MIN_SHOWN_CALLS} calls and no probes not shown)")
        if not states:
            continue
        lines.append(f"learned ({engine}): {'role':<8} {'op':<15} {'size':>9} {'exposure':<11} "
                     f"{'incumbent':<14} "
                     f"{'phase':<8} {'calls':>7} {'probes':>6} {'default_us':>10} "
                     f"{'chosen_us':>10} {'speedup':>8} {'budget_used':>11}")
        stale = False
        for st in sorted(states, key=lambda x: (x["role"], x["op"], x["size_bin"],
                                                x["exposure"], x["fused"])):
            arms = {a["name"]: a for a in st["arms"]}
            d, c = arms.get("default", {}), arms.get(st["incumbent"], {})
            # The learner's own yardstick: a winsorized mean of the current regime. A default
            # without costs since the last re-open (a focused re-open parked it) shows the last
            # centre it had, the one the ledger still reckons against, marked.
            dm, cm = d.get("center_us", 0.0), c.get("center_us", 0.0)
            stale_row = d.get("regime_samples", 0) == 0 and st["reference_us"] > 0
            if stale_row:
                dm, stale = st["reference_us"], True
            speed = f"{dm / cm:.2f}x" if dm > 0 and cm > 0 else "-"
            phase = "frozen" if st["frozen"] else st["phase"]
            # Do no harm: what learning cost over the default, as a share of what it may cost.
            used = (f"{max(st['extra_us'], 0.0) / st['budget_us']:.0%}" if st["budget_us"] > 0
                    else "-")
            lines.append(f"{'':<14}{st['role']:<8} {st['op']:<15} "
                         f"{'>=' + size_label(st['size_bin']):>9} "
                         f"{st['exposure'] + ('+f' if st['fused'] else ''):<11} "
                         f"{st['incumbent']:<14} {phase:<8} "
                         f"{st['calls']:>7} {st['probes']:>6} "
                         f"{f'{dm:.1f}' + ('*' if stale_row else ''):>10} {cm:>10.1f} {speed:>8} "
                         f"{used:>11}")
        if stale:
            lines.append(f"{'':<14}* the default's cost before the state's last re-open, "
                         "which did not measure it again")
        lines += [_last_step_trial(engine, st) for st in states if "step_trial" in st]
    return "\n".join(lines)


def _last_step_trial(engine: str, st: dict) -> str:
    """The state's last step trial: the arm tried, its verdict ("running" while it runs) and what
    it rests on (the step's mean change, challenger minus incumbent), and in which step the
    verdict came when the state still holds its event."""
    t = st["step_trial"]
    when = [e["step"] for e in st["events"]
            if e.get("pairs") == t["pairs"] and e.get("mean_delta_us") == t["mean_delta_us"]]
    return (f"last step trial ({engine}): {st['role']} {st['op']} >={size_label(st['size_bin'])} "
            f"{st['exposure']}: {t['challenger']}, {t['verdict']}"
            + (f" at step {when[-1]}" if when else "")
            + f" ({t['mean_delta_us']:+.0f} +- {t['stderr_us']:.0f} us a step, "
            f"{t['pairs']} pairs)")


# What the exit-time outputs need of destroyed groups, whose backends are freed: their trace
# records while DYNAMICCL_TRACE is set, their summary on rank 0 while DYNAMICCL_SUMMARY=1; else
# nothing.
_destroyed_traces: list = []  # (group name, trace records)
_destroyed_summaries: List[str] = []


def _trace_prefix() -> str:
    return os.environ.get("DYNAMICCL_TRACE", ENV_VARS["DYNAMICCL_TRACE"][0])


def _summary_wanted() -> bool:
    return os.environ.get("DYNAMICCL_SUMMARY") == "1" and _groups.process_rank() == 0


def _keep_for_exit(pg) -> None:
    if _trace_prefix():
        records = pg.trace_records()
        if records:
            _destroyed_traces.append((pg.group_name_at_creation, records))
    if _summary_wanted():
        _destroyed_summaries.append(format_summary(pg))


_groups.on_destroyed.append(_keep_for_exit)


def write_trace(prefix: str, rank: Optional[int] = None) -> List[str]:
    """Writes the per-call records of every dynamiccl group, live or destroyed (needs
    DYNAMICCL_TRACE set at group creation) as JSON lines and as a Chrome/Perfetto trace. Returns
    the files written. A call whose completion callback has not run yet (c10's Future wakes
    the waiter first) has ``dur_us`` null."""
    if rank is None:
        rank = _groups.process_rank()
    live = [(pg.group_name_at_creation, pg.trace_records()) for pg in _groups.backends()]
    records, events = [], []
    for group, group_records in _destroyed_traces + live:
        for (seq, op, nbytes, engine, role, exposure, arm, probe, learned, epoch, start,
             end) in group_records:
            rec = {"group": group, "seq": seq, "op": op, "bytes": nbytes, "engine": engine,
                   "role": role, "exposure": exposure, "arm": arm, "probe": probe,
                   "learned": learned,
                   "epoch": epoch, "start_us": start / 1e3,
                   "dur_us": (end - start) / 1e3 if end else None}
            records.append(rec)
            events.append({"name": f"{op} arm{arm}", "cat": engine, "ph": "X",
                           "ts": start / 1e3, "dur": rec["dur_us"] or 0, "pid": rank,
                           "tid": f"group {group}", "args": rec})
    jsonl, chrome = f"{prefix}.rank{rank}.jsonl", f"{prefix}.rank{rank}.trace.json"
    with open(jsonl, "w") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    with open(chrome, "w") as f:
        json.dump({"traceEvents": events}, f)
    return [jsonl, chrome]


@atexit.register
def _at_exit() -> None:
    live = _groups.backends()  # hands groups destroyed since the last look to _keep_for_exit
    prefix = _trace_prefix()
    if prefix and (live or _destroyed_traces):
        try:
            write_trace(prefix)
        except OSError as e:  # the folder was checked at start; it may have gone since
            print(f"dynamiccl: DYNAMICCL_TRACE={prefix!r}: the trace could not be written: {e}",
                  file=sys.stderr, flush=True)
    if _summary_wanted():
        for text in _destroyed_summaries + [format_summary(pg) for pg in live]:
            print(text, flush=True)
