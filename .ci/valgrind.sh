#!/usr/bin/env bash
# CI: valgrind memcheck (leaks, invalid reads/writes, uninitialised values) over a gcc -O1 -g
# build without sanitizers, with --error-exitcode and leak checking, over
#   - every fuzz target's replay program over its seed corpus and its regression inputs
#     (fuzz/corpus/<name>, fuzz/regress/<name>): every loader on valid and broken files;
#   - EVERY test program of the build ($BUILD/tests/test_*, found automatically: a new test is
#     checked without editing this file), including their error-path tests (loads failing
#     halfway, damaged checkpoints, bad configs...).
# Valgrind runs code 20-100x slower, so the script sets ATTN_TEST_VALGRIND=1 and the heavy tests
# (tests/tu.h: tu_valgrind()) run their kernel cases at smaller sizes or fewer repetitions, still
# through every code path; correctness at full size stays in `make test` and `make san`.
# Two valgrind processes run at once (VALGRIND_JOBS, default 2), the longest first.
# Child processes: test_badinput traces the attn processes it starts (--trace-children: each
# file-reading command failing on broken inputs, every other one of its ~100 cases under
# valgrind, all of them under make san's LeakSanitizer, so a leak on any CLI error path fails);
# the other tests' children (attn CLI runs, python references, chromium) run untraced: the CLI
# error paths are test_badinput's, the rest is not our code. test_nolostwork's SIGKILL timing
# would test nothing under valgrind anyway.
# PCRE2 runs without its JIT under valgrind (src/tok/split.c: tok_regex_jit), so memcheck checks
# the interpreter instead of reporting on JIT-generated code; no suppressions are needed.
# Skips follow tests/run.sh's rule (tests/tu.h): every skipped test is listed with its reason;
# under CI (CI set, as .ci/run does) a software skip (tu_skip: something missing) fails the run,
# while skips for CPU features (tu_skip_hw: valgrind hides AVX-512 anyway) and for the environment
# (tu_skip_env: a test deliberately not run under valgrind, or run as root) are allowed.
# Exit status: non-zero on any valgrind error, leak or test failure, and under CI on a software
# skip. Per-program CPU and wall times are printed, the slowest first.
#   VALGRIND_BUILD=build-valgrind (default) VALGRIND_JOBS=2 VALGRIND_TIMEOUT=1200 \
#   [VALGRIND_LOGS=DIR] bash .ci/valgrind.sh [NAME...]
# With NAMEs (test_gemm, replay-npy, ...), only those run (after the build).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
BUILD=${VALGRIND_BUILD:-build-valgrind}
JOBS=${VALGRIND_JOBS:-2}
TIMEOUT=${VALGRIND_TIMEOUT:-1200} # seconds per program (a hang fails as exit 124)
step() { echo; echo "=== $* ($(( $(date +%s) - start ))s)"; }

step "gcc -O1 -g build in $BUILD"
make -j2 CC=gcc BUILD="$BUILD" OPT="-O1 -g" tests

# References for the tests: those `make test` made in build/ref, else generated here.
export ATTN_REF_DIR="$PWD/$BUILD/ref" ATTN_BUILD="$PWD/$BUILD"
mkdir -p "$ATTN_REF_DIR"
if [ -d build/ref ] && [ -n "$(ls -A build/ref)" ]; then
  cp -r build/ref/. "$ATTN_REF_DIR/"
else
  for gen in tools/ref_*.py; do .venv/bin/python "$gen" "$ATTN_REF_DIR" > /dev/null; done
fi

# One thread: valgrind serializes threads anyway, and OpenMP's thread pool only adds noise.
# Tests that ask for 2 or 3 threads themselves still get them: passive waiting makes an idle
# OpenMP thread sleep at once instead of spinning through valgrind's time slices.
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive ATTN_TEST_QUIET=1 ATTN_TEST_VALGRIND=1
# Valgrind hides AVX-512 from the programs it runs, so a test picks the AVX2 kernels while the attn
# processes it starts untraced would pick AVX-512 on an AVX-512 machine: their outputs (compared
# bit for bit with the test's own) and their bf16 support would differ. Both sides use AVX2.
export ATTN_BACKEND=avx2
export VG="valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect --num-callers=30 --suppressions=.ci/valgrind.supp"
LOGS=${VALGRIND_LOGS:-$BUILD/valgrind} # one log per program, NAME.log
rm -rf "$LOGS"
mkdir -p "$LOGS"
export BUILD LOGS TIMEOUT

