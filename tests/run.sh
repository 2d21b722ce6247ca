#!/bin/sh
# Run every test program of a build: first generate the PyTorch references live (tools/ref_*.py,
# in the project venv; tools/refnew_*.py in .venv-bench, the newest torch and transformers), then
# each build/tests/test_* binary. Ends with one line
# "N passed, N failed, N skipped" over all cmocka tests (a program that exits non-zero without
# cmocka's counts is one failed test) and the list of every skipped test with its reason.
#
# Skips (tests/tu.h): a test that cannot run is reported by cmocka as [  SKIPPED ], after one line
#   tu-skip: TEST: REASON           a program, file or package it needs is missing (software);
#   tu-skip-hw: TEST: REASON        this CPU lacks a feature it needs (AVX-512, AVX512-BF16);
#   tu-skip-env: TEST: REASON       how it is run makes it meaningless (under valgrind, as root).
# A skipped test without such a line (a bare cmocka skip()) counts as a software skip.
# The CI rule: under CI (the CI variable set to anything but "", "0" or "false"; .ci/run sets
# CI=true), where everything is installed, a software skip is an installation problem: it fails
# the run and names the test. Hardware and environment skips are listed as such and allowed (our
# CI machines may lack AVX-512, this one does). Outside CI every skip is only listed.
# Exit status: non-zero on any failed test or reference generator, and under CI on a software skip.
#   sh tests/run.sh [BUILD]              (default build)
#   ATTN_REF_FROM=DIR sh tests/run.sh B  copy the references from DIR instead of generating them
#   ATTN_REF_JOBS=1, ATTN_TEST_JOBS=1    one reference generator / test program at a time (the
#                                        default: two, in two lanes)
#   sh tests/run.sh --skips LOG...       only the skip list and the CI rule, over cmocka output
#                                        files named PROG.log (.ci/valgrind.sh uses it)

# The skipped tests of one program's output $1 (program name $2), one a line:
# KIND PROGRAM TEST REASON, in the order they ran. cmocka prints "[  SKIPPED ] TEST" once when the
# test ends and once in its closing list; the first occurrence counts.
skips_of() {
  awk -v prog="$2" '
    /^tu-skip(-hw|-env)?: [A-Za-z_][A-Za-z0-9_]*: / {
      kind = substr($1, 1, length($1) - 1); name = substr($2, 1, length($2) - 1)
      reason = $0; sub(/^[^ ]* [^ ]* /, "", reason)
      k[name] = kind; r[name] = reason; next
    }
    /^\[  SKIPPED \] [A-Za-z_][A-Za-z0-9_]*$/ {
      if (!($4 in seen)) { seen[$4] = 1; order[++n] = $4 }
    }
    END {
      for (i = 1; i <= n; i++) {
        t = order[i]
        printf "%s %s %s %s\n", (t in k) ? k[t] : "tu-skip", prog, t,
               (t in r) ? r[t] : "(no reason given: a bare skip() without tu_skip)"
      }
    }' "$1"
}

# Print the skip list of the file $1 (skips_of lines); under CI, name each software skip as an
# error. Returns 1 when that fails the run.
report_skips() {
  ci=0
  case "${CI:-}" in "" | 0 | false) ;; *) ci=1 ;; esac
  bad=0
  echo "skipped tests: $(wc -l < "$1")"
  [ -s "$1" ] || return 0
  while read -r kind prog name reason; do
    case $kind in
      tu-skip-hw) what="CPU feature" ;;
      tu-skip-env) what="environment" ;;
      *) what="software"
         [ $ci -eq 1 ] && bad=1 ;;
    esac
    echo "  $prog: $name ($what): $reason"
  done < "$1"
  if [ $bad -eq 1 ]; then
    echo "error: under CI (CI=$CI) everything is installed: no test may skip for missing software:"
    while read -r kind prog name reason; do
      case $kind in
        tu-skip-hw | tu-skip-env) ;;
        *) echo "error:   $prog: $name skipped: $reason" ;;
      esac
    done < "$1"
    return 1
  fi
  return 0
}

if [ "${1:-}" = --skips ]; then
  shift
  list=$(mktemp) || exit 1
  for l in "$@"; do [ -f "$l" ] && skips_of "$l" "$(basename "$l" .log)" >> "$list"; done
  report_skips "$list"
  rc=$?
  rm -f "$list"
  exit $rc
fi

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
export ATTN_REF_DIR="$ROOT/$BUILD/ref"
export ATTN_BUILD="$ROOT/$BUILD"
mkdir -p "$ATTN_REF_DIR"
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || { echo "error: $PY missing: run 'sh tools/install_deps.sh'"; exit 1; }

