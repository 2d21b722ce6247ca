#!/bin/sh
# Tokenizer speed, attn against Hugging Face tokenizers, on the Llama-family tokenizers
# (models/tokenizers/*, models/SmolLM2-135M-Instruct; tools/install_deps.sh makes them) and a
# large text (default ../shared/data/tinyshakespeare/input.txt):
#   sh tools/tok_speed.sh [BUILD [TEXT]]      BUILD: a build directory with libattn.a (build)
# attn: tools/tok_speed.c linked with BUILD/libattn.a (load, encode of the whole text as one
# call, line by line, decode; best of three). tokenizers: the same in the project venv, one
# thread (RAYON_NUM_THREADS=1). Run it on a quiet machine; nothing here asserts a time.
# TOK_SPEED_CALLGRIND=1: instead, the instructions attn's two encodes execute, under callgrind
# (use a shorter TEXT: head -c 200000 input.txt); comparable across builds on a busy machine.
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
TEXT=${2:-$ROOT/../shared/data/tinyshakespeare/input.txt}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
${CC:-cc} -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I"$ROOT/include" -o "$TMP/tok_speed" \
  "$ROOT/tools/tok_speed.c" "$BUILD/libattn.a" -fopenmp -ljansson -lutf8proc -lpcre2-8 \
  -lpng16 -lfreetype -lm
set --
for f in "$ROOT"/models/tokenizers/*/tokenizer.json "$ROOT"/models/SmolLM2-135M-Instruct/tokenizer.json; do
  [ -f "$f" ] && set -- "$@" "$f"
done
[ $# -gt 0 ] || { echo "tok_speed: no tokenizers (run sh tools/install_deps.sh)"; exit 1; }
echo "== attn ($BUILD/libattn.a), $(wc -c < "$TEXT") bytes"
if [ -n "${TOK_SPEED_CALLGRIND:-}" ]; then
  # instructions executed by the two encodes (one run each), which a busy machine does not blur
  for f in "$@"; do
    TOK_SPEED_REPS=1 valgrind --tool=callgrind --callgrind-out-file="$TMP/cg" \
      --collect-atstart=no --toggle-collect=encode_whole --toggle-collect=encode_lines \
      "$TMP/tok_speed" "$TEXT" "$f" > "$TMP/out" 2>/dev/null
    w=$(callgrind_annotate --inclusive=yes "$TMP/cg" | grep -m1 ':encode_whole ' | awk '{print $1}')
    l=$(callgrind_annotate --inclusive=yes "$TMP/cg" | grep -m1 ':encode_lines ' | awk '{print $1}')
    echo "$f: instructions: whole text ${w:-(refused: $(tail -n 1 "$TMP/out"))}, line by line ${l:--}"
  done
  exit 0
fi
"$TMP/tok_speed" "$TEXT" "$@"
echo "== tokenizers (one thread)"
RAYON_NUM_THREADS=1 "$ROOT/.venv/bin/python" - "$TEXT" "$@" <<'PYEOF'
import sys, time
from tokenizers import Tokenizer, __version__
text = open(sys.argv[1], encoding="utf-8").read()
lines = text.splitlines(keepends=True)
print(f"tokenizers {__version__}")
print("%-40s %7s %9s %9s %8s %9s %9s" % ("tokenizer", "load s", "ids", "encode s", "MB/s",
                                        "lines s", "decode s"))
for path in sys.argv[2:]:
    best = [1e9] * 4
    for _ in range(3):
        t0 = time.perf_counter(); tok = Tokenizer.from_file(path); t1 = time.perf_counter()
        ids = tok.encode(text).ids; t2 = time.perf_counter()
        for l in lines: tok.encode(l)
        t3 = time.perf_counter(); tok.decode(ids); t4 = time.perf_counter()
        best = [min(b, v) for b, v in zip(best, (t1 - t0, t2 - t1, t3 - t2, t4 - t3))]
    n = len(text.encode("utf-8"))
    print("%-40s %7.3f %9d %9.3f %8.2f %9.3f %9.3f" % (path, best[0], len(ids), best[1],
                                                    n / 1e6 / best[1], best[2], best[3]))
PYEOF
