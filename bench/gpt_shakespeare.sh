#!/bin/sh
# Issue 4's shakespeare-char target: nanoGPT's CPU configuration (4 layers, 4 heads, width 128,
# context 64, batch 12, 2000 iterations, no dropout, lr 1e-3 with 100 warmup steps and cosine
# decay to 1e-4 over the 2000, AdamW betas (0.9, 0.99), weight decay 0.1, clipping 1.0) on
# tinyshakespeare (first 90% train, last 10% validation), trained by attn and by its PyTorch twin
# (bench/torch_gpt.py --shakespeare, nanoGPT's model and loop) at the same thread count, from the
# same initial weights and on the same batches. Prints each side's validation loss (the mean over
# the trainer's 200 fixed validation batches of 12 x 64 characters) and wall time.
# Wall time: attn's is the whole `attn train` command (start-up, reading and encoding the text,
# training, the final evaluation, the final checkpoint); the twin's is its training loop plus the
# final evaluation only (imports and data preparation excluded), which favours the twin.
# Target: attn's validation loss <= 1.88 in at most half the PyTorch twin's wall time.
#   sh bench/gpt_shakespeare.sh [BUILD]       (ATTN_BENCH_THREADS, default 2;
#                                              ATTN_BENCH_SHAKESPEARE_STEPS, default 2000;
#                                              ATTN_BENCH_PRECISION=bf16: attn trains with
#                                              --precision bf16, the twin stays float32)
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
THREADS=${ATTN_BENCH_THREADS:-2}
STEPS=${ATTN_BENCH_SHAKESPEARE_STEPS:-2000}
PREC=${ATTN_BENCH_PRECISION:-f32}
export OMP_NUM_THREADS=$THREADS ATTN_BENCH_THREADS=$THREADS
DATA=../shared/data/tinyshakespeare/input.txt
[ -x "$BUILD/attn" ] || { echo "error: $BUILD/attn missing (make BUILD=$BUILD)"; exit 1; }
[ -r "$DATA" ] || { echo "error: $DATA missing"; exit 1; }
sh bench/setup.sh || exit 1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
OPTS="--config configs/gpt-shakespeare-char.json --data $DATA --tokenizer char --batch 12
      --lr 1e-3 --min-lr 1e-4 --warmup-steps 100 --lr-decay-steps $STEPS --beta1 0.9 --beta2 0.99
      --weight-decay 0.1 --grad-clip 1.0 --seed 1337 --eval-iters 200"
now() { date +%s.%N; }

echo "== gpt_shakespeare (threads=$THREADS, $STEPS steps, attn precision $PREC)"
# attn: one plain command, timed whole (data loading, training, final evaluation, checkpoint)
t0=$(now)
"$BUILD/attn" --threads "$THREADS" train --arch gpt $OPTS --precision "$PREC" --max-steps "$STEPS" \
  --eval-every 1000000 --save-every 1000000 --log-every 250 --out "$out/attn" > "$out/attn.log" 2>&1 \
  || { cat "$out/attn.log"; echo "error: attn train failed"; exit 1; }
t1=$(now)
grep -E '^(step|done)' "$out/attn.log" | sed 's/^/  attn: /'
attn_val=$(sed -n 's/.*val loss \([0-9.]*\).*/\1/p' "$out/attn.log" | tail -n 1)
attn_s=$(echo "$t1 $t0" | awk '{printf "%.1f", $1 - $2}')

# the same initial weights for the twin (not timed)
"$BUILD/attn" --threads "$THREADS" train --arch gpt $OPTS --max-steps 0 --eval-iters 1 \
  --out "$out/init" > "$out/init.log" 2>&1 || { cat "$out/init.log"; exit 1; }
.venv-bench/bin/python bench/torch_gpt.py --shakespeare --init "$out/init" --data "$DATA" \
  --steps "$STEPS" --batch 12 --lr 1e-3 --min-lr 1e-4 --warmup 100 --decay "$STEPS" \
  --weight-decay 0.1 --beta1 0.9 --beta2 0.99 --clip 1.0 --seed 1337 --eval-iters 200 \
  --log-every 250 > "$out/torch.json" 2> "$out/torch.log" || { cat "$out/torch.log"; exit 1; }
sed 's/^/  torch:/' "$out/torch.log"
torch_val=$(.venv-bench/bin/python -c "import json,sys; print('%.4f' % json.load(open(sys.argv[1]))['val_loss'])" "$out/torch.json")
torch_s=$(.venv-bench/bin/python -c "import json,sys; print('%.1f' % json.load(open(sys.argv[1]))['seconds'])" "$out/torch.json")

printf "  %-10s %12s %12s\n" "" "val loss" "wall s"
printf "  %-10s %12s %12s\n" "attn" "$attn_val" "$attn_s"
printf "  %-10s %12s %12s\n" "pytorch" "$torch_val" "$torch_s"
echo "$attn_val $attn_s $torch_s" | awk '{
  printf "  attn wall / pytorch wall = %.2f (target <= 0.50); attn val loss %.4f (target <= 1.88): %s\n",
         $2 / $3, $1, ($1 <= 1.88 && $2 <= 0.5 * $3) ? "MET" : "not met" }'
