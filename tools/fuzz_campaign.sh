#!/usr/bin/env bash
# shellcheck disable=SC1090,SC2154  # the per-target results are sourced files (r_* variables)
# tools/fuzz_campaign.sh — a long fuzzing campaign over the libFuzzer targets (`make fuzz-campaign`,
# which builds them first with `make fuzz-build`; see fuzz/README.md).
#
# Every target in FUZZ_TARGETS runs in turn (FUZZ_JOBS at a time) until it has executed FUZZ_EXECS
# inputs or spent its share of the time budget, whichever comes first (libFuzzer's -runs= and
# -max_total_time=), on its own corpus that grows from one campaign to the next:
#   $FUZZ_CAMPAIGN_DIR/corpus/<name>/     kept between runs, seeded (new files only) from
#                                         fuzz/corpus/<name>/ and fuzz/regress/<name>/ each run
#   $FUZZ_CAMPAIGN_DIR/logs/<name>.log    libFuzzer's output of the last run (and <name>.merge.log)
#   $FUZZ_CAMPAIGN_DIR/artifacts/<name>/  what libFuzzer wrote on a finding
#   $FUZZ_CAMPAIGN_DIR/table.md           the table below (also printed), with the findings
#   $FUZZ_CAMPAIGN_DIR/history.tsv        one line per target run, appended, never rewritten
# Every crash, leak, timeout or out-of-memory input is copied into fuzz/regress/<name>/ under
# libFuzzer's name for it (<kind>-<sha1 of the input>) and reported; `make test` replays
# fuzz/regress/, so it fails until the bug is fixed. libFuzzer stops a target at its first
# finding: that target's run ends there and the campaign goes on with the next one.
# With FUZZ_MERGE=1, each target's campaign corpus is then minimized into fuzz/corpus/<name>/
# (libFuzzer -merge=1: only inputs that add coverage to what is there are added, named by sha1).
#
# Environment (make passes them; defaults in brackets):
#   FUZZ_TARGETS  target names [every fuzz/fuzz_*.c]
#   FUZZ_HOURS    total wall-time budget in hours, shared evenly: each target gets
#                 FUZZ_HOURS * 3600 / ceil(targets / FUZZ_JOBS) seconds [unset]
#   FUZZ_SECS     seconds per target when FUZZ_HOURS is unset [1800]
#   FUZZ_EXECS    executions per target [10000000]
#   FUZZ_JOBS     targets run at once, one per core [1]
#   FUZZ_MERGE    1: merge new coverage into fuzz/corpus/<name>/ [0]
#   FUZZ_ARGS     extra libFuzzer flags [-timeout=10 -rss_limit_mb=2048 -max_len=65536]
#   FUZZ_BUILD    where the binaries are: $FUZZ_BUILD/fuzz/fuzz_<name> [build-fuzz]
#   FUZZ_CAMPAIGN_DIR  [$FUZZ_BUILD/campaign]
#   FUZZ_DIR      the fuzz/ directory (corpus/, regress/, <name>.dict) [fuzz]
#
# Exit status: 0 when every target ran to its limit without a finding; 1 when a target crashed,
# leaked, timed out, ran out of memory, or could not run (or a merge failed); 130 when interrupted
# (the table of what ran is still written).
#
#   tools/fuzz_campaign.sh --selftest   builds three throwaway targets (one clean, one with a planted
#   crash, one with a planted leak) in build-fuzz/campaign-selftest/, runs a short campaign on them
#   there (nothing in fuzz/ is touched) and checks that both findings are caught, kept under their
#   hash and reported, that the campaign exits non-zero, that -runs stops a target, and that the
#   merge adds coverage.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)