fail=0
# ATTN_REF_FROM=DIR (CI's sanitizer run, after `make test` made them): copy those references
# instead of generating them again; they come from the same tools/ref_*.py on the same checkout.
if [ -n "${ATTN_REF_FROM:-}" ] && [ -d "$ATTN_REF_FROM" ] && [ -n "$(ls -A "$ATTN_REF_FROM")" ]; then
  echo "== references: copied from $ATTN_REF_FROM"
  cp -r "$ATTN_REF_FROM/." "$ATTN_REF_DIR/"
  REF_GENS= REFNEW_GENS=
else
  REF_GENS=$(ls tools/ref_*.py 2>/dev/null) REFNEW_GENS=$(ls tools/refnew_*.py 2>/dev/null)
fi
# The generators are independent (each writes its own files under $ATTN_REF_DIR and only reads
# models/), so two lanes run them at once, each taking the next one not yet taken
# (ATTN_REF_JOBS=1: one lane); each one's output goes to $ATTN_REF_DIR/.gen/NAME.log and is
# printed afterwards in order.
# References that need the newest torch and transformers (Qwen3, transformers 5's files) run in
# the .venv-bench venv (sh bench/setup.sh; tools/install_deps.sh makes it). Without it their tests
# skip (as a software skip: an error under CI).
PYNEW="$ROOT/.venv-bench/bin/python"
gendir="$ATTN_REF_DIR/.gen"
rm -rf "$gendir"; mkdir -p "$gendir"
run_gen() { # $1 python, $2 generator: its log, seconds and exit status into $gendir
  # (one thread each when two lanes share the cores: two torch processes of 2 threads each on 2
  # cores spin in OpenMP's barriers; refnew_gguf_smollm2 took 238 s so, 81 s with 1 thread)
  n=$(basename "$2" .py); t0=$(date +%s)
  OMP_NUM_THREADS=$ref_threads ATTN_REF_THREADS=$ref_threads \
    "$1" "$2" "$ATTN_REF_DIR" > "$gendir/$n.log" 2>&1
  echo "$? $(( $(date +%s) - t0 ))" > "$gendir/$n.rc"
}
lane() { # take the next generator nobody has taken (mkdir is atomic), run it; the newest-torch
         # ones first (the longest: their venv's torch starts slowly)
  for gen in $REFNEW_GENS $REF_GENS; do
    mkdir "$gendir/$(basename "$gen" .py).taken" 2>/dev/null || continue
    case $gen in
      tools/refnew_*) [ -x "$PYNEW" ] && run_gen "$PYNEW" "$gen" ;;
      *) run_gen "$PY" "$gen" ;;
    esac
  done
}
lanes=${ATTN_REF_JOBS:-2}
case $lanes in 1 | 2) ;; *) lanes=2 ;; esac
ref_threads=$((lanes == 2 ? 1 : 2))
t_ref=$(date +%s)
l=1
while [ $l -le $lanes ]; do lane & l=$((l + 1)); done
wait
for gen in $REF_GENS $REFNEW_GENS; do
  n=$(basename "$gen" .py)
  case $gen in
    tools/refnew_*) if [ ! -x "$PYNEW" ]; then
                      echo "== reference: $gen skipped: no $PYNEW (sh bench/setup.sh)"; continue
                    fi
                    echo "== reference: $gen (newest transformers)" ;;
    *) echo "== reference: $gen" ;;
  esac
  cat "$gendir/$n.log" 2>/dev/null
  read -r rc secs < "$gendir/$n.rc" 2>/dev/null || { rc=1; secs=?; }
  echo "   ($secs s)"
  if [ "$rc" != 0 ]; then echo "error: $gen failed"; fail=1; fi
done
[ -n "$REF_GENS$REFNEW_GENS" ] && echo "== references: $(( $(date +%s) - t_ref )) s in $lanes lane(s)"

passed=0; failed=0; skipped=0
skips="$ATTN_REF_DIR/.skipped-tests"
: > "$skips"
# The test programs run two at a time (ATTN_TEST_JOBS=1: one), each lane taking the next program
# not yet taken, the known long ones first; each one's output goes to $tdir/NAME.log and is
# printed afterwards in order, with its wall time. Many programs are single-threaded or wait on
# child processes, so two lanes keep both cores busy; with two lanes OpenMP threads wait
# passively (OMP_WAIT_POLICY), so that two programs' 2-thread regions do not spin against each
# other. No test asserts timings; servers take port 0, scratch files are per process.
tjobs=${ATTN_TEST_JOBS:-2}
case $tjobs in 1 | 2) ;; *) tjobs=2 ;; esac
tdir="$ATTN_REF_DIR/.tests"
rm -rf "$tdir"; mkdir -p "$tdir"
tests=""
for n in test_serve test_gguf_models test_quantize test_gemm_bf16 test_attention test_llama \
         test_embed test_train_mpi test_gemm; do
  [ -x "$BUILD/tests/$n" ] && tests="$tests $BUILD/tests/$n"
