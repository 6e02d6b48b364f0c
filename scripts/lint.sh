#!/usr/bin/env bash
# The house rules, in seconds: ruff on the Python tree (pyproject.toml's [tool.ruff]), the C++
# format of every C/C++ file (.clang-format; clang-format 14, the style differs between
# releases) and the C++ test file names (tests/cpp/**/test_<what>.cpp). Prints the findings,
# then one line; exits non-zero on any finding. scripts/test.sh runs it with the project's
# environment active (requirements.txt pins ruff); run it alone after `source scripts/env.sh`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
failed=0
summary=()

if ! command -v ruff >/dev/null; then
  summary+=("ruff: not installed (pip install -r requirements.txt)")
  failed=1
elif out="$(ruff check --quiet --output-format concise .)"; then
  summary+=("ruff: clean")
else
  printf '%s\n' "$out"
  summary+=("ruff: $(printf '%s\n' "$out" | grep -c .) finding(s)")
  failed=1
fi

if [ "$(clang-format --version 2>/dev/null | sed -E 's/.*version ([0-9]+).*/\1/')" != 14 ]; then
  summary+=("C++ format: not checked (needs clang-format 14)")
else
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
                         '*.c' '*.h' '*.cc' '*.cpp' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
  if out="$(clang-format --dry-run --Werror "${files[@]}" 2>&1)"; then
    summary+=("C++ format: ${#files[@]} files conform")
  else
    printf '%s\n' "$out"
    bad="$(printf '%s\n' "$out" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)"
    summary+=("C++ format: $(printf '%s\n' "$bad" | wc -l) file(s) to clang-format -i")
    failed=1
  fi
fi

misnamed="$(find tests/cpp -name '*.cpp' ! -name 'test_*.cpp' | sort)"
if [ -n "$misnamed" ]; then
  printf '%s: C++ tests are named test_<what>.cpp\n' $misnamed
  summary+=("tests/cpp names: $(printf '%s\n' "$misnamed" | wc -l) misnamed")
  failed=1
else
  summary+=("tests/cpp names: ok")
fi

line="$(printf '%s; ' "${summary[@]}")"
echo "lint: $([ "$failed" = 0 ] && echo ok || echo FAILED) (${line%; })"
exit "$failed"
