#!/bin/sh
# `make demo`: train the English -> Chinese translation model on the Tatoeba pairs within a time
# budget (the whole demo stays under 10 minutes on a 2-core machine), translate the article's
# example, and score the held-out test set with BLEU (sacreBLEU zh).
#   ATTN_DEMO_RETRAIN=1   train again even if models/demo-en-zh already holds a model
#   ATTN_DEMO_BUDGET=S    training seconds (default 480)
set -e
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DIR=models/demo-en-zh
DATA=../shared/data/tatoeba-eng-cmn/cmn.txt
BUDGET=${ATTN_DEMO_BUDGET:-480}
mkdir -p models
if [ -f "$DIR/training_state.json" ] && [ -z "$ATTN_DEMO_RETRAIN" ]; then
  echo "== using the model already in $DIR (ATTN_DEMO_RETRAIN=1 trains it again)"
else
  rm -rf "$DIR"
  echo "== training $DIR for ${BUDGET}s on $DATA"
  "$B/attn" train --data "$DATA" --out "$DIR" --config configs/demo-en-zh.json \
    --time-budget "$BUDGET" --max-tokens 2500 --lr 2e-3 --warmup-steps 300 \
    --eval-every 400 --bleu-sentences 200 --save-every 400 --log-every 25
fi
echo
echo "== attn translate --model $DIR \"Knowledge is power.\""
"$B/attn" translate --model "$DIR" "Knowledge is power."
echo
echo "== test set: $(wc -l < "$DIR/test.src") English sentences (held out by English sentence), beam 4"
"$B/attn" translate --model "$DIR" --beam 4 < "$DIR/test.src" > "$DIR/test.hyp.beam4"
"$B/attn" bleu "$DIR/test.hyp.beam4" "$DIR"/test.ref.*
echo "== greedy"
"$B/attn" translate --model "$DIR" --beam 1 < "$DIR/test.src" > "$DIR/test.hyp.greedy"
"$B/attn" bleu "$DIR/test.hyp.greedy" "$DIR"/test.ref.*
