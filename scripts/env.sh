# Sourced by the other scripts: creates (once) and activates the Python environment, and builds
# the project incrementally. Idempotent: a second run reuses the environment and the build.
#
#   DYNAMICCL_TORCH  which supported torch (dynamiccl_pg/torch_support.py): newest (default),
#                    oldest, or an exact release such as 2.13.0
#   DYNAMICCL_VENV   the virtual environment (default: ~/.cache/dynamiccl/venv-torch<minor>,
#                    outside the checkout so clean clones reuse it). An environment of your own
#                    keeps its torch: only the other requirements are installed into it
#   DYNAMICCL_BUILD  the CMake build folder (default: build/ for the newest torch,
#                    build-torch<minor>/ for another); reconfigured when its Python or torch change

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH_SUPPORT="$ROOT/dynamiccl_pg/torch_support.py"
case "${DYNAMICCL_TORCH:-newest}" in
  newest|oldest) TORCH_VERSION="$(python3 "$TORCH_SUPPORT" pin "${DYNAMICCL_TORCH:-newest}")" ;;
  *) TORCH_VERSION="$DYNAMICCL_TORCH"; python3 "$TORCH_SUPPORT" check "$TORCH_VERSION" ;;
esac
TORCH_MINOR="${TORCH_VERSION%.*}"
VENV="${DYNAMICCL_VENV:-$HOME/.cache/dynamiccl/venv-torch$TORCH_MINOR}"
if [ "$TORCH_VERSION" = "$(python3 "$TORCH_SUPPORT" pin newest)" ]; then
  BUILD="${DYNAMICCL_BUILD:-$ROOT/build}"
else
  BUILD="${DYNAMICCL_BUILD:-$ROOT/build-torch$TORCH_MINOR}"
fi

ensure_venv() {
  local stamp="$VENV/.dynamiccl-requirements" want
  if [ ! -x "$VENV/bin/python" ]; then
    echo "[dynamiccl] creating the Python environment in $VENV"
    python3 -m venv "$VENV"
  fi
  # The torch pin only in an environment the project made; one of the user's keeps its torch.
  local torch_req=("torch==$TORCH_VERSION")
  [ -n "${DYNAMICCL_VENV:-}" ] && torch_req=()
  want="$(cat "$ROOT/requirements.txt"; echo "${torch_req[*]:-}")"
  # Reinstall only when the requirements changed (torch is several GB).
  if [ "$want" != "$(cat "$stamp" 2>/dev/null)" ]; then
    echo "[dynamiccl] installing requirements.txt ${torch_req[*]:-} into $VENV (the first run downloads PyTorch)"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -r "$ROOT/requirements.txt" ${torch_req[@]+"${torch_req[@]}"}
    echo "$want" > "$stamp"
  fi
  "$VENV/bin/python" -c "import torch, runpy; runpy.run_path('$TORCH_SUPPORT')['check'](torch.__version__)"
  export PATH="$VENV/bin:$PATH"
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
}

build_project() {
  # A build folder configured for another interpreter or torch is configured afresh.
  local key stamp="$BUILD/.dynamiccl-configured-for"
  key="$("$VENV/bin/python" -c 'import sys, torch; print(sys.executable, torch.__version__)')"
  if [ ! -f "$BUILD/CMakeCache.txt" ] || [ "$key" != "$(cat "$stamp" 2>/dev/null)" ]; then
    cmake --fresh -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DPython_EXECUTABLE="$VENV/bin/python" >/dev/null
    echo "$key" > "$stamp"
  fi
  cmake --build "$BUILD" -j "$(nproc)"
}

ensure_venv
build_project
