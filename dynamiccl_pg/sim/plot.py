"""Cost per step of NCCL's default, the learner and the oracle, with congestion windows."""

from __future__ import annotations

from typing import Any

__all__ = ["plot_summary"]


def _smooth(values: list[float], window: int) -> list[float]:
    if window <= 1:
        return list(values)
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def plot_summary(summary: dict[str, Any], path: str) -> None:
    """Write a PNG of collective time per step (ms) for one scenario summary."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = summary["series"]
    steps = len(series["default_us"])
    window = max(1, steps // 150)  # a trailing mean keeps noise from hiding the curves
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=110)
    curves = {}
    for key, label, style in (("default_us", "NCCL default", dict(color="#d62728", lw=1.4)),
                              ("learned_us", "learned", dict(color="#1f77b4", lw=1.4)),
                              ("oracle_us", "oracle", dict(color="#2ca02c", lw=1.2, ls="--"))):
        ys = [v / 1e3 for v in _smooth(series[key], window)]
        curves[key] = ys
        ax.plot(range(steps), ys, label=label, **style)
    values = [v for ys in curves.values() for v in ys if v > 0]
    # A probe of a hopeless arm can cost orders of magnitude more than a step: log scale then.
    log = bool(values) and max(values) > 20 * min(values)
    for i, c in enumerate(summary["congestion"]):
        lo, hi = c["from_step"], min(c["to_step"], steps)
        ax.axvspan(lo, hi, color="#ff7f0e", alpha=0.15,
                   label="congestion" if i == 0 else None)
        ax.text(lo, 1.0, f" {c['link']} bw x{c['bw_factor']:g}", transform=ax.get_xaxis_transform(),
                va="top", ha="left", fontsize=8, color="#a0522d")
    ax.set_xlabel("step")
    ax.set_ylabel("collective time per step (ms)" + (f", mean of {window}" if window > 1 else ""))
    speed = summary.get("speedup_vs_default")
    gap = summary.get("gap_to_oracle")
    title = f"{summary['name']}: speedup {speed:.3f}x" if speed else summary["name"]
    if gap is not None:
        title += f", gap to oracle after convergence {100 * gap:+.2f}%"
    ax.set_title(title, fontsize=10)
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
