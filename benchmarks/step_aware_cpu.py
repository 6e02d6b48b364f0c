"""The step-aware learner against the per-call learner and gloo on CPU, real processes: the main
job (`examples/train_ddp.py`, 4 ranks), learning from scratch, median step of the second half.

    PYTHONPATH=. python benchmarks/step_aware_cpu.py --out benchmarks/results/step_aware_cpu.md

step-aware: the job as shipped (DDP's bucket-hint hook: buckets but the last are overlapped and
judged by step trials). per-call: `--no-hook` (no bucket hints: every call is exposed and judged
by its own duration, as before step-aware tuning). The three run in rotating order, --repeats
times, so that drift on the machine spreads over all of them. With --baseline CHECKOUT (another
built checkout, e.g. a `git worktree` of an earlier commit), its step-aware and per-call jobs run
in the rotation too: a learner change judged side by side with the one it replaces. With
--ablate RULE[,RULE], this checkout's step-aware and per-call jobs also run with those learner
rules off (DYNAMICCL_TEST_ABLATE): what the rules buy on a real job.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from prior_cpu import ROOT, train_ddp_stats

MODES = {"gloo": ["--backend", "gloo"], "per-call": ["--no-hook"], "step-aware": []}
BASELINE = "baseline step-aware"
BASELINE_PER_CALL = "baseline per-call"
ATTEMPTS = 8


def learned(stats) -> str:
    """The all-reduce states: size bin, exposure, incumbent and the last step trial's verdict."""
    if not stats:
        return "-"
    out = []
    for s in stats["states"]["cpu"]:
        if s["op"] != "allreduce" or s["calls"] < 10:
            continue
        trial = s.get("step_trial")
        out.append(f"{s['size_bin']} {s['exposure']}: {s['incumbent']}" +
                   (f" (trial {trial['challenger']}: {trial['verdict']})" if trial else ""))
    return "; ".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="Markdown file for the results")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--baseline", metavar="CHECKOUT",
                   help="a built checkout whose step-aware and per-call jobs run beside "
                        "this one's")
    p.add_argument("--ablate", metavar="RULE[,RULE]",
                   help="also run this checkout's step-aware and per-call jobs with these "
                        "learner rules off")
    args = p.parse_args(argv)
    if args.baseline and not os.path.isfile(os.path.join(args.baseline, "examples",
                                                         "train_ddp.py")):
        p.error(f"--baseline {args.baseline}: not a checkout (no examples/train_ddp.py)")
    work = tempfile.mkdtemp(prefix="step-aware-cpu-")
    modes = {m: (a, ROOT, None) for m, a in MODES.items()}
    if args.baseline:
        for name, mode in ((BASELINE, "step-aware"), (BASELINE_PER_CALL, "per-call")):
            modes[name] = (MODES[mode], os.path.abspath(args.baseline), None)
    ablated = {}  # the ablated job's name -> the job it is compared with
    if args.ablate:
        from dynamiccl_pg.config import parse_ablated_rules
        parse_ablated_rules(args.ablate, "--ablate")
        for mode in ("step-aware", "per-call"):
            name = f"{mode} without {args.ablate}"
            modes[name] = (MODES[mode], ROOT, {"DYNAMICCL_TEST_ABLATE": args.ablate})
            ablated[name] = mode
    names = list(modes)
    runs = {m: [] for m in names}
    # A run that crashed (torch 2.15's gloo aborts at exit now and then: SIGABRT) is run again,
    # up to ATTEMPTS times, and said.
    failed = []
    for r in range(args.repeats):
        for m in names[r % len(names):] + names[:r % len(names)]:
            for attempt in range(ATTEMPTS):
                try:
                    train_args, root, env = modes[m]
                    runs[m].append(train_ddp_stats(args.ranks, args.steps, train_args,
                                                   os.path.join(work, f"{m}{r}.json"),
                                                   env_extra=env, root=root))
                    break
                except subprocess.CalledProcessError as e:
                    failed.append(f"{m} run {r + 1}: exit status {e.returncode}")
                    if attempt == ATTEMPTS - 1:
                        raise
    command = "PYTHONPATH=. python benchmarks/step_aware_cpu.py " + " ".join(argv or sys.argv[1:])
    lines = [f"Command: `{command}`", "",
             f"`examples/train_ddp.py`, {args.ranks} ranks, {args.steps} steps, its defaults; "
             f"the {len(names)} in rotating order, {args.repeats} times. Median step of the "
             "second half (rank 0)." +
             (f" Baseline: the step-aware and per-call jobs of {args.baseline}."
              if args.baseline else ""), "",
             "| run | " + " | ".join(f"{m}, ms" for m in names) + " | step-aware learned |" +
             (" baseline learned |" if args.baseline else ""),
             "|---|" + "---|" * len(names) + "---|" + ("---|" if args.baseline else "")]
    for i in range(args.repeats):
        lines.append(f"| {i + 1} | " + " | ".join(f"{runs[m][i]['median_step_ms']:.2f}"
                                                  for m in names) +
                     f" | {learned(runs['step-aware'][i]['stats'])} |" +
                     (f" {learned(runs[BASELINE][i]['stats'])} |" if args.baseline else ""))
    med = {m: statistics.median(x["median_step_ms"] for x in rs) for m, rs in runs.items()}
    spread = {m: (min(x["median_step_ms"] for x in rs), max(x["median_step_ms"] for x in rs))
              for m, rs in runs.items()}
    lines += ["", "Medians (range): " +
              ", ".join(f"{m} {v:.2f} ms ({spread[m][0]:.2f}-{spread[m][1]:.2f})"
                        for m, v in med.items()) +
              f"; step-aware / per-call {med['step-aware'] / med['per-call']:.3f}, "
              f"step-aware / gloo {med['step-aware'] / med['gloo']:.3f}, "
              f"per-call / gloo {med['per-call'] / med['gloo']:.3f}" +
              (f", step-aware / baseline {med['step-aware'] / med[BASELINE]:.3f}, "
               f"per-call / baseline per-call {med['per-call'] / med[BASELINE_PER_CALL]:.3f}"
               if args.baseline else "") +
              "".join(f", {name} / {mode} {med[name] / med[mode]:.3f}"
                      for name, mode in ablated.items()) + "."]
    if failed:
        lines += ["", "Runs that failed and were run again: " + "; ".join(failed) + "."]
    with open(args.out, "w") as f:
        f.write("# Step-aware vs per-call learner vs gloo: the main job on CPU\n\n" +
                "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
