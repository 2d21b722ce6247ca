#!/bin/sh
# Side-by-side benchmarks: for each bench/bench_NAME.c program there is a bench/torch_NAME.py
# peer. Both run in this same invocation at the same thread count (ATTN_BENCH_THREADS, default 2)
# and print JSON lines {"bench","case","metric","value"} (higher is better); bench/compare.py
# joins them and prints attn, PyTorch and the ratio attn/PyTorch.
#   sh bench/run.sh [BUILD] [NAME...]
# `sh bench/run.sh build gpt` runs issue 4's three GPT targets: training throughput and generation
# (bench_gpt.c vs torch_gpt.py + torch_gpt_generate.py), then bench/gpt_shakespeare.sh.
# `sh bench/run.sh build llamacpp` runs bench/run_llamacpp.sh instead (issue 16: attn's
# bench_gguf.c against llama.cpp's llama-bench on the same GGUF files); it is not in the default
# list, which holds the benches with a PyTorch peer.
BUILD=${1:-build}; [ $# -gt 0 ] && shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
sh bench/setup.sh || exit 1
THREADS=${ATTN_BENCH_THREADS:-2}
export OMP_NUM_THREADS=$THREADS ATTN_BENCH_THREADS=$THREADS
names="$*"
if [ -z "$names" ]; then
  for f in bench/bench_*.c; do
    n=$(basename "$f" .c); n=${n#bench_}
    [ -f "bench/torch_$n.py" ] && names="$names $n"
  done
fi
out=$(mktemp -d)
# A bench may hand data (batches, weights) to its PyTorch peer through this directory.
export ATTN_BENCH_DIR="$out"
for n in $names; do
  if [ "$n" = llamacpp ]; then
    sh bench/run_llamacpp.sh "$BUILD" || { echo "error: run_llamacpp.sh failed"; exit 1; }
    continue
  fi
  echo "== $n (threads=$THREADS)"
  "$BUILD/bench/bench_$n" > "$out/$n.attn.jsonl" || { echo "error: bench_$n failed"; exit 1; }
  .venv-bench/bin/python "bench/torch_$n.py" > "$out/$n.torch.jsonl" || { echo "error: torch_$n.py failed"; exit 1; }
  .venv-bench/bin/python bench/compare.py "$out/$n.attn.jsonl" "$out/$n.torch.jsonl"
  # gpt: also the shakespeare-char training race (minutes; ATTN_BENCH_SHAKESPEARE=0 skips it)
  if [ "$n" = gpt ] && [ "${ATTN_BENCH_SHAKESPEARE:-1}" != 0 ]; then
    sh bench/gpt_shakespeare.sh "$BUILD" || { echo "error: gpt_shakespeare.sh failed"; exit 1; }
  fi
done
rm -rf "$out"
