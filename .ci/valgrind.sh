#!/usr/bin/env bash
# CI: valgrind memcheck (leaks, invalid reads/writes, uninitialised values) over a gcc -O1 -g
# build without sanitizers. Valgrind runs code 20-100x slower, and the whole suite would take
# over half an hour under it, so this runs what exercises error paths and loaders (where leaks
# on failure hide), each well under a minute:
#   - every fuzz target's replay program over its seed corpus and its regression inputs
#     (fuzz/corpus/<name>, fuzz/regress/<name>): every loader on valid and broken files;
#   - tests/test_badinput with the attn processes it starts traced too (--trace-children): each
#     file-reading command failing on ~100 broken inputs, so a leak on any CLI error path fails;
#   - test_io, test_train, test_explain, test_gpt_train, test_mha (library loaders, checkpoints
#     and their damage cases, small models end to end);
#   - test_nolostwork (checkpoint loads after SIGKILLs; its attn children are not traced: kill
#     timing under valgrind would test nothing).
# Kernel-heavy tests (gemm, attention, bleu, bert, embed, the tokenizer corpora) are left to
# ASan + UBSan (`make san`), which runs them all. Exit status: non-zero on any valgrind error.
#   VALGRIND_BUILD=build-valgrind (default) sh .ci/valgrind.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
BUILD=${VALGRIND_BUILD:-build-valgrind}
step() { echo; echo "=== $* ($(( $(date +%s) - start ))s)"; }

step "gcc -O1 -g build in $BUILD"
make -j2 CC=gcc BUILD="$BUILD" OPT="-O1 -g" tests

# References for the tests below: those `make test` made in build/ref, else generated here.
export ATTN_REF_DIR="$PWD/$BUILD/ref" ATTN_BUILD="$PWD/$BUILD"
mkdir -p "$ATTN_REF_DIR"
if [ -d build/ref ] && [ -n "$(ls -A build/ref)" ]; then
  cp -r build/ref/. "$ATTN_REF_DIR/"
else
  for gen in ref_io ref_train ref_explain ref_mha ref_viz ref_gpt_train; do
    [ -f "tools/$gen.py" ] && .venv/bin/python "tools/$gen.py" "$ATTN_REF_DIR" > /dev/null
  done
fi

# One thread: valgrind serializes threads anyway, and OpenMP's thread pool only adds noise.
export OMP_NUM_THREADS=1 ATTN_TEST_QUIET=1
VG="valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect --num-callers=30 --suppressions=.ci/valgrind.supp"
fail=0
run() { # NAME CMD...
  local name=$1 t0=$(date +%s)
  shift
  if "$@" > "$BUILD/valgrind-$name.log" 2>&1; then
    echo "ok   $name ($(( $(date +%s) - t0 ))s)"
  else
    echo "FAIL $name (exit $?, $(( $(date +%s) - t0 ))s): $BUILD/valgrind-$name.log"
    grep -E "^==[0-9]+== |FAIL|ERROR" "$BUILD/valgrind-$name.log" | head -n 40
    fail=1
  fi
}

step "fuzz replays under memcheck"
for src in fuzz/fuzz_*.c; do
  n=$(basename "$src" .c); n=${n#fuzz_}
  run "replay-$n" $VG "$BUILD/fuzz/replay-$n" "fuzz/corpus/$n" "fuzz/regress/$n"
done

step "tests under memcheck"
# (the shell that system() starts is traced too: a skipped shell would run attn untraced)
run test_badinput $VG --trace-children=yes "$BUILD/tests/test_badinput"
for t in test_io test_train test_explain test_gpt_train test_mha test_nolostwork; do
  [ -x "$BUILD/tests/$t" ] && run "$t" $VG "$BUILD/tests/$t"
done

step "valgrind done in $(( $(date +%s) - start ))s"
exit $fail