# The jobs, one a line: NAME then the command. Known long ones first (an ordering hint only:
# whatever is not named here still runs, after them).
jobs="$LOGS/jobs"
: > "$jobs"
: > "$jobs.order"
for t in test_badinput test_bert test_embed test_embed_speed test_gpt test_generate test_gpt_train \
         test_tokenizer_wordpiece test_tokenizer_char test_bert_train test_attention; do
  [ -x "$BUILD/tests/$t" ] && echo "$t" >> "$jobs.order"
done
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] && ! grep -qx "$(basename "$t")" "$jobs.order" && basename "$t" >> "$jobs.order"
done
while read -r n; do
  # (the shell that system() starts is traced too: a skipped shell would run attn untraced)
  if [ "$n" = test_badinput ]; then echo "$n --trace-children=yes $BUILD/tests/$n" >> "$jobs"
  else echo "$n $BUILD/tests/$n" >> "$jobs"; fi
done < "$jobs.order"
for src in fuzz/fuzz_*.c; do
  n=$(basename "$src" .c); n=${n#fuzz_}
  echo "replay-$n $BUILD/fuzz/replay-$n fuzz/corpus/$n fuzz/regress/$n" >> "$jobs"
done
if [ $# -gt 0 ]; then # only the named programs
  pat=$(printf '^%s |' "$@"); grep -E "${pat%|}" "$jobs" > "$jobs.only" || true
  mv "$jobs.only" "$jobs"
fi

# One job: run it under memcheck, log to $LOGS/NAME.log, print one line (ok/FAIL, times).
one() {
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  local TIMEFORMAT='%U %S' # bash's time: CPU of the command and its children
  if { time timeout -k 10 "$TIMEOUT" $VG "$@" > "$LOGS/$name.log" 2>&1; } 2> "$LOGS/$name.time"; then rc=0
  else rc=$?; fi
  read -r u s < <(tail -n 1 "$LOGS/$name.time")
  local cpu wall=$(( $(date +%s) - t0 ))
  cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.0f", u + s }')
  echo "$name $cpu $wall $rc" > "$LOGS/$name.result"
  if [ $rc -eq 0 ]; then
    printf 'ok   %-28s cpu %5ss  wall %5ss\n' "$name" "$cpu" "$wall"
  else
    printf 'FAIL %-28s cpu %5ss  wall %5ss  exit %s: %s\n' "$name" "$cpu" "$wall" "$rc" "$LOGS/$name.log"
    grep -E "^==[0-9]+== |FAIL|ERROR|error:" "$LOGS/$name.log" | head -n 40
  fi
}
export -f one

step "$(wc -l < "$jobs") programs under memcheck, $JOBS at a time"
# shellcheck disable=SC2016
xargs -P "$JOBS" -L 1 bash -c 'one "$@"' _ < "$jobs" || true

step "per-program times (CPU = user + system seconds of valgrind and untraced children)"
fail=0
total=0
while read -r name cpu wall rc; do
  printf '  %-28s cpu %5ss  wall %5ss%s\n' "$name" "$cpu" "$wall" "$([ "$rc" = 0 ] || echo "  FAILED ($rc)")"
  total=$((total + cpu))
  [ "$rc" = 0 ] || fail=1
done < <(cat "$LOGS"/*.result | sort -k2 -n -r)
n_jobs=$(wc -l < "$jobs")
n_done=$(cat "$LOGS"/*.result 2>/dev/null | wc -l)
[ "$n_done" -eq "$n_jobs" ] || { echo "error: $n_done of $n_jobs programs reported"; fail=1; }
echo "  total CPU ${total}s over $n_done programs"
# The failures again, last (CI shows the end of its output).
for r in "$LOGS"/*.result; do
  read -r name _ _ rc < "$r"
  [ "$rc" = 0 ] && continue
  echo "FAILED: $name (exit $rc): $LOGS/$name.log"
  grep -E "^==[0-9]+== (Invalid|Conditional|Use of|.*definitely lost|.*indirectly lost)|FAIL|ERROR|error:" \
    "$LOGS/$name.log" | head -n 12 | sed 's/^/    /'
done
step "skipped tests (tests/run.sh --skips)"
sh tests/run.sh --skips "$LOGS"/test_*.log || fail=1
step "valgrind done in $(( $(date +%s) - start ))s: $([ $fail -eq 0 ] && echo clean || echo FAILED)"
exit $fail
