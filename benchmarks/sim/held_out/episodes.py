"""Per-episode figures from the simulator's per-step series (benchmarks/sim/held_out/*.json).

For each congestion episode: collective time of NCCL's default, the learner and the oracle over
the episode's steps, the headroom (default / oracle), the share of it the learner captured
((default - learned) / (default - oracle); probes included) and learned / oracle - 1; the same
for the steps before the first episode and for the steps after each, up to the next episode or
the end of the run. Run from the repository root:

    python benchmarks/sim/held_out/episodes.py \
        benchmarks/sim/held_out benchmarks/sim/held_out/described
"""
import json
import pathlib
import sys


def window(series, lo, hi):
    return tuple(sum(series[k][lo:hi]) for k in ("default_us", "learned_us", "oracle_us"))


def row(label, d, learned, o):
    head = d / o
    cap = "-" if d - o <= 1e-9 * d else f"{100 * (d - learned) / (d - o):.1f}%"
    return (f"| {label} | {d / 1e3:.1f} | {learned / 1e3:.1f} | {o / 1e3:.1f} | {head:.3f}x "
            f"| {cap} | {100 * (learned / o - 1):+.2f}% |")


def main(dirs):
    for dir_ in dirs:
        print(f"\n`{dir_}`\n")
        print("| scenario, window | default ms | learned ms | oracle ms | headroom | captured "
              "| learned vs oracle |")
        print("|---|---|---|---|---|---|---|")
        for path in sorted(pathlib.Path(dir_).glob("*.json")):
            if path.name == "results.json":
                continue
            r = json.loads(path.read_text())
            s, eps = r["series"], sorted(r["congestion"], key=lambda e: e["from_step"])
            print(row(f"{r['name']}, before (steps 0-{eps[0]['from_step']})",
                      *window(s, 0, eps[0]["from_step"])))
            for i, e in enumerate(eps):
                lo, hi = e["from_step"], e["to_step"]
                nxt = eps[i + 1]["from_step"] if i + 1 < len(eps) else len(s["default_us"])
                print(row(f"{r['name']}, episode {i} ({e['link']}, steps {lo}-{hi})",
                          *window(s, lo, hi)))
                print(row(f"{r['name']}, after episode {i} (steps {hi}-{nxt})",
                          *window(s, hi, nxt)))


if __name__ == "__main__":
    main(sys.argv[1:] or ["benchmarks/sim/held_out", "benchmarks/sim/held_out/described"])
