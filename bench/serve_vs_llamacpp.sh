#!/bin/sh
# Issue 18's side by side with llama-server: `attn serve` and llama.cpp's llama-server on the same
# GGUF file, one after the other in this same run, each at ATTN_BENCH_THREADS (2) threads and 16
# slots, driven by the same load generator (bench/serve_load.py: streamed greedy chat completions
# through the openai client, --tokens generated tokens per stream) at 1, 4 and 16 concurrent
# streams. Prints each server's aggregate tokens/s per level and attn / llama-server.
#   sh bench/serve_vs_llamacpp.sh [BUILD]
# llama-server: bench/llama.cpp-build/build/bin/llama-server (sh bench/llamacpp_setup.sh), with
#   -m FILE -t T -tb T -np 16 -c 16*1024 --cont-batching --port P (its defaults otherwise: F16 KV
#   cache, flash attention auto, CPU weight repacking, the chat template from the GGUF file).
# attn: BUILD/attn serve --model smol=FILE --threads T --slots 16 [--quant-act $ATTN_QUANT_ACT]
#   [--kv-type $ATTN_KV_TYPE]. ATTN_QUANT_ACT=q8 (the default here) quantizes activations to int8
#   for the products as llama.cpp does (the same arithmetic on both sides); ATTN_QUANT_ACT=f32 is
#   attn's exact mode. ATTN_KV_TYPE=f16 (the default here) caches keys and values as binary16, as
#   llama-server's default F16 KV cache does; f32 is attn's default.
# Each level runs SERVE_REPEAT (3) times; the best run of each counts (warm-up: the load generator
# first runs each conversation alone, the reference replies, on both servers).
# Environment: SERVE_FILE (models/SmolLM2-135M-Instruct.Q4_1.gguf), SERVE_TOKENS (64),
# SERVE_STREAMS (1,4,16), SERVE_REPEAT (3), ATTN_BENCH_THREADS (2), ATTN_QUANT_ACT (q8),
# ATTN_KV_TYPE (f16).
# Run it on a quiet machine: numbers taken while anything else runs are noise.
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
T=${ATTN_BENCH_THREADS:-2}
FILE=${SERVE_FILE:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TOKENS=${SERVE_TOKENS:-64}
STREAMS=${SERVE_STREAMS:-1,4,16}
REPEAT=${SERVE_REPEAT:-3}
QA=${ATTN_QUANT_ACT:-q8}
KVT=${ATTN_KV_TYPE:-f16}
LS=bench/llama.cpp-build/build/bin/llama-server
PY=.venv/bin/python
[ -f "$FILE" ] || { echo "error: no $FILE (sh tools/get_smollm2.sh)"; exit 1; }
[ -x "$LS" ] || { echo "error: no $LS (sh bench/llamacpp_setup.sh)"; exit 1; }
[ -x "$BUILD/attn" ] || { echo "error: no $BUILD/attn (make)"; exit 1; }
"$PY" -c "import openai" 2> /dev/null || { echo "error: no openai package in .venv"; exit 1; }
out=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$out"' EXIT INT TERM

# wait_up PORT: until GET /health answers 200 (60 s at most)
wait_up() {
  i=0
  while [ $i -lt 600 ]; do
    if "$PY" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$1/health')" \
        2> /dev/null; then return 0; fi
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

echo "file $FILE, $T threads, 16 slots, $TOKENS greedy tokens per stream, streams $STREAMS," \
     "best of $REPEAT; attn activations $QA, cache $KVT"
echo "== attn serve"
"$BUILD/attn" --threads "$T" serve --model "smol=$FILE" --port 8091 --slots 16 \
  --quant-act "$QA" --kv-type "$KVT" > "$out/attn.log" 2>&1 &
pid=$!
wait_up 8091 || { cat "$out/attn.log"; echo "error: attn serve did not start"; exit 1; }
"$PY" bench/serve_load.py --port 8091 --model smol --no-embed --streams "$STREAMS" \
  --tokens "$TOKENS" --repeat "$REPEAT" --json "$out/attn.json" || exit 1
kill "$pid"; wait "$pid" 2> /dev/null; pid=

echo "== llama-server ($("$LS" --version 2>&1 | grep -m1 version))"
"$LS" -m "$FILE" -t "$T" -tb "$T" -np 16 -c 16384 --cont-batching --host 127.0.0.1 \
  --port 8092 > "$out/llama.log" 2>&1 &
pid=$!
wait_up 8092 || { tail -20 "$out/llama.log"; echo "error: llama-server did not start"; exit 1; }
"$PY" bench/serve_load.py --port 8092 --model smol --no-embed --streams "$STREAMS" \
  --tokens "$TOKENS" --repeat "$REPEAT" --peer --json "$out/llama.json" || exit 1
kill "$pid"; wait "$pid" 2> /dev/null; pid=

"$PY" - "$out/attn.json" "$out/llama.json" <<'EOF'
import json, sys
a, l = (json.load(open(f)) for f in sys.argv[1:3])
print("streams  attn tokens/s  llama-server tokens/s  attn / llama-server")
for k in sorted(a, key=int):
    print("%7s  %13.1f  %21.1f  %19.2f" % (k, a[k], l[k], a[k] / l[k]))
EOF
