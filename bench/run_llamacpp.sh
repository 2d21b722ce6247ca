#!/bin/sh
# Issue 16's side-by-side with llama.cpp: llama.cpp's llama-bench and attn's bench_gguf on the
# same GGUF files, in this same run, each at ATTN_BENCH_THREADS (2) threads:
#   sh bench/run_llamacpp.sh [BUILD]          (or: sh bench/run.sh BUILD llamacpp)
# 1. sh bench/llamacpp_setup.sh: llama.cpp (llama-cpp-python's sdist) in bench/llama.cpp-build/.
# 2. bench/llamacpp_models.py (.venv-bench): GPT-2-124M with random weights, converted by
#    llama.cpp's convert_hf_to_gguf.py to F32, F16 and Q8_0, in bench/llama.cpp-build/models/.
# 3. For each file — models/SmolLM2-135M-Instruct.Q4_1.gguf (the real one: sh
#    tools/get_smollm2.sh) and the three GPT-2 files, or the files in $LLAMACPP_FILES — first
#      llama-bench -m FILE -t 2 -p 512 -n 128 -r 5 -o jsonl   (its defaults otherwise: n_batch
#                                                  2048, n_ubatch 512, flash attention auto,
#                                                  F16 KV cache, mmap, CPU repacking; warm-up
#                                                  runs excluded, as llama-bench does)
#    then BUILD/bench/bench_gguf FILE (the same tests defined as llama-bench defines them; see
#    its header), each under /usr/bin/time for its peak RSS. bench_gguf runs the products on
#    quantized weights with int8 activations, llama.cpp's arithmetic (the same precision on both
#    sides), then once more with float32 activations (attn's exact mode, `attn generate`'s
#    default; tg only). Last, bench_membw: the machine's read bandwidth at the same threads, the
#    ceiling of any decoder's tokens/s (bandwidth / weight bytes per token).
# 4. bench/compare_llamacpp.py prints the table: pp512 and tg128 of both (mean ± sd over the
#    repetitions), attn / llama.cpp, peak RSS of both, and the weight bandwidth each generation
#    figure implies (weight bytes per token × tokens/s).
# 5. Files attn writes (`attn quantize`, where BUILD/attn has it, or $ATTN_QUANTIZE names an attn
#    that does): the GPT-2 directory as Q8_0 and models/SmolLM2-135M-Instruct as Q4_1, each
#    loaded by llama.cpp's llama-simple (greedy, 16 tokens) next to `attn generate --greedy`; with
#    LLAMACPP_ATTN_WRITTEN=bench they are also benchmarked like the others.
# Environment: ATTN_BENCH_THREADS (2), ATTN_BENCH_REPS (5), ATTN_BENCH_PACK (bench_gguf),
# LLAMACPP_FILES (space-separated paths), LLAMACPP_KEEP=DIR (keep the raw outputs there).
# Run it on a quiet machine: numbers taken while anything else runs are noise.
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
D=bench/llama.cpp-build
THREADS=${ATTN_BENCH_THREADS:-2}
REPS=${ATTN_BENCH_REPS:-5}
export ATTN_BENCH_THREADS="$THREADS" ATTN_BENCH_REPS="$REPS"
sh bench/llamacpp_setup.sh || exit 1
for b in bench_gguf bench_membw; do
  [ -x "$BUILD/bench/$b" ] || nice -n 19 make -j2 "$BUILD/bench/$b" BUILD="$BUILD" ||
    { echo "error: cannot build $BUILD/bench/$b"; exit 1; }
done
[ -x /usr/bin/time ] || { echo "error: /usr/bin/time missing (apt-get install time)"; exit 1; }
PY=.venv-bench/bin/python
[ -x "$PY" ] || { echo "error: .venv-bench missing (sh bench/setup.sh)"; exit 1; }
nice -n 19 "$PY" bench/llamacpp_models.py "$D/src" "$D/models" || exit 1
files=${LLAMACPP_FILES:-"models/SmolLM2-135M-Instruct.Q4_1.gguf $D/models/gpt2-124m-random.F32.gguf $D/models/gpt2-124m-random.F16.gguf $D/models/gpt2-124m-random.Q8_0.gguf"}

