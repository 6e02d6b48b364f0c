"""Writes results.md and one plot per op (sweep_<op>.png) from what run.sh measured:
netcheck.jsonl (the emulated network), sweep.jsonl (every arm per op, size, profile, ranks),
e2e.jsonl (examples/train_ddp.py, dynamiccl against gloo) and forced.jsonl (the same training with
each all-reduce arm pinned: the step-time oracle).

A size's winner is the arm with the lowest median; when the engine default is within TIE of it
the size counts for the default (differences that small are inside this machine's noise).
"""

import argparse
import json
import math
import os
import platform
import statistics
from collections import defaultdict

TIE = 1.05
OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast")
PROFILES = ("lan", "wan")
STAGES = ("capacity", "netcheck", "sweep", "e2e", "forced")  # run.sh's, in its order


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def size_str(b: int) -> str:
    """Exact sizes as 4 B / 64 KiB; others as 529.1 KiB."""
    v = float(b)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024:
            return f"{v:g} {unit}" if v == int(v) else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def ms(us: float) -> str:
    v = us / 1e3
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def arm_median_ms(arm: dict) -> str:
    """An arm's median since its state's last re-open; '-' when it has none since (a focused
    re-open parks the arms it does not re-probe). Older records lack regime_samples."""
    return f"{arm['median_us'] / 1000:.1f}" if arm.get("regime_samples", 1) else "-"


def by_config(sweep):
    """{(op, profile, world): {bytes: {arm: row}}}"""
    out = defaultdict(lambda: defaultdict(dict))
    for r in sweep:
        out[(r["op"], r["profile"], r["world"])][r["bytes"]][r["arm"]] = r
    return out


def winner(arms: dict) -> tuple:
    """(winning arm, its speedup over default) for one size's {arm: row}."""
    best = min(arms, key=lambda a: arms[a]["median_us"])
    d = arms["default"]["median_us"]
    if d <= TIE * arms[best]["median_us"]:
        return "default", 1.0
    return best, d / arms[best]["median_us"]


def crossover_line(sizes: dict) -> str:
    """Consecutive sizes with the same winner, as 'arm lo–hi (speedup range)'."""
    runs = []
    for b in sorted(sizes):
        arm, speedup = winner(sizes[b])
        if runs and runs[-1][0] == arm:
            runs[-1][2] = b
            runs[-1][3].append(speedup)
        else:
            runs.append([arm, b, b, [speedup]])
    parts = []
    for arm, lo, hi, sp in runs:
        span = size_str(lo) if lo == hi else f"{size_str(lo)}–{size_str(hi)}"
        if arm == "default":
            parts.append(f"**default** {span}")
        else:
            lo_s, hi_s = min(sp), max(sp)
            ratio = f"{lo_s:.2f}x" if abs(hi_s - lo_s) < 0.01 else f"{lo_s:.2f}–{hi_s:.2f}x"
            parts.append(f"**{arm}** {span} ({ratio})")
    return "; ".join(parts)


def capacity_lines(cap):
    if not cap:
        return []
    lines = ["What the path itself can carry (one TCP stream for 5 s, 64-byte ping-pong), "
             "measured on an idle machine:", "",
             "| path | RTT (p10–p90) | bulk |", "|---|---|---|"]
    for r in cap:
        p = r["ping"]
        lines.append(f"| {r['path']} | {p['rtt_us_median']:.0f} µs ({p['rtt_us_p10']:.0f}–"
                     f"{p['rtt_us_p90']:.0f}) | {r['bulk']['gbit_per_s']:.2f} Gbit/s |")
    return lines + [""]


