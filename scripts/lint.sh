#!/usr/bin/env bash
# The house rules, in seconds: ruff on the Python tree (pyproject.toml's [tool.ruff]), the C++
# format (.clang-format, clang-format 14) and the C++ test file names (tests/cpp/**/test_*.cpp).
# Prints the findings, then one line; exits non-zero on any finding. Builds nothing.
#
# The C++ format is checked on every C/C++ file of the tree except those listed in PENDING below,
# which predate .clang-format: a new file must conform, a listed one may not yet. Once a listed
# file conforms (clang-format -i it as a change of its own), take it off the list.
#
#   RUFF   the ruff to run (default: the project environment's, as scripts/env.sh makes it, else
#          the one on PATH); requirements.txt pins its version
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PENDING="
benchmarks/cpp/backend_hot_path.cpp
benchmarks/cpp/core_decide_bench.cpp
benchmarks/cpp/core_sim_bench.cpp
benchmarks/network/delay_line.c
csrc/backend/config.h
csrc/backend/consensus.cpp
csrc/backend/consensus.h
csrc/backend/dynamic_work.h
csrc/backend/hint_scope.h
csrc/backend/process_group_dynamiccl.cpp
csrc/backend/process_group_dynamiccl.h
csrc/backend/roles.cpp
csrc/backend/telemetry.cpp
csrc/backend/telemetry.h
csrc/backend/torch_compat.h
csrc/core/types.cpp
csrc/core/types.h
csrc/engines/cpu/alltoall.cpp
csrc/engines/cpu/arm_catalog.cpp
csrc/engines/cpu/cpu_engine.cpp
csrc/engines/cpu/cpu_engine.h
csrc/engines/cpu/recursive.cpp
csrc/engines/cpu/reduction.cpp
csrc/engines/cpu/schedule.h
csrc/engines/cpu/schedule_util.cpp
csrc/engines/cpu/schedule_util.h
csrc/engines/cpu/schedule_worker.cpp
csrc/engines/cpu/schedules.cpp
csrc/engines/cpu/tree.cpp
csrc/engines/emulated_nccl/emulated_nccl.cpp
csrc/engines/emulated_nccl/emulated_nccl.h
csrc/engines/emulated_nccl/tuner_loader.cpp
csrc/engines/nccl/arm_catalog.cpp
csrc/engines/nccl/publish.cpp
csrc/nccl_model/cost_model.cpp
csrc/nccl_model/cost_model.h
csrc/nccl_plugin/abi/compile_as_c.c
csrc/nccl_plugin/abi/nccl_common.h
csrc/nccl_plugin/abi/profiler_v5.h
csrc/nccl_plugin/abi/tuner_v2.h
csrc/nccl_plugin/abi/tuner_v3.h
csrc/nccl_plugin/abi/tuner_v4.h
csrc/nccl_plugin/decision_channel.cpp
csrc/nccl_plugin/dynamiccl_nccl.h
csrc/nccl_plugin/forcing.cpp
csrc/nccl_plugin/nccl_names.cpp
csrc/nccl_plugin/tuner_plugin.cpp
csrc/policy/arm_catalog.h
csrc/policy/arm_slot.cpp
csrc/policy/arm_slot.h
csrc/policy/arm_stats.h
csrc/policy/cusum.cpp
csrc/policy/head_config.cpp
csrc/policy/learner.cpp
csrc/policy/learner.h
csrc/policy/policy_recovery.cpp
csrc/policy/policy_state.cpp
csrc/policy/policy_state.h
csrc/policy/round_scheduler.cpp
csrc/policy/round_scheduler.h
csrc/sim/runner.cpp
csrc/sim/runner.h
csrc/sim/scenario_schema.cpp
csrc/sim/scenario_schema.h
csrc/sim/scenario_spec.cpp
csrc/sim/truth.h
csrc/sim/workload.cpp
csrc/sim/workload.h
python/emulated_nccl_bindings.cpp
python/module.cpp
python/scenario_schema_bindings.cpp
tests/cpp/backend/null_engine.h
tests/cpp/backend/test_dispatch.cpp
tests/cpp/backend/test_one_catalog.cpp
tests/cpp/core/test_learner.cpp
tests/cpp/core/test_sim_model.cpp
tests/cpp/core/test_sim_runner.cpp
tests/cpp/core/test_validate_spec.cpp
tests/cpp/nccl_plugin/test_exports.cpp
tests/cpp/nccl_plugin/test_tuner_lifecycle.cpp
tests/cpp/nccl_plugin/test_tuner_v2.cpp
"

