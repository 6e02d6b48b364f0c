"""`python -m dynamiccl_pg sim --ablate RULE[,RULE]`: what the learner's named rules buy.

Every scenario runs with the learner's rules all on, then with the named rules off (``each``:
every rule off on its own, one run per rule), and each scenario's figures are printed side by
side: with, without, and the difference. The rules and what they do come from the C++ registry
(policy/rules.h, ``_C.learner_rules()``); switching them off is a test and benchmark setting,
never a setting of the backend.

Figures, in percent:
  captured   the oracle's headroom captured (collective time; scenarios with headroom)
  vs_default what the job paid against NCCL's default (its step where the scenario has compute,
             else collective time): negative saves, positive is a defaults-right loss
  step_share the step oracle's headroom captured (scenarios with compute and step headroom)
and calls_to_converge (median over the learnable states). Harm, in percentage points: a lower
captured or step_share, a higher vs_default.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["EACH", "rule_names", "parse_ablate", "figures", "harm", "run_ablation",
           "format_table"]

EACH = "each"
FIGURES = ("captured", "vs_default", "step_share", "calls_to_converge")
# Figures where a higher value is worse.
_HIGHER_WORSE = {"vs_default"}
# Headroom below this (relative) is no headroom: its share would be noise over nothing.
_MIN_HEADROOM = 1e-3


def rule_names() -> list[str]:
    from dynamiccl_pg import _C

    return [name for name, _ in _C.learner_rules()]


def parse_ablate(text: str) -> list[list[str]]:
    """The rule sets to switch off, one run each: `A,B` is one set, `each` every rule alone.
    Raises ValueError naming the value and listing the accepted names."""
    names = rule_names()
    if text.strip() == EACH:
        return [[n] for n in names]
    wanted = [w.strip() for w in text.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in names]
    if not wanted or unknown:
        bad = ", ".join(repr(w) for w in unknown) if unknown else repr(text)
        raise ValueError(f"--ablate {bad}: unknown learner rule (accepted: {EACH}, or a "
                         f"comma-separated list of: {', '.join(names)})")
    return [wanted]


def _share(default: float, learned: float, oracle: float) -> float | None:
    if default <= 0 or (default - oracle) / default < _MIN_HEADROOM:
        return None
    return 100.0 * (default - learned) / (default - oracle)


def figures(s: dict[str, Any]) -> dict[str, float | None]:
    """One scenario's ablation figures from its report.summarize() summary."""
    paid = s.get("step_time", s)
    step = s.get("step_time")
    return {
        "captured": _share(s["default_us"], s["learned_us"], s["oracle_us"]),
        "vs_default": 100.0 * (paid["learned_us"] / paid["default_us"] - 1.0)
        if paid["default_us"] > 0 else None,
        "step_share": _share(step["default_us"], step["learned_us"], step["oracle_us"])
        if step else None,
        "calls_to_converge": s["calls_to_converge"],
    }


def harm(with_: dict[str, Any], without: dict[str, Any]) -> tuple[float, str | None]:
    """The largest harm of a removal, in percentage points, and the figure it is on (0, None
    when nothing got worse)."""
    worst, on = 0.0, None
    for f in ("captured", "vs_default", "step_share"):
        a, b = with_.get(f), without.get(f)
        if a is None or b is None:
            continue
        h = (b - a) if f in _HIGHER_WORSE else (a - b)
        if h > worst:
            worst, on = h, f
    return worst, on


def _run_all(scenarios, rules_off: list[str], prior) -> dict[str, dict[str, Any]]:
    from dynamiccl_pg._C import sim as _sim

    from . import report

    out = {}
    for sc in scenarios:
        res = _sim.run(sc.to_spec(), prior, rules_off)
        out[sc.name] = figures(report.summarize(sc, res, 0.0))
    return out


def run_ablation(scenarios, sets: list[list[str]], prior=None) -> dict[str, Any]:
    """Runs every scenario with all rules on, then once per set with that set off."""
    base = _run_all(scenarios, [], prior)
    runs = []
    for off in sets:
        without = _run_all(scenarios, off, prior)
        rows = []
        for sc in scenarios:
            w, wo = base[sc.name], without[sc.name]
            h, f = harm(w, wo)
            rows.append({"scenario": sc.name, "with": w, "without": wo, "harm_pp": h,
                         "harm_figure": f})
        worst = max(rows, key=lambda r: r["harm_pp"])
        runs.append({"off": off, "scenarios": rows,
                     "largest_harm": {"pp": worst["harm_pp"], "scenario": worst["scenario"],
                                      "figure": worst["harm_figure"]}
                     if worst["harm_pp"] > 0 else None})
    return {"rules": dict(_rules()), "runs": runs}


def _rules():
    from dynamiccl_pg import _C

    return _C.learner_rules()


def _fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def format_table(result: dict[str, Any], markdown: bool = False) -> str:
    """Per rule set, per scenario: each figure with, without and the delta."""
    lines = []
    for run in result["runs"]:
        lh = run["largest_harm"]
        head = (f"rules off: {', '.join(run['off'])}; largest harm: "
                + (f"{lh['pp']:.2f} pp ({lh['scenario']}, {lh['figure']})" if lh else "none"))
        lines.append(("### " if markdown else "") + head)
        cols = ["scenario"] + [f"{f} {k}" for f in FIGURES for k in ("with", "without", "delta")]
        cols.append("harm pp")
        rows = []
        for r in run["scenarios"]:
            cells = [r["scenario"]]
            for f in FIGURES:
                a, b = r["with"][f], r["without"][f]
                d = None if a is None or b is None else b - a
                digits = 0 if f == "calls_to_converge" else 2
                cells += [_fmt(a, digits), _fmt(b, digits), _fmt(d, digits)]
            cells.append(_fmt(r["harm_pp"]))
            rows.append(cells)
        if markdown:
            lines.append("")
            lines.append("| " + " | ".join(cols) + " |")
            lines.append("|" + "---|" * len(cols))
            lines += ["| " + " | ".join(c) + " |" for c in rows]
        else:
            widths = [max(len(c[i]) for c in [cols] + rows) for i in range(len(cols))]
            lines.append("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
            lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        lines.append("")
    return "\n".join(lines)


def write(out: str, command: str, result: dict[str, Any]) -> None:
    """ablation.json and ablation.md under `out`."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "ablation.json"), "w", encoding="utf-8") as f:
        json.dump({"command": command, **result}, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "ablation.md"), "w", encoding="utf-8") as f:
        f.write(f"Command: `{command}`\n\n{format_table(result, markdown=True)}\n")
