#!/bin/sh
# Install what building and testing attn needs on a Debian machine, then the project venv (.venv)
# with the PyTorch reference. Idempotent: fast when everything is present.
#   Debian: gcc clang make libjansson-dev libutf8proc-dev libpcre2-dev libomp-dev libcmocka-dev python3-venv
#           python3-torch (1.13, CPU) python3-numpy — the test reference, light next to PyPI's torch
#   .venv:  /usr/bin/python3 venv with system site packages (sees Debian's torch and numpy),
#           plus sacrebleu 2.6.0 from PyPI (the BLEU reference)
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKGS="gcc clang make libjansson-dev libutf8proc-dev libpcre2-dev libomp-dev libcmocka-dev python3-venv python3-torch python3-numpy"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing Debian packages:$missing"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  echo "creating $ROOT/.venv"
  /usr/bin/python3 -m venv --system-site-packages "$ROOT/.venv"
fi
"$ROOT/.venv/bin/python" -c "import torch, numpy" || {
  echo "error: the reference venv cannot import torch and numpy"; exit 1; }
# sacreBLEU, pinned: tools/ref_bleu.py computes the BLEU reference with it live.
"$ROOT/.venv/bin/python" -c "import sacrebleu" 2>/dev/null || {
  echo "installing sacrebleu into $ROOT/.venv"
  "$ROOT/.venv/bin/pip" install -q sacrebleu==2.6.0; }
# Hugging Face tokenizers, pinned: tools/ref_tokenizer.py and tools/check_tokenizer.py check attn's
# tokenizer.json files and ids against it.
"$ROOT/.venv/bin/python" -c "import tokenizers" 2>/dev/null || {
  echo "installing tokenizers into $ROOT/.venv"
  "$ROOT/.venv/bin/pip" install -q tokenizers==0.22.1; }