failed=0
summary=()

# ---- Python: ruff ----------------------------------------------------------------------------
want_ruff="$(sed -n 's/^ruff==//p' requirements.txt)"
ruff="${RUFF:-}"
if [ -z "$ruff" ]; then
  case "${DYNAMICCL_TORCH:-newest}" in
    newest|oldest) torch_version="$(python3 dynamiccl_pg/torch_support.py pin "${DYNAMICCL_TORCH:-newest}")" ;;
    *) torch_version="$DYNAMICCL_TORCH" ;;
  esac
  venv="${DYNAMICCL_VENV:-$HOME/.cache/dynamiccl/venv-torch${torch_version%.*}}"
  if [ -x "$venv/bin/ruff" ]; then ruff="$venv/bin/ruff"; else ruff="$(command -v ruff || true)"; fi
fi
if [ -z "$ruff" ]; then
  echo "ruff not found: scripts/env.sh installs it (requirements.txt), or pip install ruff==$want_ruff"
  summary+=("ruff: not installed")
  failed=1
else
  ruff_version="$("$ruff" --version | awk '{print $2}')"
  note=""
  [ "$ruff_version" = "$want_ruff" ] || note=", requirements.txt pins $want_ruff"
  if out="$("$ruff" check --quiet --output-format concise .)"; then
    summary+=("ruff $ruff_version: clean$note")
  else
    printf '%s\n' "$out"
    summary+=("ruff $ruff_version: $(printf '%s\n' "$out" | grep -c .) finding(s)$note")
    failed=1
  fi
fi

# ---- C++: format -----------------------------------------------------------------------------
if ! command -v clang-format >/dev/null; then
  summary+=("C++ format: not checked (no clang-format)")
elif [ "$(clang-format --version | sed -E 's/.*version ([0-9]+).*/\1/')" != 14 ]; then
  summary+=("C++ format: not checked (clang-format $(clang-format --version |
    sed -E 's/.*version ([0-9.]+).*/\1/'); the style is set for 14, other releases differ)")
else
  checked=() pending=0
  while IFS= read -r f; do
    [ -f "$f" ] || continue  # deleted in the work tree
    case "$PENDING" in
      *"
$f
"*) pending=$((pending + 1)) ;;
      *) checked+=("$f") ;;
    esac
  done < <(git ls-files --cached --others --exclude-standard -- \
             '*.c' '*.h' '*.cc' '*.cpp' '*.hpp' '*.cu' '*.cuh' | sort -u)
  if [ "${#checked[@]}" = 0 ]; then
    summary+=("C++ format: no file to check ($pending pending)")
  elif out="$(clang-format --dry-run --Werror "${checked[@]}" 2>&1)"; then
    summary+=("C++ format: ${#checked[@]} files conform ($pending pending)")
  else
    printf '%s\n' "$out"
    bad="$(printf '%s\n' "$out" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u | wc -l)"
    summary+=("C++ format: $bad of ${#checked[@]} files do not conform (clang-format -i them)")
    failed=1
  fi
fi

# ---- C++: test file names --------------------------------------------------------------------
misnamed="$(find tests/cpp -name '*.cpp' ! -name 'test_*.cpp' | sort)"
if [ -n "$misnamed" ]; then
  printf '%s: C++ tests are named test_<what>.cpp\n' $misnamed
  summary+=("tests/cpp names: $(printf '%s\n' "$misnamed" | wc -l) misnamed")
  failed=1
else
  summary+=("tests/cpp names: ok")
fi

if [ "$failed" = 0 ]; then status="ok"; else status="FAILED"; fi
line="$(printf '%s; ' "${summary[@]}")"
echo "lint: $status (${line%; })"
exit "$failed"
