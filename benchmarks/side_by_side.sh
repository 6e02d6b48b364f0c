#!/usr/bin/env bash
# This checkout beside another built checkout (an earlier commit's `git worktree`), alternated:
# the tiny all-reduce (torchrun, 4 ranks) and the scale probe, then the main job (step-aware and
# per-call learners and gloo, benchmarks/step_aware_cpu.py --baseline). Raw outputs go to OUT;
# the WAN end to end is benchmarks/network/run.sh run in each checkout (it needs root).
#
#   benchmarks/side_by_side.sh BASELINE_CHECKOUT OUT [REPEATS]
#
# Both checkouts must be built for the same environment (scripts/env.sh in each).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE="$(cd "$1" && pwd)"
OUT="$2"
REPEATS="${3:-4}"
mkdir -p "$OUT"

tiny() {  # checkout, label, run
  (cd "$1" && PYTHONPATH="$1" torchrun --standalone --nproc-per-node=4 \
    benchmarks/tiny_allreduce.py --rounds 60 >"$OUT/tiny-$2-$3.txt" 2>&1) ||
    echo "[side-by-side] tiny all-reduce failed in $1 (see $OUT/tiny-$2-$3.txt)" >&2
}

for r in $(seq 1 "$REPEATS"); do  # base, new, new, base, ...: drift hits both alike
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for which in $order; do
    if [ "$which" = base ]; then tiny "$BASE" base "$r"; else tiny "$ROOT" new "$r"; fi
  done
done
for which in base new; do
  dir="$ROOT"; [ "$which" = base ] && dir="$BASE"
  (cd "$ROOT" && PYTHONPATH="$dir" python benchmarks/scale_probe.py --ranks 4 8 16 \
    --repeats 2 >"$OUT/scale-$which.md" 2>&1)
done
(cd "$ROOT" && PYTHONPATH="$ROOT" python benchmarks/step_aware_cpu.py \
  --out "$OUT/main_job.md" --repeats "$REPEATS" --baseline "$BASE")
echo "[side-by-side] outputs in $OUT"
