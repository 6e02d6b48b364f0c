#!/usr/bin/env bash
# The GPU proof in one command, for a machine with an NVIDIA GPU (one is enough): builds the
# project from source against the torch already installed there (or the project's own
# environment when there is none), runs the stages of gpu_proof.py, each in its own bounded
# process, and writes benchmarks/gpu/results.md.
#
#   benchmarks/gpu/run.sh                 all stages
#   benchmarks/gpu/run.sh ddp arm_sweep   some of them (see gpu_proof.py for the list)
#
#   PYTHON          the interpreter with torch (default: python3)
#   STAGE_TIMEOUT   seconds per stage (default 300); a stage past it is recorded as timed out
#   RANK_TIMEOUT    seconds a stage waits for its rank processes (default 240); a rank past it
#                   is killed and recorded as timed out (a way of stage c that hangs)
#   GPU_PROOF_RAW   folder for the stages' raw JSON results (default: a new temporary folder)
#   DYNAMICCL_BUILD the CMake build folder (default: build-gpu/ in the checkout)
#   CXX, CC         the compiler; it must link libstdc++ dynamically, as torch does (a toolchain
#                   that links it statically puts a second C++ runtime in the process: the module
#                   crashes at import). The distribution's g++ does.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/benchmarks/gpu"
PY="${PYTHON:-python3}"
STAGE_TIMEOUT="${STAGE_TIMEOUT:-300}"
BUILD="${DYNAMICCL_BUILD:-$ROOT/build-gpu}"

if "$PY" -c "import torch" 2>/dev/null; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v "$PY")" \
    -DDYNAMICCL_BUILD_TESTS=OFF -DDYNAMICCL_BUILD_BENCHMARKS=OFF >/dev/null || exit 1
  cmake --build "$BUILD" -j "$(nproc)" || exit 1
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  "$PY" -c "import dynamiccl_pg" || { echo "[gpu] the built module does not import; with a" \
    "compiler that links libstdc++ statically, build with the distribution's (CXX=/usr/bin/g++)" >&2; exit 1; }
else
  DYNAMICCL_BUILD="$BUILD" source "$ROOT/scripts/env.sh"
  PY=python
fi

OUT="${GPU_PROOF_RAW:-$(mktemp -d)}"
mkdir -p "$OUT"
"$PY" "$HERE/gpu_proof.py" preflight --out "$OUT/preflight.json" || exit 1
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(collectives ddp multi_rank arm_sweep learn_vs_nccl overlap)
for stage in "${stages[@]}"; do
  echo "[gpu] $stage (at most ${STAGE_TIMEOUT}s)"
  timeout -k 10 "$STAGE_TIMEOUT" "$PY" "$HERE/gpu_proof.py" "$stage" --out "$OUT/$stage.json" \
    --multi-rank "$OUT/multi_rank.json"
  rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "{\"stage\": \"$stage\", \"timed_out\": $STAGE_TIMEOUT}" >"$OUT/$stage.json"
done
"$PY" "$HERE/gpu_proof.py" report --dir "$OUT" --results "$HERE/results.md"
echo "[gpu] results: $HERE/results.md (raw stage results in $OUT)"