if [ "${1:-}" = "--selftest" ]; then
    FUZZ_CC=${FUZZ_CC:-clang}
    T=${FUZZ_BUILD:-build-fuzz}/campaign-selftest
    case $T in /*) ;; *) T=$ROOT/$T ;; esac
    rm -rf "$T"
    mkdir -p "$T/bin/fuzz" "$T/fuzz/corpus/plant_ok" "$T/fuzz/corpus/plant_crash" \
        "$T/fuzz/corpus/plant_leak" "$T/src"
    # Branches that libFuzzer's comparison tracing finds in seconds.
    cat > "$T/src/fuzz_plant_ok.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    volatile int x = 0;
    if (n > 0 && d[0] == 'a') x++;
    if (n > 1 && d[1] == 'b') x++;
    if (n > 2 && d[2] == 'c') x++;
    if (n > 3 && d[3] == 'd') x++;
    return x * 0;
}
EOF
    cat > "$T/src/fuzz_plant_crash.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n >= 3 && d[0] == 'B' && d[1] == 'U' && d[2] == 'G') abort(); /* the planted crash */
    return 0;
}
EOF
    cat > "$T/src/fuzz_plant_leak.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
static void *volatile keep; /* volatile: the allocation escapes, is not optimized out */
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char *p = malloc(16);
    if (!p) return 0;
    memcpy(p, "x", 2);
    if (n == 2 && d[0] == 'L') { keep = p; keep = NULL; return 0; } /* the planted leak */
    free(p);
    return 0;
}
EOF
    for n in plant_ok plant_crash plant_leak; do
        "$FUZZ_CC" -g -O1 -fsanitize=fuzzer,address,undefined -o "$T/bin/fuzz/fuzz_$n" \
            "$T/src/fuzz_$n.c" || { echo "selftest: cannot build fuzz_$n with $FUZZ_CC"; exit 2; }
        printf 'seed' > "$T/fuzz/corpus/$n/seed"
    done
    echo "== selftest: a campaign over three throwaway targets (output in $T/out)"
    FUZZ_TARGETS="plant_ok plant_crash plant_leak" FUZZ_HOURS='' FUZZ_SECS=20 FUZZ_EXECS=200000 \
        FUZZ_JOBS=2 FUZZ_MERGE=1 FUZZ_BUILD="$T/bin" FUZZ_CAMPAIGN_DIR="$T/campaign" \
        FUZZ_DIR="$T/fuzz" FUZZ_ARGS="-timeout=10 -rss_limit_mb=2048" \
        bash "$0" > "$T/out" 2>&1
    rc=$?
    cat "$T/out"
    bad=0
    check() { if eval "$2"; then echo "selftest ok:   $1"; else echo "selftest FAIL: $1"; bad=1; fi; }
    kept_ok() { # $1: kind, $2: target — one input kept, named by its sha1, holding the trigger $3
        local f
        f=$(ls "$T/fuzz/regress/$2/$1"-* 2>/dev/null | head -n 1)
        [ -n "$f" ] && [ "$(basename "$f")" = "$1-$(sha1sum < "$f" | cut -d' ' -f1)" ] &&
            grep -q "$3" "$f" && grep -q "fuzz/regress/$2/$(basename "$f")" "$T/campaign/table.md"
    }
    check "the campaign exits 1 (got $rc)" '[ $rc -eq 1 ]'
    check "the planted crash is kept as fuzz/regress/plant_crash/crash-<sha1> and reported" \
        'kept_ok crash plant_crash BUG'
    check "the planted leak is kept as fuzz/regress/plant_leak/leak-<sha1> and reported" \
        'kept_ok leak plant_leak L'
    check "the clean target stops at FUZZ_EXECS (200000 runs) without a finding" \
        'grep "^| plant_ok |" "$T/campaign/table.md" | grep "| runs | no crash |" |
         awk -F"|" "{ exit !(\$3 + 0 >= 200000) }"'
    check "the merge adds coverage-increasing inputs to corpus/plant_ok/" \
        '[ "$(ls "$T/fuzz/corpus/plant_ok" | wc -l)" -gt 1 ]'
    check "table.md and history.tsv written" \
        '[ -s "$T/campaign/table.md" ] && [ "$(wc -l < "$T/campaign/history.tsv")" -eq 4 ]'
    # a second campaign starts from the corpus the first one left
    kept=$(find "$T/campaign/corpus/plant_ok" -type f | wc -l)
    FUZZ_TARGETS=plant_ok FUZZ_HOURS='' FUZZ_SECS=20 FUZZ_EXECS=1000 FUZZ_BUILD="$T/bin" \
        FUZZ_CAMPAIGN_DIR="$T/campaign" FUZZ_DIR="$T/fuzz" bash "$0" > "$T/out2" 2>&1
    rc=$?
    check "a second campaign resumes from the $kept kept corpus files (exit $rc)" \
        '[ $rc -eq 0 ] && grep "^| plant_ok |" "$T/campaign/table.md" | grep -q "| $kept → "'
    # a fuzzer that exits non-zero without an input (a broken build, a bad flag) is no pass
    printf '#!/bin/sh\necho "ERROR: cannot start" >&2\nexit 3\n' > "$T/bin/fuzz/fuzz_plant_broken"
    chmod +x "$T/bin/fuzz/fuzz_plant_broken"
    FUZZ_TARGETS=plant_broken FUZZ_HOURS='' FUZZ_SECS=5 FUZZ_BUILD="$T/bin" \
        FUZZ_CAMPAIGN_DIR="$T/campaign" FUZZ_DIR="$T/fuzz" bash "$0" > "$T/out4" 2>&1
    rc=$?
    check "a fuzzer failing without an input fails the campaign (exit $rc)" \
        '[ $rc -eq 1 ] && grep -q "^| plant_broken | .* FAILED: exit 3 without an input: ERROR: cannot start" \
         "$T/campaign/table.md"'
    # stopped early (SIGTERM; an interactive ^C reaches the fuzzers directly): a partial table
    FUZZ_TARGETS="plant_ok plant_ok2" FUZZ_HOURS='' FUZZ_SECS=60 FUZZ_BUILD="$T/bin" \
        FUZZ_CAMPAIGN_DIR="$T/campaign" FUZZ_DIR="$T/fuzz" bash "$0" > "$T/out3" 2>&1 &
    p=$!
    cp "$T/bin/fuzz/fuzz_plant_ok" "$T/bin/fuzz/fuzz_plant_ok2"
    sleep 3
    kill -TERM $p
    wait $p
    rc=$?
    check "an interrupted campaign exits 130 with a partial table (exit $rc)" \
        '[ $rc -eq 130 ] && grep -q "^| plant_ok | .* interrupted |" "$T/campaign/table.md" &&
         grep -q "^| plant_ok2 | .* not run" "$T/campaign/table.md"'
    [ $bad -eq 0 ] && echo "selftest: PASS" || echo "selftest: FAILED"
    exit $bad
