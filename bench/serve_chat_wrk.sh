#!/bin/sh
# Issue 18's generation throughput at 1 and 16 concurrent chat streams with a light load
# generator: wrk (Debian's, a C client that does not parse the replies) keeps C connections each
# posting streamed greedy chat completions back to back, the questions of bench/serve_load.py's
# first four conversations in turn. bench/serve_load.py's Python client (the official openai
# package, which parses every streamed chunk) took ~10% of the 2 cores the server runs on during
# its 16-stream runs, and a compute thread it descheduled left the other waiting at a barrier:
# a load generator's cost, charged to the server. Here the client costs ~nothing.
#   sh bench/serve_chat_wrk.sh [BUILD]
# The server: BUILD/attn serve --model smol=MODEL --slots 16 --ctx 1024 --threads T
#   [--quant-act Q], each question asked once first (as serve_load.py's single-stream references
#   do: the prompt cache then holds them).
# Tokens/s: the server's attn_tokens_out_total (from /metrics) over each wrk run, divided by its
#   duration; requests cut off at the end still count the tokens they got. The levels alternate
#   (1, 16, 1, 16, ...) REPEAT times; printed: every run (with its prompt tokens computed, taken
#   from the slots' caches, and of those copied from another slot), each pair's ratio and their
#   median, and the ratio of the best runs.
# Environment: CHAT_MODEL (models/SmolLM2-135M-Instruct.Q4_1.gguf), CHAT_SECS (8),
#   CHAT_TOKENS (64: max_tokens), CHAT_QUANT_ACT (f32 | q8, default f32), CHAT_KV_TYPE (f32 |
#   f16: the server's --kv-type, default f32), CHAT_REPEAT (3),
#   ATTN_BENCH_THREADS (2). Install wrk with `apt-get install wrk` (bench only). Run it on a
#   quiet machine: numbers taken while anything else runs are noise.
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
T=${ATTN_BENCH_THREADS:-2}
MODEL=${CHAT_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
SECS=${CHAT_SECS:-8}
TOKENS=${CHAT_TOKENS:-64}
QA=${CHAT_QUANT_ACT:-f32}
KVT=${CHAT_KV_TYPE:-f32}
REPEAT=${CHAT_REPEAT:-3}
command -v wrk > /dev/null || { echo "error: no wrk (apt-get install wrk)"; exit 1; }
command -v curl > /dev/null || { echo "error: no curl"; exit 1; }
[ -e "$MODEL" ] || { echo "error: no $MODEL (sh tools/install_deps.sh)"; exit 1; }
[ -x "$BUILD/attn" ] || { echo "error: no $BUILD/attn (make)"; exit 1; }
out=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$out"' EXIT INT TERM

Q1="Write a short story about a robot who learns to paint."
Q2="Why is the sky blue?"
Q3="Explain, step by step and for a beginner, how a bicycle's gears make it easier to climb a steep hill, and when a rider should change them."
Q4="Hi!"
body() {
  printf '{"model":"smol","messages":[{"role":"user","content":"%s"}],"max_tokens":%d,"temperature":0,"stream":true}' "$1" "$TOKENS"
}
{
  echo 'wrk.method = "POST"'
  echo 'wrk.headers["Content-Type"] = "application/json"'
  echo 'local bodies = {'
  for q in "$Q1" "$Q2" "$Q3" "$Q4"; do echo "  [==[$(body "$q")]==],"; done
  echo '}'
  echo 'local i = 0'
  echo 'request = function() i = i % 4 + 1; return wrk.format(nil, nil, nil, bodies[i]) end'
  cat <<'EOF'
done = function(summary, latency, requests)
  io.write(string.format("WRK %d %d %d %.6f %.6f\n", summary.requests, summary.duration,
                         summary.errors.status + summary.errors.connect + summary.errors.read +
                         summary.errors.write, latency:percentile(50) / 1e6,
                         latency:percentile(99) / 1e6))
end
EOF
} > "$out/chat.lua"

port=$((20000 + $$ % 20000))
"$BUILD/attn" serve --model "smol=$MODEL" --threads "$T" --port "$port" --slots 16 --ctx 1024 \
  --quant-act "$QA" --kv-type "$KVT" > "$out/serve.log" 2>&1 &
pid=$!
i=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]; do
  i=$((i + 1))
  [ $i -gt 600 ] && { echo "error: the server did not come up"; cat "$out/serve.log"; exit 1; }
  sleep 0.1
