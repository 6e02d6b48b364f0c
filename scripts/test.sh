#!/usr/bin/env bash
# The README's test command: set-up (environment, build), the house rules (scripts/lint.sh:
# ruff, C++ format, test names; seconds), then every test — GoogleTest through ctest, and pytest
# (real processes, real stores). Extra arguments go to pytest.
#   --short   the set CI also runs on the oldest supported torch (DYNAMICCL_TORCH=oldest): the
#             C++ tests, the collectives against gloo, pipelining (it patches torch internals),
#             the group APIs and the torch-suite subset
SHORT=0
if [ "${1:-}" = "--short" ]; then SHORT=1; shift; fi
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
echo "[dynamiccl] torch $(python -c 'import torch; print(torch.__version__)') in $VENV, build $BUILD"
"$ROOT/scripts/lint.sh"
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)"
cd "$ROOT"
if [ "$SHORT" = 1 ]; then
  python -m pytest tests/python/test_torch_support.py tests/python/test_collectives.py \
    tests/python/test_pipelining.py tests/python/test_group_apis.py \
    tests/python/test_torch_suite.py "$@"
else
  python -m pytest tests/python "$@"
fi