def network_section(net, cap):
    if not net and not cap:
        return []  # a run of the e2e or forced stage alone (--out elsewhere)
    lines = ["## The emulated network, measured", ""] + capacity_lines(cap) + [
             "TCP ping-pong of 64-byte messages (1000 round trips, median and p10–p90), one "
             "bulk TCP stream for 3 s, and a 256 KiB message sent on a new connection, then ten "
             "more on it (median), between ranks 0 and 1 of the cluster the sweep then ran on. "
             "First use of a connection: TCP's slow start opens its window as data flows, so a "
             "schedule's first call on connections nothing used yet pays round trips later "
             "calls do not; the CPU engine sends that much on its connections when a group is "
             "created (`CpuEngine::warm_connections`).",
             "",
             "| profile | ranks | target one-way | added by each delay line | measured RTT "
             "(p10–p90) | measured one-way (RTT/2) | rate (tbf) | measured bulk "
             "| 256 KiB: first on a connection / then |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in net:
        p, f = r["ping"], r.get("first_use")  # older records have no first_use
        first = f"{f['first_ms']:.1f} / {f['warm_ms_median']:.1f} ms" if f else "-"
        lines.append(
            f"| {r['profile']} | {r['world']} | {r['target_one_way_us']:g} µs | "
            f"{r['added_delay_us']} µs | {p['rtt_us_median']:.0f} µs ({p['rtt_us_p10']:.0f}–"
            f"{p['rtt_us_p90']:.0f}) | {p['rtt_us_median'] / 2:.0f} µs | {r['rate']} | "
            f"{r['bulk']['gbit_per_s']:.2f} Gbit/s | {first} |")
    if net:
        lines += ["", "The machine's own one-way latency through this path, with nothing added, "
                  f"was {net[0]['base_one_way_us']} µs (veth, bridge, a delay line copying in "
                  "user space, scheduling on 2 cores)."]
    return lines


def sweep_section(cfgs):
    if not cfgs:
        return []
    lines = ["## Crossovers: which arm wins, per size", "",
             f"Winner = lowest median; the default keeps a size unless an arm beats it by more "
             f"than {int((TIE - 1) * 100)}%. In parentheses: median time of the default / the "
             "winner's.", ""]
    for op in OPS:
        rows = [(p, w) for (o, p, w) in sorted(cfgs) if o == op]
        if not rows:
            continue
        lines += [f"### {op}", "", "| profile | ranks | winners by size |", "|---|---|---|"]
        for p, w in rows:
            lines.append(f"| {p} | {w} | {crossover_line(cfgs[(op, p, w)])} |")
        lines.append("")
    lines += ["## Median time per arm (ms)", "",
              "Median over the timed repetitions of one call, from the moment the last rank "
              "entered to the moment the last rank left (all ranks share this machine's clock); "
              "**bold** = fastest.", ""]
    for (op, p, w), sizes in sorted(cfgs.items()):
        arms = list(next(iter(sizes.values())).keys())
        lines += [f"#### {op}, {p}, {w} ranks", "",
                  "| size | reps | " + " | ".join(arms) + " | default / best |",
                  "|---" * (len(arms) + 3) + "|"]
        for b in sorted(sizes):
            row = sizes[b]
            best = min(row, key=lambda a: row[a]["median_us"])
            cells = [f"**{ms(row[a]['median_us'])}**" if a == best else ms(row[a]["median_us"])
                     for a in arms]
            reps = row[arms[0]]["reps"]
            lines.append(f"| {size_str(b)} | {reps} | " + " | ".join(cells) +
                         f" | {row['default']['median_us'] / row[best]['median_us']:.2f} |")
        lines.append("")
    return lines


def expected_for(cfgs, buckets, world):
    """Per bucket: the WAN sweep's winner at the nearest measured size and its speedup."""
    sizes = cfgs.get(("allreduce", "wan", world))
    if not sizes:
        return ""
    out = []
    for b in buckets:
        near = min(sizes, key=lambda s: abs(math.log2(s / b)))
        arm, sp = winner(sizes[near])
        out.append(f"{size_str(b)}: {arm} {sp:.2f}x (sweep at {size_str(near)})")
    return "; ".join(out)


def split_lines(runs):
    """Where each learner run's step went: its calls and the compute between them, per half."""
    traced = [r for r in runs if "compute_ms_second_half" in r.get("trace", {})]
    if not traced:
        return []  # recorded since the compute split was added to e2e_parse.py
    lines = ["Where the step went (from the call trace, steps without probes; medians of each half "
             "of the run): the call per bucket (what the learner charges it) and rank 0's compute "
             "from the last of a step's calls to complete to the next step's first call.", "",
             "| run | variant | step (ms) | call per bucket, 1st / 2nd half (ms) | "
             "compute, 1st / 2nd half (ms) |", "|---|---|---|---|---|"]
    for r in traced:
        t = r["trace"]
        calls = ", ".join(f"{size_str(int(b))}: {v:.1f} / {t['call_ms_second_half'][b]:.1f}"
                          for b, v in t["call_ms_first_half"].items()
                          if b in t["call_ms_second_half"])
        lines.append(f"| {r['run']} | {r['backend']} | {r['median_step_ms']:.1f} | {calls} | "
                     f"{t['compute_ms_first_half']:.1f} / {t['compute_ms_second_half']:.1f} |")
    return lines + [""]


def e2e_section(e2e, cfgs):
    if not e2e:
        return []
    lines = ["## End to end: examples/train_ddp.py, WAN profile, 4 ranks", "",
             "`examples/train_ddp.py` unmodified, back to back in the same emulated cluster "
             "(which goes first rotates between repetitions; dynamiccl learns from scratch every "
             "time): gloo; dynamiccl as shipped, step-aware (the DDP hook's bucket hints: buckets "
             "but the last overlapped, judged by step trials); and dynamiccl per call "
             "(`--no-hook`: every bucket exposed, judged by its own duration). Each prints the "
             "median step time of the second half of its steps. Speedup = gloo median / "
             "step-aware median. Learned arms and phases (step-aware runs) are "
             "from the summary the example prints (default and chosen µs: the learner's "
             "centre of each arm's cost in training, queueing behind other buckets included); "
             "from the call trace: the step from which every non-probe call ran the final arm, "
             "the probes after that step (runner-up re-checks) and the last probe.", ""]
    configs = []
    for r in e2e:
        if r["config"] not in configs:
            configs.append(r["config"])
    for name in configs:
        runs = [r for r in e2e if r["config"] == name]
        gloo = [r["median_step_ms"] for r in runs if r["backend"] == "gloo"]
        dcl = [r for r in runs if r["backend"] == "dynamiccl"]
        dmed = [r["median_step_ms"] for r in dcl]
        # Older records have no per-call runs: their column reads "-".
        pmed = [r["median_step_ms"] for r in runs if r["backend"] == "dynamiccl_per_call"]
        pmed += [None] * (len(dmed) - len(pmed))
        lines += [f"### {name}: `train_ddp.py {runs[0]['args']} --steps {runs[0]['steps']}`", ""]
        lines += ["| run | gloo step (ms) | per-call step (ms) | step-aware step (ms) | "
                  "speedup vs gloo | step-aware / per-call |", "|---|---|---|---|---|---|"]

        def row(label, g, p, d):
            per_call = f"{p:.1f} | " if p else "- | "
            ratio = f"{d / p:.3f}" if p else "-"
            speedup = f"{g / d:.2f}x" if g else "-"
            lines.append(f"| {label} | {f'{g:.1f}' if g else '-'} | {per_call}{d:.1f} | "
                         f"{speedup} | {ratio} |")

        # A run of some variants only (run.sh --variants) has no gloo column.
        gloo += [None] * (len(dmed) - len(gloo))
        for i, (g, p, d) in enumerate(zip(gloo, pmed, dmed)):
            row(i, g, p, d)
        if len(dmed) > 1:
            def median_of(v):
                return statistics.median(v) if all(v) else None
            row("median", median_of(gloo), median_of(pmed), statistics.median(dmed))
        lines.append("")
        replayed = {r["run"]: r["median_step_ms"] for r in runs
                    if r["backend"] == "dynamiccl_replay"}
        if replayed:  # run.sh --variants ...,dynamiccl_replay
            learned = {r["run"]: r["median_step_ms"] for r in dcl}
            ratios = [learned[k] / v for k, v in replayed.items() if k in learned]
            lines += ["Replayed (each step-aware run's policy loaded and run frozen, last in its "
                      "repetition): " + ", ".join(f"{v:.1f}" for v in replayed.values()) +
                      " ms; step-aware / replayed per run " +
                      ", ".join(f"{x:.3f}" for x in ratios) +
                      f" (median {statistics.median(ratios):.3f}): what learning its choices "
                      "cost the second half's median step, beside what the choices give.", ""]
        lines += split_lines(runs)
        tr = dcl[-1].get("trace") if dcl else None
        if tr:
            expected = expected_for(cfgs, tr["bucket_bytes"], 4)
            lines.append(f"Gradient buckets per step: {tr['allreduces_per_step']} "
                         f"({', '.join(size_str(b) for b in tr['bucket_bytes'])})."
                         + (f" The sweep predicts: {expected}." if expected else ""))
            lines.append("")
        lines += ["| run | size bin | learned arm | phase | calls | probes | default µs | "
                  "chosen µs | speedup | final arm from step | probes after | last probe |",
                  "|---" * 12 + "|"]
        for i, r in enumerate(dcl):
            states = {s["size_bin"]: s for s in r.get("trace", {}).get("states", [])}
            for st in r["learned"]:
                if st["op"] != "allreduce":
                    continue
                t = states.get(st["size"], {})
                lines.append(f"| {i} | {st['size']} | {st['incumbent']} | {st['phase']} | "
                             f"{st['calls']} | {st['probes']} | {st['default_us']:.0f}"
                             f"{'*' if st.get('default_stale') else ''} | "
                             f"{st['chosen_us']:.0f} | {st['speedup']} | "
                             f"{t.get('final_arm_from_step', '-')} | "
                             f"{t.get('probes_after', '-')} | {t.get('last_probe_step', '-')} |")
        lines.append("")
        arms = [(i, a) for i, r in enumerate(dcl) for a in r.get("arms", [])]
        if arms:  # recorded since da3f2a4
            lines += ["Each probed state's arms at the end (costs received, median ms since "
                      "the state's last re-open, - = none since; x = eliminated or parked):", "",
                      "| run | size bin | arms |", "|---|---|---|"]
            lines += [f"| {i} | {a['size_bin']} | " + ", ".join(
                f"{x['name']} {x['samples']}/{arm_median_ms(x)}"
                f"{' x' if x['eliminated'] else ''}" for x in a["arms"] if x["samples"]) + " |"
                for i, a in arms]
            lines.append("")
        trials = [(i, t) for i, r in enumerate(dcl) for t in r.get("step_trials", [])]
        if trials:  # older records have none
            lines += ["Step trials (the last events each state kept):", "",
                      "| run | size bin | exposure | trials |", "|---|---|---|---|"]
            lines += [f"| {i} | {t['size_bin']} | {t['exposure']} | {'; '.join(t['trials'])} |"
                      for i, t in trials]
            lines.append("")
    return lines


def forced_section(forced, e2e):
    """Per configuration: each pinned arm's step (runs, median, over gloo's median), the fastest
    (the oracle on this machine) and, from e2e.jsonl, where the learners stood."""
    if not forced:
        return []
    lines = ["## Every arm pinned: the step-time oracle", "",
             "The same training, each CPU all-reduce arm pinned on every rank in turn "
             "(`DYNAMICCL_FORCE=allreduce:ARM`, nothing learned for the gradient buckets), and "
             "plain gloo; which goes first rotates between repetitions. The oracle is the arm "
             "with the shortest median step. Call per bucket: what the learner charges a call "
             "(its duration, max over ranks; median of the second half's calls, then over the "
             "runs), from the call trace. The learners' medians come from e2e.jsonl: other "
             "runs, possibly another day, so compare them through their own gloo column.", ""]
    for name in dict.fromkeys(r["config"] for r in forced):
        runs = [r for r in forced if r["config"] == name]
        by_arm, calls = defaultdict(list), defaultdict(lambda: defaultdict(list))
        for r in runs:
            by_arm[r["backend"]].append(r["median_step_ms"])
            for b, v in r.get("trace", {}).get("call_ms_second_half", {}).items():
                calls[r["backend"]][int(b)].append(v)
        med = {arm: statistics.median(v) for arm, v in by_arm.items()}
        gloo = med.get("gloo")
        best = min((a for a in med if a != "gloo"), key=med.get)
        lines += [f"### {name}: `train_ddp.py {runs[0]['args']} --steps {runs[0]['steps']}`", "",
                  "| arm | step per run (ms) | median step (ms) | gloo / arm | "
                  "call per bucket (ms) |",
                  "|---|---|---|---|---|"]
        for arm, steps in by_arm.items():
            label = arm.removeprefix("forced:") + (" (oracle)" if arm == best else "")
            ratio = f"{gloo / med[arm]:.3f}" if gloo else "-"
            call = ", ".join(f"{size_str(b)}: {statistics.median(v):.1f}"
                             for b, v in sorted(calls[arm].items())) or "-"
            lines.append(f"| {label} | {', '.join(f'{v:.1f}' for v in steps)} | "
                         f"{med[arm]:.1f} | {ratio} | {call} |")
        learned = [r for r in e2e if r["config"] == name]
        if learned and gloo:
            e2e_med = {b: statistics.median(r["median_step_ms"] for r in learned
                                            if r["backend"] == b)
                       for b in dict.fromkeys(r["backend"] for r in learned)}
            e2e_gloo = e2e_med.get("gloo")
            parts = [f"{b} {v:.1f} ms ({e2e_gloo / v:.3f}x its gloo)"
                     for b, v in e2e_med.items() if b != "gloo" and e2e_gloo]
            lines += ["", f"Oracle: `{best.removeprefix('forced:')}`, {gloo / med[best]:.3f}x gloo "
                      f"here. In e2e.jsonl (gloo {e2e_gloo:.1f} ms): " + "; ".join(parts) + "."]
        lines.append("")
    return lines


def plot(cfgs, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for op in OPS:
        panels = [(p, w) for (o, p, w) in sorted(cfgs, key=lambda k: (PROFILES.index(k[1]), k[2]))
                  if o == op]
        if not panels:
            continue
        fig, axes = plt.subplots(2, len(panels), figsize=(4.2 * len(panels), 7.5),
                                 squeeze=False, sharex=True)
        for col, (p, w) in enumerate(panels):
            sizes = cfgs[(op, p, w)]
            xs = sorted(sizes)
            arms = list(sizes[xs[0]].keys())
            for arm in arms:
                ys = [sizes[b][arm]["median_us"] / 1e3 for b in xs]
                rel = [sizes[b][arm]["median_us"] / sizes[b]["default"]["median_us"] for b in xs]
                style = dict(color="black", linestyle="--", linewidth=2) if arm == "default" \
                    else dict(marker="o", markersize=3)
                axes[0][col].plot(xs, ys, label=arm, **style)
                axes[1][col].plot(xs, rel, label=arm, **style)
            axes[0][col].set_title(f"{op}: {p}, {w} ranks")
            axes[0][col].set_yscale("log")
            axes[0][col].set_ylabel("median time (ms)")
            axes[1][col].set_ylabel("time / default's")
            axes[1][col].set_xlabel("message size (bytes)")
            axes[1][col].axhline(1.0, color="grey", linewidth=0.5)
            for row in axes:
                row[col].set_xscale("log", base=2)
                row[col].grid(True, which="major", alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, f"sweep_{op}.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(os.path.basename(path))
    return written


def load_provenance(out_dir):
    """{stage: {"command", "elapsed_s", "quick"}} as run.sh recorded it (stages re-run alone
    replace only their own entries)."""
    path = os.path.join(out_dir, "provenance.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def provenance_lines(prov):
    if not prov:
        return ["- (no provenance.json: commands not recorded)"]
    by_run = defaultdict(list)  # one invocation of run.sh = one command and its elapsed time
    for stage, rec in prov.items():
        by_run[(rec["command"], rec.get("elapsed_s"), rec.get("quick", False))].append(stage)
    lines = []
    for (command, elapsed, quick), stages in sorted(by_run.items(), key=lambda kv: str(kv[0])):
        took = ("time not recorded" if elapsed is None
                else f"{elapsed // 60} min {elapsed % 60} s")
        # A stage run for some configurations only is recorded as "e2e (name,...)".
        stages.sort(key=lambda s: STAGES.index(s.split(" ")[0]))
        lines.append(f"- `{command}`{' (quick mode)' if quick else ''}: "
                     f"{', '.join(stages)} ({took})")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dir", required=True)
    a = p.parse_args()
    net = load(os.path.join(a.dir, "netcheck.jsonl"))
    sweep = load(os.path.join(a.dir, "sweep.jsonl"))
    e2e = load(os.path.join(a.dir, "e2e.jsonl"))
    forced = load(os.path.join(a.dir, "forced.jsonl"))
    cap = load(os.path.join(a.dir, "capacity.jsonl"))
    cfgs = by_config(sweep)
    pngs = plot(cfgs, a.dir) if cfgs else []
    lines = ["# CPU engine under emulated network conditions", "",
             f"Measured on a {os.cpu_count()}-core machine ({platform.machine()}, Linux "
             f"{platform.release()}), as root, by:", ""]
    lines += provenance_lines(load_provenance(a.dir))
    lines += ["", "How the cluster is emulated, and the limits of that: README.md in this folder.",
              ""]
    if pngs:
        lines += ["Plots (top: median time; bottom: time relative to the engine default, below 1 "
                  "= faster): " + ", ".join(f"[{n}]({n})" for n in pngs) + ".", ""]
    lines += network_section(net, cap) + [""] + e2e_section(e2e, cfgs)
    lines += forced_section(forced, e2e) + sweep_section(cfgs)
    with open(os.path.join(a.dir, "results.md"), "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")


if __name__ == "__main__":
    main()