done
for q in "$Q1" "$Q2" "$Q3" "$Q4"; do
  code=$(curl -s -o "$out/first.txt" -w '%{http_code}' -H 'Content-Type: application/json' \
    -d "$(body "$q")" "http://127.0.0.1:$port/v1/chat/completions")
  [ "$code" = 200 ] || { echo "error: a warm-up request got $code"; cat "$out/first.txt"; exit 1; }
done
tokens_out() {
  curl -s "http://127.0.0.1:$port/metrics" | awk '$1 == "attn_tokens_out_total" { print $2 }'
}
# prompt tokens computed, taken from caches, and of those copied from another slot: "in cached shared"
prompt_counts() {
  curl -s "http://127.0.0.1:$port/metrics" | awk '$1 == "attn_tokens_in_total" { i = $2 }
    $1 == "attn_prompt_tokens_cached_total" { c = $2 } $1 == "attn_prompt_tokens_shared_total" { s = $2 }
    END { print i + 0, c + 0, s + 0 }'
}
echo "== $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "chat: $MODEL, --quant-act $QA --kv-type $KVT, greedy, max_tokens $TOKENS, streamed; wrk ${SECS} s a run"
# Wait until the server has finished what the last run left (the requests wrk cut off at its end
# still generate until the server sees them gone): tokens_out steady for 0.3 s.
quiet() {
  q0=$(tokens_out)
  while sleep 0.3; do
    q1=$(tokens_out)
    [ "$q0" = "$q1" ] && break
    q0=$q1
  done
}
# One wrk run at $1 connections; its tokens/s into $tps.
run_level() {
  quiet
  t0=$(tokens_out)
  p0=$(prompt_counts)
  wrk -t 1 -c "$1" -d "${SECS}s" --timeout 60s -s "$out/chat.lua" \
    "http://127.0.0.1:$port/v1/chat/completions" > "$out/wrk.log" 2>&1
  t1=$(tokens_out)
  p1=$(prompt_counts)
  line=$(grep '^WRK ' "$out/wrk.log")
  [ -n "$line" ] || { echo "error: wrk gave no summary"; cat "$out/wrk.log"; exit 1; }
  set -- $line
  [ "$4" = 0 ] || { echo "error: $4 failed requests"; cat "$out/wrk.log"; exit 1; }
  tps=$(awk -v a="$t0" -v b="$t1" -v d="$3" 'BEGIN { printf "%.1f", (b - a) / (d / 1e6) }')
  prompts=$(echo "$p0 $p1" | awk '{ printf "prompt tokens %d computed, %d from caches (%d copied from other slots)", $4 - $1, $5 - $2, $6 - $3 }')
  echo "  $c streams: $2 requests, $((t1 - t0)) tokens in $(awk -v d="$3" 'BEGIN { printf "%.2f", d / 1e6 }') s = $tps tokens/s; latency p50 $5 s p99 $6 s; $prompts"
}
# The levels alternate (1, 16, 1, 16, ...): this machine's speed drifts by tens of percent over
# minutes, and a 1-stream run next to a 16-stream run sees the same phase. Each pair gives a
# ratio; the summary gives the ratio of the best runs and the median of the pairs' ratios.
best_1=0 best_16=0 ratios=
for r in $(seq "$REPEAT"); do
  for c in 1 16; do
    run_level "$c"
    eval "tps_$c=$tps"
    eval "best_$c=\$(awk -v a=\"\$best_$c\" -v b=\"$tps\" 'BEGIN { print (b > a ? b : a) }')"
  done
  ratios="$ratios $(awk -v a="$tps_1" -v b="$tps_16" 'BEGIN { printf "%.2f", b / a }')"
done
med=$(echo "$ratios" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
echo "pairs' 16 / 1 ratios:$ratios (median $med)"
awk -v a="$best_1" -v b="$best_16" \
  'BEGIN { printf "16 / 1 streams: %.1f / %.1f tokens/s = %.2fx (best runs)\n", b, a, b / a }'
