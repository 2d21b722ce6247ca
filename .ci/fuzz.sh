#!/usr/bin/env bash
# CI: build every fuzz target (clang, libFuzzer + ASan + UBSan, into build-fuzz/) and run each for
# FUZZ_TIME seconds (default 60) on a copy of its seed corpus plus its regression inputs, FUZZ_JOBS
# at a time (default: cores + 1; each target still gets its full FUZZ_TIME of wall time). Fails on
# any crash, leak, hang (> 10 s) or out-of-memory (> 2 GB), naming the input to keep in
# fuzz/regress/<name>/. Time: the build plus ceil(targets / FUZZ_JOBS) x FUZZ_TIME.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
FUZZ_TIME=${FUZZ_TIME:-60}
FUZZ_JOBS=${FUZZ_JOBS:-$(( $(nproc) + 1 ))}
echo "=== fuzz build"
make -j"$(nproc)" fuzz-build
echo "=== fuzz: every target for ${FUZZ_TIME}s, $FUZZ_JOBS at a time ($(( $(date +%s) - start ))s)"
rc=0
make --no-print-directory -j"$FUZZ_JOBS" fuzz FUZZ_TIME="$FUZZ_TIME" > build-fuzz/fuzz.log 2>&1 || rc=$?
sed -n '/^== fuzz:/,$p' build-fuzz/fuzz.log
[ $rc -eq 0 ] || { echo "fuzz: FAILED (make exit $rc; see build-fuzz/fuzz.log and build-fuzz/work/*/log)"; tail -n 20 build-fuzz/fuzz.log; }
echo "=== fuzz done in $(( $(date +%s) - start ))s"
exit $rc
