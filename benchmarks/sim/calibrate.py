"""NCCL's cost model (the product's NCCL prior and the simulator's nominal model) against published
measurements no one on this project made: for each configuration, the model's bus bandwidth for
NCCL's default pick (and for the algorithm the source compares), next to the reported figure.

    python benchmarks/sim/calibrate.py [--out benchmarks/sim/calibration.md]

Bus bandwidth as nccl-tests defines it (doc/PERFORMANCE.md): algbw = bytes / time; busbw = algbw x
2(n-1)/n for all-reduce, x (n-1)/n for all-gather.
"""

from __future__ import annotations

import argparse
import math

from dynamiccl_pg import _C


def topo(nodes, gpus, gpu, intra_bw, inter_type="ib", inter_bw=50.0, nvswitch=True):
    return {"nodes": nodes, "gpus_per_node": gpus, "gpu": gpu, "cpu": "intel",
            "intra": {"type": "nvlink", "bw_GBps": intra_bw, "lat_us": 0.0},
            "inter": {"type": inter_type, "bw_GBps": inter_bw, "lat_us": 2.0},
            "nvswitch": nvswitch, "sharp": False, "channels": 0}


GIB = 1 << 30
# NVLink per GPU as NCCL's topology search counts it (links x per-link speed): the bandwidths
# the product assumes (nccl_model's assumed_bw_GBps).
H100_NVLINK = _C.assumed_bw_GBps("nvlink", "hopper")
A100_NVLINK = _C.assumed_bw_GBps("nvlink", "ampere")
# (name, source, topology, op, bytes, [(arm or "default", reported busbw GB/s)])
CONFIGS = [
    ("1 x 8 H100 SXM, all-reduce", "NVIDIA/nccl#1221 (NVLS on / off)",
     topo(1, 8, "hopper", H100_NVLINK), "allreduce", 8 * GIB,
     [("default", 430.0), ("ring/Simple", 330.0)]),
    ("1 x 8 H100 SXM, all-gather", "NVIDIA/nccl#1506 (NVLS vs Ring)",
     topo(1, 8, "hopper", H100_NVLINK), "allgather", 8 * GIB,
     [("nvls/Simple", 300.0), ("ring/Simple", 350.0)]),
    ("8 x 8 H100, 8 x 400G IB, all-reduce", "NVIDIA/nccl-tests#309, uccl-project/uccl#205",
     topo(8, 8, "hopper", H100_NVLINK, "ib", 50.0), "allreduce", 8 * GIB, [("default", 350.0)]),
    ("5 x 8 H100, 4 x 400G RoCE, all-reduce", "NVIDIA/nccl#1368 (Tree vs Ring)",
     topo(5, 8, "hopper", H100_NVLINK, "roce", 25.0), "allreduce", 8 * GIB,
     [("tree/Simple", 150.0), ("ring/Simple", 190.0)]),
    ("2 x 8 A100, 2 x 200G IB, all-reduce", "NVIDIA/nccl#837 (NCCL 2.9/2.10)",
     topo(2, 8, "ampere", A100_NVLINK, "ib", 6.25), "allreduce", 4 * GIB, [("default", 55.5)]),
]


def busbw(op: str, n: int, nbytes: int, us: float) -> float:
    factor = 2.0 * (n - 1) / n if op == "allreduce" else (n - 1) / n
    return nbytes / (us * 1e-6) / 1e9 * factor


def rows():
    for name, source, t, op, nbytes, points in CONFIGS:
        n = t["nodes"] * t["gpus_per_node"]
        model = _C.nccl_predict(t, op, nbytes)
        for arm, reported in points:
            key = model["default"] if arm == "default" else arm
            predicted = busbw(op, n, nbytes, model[key])
            yield (name, source, arm if arm != "default" else f"default ({key})", reported,
                   predicted, predicted / reported - 1.0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", help="write the table as Markdown here too")
    args = p.parse_args()
    lines = ["| configuration | source | arm | reported busbw GB/s | model busbw GB/s | error |",
             "|---|---|---|---|---|---|"]
    errors = []
    for name, source, arm, reported, predicted, err in rows():
        errors.append(abs(err))
        flag = " **>25%**" if abs(err) > 0.25 else ""
        lines.append(f"| {name} | {source} | {arm} | {reported:.0f} | {predicted:.0f} | "
                     f"{err:+.0%}{flag} |")
    lines.append(f"\nMedian absolute error: {sorted(errors)[len(errors) // 2]:.0%}; "
                 f"geometric mean of (1 + |error|): "
                 f"{math.exp(sum(math.log1p(e) for e in errors) / len(errors)) - 1:.0%}.")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write("# NCCL cost model vs published measurements\n\n"
                    "    python benchmarks/sim/calibrate.py --out benchmarks/sim/calibration.md\n\n"
                    + text + "\n")


if __name__ == "__main__":
    main()
