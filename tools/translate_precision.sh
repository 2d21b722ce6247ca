#!/bin/sh
# BLEU of the demo translator (models/demo-en-zh, `make demo`) on its whole test split in each
# precision of `attn translate --precision`, beam 4 and greedy, and how many outputs are identical
# to float32's. Fails (exit 1) when a precision's BLEU is more than 0.3 from float32's.
#   sh tools/translate_precision.sh [BUILD]        (default build; run from the repository root)
#   ATTN_PRECISIONS="f32 int8"                     the precisions (default: f32 int8 q8_0 q8_0-f32
#                                                  bf16; q8_0-f32 is q8_0 with --int8-activations f32)
#   ATTN_BF16_REF=1                                without AVX512-BF16, run bf16 on the ref backend
#                                                  (plain loops: the same arithmetic, ~100-200x slower)
#   ATTN_DEMO_DIR=DIR                              another model directory with the same files
set -e
B=${1:-build}
DIR=${ATTN_DEMO_DIR:-models/demo-en-zh}
PRECS=${ATTN_PRECISIONS:-f32 int8 q8_0 q8_0-f32 bf16}
[ -f "$DIR/test.src" ] || { echo "no $DIR/test.src (make demo trains the model)"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
bad=0
for beam in 4 1; do
  echo "== $(wc -l < "$DIR/test.src") test sentences, beam $beam"
  f32=
  for p in f32 $PRECS; do
    [ "$p" = f32 ] && [ -n "$f32" ] && continue
    opts="--precision $p" env=
    [ "$p" = q8_0-f32 ] && opts="--precision q8_0 --int8-activations f32"
    if [ "$p" = bf16 ] && ! "$B/attn" translate --model "$DIR" --precision bf16 x >/dev/null 2>&1; then
      if [ -n "${ATTN_BF16_REF:-}" ]; then
        env="ATTN_BACKEND=ref"
      else
        echo "  bf16: not available on this CPU (AVX512-BF16); ATTN_BF16_REF=1 runs it on the ref backend"
        continue
      fi
    fi
    out="$TMP/hyp.$p.$beam"
    t0=$(date +%s.%N)
    env $env "$B/attn" translate --model "$DIR" --beam "$beam" $opts < "$DIR/test.src" > "$out"
    t1=$(date +%s.%N)
    score=$("$B/attn" bleu "$out" "$DIR"/test.ref.* | awk '{print $3}')
    if [ "$p" = f32 ]; then
      f32=$score
      same=$(wc -l < "$out")
    else
      same=$(paste -d '\t' "$TMP/hyp.f32.$beam" "$out" | awk -F '\t' '$1 == $2' | wc -l)
    fi
    diff=$(awk -v a="$score" -v b="$f32" 'BEGIN { d = a - b; printf "%+.2f", d }')
    ok=$(awk -v a="$score" -v b="$f32" 'BEGIN { d = a - b; print (d <= 0.3 && d >= -0.3) ? "ok" : "FAIL" }')
    [ "$ok" = ok ] || bad=1
    printf '  %-9s BLEU %6s (%s vs f32) %s  identical to f32: %4d  %.1f s%s\n' "$p" "$score" \
      "$diff" "$ok" "$same" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
      "${env:+ ($env)}"
  done
done
exit $bad