fi

FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZ_DIR=${FUZZ_DIR:-fuzz}
C=${FUZZ_CAMPAIGN_DIR:-$FUZZ_BUILD/campaign}
case $C in /*) ;; *) C=$ROOT/$C ;; esac
case $FUZZ_BUILD in /*) ;; *) FUZZ_BUILD=$ROOT/$FUZZ_BUILD ;; esac
case $FUZZ_DIR in /*) ;; *) FUZZ_DIR=$ROOT/$FUZZ_DIR ;; esac
FUZZ_EXECS=${FUZZ_EXECS:-10000000}
FUZZ_JOBS=${FUZZ_JOBS:-1}
FUZZ_MERGE=${FUZZ_MERGE:-0}
FUZZ_ARGS=${FUZZ_ARGS:--timeout=10 -rss_limit_mb=2048 -max_len=65536}
if [ -z "${FUZZ_TARGETS:-}" ]; then
    FUZZ_TARGETS=$(cd "$FUZZ_DIR" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//' | tr '\n' ' ')
fi
read -r -a targets <<< "$FUZZ_TARGETS"
ntargets=${#targets[@]}
[ "$ntargets" -gt 0 ] || { echo "fuzz-campaign: no targets"; exit 1; }
case $FUZZ_JOBS in '' | *[!0-9]* | 0) echo "fuzz-campaign: FUZZ_JOBS=$FUZZ_JOBS"; exit 1 ;; esac
case $FUZZ_EXECS in '' | *[!0-9]* | 0) echo "fuzz-campaign: FUZZ_EXECS=$FUZZ_EXECS"; exit 1 ;; esac
[ "$FUZZ_JOBS" -le "$ntargets" ] || FUZZ_JOBS=$ntargets
rounds=$(( (ntargets + FUZZ_JOBS - 1) / FUZZ_JOBS ))
if [ -n "${FUZZ_HOURS:-}" ]; then # each round of FUZZ_JOBS targets gets an equal share
    secs=$(awk -v h="$FUZZ_HOURS" -v r="$rounds" \
        'BEGIN { if (h + 0 <= 0) exit 1; s = int(h * 3600 / r); print s < 1 ? 1 : s }') ||
        { echo "fuzz-campaign: FUZZ_HOURS=$FUZZ_HOURS is not a positive number"; exit 1; }
    budget="FUZZ_HOURS=$FUZZ_HOURS"
else
    secs=${FUZZ_SECS:-1800}
    case $secs in '' | *[!0-9]* | 0) echo "fuzz-campaign: FUZZ_SECS=$secs"; exit 1 ;; esac
    budget="FUZZ_SECS=$secs"
fi
for n in "${targets[@]}"; do
    [ -x "$FUZZ_BUILD/fuzz/fuzz_$n" ] || {
        echo "fuzz-campaign: $FUZZ_BUILD/fuzz/fuzz_$n is missing (make fuzz-build FUZZ_TARGETS=\"$n\")"
        exit 1
    }
done
rel() { case $1 in "$ROOT"/*) echo "${1#"$ROOT"/}" ;; *) echo "$1" ;; esac; }
hms() { printf '%d:%02d:%02d' $(($1 / 3600)) $(($1 / 60 % 60)) $(($1 % 60)); }
mkdir -p "$C/corpus" "$C/logs" "$C/artifacts" "$C/results" "$C/work"
started=$(date -u '+%Y-%m-%d %H:%M UTC')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
echo "== fuzz-campaign: $ntargets targets, each until $FUZZ_EXECS runs or $secs s ($(hms "$secs"))," \
    "$FUZZ_JOBS at a time: at most $(hms $((rounds * secs))) plus start-up$([ "$FUZZ_MERGE" = 1 ] && echo ' and merges')"
echo "   corpus and logs in $(rel "$C")/"

count_files() { find "$1" -maxdepth 1 -type f 2>/dev/null | wc -l; }

# One target: run, collect, keep findings, merge. Writes $C/results/<name> (sourced later).
run_target() {
    local n=$1 bin=$FUZZ_BUILD/fuzz/fuzz_$1 corpus=$C/corpus/$1 log=$C/logs/$1.log
    local art=$C/artifacts/$1 work=$C/work/$1 dict=() t0 t1 rc before
    mkdir -p "$corpus" "$art" "$work"
    for src in "$FUZZ_DIR/corpus/$n" "$FUZZ_DIR/regress/$n"; do
        [ -d "$src" ] && find "$src" -maxdepth 1 -type f -exec cp -n -t "$corpus" {} +
    done
    [ -f "$FUZZ_DIR/$n.dict" ] && dict=(-dict="$FUZZ_DIR/$n.dict")
    before=$(count_files "$corpus")
    rm -f "$art"/*
    t0=$(date +%s)
    # OMP_NUM_THREADS=1: one core per target (the library uses OpenMP)
    # shellcheck disable=SC2086
    (cd "$work" && OMP_NUM_THREADS=1 ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
        exec "$bin" $FUZZ_ARGS -runs="$FUZZ_EXECS" -max_total_time="$secs" -print_final_stats=1 \
        -artifact_prefix="$art/" "${dict[@]}" "$corpus") > "$log" 2>&1
    rc=$?
    t1=$(date +%s)
    local runs rate cov ft after kb result="no crash" stop found="" kind first="" merged=""
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -n "$runs" ] || runs=$(grep -aoE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    # libFuzzer's rate is runs / whole seconds, 0 under one second: then runs / wall time
    if [ -n "$runs" ] && { [ -z "$rate" ] || [ "$rate" = 0 ]; }; then
        rate=$((runs / (t1 - t0 > 0 ? t1 - t0 : 1)))
    fi
    cov=$(grep -aoE 'cov: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2)
    ft=$(grep -aoE 'ft: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2)
    for f in "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-*; do
        [ -f "$f" ] || continue
        kind=$(basename "$f" | cut -d- -f1)
        local keep
        keep=$kind-$(sha1sum < "$f" | cut -d' ' -f1)
        mkdir -p "$FUZZ_DIR/regress/$n"
        cp "$f" "$FUZZ_DIR/regress/$n/$keep"
        found="$found${found:+ }$(rel "$FUZZ_DIR/regress/$n/$keep")"
    done
    if [ -n "$found" ]; then
        result="FINDING"
        first=$(grep -am 1 -E 'ERROR: |runtime error|^fuzz: ' "$log" | sed 's/^==[0-9]*== *//')
    elif [ $rc -eq 72 ] || [ $rc -eq 130 ] || [ $rc -eq 143 ]; then
        result="interrupted"
    elif [ $rc -ne 0 ]; then
        result="FAILED"
        first="exit $rc without an input: $(grep -am 1 -E 'ERROR|error|fuzz:' "$log")"
    fi
    if [ "$result" != "no crash" ]; then stop="-"
    elif [ "${runs:-0}" -ge "$FUZZ_EXECS" ]; then stop="runs"
    else stop="time"; fi
    if [ "$FUZZ_MERGE" = 1 ] && [ "$result" != interrupted ]; then
        local dst=$FUZZ_DIR/corpus/$n m0
        mkdir -p "$dst"
        m0=$(count_files "$dst")
        # shellcheck disable=SC2086
        if (cd "$work" && OMP_NUM_THREADS=1 ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} \
            exec "$bin" $FUZZ_ARGS -merge=1 -artifact_prefix="$art/merge-" "$dst" "$corpus") \
            > "$C/logs/$n.merge.log" 2>&1; then
            merged=$(( $(count_files "$dst") - m0 ))
        else
            merged="FAILED"
            [ "$result" = "no crash" ] && result="FAILED" &&
                first="merge failed: see $(rel "$C/logs/$n.merge.log")"
        fi
    fi
    after=$(count_files "$corpus")
    kb=$(du -sk "$corpus" | cut -f1)
    {
        printf 'r_runs=%q\nr_rate=%q\nr_secs=%q\nr_cov=%q\nr_ft=%q\n' "${runs:-?}" "${rate:-?}" \
            $((t1 - t0)) "${cov:-?}" "${ft:-?}"
        printf 'r_before=%q\nr_after=%q\nr_kb=%q\nr_result=%q\nr_stop=%q\nr_found=%q\n' "$before" \
            "$after" "$kb" "$result" "$stop" "$found"
        printf 'r_first=%q\nr_merged=%q\nr_rc=%q\n' "$first" "$merged" "$rc"
    } > "$C/results/$n"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" "$commit" \
        "$n" "${runs:-?}" $((t1 - t0)) "${rate:-?}" "${cov:-?}" "${ft:-?}" "$after" "$result" \
        "${found:--}" >> "$C/history.tsv"
    printf 'fuzz-campaign %-14s %s after %s runs in %ss (cov %s, ft %s, corpus %s -> %s)%s\n' "$n" \
        "$result" "${runs:-?}" $((t1 - t0)) "${cov:-?}" "${ft:-?}" "$before" "$after" \
        "${found:+: $found}"
}

