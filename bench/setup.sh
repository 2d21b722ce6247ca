#!/bin/sh
# The benchmark peer: the newest PyTorch from PyPI in .venv-bench (large: it pulls CUDA wheels,
# about 5 GB; installed once). Tests use Debian's lighter torch 1.13 in .venv instead.
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$ROOT/.venv-bench/bin/python" ] || ! "$ROOT/.venv-bench/bin/python" -c "import torch" 2>/dev/null; then
  python3 -m venv "$ROOT/.venv-bench"
  "$ROOT/.venv-bench/bin/pip" install -q --upgrade pip
  "$ROOT/.venv-bench/bin/pip" install -q torch numpy
fi