done
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  case " $tests " in *" $t "*) ;; *) tests="$tests $t" ;; esac
done
test_lane() {
  for t in $tests; do
    n=$(basename "$t")
    mkdir "$tdir/$n.taken" 2>/dev/null || continue
    t0=$(date +%s)
    if [ "$tjobs" = 2 ]; then OMP_WAIT_POLICY=passive "$t" > "$tdir/$n.log" 2>&1
    else "$t" > "$tdir/$n.log" 2>&1; fi
    echo "$? $(( $(date +%s) - t0 ))" > "$tdir/$n.rc"
  done
}
t_tests=$(date +%s)
l=1
while [ $l -le $tjobs ]; do test_lane & l=$((l + 1)); done
wait
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  log="$tdir/$n.log"
  echo "== $t"
  cat "$log" 2>/dev/null
  read -r rc secs < "$tdir/$n.rc" 2>/dev/null || { rc=1; secs=?; }
  echo "   ($secs s)"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
  skips_of "$log" "$n" >> "$skips"
  if [ "$rc" != 0 ]; then
    fail=1
    [ -z "$f" ] && failed=$((failed + 1)) && echo "error: $t exited with status $rc"
  fi
done
echo "== test programs: $(( $(date +%s) - t_tests )) s in $tjobs lane(s)"
# The Python package (python/): its wheel is built (pip wheel, setuptools, no network), installed
# into a fresh venv (Debian's python3 with system site packages: numpy, pytest), and its pytest
# tests (python/tests: every call against this build's CLI) run from there. Counted with the
# others; a pytest skip is listed like a tu-skip (software). Not for a sanitizer build (the
# interpreter would need the sanitizer runtime loaded first): an environment skip there.
echo "== python: wheel, fresh venv, pytest (python/tests)"
pylog="$ATTN_REF_DIR/.last-pytest.log"
case "$BUILD" in
  *san*) echo "tu-skip-env: python_package: not with a sanitizer build ($BUILD)" > "$pylog"
         echo "[  SKIPPED ] python_package" >> "$pylog"; cat "$pylog"
         skipped=$((skipped + 1)); skips_of "$pylog" python >> "$skips" ;;
  *)
  pyvenv="$ROOT/$BUILD/python/venv"; wheels="$ROOT/$BUILD/python/wheel"
  rm -rf "$pyvenv" "$wheels"
  if ! ATTN_NO_MAKE=1 "$PY" -m pip wheel -q --no-build-isolation --no-deps ./python -w "$wheels" \
       > "$pylog" 2>&1 \
     || ! /usr/bin/python3 -m venv --system-site-packages "$pyvenv" >> "$pylog" 2>&1 \
     || ! "$pyvenv/bin/pip" install -q --no-index --no-deps "$wheels"/attn-*.whl >> "$pylog" 2>&1; then
    cat "$pylog"; echo "error: the Python package did not build or install"
    fail=1; failed=$((failed + 1))
  elif ! "$pyvenv/bin/python" -c "import pytest" 2>/dev/null; then
    echo "tu-skip: python_package: pytest missing (sh tools/install_deps.sh: python3-pytest)" > "$pylog"
    echo "[  SKIPPED ] python_package" >> "$pylog"; cat "$pylog"
    skipped=$((skipped + 1)); skips_of "$pylog" python >> "$skips"
  else
    "$pyvenv/bin/python" -m pytest -q -rs -p no:cacheprovider python/tests \
      > "$pylog" 2>&1
    rc=$?
    cat "$pylog"
    sum=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$pylog" | tail -n 1)
    n_of() { echo "$sum" | grep -o "[0-9]* $1" | cut -d' ' -f1; }
    p=$(n_of passed); f=$(n_of failed); e=$(n_of error); s=$(n_of skipped)
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0} + ${e:-0})); skipped=$((skipped + ${s:-0}))
    # "SKIPPED [1] tests/test_attn.py:42: REASON" -> a software skip named by file:line
    sed -n 's/^SKIPPED \[[0-9]*\] \([^ ]*\): \(.*\)$/tu-skip python \1 \2/p' "$pylog" >> "$skips"
    if [ $rc -ne 0 ]; then
      fail=1
      [ -z "$f$e" ] && failed=$((failed + 1)) && echo "error: pytest exited with status $rc"
    fi
  fi ;;
esac

echo "$passed passed, $failed failed, $skipped skipped"
report_skips "$skips" || fail=1
[ $fail -eq 0 ] && [ $failed -eq 0 ]
