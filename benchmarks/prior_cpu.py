"""The learned prior on CPU, real processes: train on the main job's policies at two model sizes,
then start a third size from the trained prior and compare it with a cold start (the analytic
prior): probes until each state first converged, probes in all (re-checks and re-opens after
convergence included) and the median step (second half).

    PYTHONPATH=. python benchmarks/prior_cpu.py --out benchmarks/results/prior_cpu.md

Each run is `examples/train_ddp.py` under torchrun (4 ranks by default) with the dynamiccl
backend; the cold and warm runs of the third size alternate, --repeats times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train_ddp_stats(ranks, steps, train_args, stats_json, env_extra=None, root=ROOT):
    """One `examples/train_ddp.py` run under torchrun with `train_args`: its median step (second
    half), and for dynamiccl its stats() with the probes and tuned states counted. `root`: the
    checkout (built) whose example and package run."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={ranks}", os.path.join(root, "examples", "train_ddp.py"),
           "--steps", str(steps), "--stats-json", stats_json, "--log-every", str(steps),
           *train_args]
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1", **(env_extra or {}))
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, cwd=root)
    with open(stats_json) as f:
        data = json.load(f)
    states = data["stats"]["states"]["cpu"] if data["stats"] else []
    return {"median_step_ms": data["median_step_ms"], "stats": data["stats"],
            "probes": sum(s["probes"] for s in states),
            "probes_to_converge": sum(s["probes_to_converge"] for s in states),
            "states": len([s for s in states if len(s["arms"]) > 1]),
            "frozen": len([s for s in states if s["frozen"]])}


def train_ddp(ranks, hidden, steps, stats_json, env_extra=None, save_policy=""):
    extra = ["--hidden", str(hidden)] + (["--save-policy", save_policy] if save_policy else [])
    return train_ddp_stats(ranks, steps, extra, stats_json, env_extra)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="Markdown file for the results")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--train-sizes", type=int, nargs=2, default=(128, 512), metavar="HIDDEN")
    p.add_argument("--test-size", type=int, default=256, metavar="HIDDEN")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="prior-cpu-")
    policies = os.path.join(work, "policies")
    os.makedirs(policies)
    for h in args.train_sizes:
        train_ddp(args.ranks, h, args.steps, os.path.join(work, f"train{h}.json"),
                  save_policy=os.path.join(policies, f"hidden{h}.json"))
    model = os.path.join(work, "prior.pt")
    subprocess.run([sys.executable, "-m", "dynamiccl_pg", "prior", "train", "--data", policies,
                    "--out", model, "--epochs", "400", "--no-progress"], check=True,
                   env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.DEVNULL)
    runs = {"cold": [], "prior": []}
    for r in range(args.repeats):
        for kind in (("cold", "prior") if r % 2 == 0 else ("prior", "cold")):
            env = {"DYNAMICCL_PRIOR": model} if kind == "prior" else {}
            runs[kind].append(train_ddp(args.ranks, args.test_size, args.steps,
                                        os.path.join(work, f"{kind}{r}.json"), env))
    command = "PYTHONPATH=. python benchmarks/prior_cpu.py " + " ".join(argv or sys.argv[1:])
    lines = [f"Command: `{command}`", "",
             f"Trained on `examples/train_ddp.py --hidden {args.train_sizes[0]}` and "
             f"`--hidden {args.train_sizes[1]}` ({args.ranks} ranks, {args.steps} steps each); "
             f"then `--hidden {args.test_size}`, cold (analytic prior) and from the trained "
             f"prior, alternating, {args.repeats} times.", "",
             "| run | probes to converge | probes in all | tuned states | frozen by a guard | "
             "median step (second half), ms |",
             "|---|---|---|---|---|---|"]
    for kind, rs in runs.items():
        for i, res in enumerate(rs):
            lines.append(f"| {kind} {i + 1} | {res['probes_to_converge']} | {res['probes']} | "
                         f"{res['states']} | {res['frozen']} | {res['median_step_ms']:.2f} |")
    med = {k: {key: statistics.median(r[key] for r in rs)
               for key in ("probes_to_converge", "probes", "median_step_ms")}
           for k, rs in runs.items()}
    cold, prior = med["cold"], med["prior"]

    def fewer(key):
        return (f"cold {cold[key]:.0f}, prior {prior[key]:.0f} "
                f"({cold[key] / max(prior[key], 1):.2f}x fewer)")

    lines += ["", f"Medians: probes to converge {fewer('probes_to_converge')}; probes in all "
              f"{fewer('probes')}; step cold {cold['median_step_ms']:.2f} ms, prior "
              f"{prior['median_step_ms']:.2f} ms (prior / cold "
              f"{prior['median_step_ms'] / cold['median_step_ms']:.3f}).", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
