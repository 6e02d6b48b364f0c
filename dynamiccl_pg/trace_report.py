"""``python -m dynamiccl_pg report TRACE_PREFIX --out DIR``: what a job learned, as a page to look
at. Reads the JSONL traces every rank wrote (``DYNAMICCL_TRACE=TRACE_PREFIX``) and writes
``DIR/index.html`` with PNG plots beside it: a one-page summary of the job first, then per state
(group, engine, role, op, size bin) the cost of every call over time coloured by arm, probes
marked, the incumbent's switches and the points where probing resumed after a quiet stretch (a
CUSUM re-open or a new candidate), the default's cost as the baseline, and a table of what was
gained per role, op and size.

A call's cost is the slowest rank's local duration (what the job waits for); the default's cost is
the median of the calls that ran the default arm in that state.
"""

from __future__ import annotations

import argparse
import glob
import html
import json
import os
import statistics
from collections import defaultdict
from typing import Dict, List

from . import _C
from .telemetry import size_label

# Probing "resumes" when a probe follows at least this many calls without one.
QUIET_CALLS = 64
MAX_PLOTS = 16  # the states that took the most time
MIN_CALLS = 8   # states with fewer calls (one-off set-up calls) are counted, not shown


def load(prefix: str) -> List[dict]:
    """One record per call, joined across ranks on (group, seq): the cost is the max duration."""
    paths = sorted(glob.glob(f"{prefix}.rank*.jsonl"))
    if not paths:
        raise SystemExit(f"report: no trace files {prefix}.rank*.jsonl (run with "
                         f"DYNAMICCL_TRACE={prefix})")
    calls: Dict[tuple, dict] = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                key = (r["group"], r["seq"], r["op"])
                c = calls.setdefault(key, dict(r, ranks=0, cost_us=0.0))
                c["ranks"] += 1
                c["cost_us"] = max(c["cost_us"], r["dur_us"] or 0.0)
    return sorted(calls.values(), key=lambda c: (c["group"], c["seq"]))


def _arm_name(engine: str, op: str, arm: int) -> str:
    names = _C.arm_names(getattr(_C.Engine, engine), op) if hasattr(_C.Engine, engine) else []
    return names[arm] if 0 <= arm < len(names) else f"arm{arm}"


def states_of(calls: List[dict]) -> Dict[tuple, List[dict]]:
    out = defaultdict(list)
    for c in calls:
        if c.get("learned"):
            out[(c["group"], c["engine"], c["role"], c["op"], _C.size_bin(c["bytes"]))].append(c)
    return dict(out)