pids=()
interrupted=0
on_signal() {
    interrupted=1
    # the fuzzers are children of the run_target subshells (which, in the background, ignore INT)
    for p in "${pids[@]}"; do pkill -INT -P "$p" 2>/dev/null; done
}
trap on_signal INT TERM
[ -s "$C/history.tsv" ] || printf 'date\tcommit\ttarget\truns\tseconds\texec_per_s\tcov\tft\tcorpus\tresult\tinputs\n' > "$C/history.tsv"
for n in "${targets[@]}"; do rm -f "$C/results/$n"; done
for n in "${targets[@]}"; do
    [ $interrupted -eq 1 ] && break
    while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do wait -n; done
    [ $interrupted -eq 1 ] && break
    run_target "$n" &
    pids+=($!)
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait; done

# ---- the table ----
table=$C/table.md
fail=0
{
    echo "# fuzz campaign, $started (commit $commit)"
    echo
    echo "$ntargets targets, each until $FUZZ_EXECS runs or $secs s ($budget), $FUZZ_JOBS at a time;" \
        "libFuzzer flags: \`$FUZZ_ARGS\`. Corpus: $(rel "$C")/corpus/<name>/."
    echo
    printf '| target | executions | exec/s | wall | cov | ft | corpus (files) | corpus KiB | stopped by | result |%s\n' \
        "$([ "$FUZZ_MERGE" = 1 ] && echo ' added to fuzz/corpus |')"
    printf '|---|---:|---:|---:|---:|---:|---:|---:|---|---|%s\n' "$([ "$FUZZ_MERGE" = 1 ] && printf '%s' '---:|')"
    for n in "${targets[@]}"; do
        if [ ! -f "$C/results/$n" ]; then
            echo "| $n | | | | | | | | - | not run (interrupted) |$([ "$FUZZ_MERGE" = 1 ] && echo ' |')"
            continue
        fi
        # shellcheck disable=SC1090
        . "$C/results/$n"
        res=$r_result
        [ -n "$r_found" ] && res="FINDING: $(echo "$r_found" | sed 's/ /<br>/g')"
        [ "$r_result" = FAILED ] && res="FAILED: $r_first"
        printf '| %s | %s | %s | %s | %s | %s | %s → %s | %s | %s | %s |%s\n' "$n" "$r_runs" \
            "$r_rate" "$(hms "$r_secs")" "$r_cov" "$r_ft" "$r_before" "$r_after" "$r_kb" "$r_stop" \
            "$res" "$([ "$FUZZ_MERGE" = 1 ] && echo " $r_merged |")"
    done
    findings=0
    for n in "${targets[@]}"; do
        [ -f "$C/results/$n" ] || continue
        . "$C/results/$n"
        [ "$r_result" = "FINDING" ] || [ "$r_result" = "FAILED" ] || continue
        [ $findings -eq 0 ] && printf '\n## Findings (fix each; `make test` replays fuzz/regress/)\n\n'
        findings=$((findings + 1))
        echo "- **$n**: ${r_first:-see the log} (log: $(rel "$C/logs/$n.log"))"
        for f in $r_found; do
            echo "  - \`$f\` — reproduce: \`$(rel "$FUZZ_BUILD/fuzz/fuzz_$n") $f\`"
        done
    done
} > "$table"
for n in "${targets[@]}"; do
    if [ ! -f "$C/results/$n" ]; then # not started after an interrupt, else a broken run
        [ $interrupted -eq 1 ] || { fail=1; echo "fuzz-campaign: $n left no result"; }
        continue
    fi
    . "$C/results/$n"
    case $r_result in FINDING | FAILED) fail=1 ;; interrupted) interrupted=1 ;; esac
done
echo
cat "$table"
echo
if [ $fail -ne 0 ]; then
    echo "fuzz-campaign: FAILED$([ $interrupted -eq 1 ] && echo ' (and interrupted)') — findings above" \
        "(inputs kept in $(rel "$FUZZ_DIR")/regress/), table in $(rel "$table")"
    exit 1
elif [ $interrupted -ne 0 ]; then
    echo "fuzz-campaign: interrupted — partial table in $(rel "$table")"
    exit 130
fi
echo "fuzz-campaign: no finding — table in $(rel "$table")"
