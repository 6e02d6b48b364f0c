# Sourced by the other scripts: creates (once) and activates the Python environment, and builds
# the project incrementally. Idempotent: a second run reuses the environment and the build.
#
#   DYNAMICCL_VENV   where the virtual environment lives (default: ~/.cache/dynamiccl/venv, outside
#                    the checkout so clean clones reuse it)
#   DYNAMICCL_BUILD  the CMake build folder (default: build/ in the checkout)

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DYNAMICCL_VENV:-$HOME/.cache/dynamiccl/venv}"
BUILD="${DYNAMICCL_BUILD:-$ROOT/build}"

ensure_venv() {
  local stamp="$VENV/.dynamiccl-requirements"
  if [ ! -x "$VENV/bin/python" ]; then
    echo "[dynamiccl] creating the Python environment in $VENV"
    python3 -m venv "$VENV"
  fi
  # Reinstall only when requirements.txt changed (torch is several GB).
  if ! cmp -s "$ROOT/requirements.txt" "$stamp"; then
    echo "[dynamiccl] installing requirements.txt into $VENV (first run downloads PyTorch)"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -r "$ROOT/requirements.txt"
    cp "$ROOT/requirements.txt" "$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
}

build_project() {
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DPython_EXECUTABLE="$VENV/bin/python" >/dev/null
  fi
  cmake --build "$BUILD" -j "$(nproc)"
}

ensure_venv
build_project