def analyse(calls: List[dict]) -> dict:
    """Per state: arms, cost over time, switches, probing resumed, default vs final cost."""
    result = {}
    for key, cs in states_of(calls).items():
        _, engine, _, op, _ = key
        default = [c["cost_us"] for c in cs if c["arm"] == 0 and c["cost_us"] > 0]
        incumbent, switches, resumed, since_probe = None, [], [], 0
        for i, c in enumerate(cs):
            if c["probe"]:
                if since_probe >= QUIET_CALLS and i > QUIET_CALLS:
                    resumed.append(i)
                since_probe = 0
                continue
            since_probe += 1
            if c["arm"] != incumbent:
                if incumbent is not None:
                    switches.append((i, _arm_name(engine, op, c["arm"])))
                incumbent = c["arm"]
        tail = [c["cost_us"] for c in cs[len(cs) // 2:] if not c["probe"] and c["cost_us"] > 0]
        probes = [c for c in cs if c["probe"]]
        d = statistics.median(default) if default else None
        result[key] = {
            "calls": cs, "bytes": sum(c["bytes"] for c in cs),
            "time_us": sum(c["cost_us"] for c in cs),
            "final": _arm_name(engine, op, incumbent) if incumbent is not None else "-",
            "default_us": d, "final_us": statistics.median(tail) if tail else None,
            "probes": len(probes),
            "probe_extra_us": sum(c["cost_us"] - d for c in probes) if d else None,
            "switches": switches, "resumed": resumed,
        }
    return result


def _plot(key, s, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    group, engine, role, op, size_bin = key
    fig, ax = plt.subplots(figsize=(10, 3.2))
    by_arm = defaultdict(lambda: ([], [], [], []))
    for i, c in enumerate(s["calls"]):
        xs, ys, pxs, pys = by_arm[_arm_name(engine, op, c["arm"])]
        (pxs if c["probe"] else xs).append(i)
        (pys if c["probe"] else ys).append(max(c["cost_us"], 1e-3))
    for n, (arm, (xs, ys, pxs, pys)) in enumerate(sorted(by_arm.items())):
        colour = f"C{n % 10}"
        ax.scatter(xs, ys, s=4, color=colour, label=arm)
        ax.scatter(pxs, pys, s=28, color=colour, marker="x")
    if s["default_us"]:
        ax.axhline(s["default_us"], color="black", lw=0.8, ls=":", label="default (median)")
    for i, arm in s["switches"]:
        ax.axvline(i, color="red", lw=0.8)
        ax.annotate(f"-> {arm}", (i, 1), xycoords=("data", "axes fraction"), fontsize=7,
                    color="red", va="top")
    for i in s["resumed"]:
        ax.axvline(i, color="orange", lw=0.8, ls="--")
    ax.set_yscale("log")
    ax.set_xlabel("call of this state (x: probe; red: switch; orange dashed: probing resumed)")
    ax.set_ylabel("cost per call (µs, slowest rank)")
    ax.set_title(f"group {group} · {engine} · {role} · {op} · >= {size_label(size_bin)}",
                 fontsize=9)
    ax.legend(fontsize=7, markerscale=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _us(x) -> str:
    return "-" if x is None else f"{x:,.1f}"


def write(prefix: str, out: str) -> str:
    """Writes out/index.html and its PNGs; returns the page's path."""
    calls = load(prefix)
    states = analyse(calls)
    os.makedirs(out, exist_ok=True)
    total_bytes = sum(c["bytes"] for c in calls) or 1
    learned_bytes = sum(s["bytes"] for s in states.values())
    time_us = sum(c["cost_us"] for c in calls)
    saved = sum((s["default_us"] - s["final_us"]) * len(s["calls"]) for s in states.values()
                if s["default_us"] and s["final_us"])
    probe_cost = sum(s["probe_extra_us"] or 0 for s in states.values())
    ranks = max((c["ranks"] for c in calls), default=0)
    e = html.escape
    rows, figures = [], []
    ordered = sorted(((k, s) for k, s in states.items() if len(s["calls"]) >= MIN_CALLS),
                     key=lambda kv: -kv[1]["time_us"])
    for n, (key, s) in enumerate(ordered):
        group, engine, role, op, size_bin = key
        gain = (f"{s['default_us'] / s['final_us']:.2f}x" if s["default_us"] and s["final_us"]
                else "-")
        rows.append(f"<tr><td>{e(str(group))}</td><td>{engine}</td><td>{role}</td><td>{op}</td>"
                    f"<td>&ge;{size_label(size_bin)}</td><td>{len(s['calls'])}</td><td>{e(s['final'])}</td>"
                    f"<td>{_us(s['default_us'])}</td><td>{_us(s['final_us'])}</td><td>{gain}</td>"
                    f"<td>{s['probes']}</td><td>{_us(s['probe_extra_us'])}</td>"
                    f"<td>{len(s['switches'])}</td><td>{len(s['resumed'])}</td></tr>")
        if n < MAX_PLOTS:
            png = f"state{n}.png"
            _plot(key, s, os.path.join(out, png))
            figures.append(f'<h3>group {e(str(group))} · {engine} · {role} · {op} · '
                           f'&ge;{size_label(size_bin)}</h3>'
                           f'<img src="{png}" alt="cost per call of this state">')
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>DynamICCL report</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:auto}}td,th{{padding:2px 6px;
text-align:right}}table{{border-collapse:collapse}}tr:nth-child(even){{background:#f3f3f3}}</style>
</head><body><h1>What DynamICCL learned</h1>
<h2>Summary</h2><ul>
<li>trace: <code>{e(prefix)}</code>, {ranks} ranks, {len(calls):,} calls, {total_bytes:,} bytes</li>
<li>{len(states)} learned states ({len(states) - len(ordered)} with fewer than {MIN_CALLS} calls not
shown); bytes under a learned state: {learned_bytes / total_bytes:.1%}</li>
<li>time in collectives (slowest rank per call): {time_us / 1e3:,.1f} ms</li>
<li>estimated saving over the default (default median − final median, per call):
{saved / 1e3:,.1f} ms; probes cost {probe_cost / 1e3:,.1f} ms over the default (negative: the probes
were faster)</li></ul>
<h2>Per role, op and size</h2><table><tr><th>group</th><th>engine</th><th>role</th><th>op</th>
<th>size</th><th>calls</th><th>final arm</th><th>default µs</th><th>final µs</th><th>gain</th>
<th>probes</th><th>probe cost µs</th><th>switches</th><th>probing resumed</th></tr>
{''.join(rows)}</table>
<p>Costs: median per call, the slowest rank's local duration; "final" over the second half of the
state's calls, probes excluded. Plots: the {min(len(ordered), MAX_PLOTS)} states that took the most
time.</p>
<h2>States</h2>{''.join(figures)}</body></html>"""
    index = os.path.join(out, "index.html")
    with open(index, "w") as f:
        f.write(page)
    return index


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m dynamiccl_pg report`'s options."""
    p.description = __doc__
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("prefix", help="the DYNAMICCL_TRACE prefix the job ran with")
    p.add_argument("--out", required=True, help="folder for index.html and its PNGs")


def run(args: argparse.Namespace, _words=None, _parser=None) -> int:
    print(write(args.prefix, args.out))
    return 0
