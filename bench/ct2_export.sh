#!/bin/sh
# Issue 17: attn's translator exported as a Hugging Face M2M100 directory (attn export
# --format hf-m2m100), converted by CTranslate2's ct2-transformers-converter, and the same source
# sentences translated by CTranslate2 and by `attn translate` on the export (both as
# transformers' generate: length penalty 1), each side at its best thread split / batch setting
# of a few tried (bench/ct2_export.py says which and how it times them); prints every setting's
# target tokens/s, each side's best, the ratio attn / CTranslate2 and how many outputs are
# identical. Not part of `make test` (it needs .venv-bench with ctranslate2: sh bench/setup.sh).
# Timing: run it on a quiet machine (here: sh /work/notes/quiet.sh sh bench/ct2_export.sh ...).
#   sh bench/ct2_export.sh [BUILD] [MODEL]     MODEL: an attn train directory whose config
#                                              exports as M2M100 (default models/demo-en-zh,
#                                              trained with configs/demo-en-zh-m2m100.json)
#   N=1000 sh bench/ct2_export.sh              sentences of MODEL/test.src (default 1000)
#   PRECISION=int8 sh bench/ct2_export.sh      f32 (default), int8 (CTranslate2's int8 and
#                                              int8_float32, attn --precision int8) or bf16
#   BEAMS="1 4" THREADS=2 PASSES=1             beam sizes (default 4), threads, timed passes
#   CT2_BATCHES=... ATTN_BATCHES=...           the settings tried (ct2_export.py's defaults)
#   ATTN_Q8=int8,f32                           with int8: attn's q8_0 too, with these
#                                              --int8-activations (default: not run)
#   ROUNDS=3                                   every setting of both sides, in turn, this many
#                                              times; each setting's best counts (default 1:
#                                              this VM's speed drifts over minutes)
#   ATTN_EARLY=true,false                      attn's --early-stopping values (default both):
#                                              the first (true: CTranslate2's own stopping rule)
#                                              gives the ratio and PyTorch's early_stopping
#   TORCH=0                                    skip PyTorch (bench/torch_translate_hf.py:
#                                              transformers' generate with its KV cache on
#                                              the export, same ids, same precision)
# A Marian export converts too, but CTranslate2's Marian conventions are not attn's model: it
# starts the decoder from a zero embedding and drops the last vocabulary row (Marian's <pad>),
# so only the M2M100 export is the same model in CTranslate2.
set -e
B=${1:-build}
MODEL=${2:-models/demo-en-zh}
N=${N:-1000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=.venv-bench/bin/python
"$PY" -c "import ctranslate2" 2>/dev/null || { echo "error: no ctranslate2 in .venv-bench (sh bench/setup.sh)"; exit 1; }
OUT="$B/ct2-export"
rm -rf "$OUT"
mkdir -p "$OUT"
head -n "$N" "$MODEL/test.src" > "$OUT/src.txt"
"$B/attn" export --format hf-m2m100 "$MODEL" "$OUT/hf"
echo "== exported $MODEL as $OUT/hf (M2M100ForConditionalGeneration); $(grep -c '' "$OUT/src.txt") sentences"
echo "== $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for beam in ${BEAMS:-4}; do
  "$PY" bench/ct2_export.py "$OUT/hf" "$OUT/ct2" "$OUT/src.txt" "$OUT/beam$beam" --attn "$B/attn" \
    --precision "${PRECISION:-f32}" --beam "$beam" --threads "${THREADS:-2}" --passes "${PASSES:-1}" \
    --attn-early "${ATTN_EARLY:-true,false}" --rounds "${ROUNDS:-1}" \
    ${CT2_BATCHES:+--ct2-batches "$CT2_BATCHES"} ${ATTN_BATCHES:+--attn-batches "$ATTN_BATCHES"} \
    ${ATTN_Q8:+--attn-q8 "$ATTN_Q8"}
  if [ "${TORCH:-1}" != 0 ]; then
    "$PY" bench/torch_translate_hf.py "$OUT/hf" "$OUT/beam$beam/src.ids" --beam "$beam" \
      --threads "${THREADS:-2}" --precision "${PRECISION:-f32}" --out "$OUT/beam$beam/torch.ids" \
      --early-stopping "$(echo "${ATTN_EARLY:-true,false}" | cut -d, -f1)" \
      --compare "$OUT/beam$beam/attn.ids" --summary "$OUT/beam$beam/summary.json"
  fi
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
