#!/usr/bin/env bash
# The README's test command: set-up (environment, build), then every test — GoogleTest through
# ctest, and pytest (real processes, real stores). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)"
cd "$ROOT"
python -m pytest tests/python "$@"
