#!/bin/sh
# Issue 18's embeddings throughput with a light load generator: `attn serve` answering
# POST /v1/embeddings from wrk (Debian's, a C client that does not parse the replies, so it takes
# little of the 2 cores the server runs on; bench/serve_load.py's Python client decodes every
# 384-float reply and took a good part of them), against `attn embed` on the same sentences in one
# process. Each request carries the same 8 sentences as serve_load.py's embeddings part.
#   sh bench/serve_embed_wrk.sh [BUILD]
# wrk: -t 1 -c CLIENTS -d SECS with a Lua script that posts the body and counts non-200 replies;
#   texts/s = completed requests x 8 / seconds. The server: BUILD/attn serve --model
#   minilm=DIR --threads T (its defaults otherwise), warmed by one request.
# attn embed: BUILD/attn --threads T embed --model DIR on the sentences repeated to EMBED_TEXTS
#   lines, best of 3, reported with and without its load time (the same command on empty input,
#   least of 3: the server's load is not in its number either).
# Environment: EMBED_DIR (models/all-MiniLM-L6-v2), EMBED_CLIENTS (32), EMBED_SECS (10),
# EMBED_TEXTS (4096), ATTN_BENCH_THREADS (2). Install wrk with `apt-get install wrk` (bench only).
# Run it on a quiet machine: numbers taken while anything else runs are noise.
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
T=${ATTN_BENCH_THREADS:-2}
DIR=${EMBED_DIR:-models/all-MiniLM-L6-v2}
CLIENTS=${EMBED_CLIENTS:-32}
SECS=${EMBED_SECS:-10}
TEXTS=${EMBED_TEXTS:-4096}
command -v wrk > /dev/null || { echo "error: no wrk (apt-get install wrk)"; exit 1; }
command -v curl > /dev/null || { echo "error: no curl"; exit 1; }
[ -d "$DIR" ] || { echo "error: no $DIR (sh tools/install_deps.sh)"; exit 1; }
[ -x "$BUILD/attn" ] || { echo "error: no $BUILD/attn (make)"; exit 1; }
out=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$out"' EXIT INT TERM

S="Sentence number"
BODY="{\"model\":\"minilm\",\"input\":[\"$S 0 is about cats.\",\"$S 1 is about stocks.\",\
\"$S 2 is about rain.\",\"$S 3 is about music.\",\"$S 4 is about rivers.\",\
\"$S 5 is about bread.\",\"$S 6 is about chess.\",\"$S 7 is about stars.\"]}"
cat > "$out/post.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '$BODY'
done = function(summary, latency, requests)
  io.write(string.format("WRK %d %d %d %d %.6f %.6f\n", summary.requests, summary.duration,
                         summary.errors.status + summary.errors.connect + summary.errors.read +
                         summary.errors.write + summary.errors.timeout, 0,
                         latency:percentile(50) / 1e6, latency:percentile(99) / 1e6))
end
EOF

port=$((20000 + $$ % 20000))
"$BUILD/attn" serve --model "minilm=$DIR" --threads "$T" --port "$port" > "$out/serve.log" 2>&1 &
pid=$!
i=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]; do
  i=$((i + 1))
  [ $i -gt 600 ] && { echo "error: the server did not come up"; cat "$out/serve.log"; exit 1; }
  sleep 0.1
done
code=$(curl -s -o "$out/first.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "$BODY" "http://127.0.0.1:$port/v1/embeddings")
[ "$code" = 200 ] || { echo "error: the warm-up request got $code"; cat "$out/first.json"; exit 1; }
echo "== $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
wrk -t 1 -c "$CLIENTS" -d "${SECS}s" -s "$out/post.lua" "http://127.0.0.1:$port/v1/embeddings" \
  > "$out/wrk.log" 2>&1
kill "$pid" 2> /dev/null
wait "$pid" 2> /dev/null
pid=
line=$(grep '^WRK ' "$out/wrk.log")
[ -n "$line" ] || { echo "error: wrk gave no summary"; cat "$out/wrk.log"; exit 1; }
set -- $line
reqs=$2 dur_us=$3 errs=$4 p50=$6 p99=$7
[ "$errs" = 0 ] || { echo "error: $errs failed requests"; cat "$out/wrk.log"; exit 1; }
server=$(awk -v r="$reqs" -v d="$dur_us" 'BEGIN { printf "%.1f", r * 8 / (d / 1e6) }')
echo "server: wrk $CLIENTS connections, ${SECS} s: $reqs requests x 8 texts = $server texts/s; latency p50 $p50 s p99 $p99 s; 0 errors"

# attn embed on the same sentences, TEXTS lines
awk -v n="$TEXTS" 'BEGIN { split("cats stocks rain music rivers bread chess stars", w, " ");
  for (i = 0; i < n; i++) printf "Sentence number %d is about %s.\n", i % 8, w[i % 8 + 1] }' \
  > "$out/texts.txt"
: > "$out/empty.txt"
best() { # best wall seconds of 3 runs of attn embed on $1
  b=
  for r in 1 2 3; do
    t0=$(date +%s.%N)
    "$BUILD/attn" --threads "$T" embed --model "$DIR" < "$1" > /dev/null || exit 1
    t=$(echo "$(date +%s.%N) - $t0" | bc)
    if [ -z "$b" ] || [ "$(echo "$t < $b" | bc)" = 1 ]; then b=$t; fi
  done
  echo "$b"
}
full=$(best "$out/texts.txt")
load=$(best "$out/empty.txt")
cli=$(awk -v n="$TEXTS" -v t="$full" -v l="$load" 'BEGIN { printf "%.1f %.1f", n / t, n / (t - l) }')
set -- $cli
echo "attn embed: $TEXTS texts in $full s = $1 texts/s with its load ($load s), $2 texts/s without"
awk -v s="$server" -v a="$1" -v b="$2" \
  'BEGIN { printf "server / attn embed: %.2f (load included), %.2f (load excluded)\n", s / a, s / b }'