out=${LLAMACPP_KEEP:-$(mktemp -d)}
mkdir -p "$out"

# attn-written files (step 5)
QZ=${ATTN_QUANTIZE:-$BUILD/attn}
written=""
if "$QZ" quantize --help > /dev/null 2>&1; then
  for spec in "$D/models/gpt2-124m-random q8_0 gpt2-124m-random.attn-Q8_0" \
              "models/SmolLM2-135M-Instruct q4_1 SmolLM2-135M-Instruct.attn-Q4_1"; do
    # shellcheck disable=SC2086
    set -- $spec
    f="$D/models/$3.gguf"
    if [ ! -f "$f" ]; then
      [ -d "$1" ] || { echo "note: $1 missing: no $f"; continue; }
      nice -n 19 "$QZ" quantize "$1" "$f" --type "$2" --quiet || { echo "error: attn quantize $1 failed"; exit 1; }
    fi
    echo "== llama.cpp loads $f (written by $QZ quantize --type $2): llama-simple, greedy, 16 tokens"
    "$D/build/bin/llama-simple" -m "$f" -n 16 "The capital of France is" 2> "$out/simple.err" ||
      { tail -n 20 "$out/simple.err"; echo "error: llama-simple failed on $f"; exit 1; }
    echo "== attn generate --greedy on the same file"
    "$QZ" generate --model "$f" --prompt "The capital of France is" --max-tokens 16 --greedy ||
      echo "note: attn generate failed on $f"
    written="$written $f"
  done
else
  echo "note: $QZ has no 'quantize' (ATTN_QUANTIZE=path/to/attn names one that does): no attn-written files"
fi
[ "${LLAMACPP_ATTN_WRITTEN:-}" = bench ] && files="$files$written"

names=""
for f in $files; do
  [ -f "$f" ] || { echo "error: $f missing"; exit 1; }
  n=$(basename "$f" .gguf)
  names="$names $n"
  echo "== $n: llama-bench -t $THREADS -p 512 -n 128 -r $REPS"
  /usr/bin/time -f "%M" -o "$out/$n.lcpp.rss" "$D/build/bin/llama-bench" -m "$f" -t "$THREADS" \
    -p 512 -n 128 -r "$REPS" -o jsonl > "$out/$n.lcpp.jsonl" 2> "$out/$n.lcpp.err" ||
    { tail -n 20 "$out/$n.lcpp.err"; echo "error: llama-bench failed on $f"; exit 1; }
  echo "== $n: $BUILD/bench/bench_gguf (threads $THREADS, $REPS repetitions)"
  /usr/bin/time -f "%M" -o "$out/$n.attn.rss" "$BUILD/bench/bench_gguf" "$f" > "$out/$n.attn.jsonl" ||
    { echo "error: bench_gguf failed on $f"; exit 1; }
  grep '^note' "$out/$n.attn.jsonl"
  echo "== $n: $BUILD/bench/bench_gguf with float32 activations (ATTN_BENCH_QUANT_ACT=f32: tg only)"
  ATTN_BENCH_QUANT_ACT=f32 ATTN_BENCH_PP=16 "$BUILD/bench/bench_gguf" "$f" > "$out/$n.attnf32.jsonl" ||
    { echo "error: bench_gguf (f32) failed on $f"; exit 1; }
done
echo "== the memory bandwidth ceiling: $BUILD/bench/bench_membw"
"$BUILD/bench/bench_membw" > "$out/membw.jsonl" || { echo "error: bench_membw failed"; exit 1; }
cat "$out/membw.jsonl"
echo "== raw lines (llama-bench -o jsonl, bench_gguf)"
for n in $names; do cat "$out/$n.lcpp.jsonl" "$out/$n.attn.jsonl" | grep '^{'; done
echo "== attn against llama.cpp (llama-cpp-python $(cat "$D/VERSION" 2>/dev/null), threads $THREADS, $REPS repetitions)"
# shellcheck disable=SC2086
python3 bench/compare_llamacpp.py "$out" $names || exit 1
[ -n "${LLAMACPP_KEEP:-}" ] || rm -rf "$out"
