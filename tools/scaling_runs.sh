#!/bin/sh
# scaling_runs.sh — docs/distributed-scaling.md's step-time measurements, one run after the other,
# each with the machine's load before it:
#   1. bench/'s GPT config (configs/gpt-char-6l.json: 6 layers, width 384, context 256, dropout
#      0.2; batch 8 = 2048 tokens per step), 1 process x 2 threads
#   2. the same, 2 ranks x 1 thread (mpirun -np 2, shared memory)
#   3. the same, 2 ranks x 1 thread on the two "hosts" of tools/netns_2host.sh (TCP over a veth;
#      skipped with the reason where namespaces cannot be made)
#   4. GPT-2-124M (configs/gpt2-124m.json; batch 1 = 1024 tokens per step), 1 process x 2 threads
#      (GPT2_STEPS steps: about 10 s each on the 2-core development machine; GPT2_STEPS=0 skips)
# Each prints attn's summary line (tokens/s over the training steps alone) and, for the 2-rank
# runs, attn's "mpi:" line (gradient bytes, buckets, the wait after the backward, time in all
# collectives per step) and the bytes that crossed the veth.
#   sh tools/scaling_runs.sh [BUILD]        (ATTN=PATH another attn; STEPS, default 12)
# Timing: run it on a quiet machine (it takes both cores for 2-3 minutes); the load is printed.
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
ATTN=${ATTN:-$ROOT/$BUILD/attn}
DATA="$ROOT/../shared/data/tinyshakespeare/input.txt"
STEPS=${STEPS:-12}
GPT2_STEPS=${GPT2_STEPS:-3}
[ -x "$ATTN" ] || { echo "error: $ATTN missing (make BUILD=$BUILD)"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/scaling_runs.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
root_arg=""
[ "$(id -u)" -eq 0 ] && root_arg=--allow-run-as-root
section() { echo; echo "== $1 (load: $(cut -d' ' -f1-3 /proc/loadavg))"; }
show() { grep -E '^(done|time budget|mpi:|netns_2host|model:|attn: error)' "$1"; }
set -- train --arch gpt --data "$DATA" --config configs/gpt-char-6l.json --batch 8 \
  --max-steps "$STEPS" --eval-every 1000000 --eval-iters 1 --log-every "$STEPS"
rc=0
section "1. bench GPT config, 1 process x 2 threads"
OMP_NUM_THREADS=2 "$ATTN" "$@" --out "$work/a" > "$work/a.log" 2>&1 || rc=1
show "$work/a.log"
section "2. bench GPT config, 2 ranks x 1 thread (mpirun, shared memory)"
OMP_NUM_THREADS=1 mpirun $root_arg -np 2 --bind-to none "$ATTN" "$@" --out "$work/b" > "$work/b.log" 2>&1 || rc=1
show "$work/b.log"
section "3. bench GPT config, 2 ranks x 1 thread on 2 hosts (tools/netns_2host.sh, TCP over a veth)"
OMP_NUM_THREADS=1 sh tools/netns_2host.sh "$ATTN" "$@" --out "$work/c" > "$work/c.log" 2>&1
r=$?
show "$work/c.log"
if [ $r -eq 77 ]; then grep 'skipped' "$work/c.log"; elif [ $r -ne 0 ]; then rc=1; fi
if [ "$GPT2_STEPS" -gt 0 ]; then
  section "4. GPT-2-124M, batch 1 x 1024 tokens, 1 process x 2 threads"
  OMP_NUM_THREADS=2 "$ATTN" train --arch gpt --data "$DATA" --config configs/gpt2-124m.json \
    --batch 1 --max-steps "$GPT2_STEPS" --eval-every 1000000 --eval-iters 1 --log-every 1 \
    --out "$work/d" > "$work/d.log" 2>&1 || rc=1
  grep -E '^(step|done|model:)' "$work/d.log"
fi
echo
echo "(load after: $(cut -d' ' -f1-3 /proc/loadavg))"
[ $rc -eq 0 ] || { echo "error: a run failed:"; tail -n 5 "$work"/*.log; }
exit $rc
