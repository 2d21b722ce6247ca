#!/bin/sh
# Run every test program of a build: first generate the PyTorch references live (tools/ref_*.py,
# in the project venv), then each build/tests/test_* binary. Prints a closing
# "N passed, N failed" line over all cmocka tests and exits non-zero on any failure.
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
export ATTN_REF_DIR="$ROOT/$BUILD/ref"
export ATTN_BUILD="$ROOT/$BUILD"
mkdir -p "$ATTN_REF_DIR"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || { echo "error: $PY missing: run 'sh tools/install_deps.sh'"; exit 1; }

fail=0
for gen in tools/ref_*.py; do
  [ -e "$gen" ] || continue
  echo "== reference: $gen"
  if ! "$PY" "$gen" "$ATTN_REF_DIR"; then echo "error: $gen failed"; fail=1; fi
done

passed=0; failed=0
log="$ATTN_REF_DIR/.last-test.log"
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  echo "== $t"
  "$t" >"$log" 2>&1
  rc=$?
  cat "$log"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  if [ $rc -ne 0 ]; then
    fail=1
    [ -z "$f" ] && failed=$((failed + 1)) && echo "error: $t exited with status $rc"
  fi
done
echo "$passed passed, $failed failed"
[ $fail -eq 0 ] && [ $failed -eq 0 ]
