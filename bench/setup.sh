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
# transformers (pinned) for bench/torch_gpt_generate.py: GPT-2 generation with its KV cache
if ! "$ROOT/.venv-bench/bin/python" -c "import transformers" 2>/dev/null; then
  "$ROOT/.venv-bench/bin/pip" install -q "transformers==5.24.0"
fi
# sentence-transformers (pinned) for bench/torch_embed.py: all-MiniLM-L6-v2 embeddings
if ! "$ROOT/.venv-bench/bin/python" -c "import sentence_transformers" 2>/dev/null; then
  "$ROOT/.venv-bench/bin/pip" install -q "sentence-transformers==6.2.0"
fi
# CTranslate2 (pinned) for bench/ct2_export.sh: ct2-transformers-converter on attn's exported
# translators (attn export --format hf-marian|hf-m2m100), the issue-17 peer
if ! "$ROOT/.venv-bench/bin/python" -c "import ctranslate2" 2>/dev/null; then
  "$ROOT/.venv-bench/bin/pip" install -q "ctranslate2==4.8.5"
fi
