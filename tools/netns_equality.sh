#!/bin/sh
# netns_equality.sh — issue 19's two-host equality: `attn train --arch gpt` for STEPS steps as
# 2 ranks on the two "hosts" of tools/netns_2host.sh (network namespaces + veth, Open MPI TCP)
# against one process with the same global batch; the loss of every step and the final weights
# must agree within the tolerances of tests/test_train_mpi.c (relative 1e-5 for the losses,
# absolute 1e-5 for the weights: the sums run in another order, so bit equality is not
# expected). Also prints the bytes that crossed the veth per step against the gradient's size.
#
#   sh tools/netns_equality.sh [BUILD]          (root; ATTN=PATH for another attn binary)
# Model: configs/gpt-shakespeare-char.json (4 layers, width 128, context 64) with dropout 0.1
# (the ranks must draw the same masks as the single process), batch 12, 1 thread per process,
# STEPS (20) steps on tinyshakespeare. Exit status 0 when both agree, 1 when not, 77 (with the
# reason) when it cannot run here: no MPI in attn, no namespaces.
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
ATTN=${ATTN:-$ROOT/$BUILD/attn}
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
DATA="$ROOT/../shared/data/tinyshakespeare/input.txt"
STEPS=${STEPS:-20}
PROG=netns_equality
[ -x "$ATTN" ] || { echo "$PROG: error: $ATTN missing (make BUILD=$BUILD)"; exit 1; }
info=$("$ATTN" info 2>&1 | grep '^mpi: ' | head -n 1)
case $info in
  "" | "mpi: no"*) echo "$PROG: skipped: $ATTN was built without MPI ('attn info': ${info:-no mpi line})"; exit 77 ;;
esac
work=$(mktemp -d "${TMPDIR:-/tmp}/$PROG.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
set -- train --arch gpt --data "$DATA" --config configs/gpt-shakespeare-char.json --dropout 0.1 \
  --batch 12 --max-steps "$STEPS" --eval-every 1000000 --eval-iters 1 --log-every "$STEPS"
echo "== 1 process"
"$ATTN" "$@" --out "$work/one" --metrics "$work/one.jsonl" 2>&1 | tail -n 1 || exit 1
echo "== 2 ranks on 2 hosts (tools/netns_2host.sh)"
sh tools/netns_2host.sh "$ATTN" "$@" --out "$work/two" --metrics "$work/two.jsonl" > "$work/two.log" 2>&1
rc=$?
grep -E "^(done|mpi:|netns_2host)" "$work/two.log"
if [ $rc -eq 77 ]; then echo "$PROG: skipped: $(sed -n 's/^netns_2host: skipped: //p' "$work/two.log")"; exit 77; fi
[ $rc -eq 0 ] || { echo "$PROG: FAILED: the 2-rank run exited with status $rc"; cat "$work/two.log"; exit 1; }
bytes=$(sed -n 's/^netns_2host: veth bytes: h0 sent \([0-9]*\) .*/\1/p' "$work/two.log")
"$PY" - "$work" "$STEPS" "${bytes:-0}" <<'EOF'
import json, sys
sys.path.insert(0, "tools")
import numpy as np
import stfile
work, steps, sent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def losses(p):
    out = {}
    for line in open(p):
        j = json.loads(line)
        if "loss" in j and "step" in j:
            out[j["step"]] = j["loss"]
    return out
a, b = losses(f"{work}/one.jsonl"), losses(f"{work}/two.jsonl")
bad = []
if sorted(a) != list(range(1, steps + 1)) or sorted(b) != sorted(a):
    bad.append(f"steps differ: {sorted(a)} vs {sorted(b)}")
rel = max(abs(a[s] - b[s]) / abs(a[s]) for s in a if s in b)
wa, wb = stfile.load(f"{work}/one/model.safetensors")[0], stfile.load(f"{work}/two/model.safetensors")[0]
if sorted(wa) != sorted(wb):
    bad.append("the weight files name different tensors")
wd = max(float(np.max(np.abs(wa[k].astype(np.float64) - wb[k]))) for k in wa if k in wb)
n = sum(v.size for v in wa.values())
print(f"losses of {len(a)} steps: max relative difference {rel:.3g} (tolerance 1e-5); final weights "
      f"({n} parameters): max absolute difference {wd:.3g} (tolerance 1e-5)")
print(f"veth: h0 sent {sent} bytes = {sent / steps / 1e6:.2f} MB per step; the gradient is "
      f"{4 * n / 1e6:.2f} MB (a 2-rank ring all-reduce sends it once each way per step)")
if rel > 1e-5: bad.append(f"losses differ by {rel:.3g} relative")
if wd > 1e-5: bad.append(f"weights differ by {wd:.3g}")
if bad:
    print("netns_equality: FAILED: " + "; ".join(bad)); sys.exit(1)
print("netns_equality: ok: 2 ranks on 2 hosts = 1 process")
EOF
