"""The learned prior's fleet experiment: does a model trained on a cluster's past jobs make its
next jobs learn faster, without making them worse?

For each cluster (one whose truth departs systematically from NCCL's model, one where the model
is right): simulate the training jobs, write their learned policies (the save_policy format, as
real jobs write them), train a prior on them with `python -m dynamiccl_pg prior train`, then run
new jobs (other sizes, group shapes and workloads) twice, with the analytic prior and with the
learned one, on the same seeds. Reported per job: probes until each state first converged and in
all (after convergence: runner-up and rollback checks), median calls for a state to converge,
exploration regret (the whole run's collective time over the oracle's) and the gap to the oracle
after convergence.

    python benchmarks/sim/prior_fleet.py --out benchmarks/sim/prior_fleet

writes prior_fleet.md and prior_fleet.json there (the models and policies go to a temporary
folder unless --keep is given).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

from dynamiccl_pg import _C
from dynamiccl_pg.sim.cli import run_one
from dynamiccl_pg.sim.scenario import load_scenario

TOPOLOGY = {"nodes": 4, "gpus_per_node": 8, "gpu": "hopper",
            "intra": {"type": "nvlink", "bw_GBps": 450},
            "inter": {"type": "ib", "bw_GBps": 50, "lat_us": 2}}
# How each cluster's real cost departs from NCCL's model ({}: the model is right).
CLUSTERS = {
    "departs": {"*/LL128": {"bw": 0.7}, "tree/*": {"bw": 0.8}, "ring/Simple": {"lat": 0.5}},
    "model_right": {},
}
MIB = 1 << 20


def _dp(nodes):
    return {"name": f"dp{nodes}", "nodes": nodes, "gpus_per_node": 8}


def train_jobs(count, seed=7):
    """The cluster's past jobs, what the prior is trained on: DDP, FSDP2, tensor-parallel and
    plain all-reduce jobs of random sizes on 1, 2 or 4 nodes (never the new jobs' sizes and
    shapes together)."""
    rng = random.Random(seed)
    jobs = {}
    for i in range(count):
        kind, nodes = rng.choice(("ddp", "fsdp", "tp", "call")), rng.choice((1, 2, 4))
        size = 1 << rng.randint(10, 27)
        if kind == "ddp":
            wl = [{"kind": "ddp", "layers": 32, "layer_bytes": max(size, MIB), "group": _dp(nodes)}]
        elif kind == "fsdp":
            wl = [{"kind": "fsdp", "layers": 16, "layer_bytes": max(size, MIB),
                   "group": _dp(nodes)}]
        elif kind == "tp":
            wl = [{"kind": "tp", "layers": 8, "activation_bytes": size}]
        else:
            wl = [{"role": "default", "op": "allreduce", "bytes": max(size >> k, 4), "per_step": 2,
                   "group": _dp(nodes)} for k in (0, 6, 12)]
        jobs[f"train{i:02d}_{kind}_{nodes}n"] = wl
    return jobs
# New jobs: other sizes, group shapes and workloads.
TEST_JOBS = {
    "fsdp_24m_3n": [{"kind": "fsdp", "layers": 24, "layer_bytes": "24MiB", "group": _dp(3)}],
    "ddp_8m_4n": [{"kind": "ddp", "layers": 48, "layer_bytes": "8MiB", "group": _dp(4)}],
    "ddp_64m_2n": [{"kind": "ddp", "layers": 16, "layer_bytes": "64MiB", "group": _dp(2)}],
    "tp_4m": [{"kind": "tp", "layers": 16, "activation_bytes": "4MiB"}],
    "mixed_3n": [{"role": "default", "op": "allreduce", "bytes": b, "per_step": 2,
                  "group": _dp(3)} for b in (256, 16384, MIB, 4 * MIB)],
}


def scenario(name, cluster, workload, steps, seed):
    return {"name": name, "seed": seed, "steps": steps, "topology": TOPOLOGY,
            "truth": CLUSTERS[cluster], "noise_sigma": 0.05, "workload": workload}


def run_job(folder, sc_dict, prior=None, policy_out=None):
    path = os.path.join(folder, sc_dict["name"] + ".json")
    with open(path, "w") as f:
        json.dump(sc_dict, f)
    s = run_one(load_scenario(path), prior, policy_out)
    # Probes a state spent before it first converged (after it: runner-up and rollback checks).
    to_converge = sum(st["totals"]["probes"] - st["after_convergence"]["probes"]
                      for st in s["state_detail"])
    return {"probes": round(s["probe_fraction"] * s["calls"]), "probes_to_converge": to_converge,
            "calls_to_converge": s["calls_to_converge"],
            "regret": s["learned_us"] / s["oracle_us"] - 1,
            "gap": s["gap_to_oracle"], "states": s["states_learnable"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for prior_fleet.md and .json")
    p.add_argument("--train-steps", type=int, default=400)
    p.add_argument("--test-steps", type=int, default=400)
    p.add_argument("--epochs", type=int, default=400)
    p.add_argument("--train-jobs", type=int, default=40, help="past jobs per cluster")
    p.add_argument("--keep", metavar="DIR", help="keep policies and models here")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    work = args.keep or tempfile.mkdtemp(prefix="prior-fleet-")
    results = {}
    for cluster in CLUSTERS:
        folder = os.path.join(work, cluster)
        policies = os.path.join(folder, "policies")
        os.makedirs(policies, exist_ok=True)
        for i, (name, wl) in enumerate(train_jobs(args.train_jobs).items()):
            run_job(folder, scenario(name, cluster, wl, args.train_steps, 100 + i),
                    policy_out=policies)
        model_path = os.path.join(folder, "prior.pt")
        subprocess.run([sys.executable, "-m", "dynamiccl_pg", "prior", "train", "--data",
                        policies, "--out", model_path, "--epochs", str(args.epochs)],
                       check=True, stdout=subprocess.DEVNULL)
        model = _C.PriorModel(model_path)
        rows = {}
        for i, (name, wl) in enumerate(TEST_JOBS.items()):
            sc = scenario(name, cluster, wl, args.test_steps, 200 + i)
            rows[name] = {"analytic": run_job(folder, sc), "learned": run_job(folder, sc, model)}
        results[cluster] = rows
    command = "python benchmarks/sim/prior_fleet.py " + " ".join(argv or sys.argv[1:])
    with open(os.path.join(args.out, "prior_fleet.json"), "w") as f:
        json.dump({"command": command, "clusters": CLUSTERS,
                   "train_jobs": list(train_jobs(args.train_jobs)),
                   "results": results}, f, indent=1)
    md = report(results, command)
    with open(os.path.join(args.out, "prior_fleet.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


def report(results, command) -> str:
    lines = [f"Command: `{command}`", ""]
    for cluster, rows in results.items():
        lines += [f"### Cluster `{cluster}`: truth {json.dumps(CLUSTERS[cluster]) or 'NCCL model'}",
                  "", "| job | states | probes to converge analytic / learned | probes in all "
                  "analytic / learned | calls to converge (median) analytic / learned | regret "
                  "analytic / learned | gap after conv. analytic / learned |",
                  "|---|---|---|---|---|---|---|"]
        for name, r in rows.items():
            a, b = r["analytic"], r["learned"]
            lines.append(f"| {name} | {a['states']} | {a['probes_to_converge']} / "
                         f"{b['probes_to_converge']} | {a['probes']} / {b['probes']} | "
                         f"{a['calls_to_converge']:.0f} / {b['calls_to_converge']:.0f} | "
                         f"{100 * a['regret']:+.2f}% / {100 * b['regret']:+.2f}% | "
                         f"{100 * a['gap']:+.2f}% / {100 * b['gap']:+.2f}% |")
        lines.append("")
        for key, what in (("probes_to_converge", "Probes to converge"),
                          ("probes", "Probes in all")):
            pa = sum(r["analytic"][key] for r in rows.values())
            pb = sum(r["learned"][key] for r in rows.values())
            med = statistics.median(r["analytic"][key] / max(r["learned"][key], 1)
                                    for r in rows.values())
            lines.append(f"{what} over all new jobs: {pa} analytic, {pb} learned "
                         f"({pa / max(pb, 1):.2f}x fewer; median per job {med:.2f}x).")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
