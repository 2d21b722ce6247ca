#!/bin/sh
# Issue 17: attn's translator exported as a Hugging Face M2M100 directory (attn export
# --format hf-m2m100) and converted by CTranslate2's ct2-transformers-converter; the same source
# sentences translated by CTranslate2 and by `attn translate` on the export (both transformers'
# decoding: length penalty 1), greedy and beam 4; prints how many outputs are identical and
# each side's time. Not part of `make test` (it needs .venv-bench with ctranslate2: sh
# bench/setup.sh).
#   sh bench/ct2_export.sh [BUILD] [MODEL]     MODEL: an attn train directory whose config
#                                              exports as M2M100 (default models/demo-en-zh,
#                                              trained with configs/demo-en-zh-m2m100.json)
#   N=1000 sh bench/ct2_export.sh              sentences of MODEL/test.src (default 200)
#   PRECISION=int8 sh bench/ct2_export.sh      both sides in int8 (CTranslate2's compute_type
#                                              int8, attn translate --precision int8); also bf16
# A Marian export converts too, but CTranslate2's Marian conventions are not attn's model: it
# starts the decoder from a zero embedding and drops the last vocabulary row (Marian's <pad>),
# so only the M2M100 export is the same model in CTranslate2.
set -e
B=${1:-build}
MODEL=${2:-models/demo-en-zh}
N=${N:-200}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=.venv-bench/bin/python
"$PY" -c "import ctranslate2" 2>/dev/null || { echo "error: no ctranslate2 in .venv-bench (sh bench/setup.sh)"; exit 1; }
OUT="$B/ct2-export"
rm -rf "$OUT"
mkdir -p "$OUT"
head -n "$N" "$MODEL/test.src" > "$OUT/src.txt"
"$B/attn" export --format hf-m2m100 "$MODEL" "$OUT/hf"
echo "== exported $MODEL as $OUT/hf (M2M100ForConditionalGeneration)"
PRECISION=${PRECISION:-f32}
CT=default
case $PRECISION in f32) ;; bf16) CT=bfloat16 ;; *) CT=$PRECISION ;; esac
for beam in 1 4; do
  "$PY" bench/ct2_export.py "$OUT/hf" "$OUT/ct2" "$OUT/src.txt" "$OUT/ct2.beam$beam" --beam $beam --threads 2 --compute-type $CT
  t0=$(date +%s.%N)
  "$B/attn" --threads 2 translate --model "$OUT/hf" --beam $beam --precision "$PRECISION" < "$OUT/src.txt" > "$OUT/attn.beam$beam"
  t1=$(date +%s.%N)
  same=$(paste -d '\t' "$OUT/ct2.beam$beam" "$OUT/attn.beam$beam" | awk -F '\t' '$1 == $2' | wc -l)
  echo "beam $beam: attn translate on the export $(echo "$t1 - $t0" | bc) s; $same of $(wc -l < "$OUT/src.txt") outputs identical to CTranslate2's"
done
