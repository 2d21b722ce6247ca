#!/bin/sh
# Fetch test data that llama.cpp ships in its sources, from the PyPI sdist of llama-cpp-python
# (pinned by version and SHA-256; it vendors llama.cpp), into models/llamacpp (or DIR):
#   vocab/ggml-vocab-*.gguf (+ .inp/.out)   real tokenizers of the model families (Llama 2 SPM,
#                                           Llama 3 BPE, Qwen2, Phi-3, GPT-2, ...) as GGUF
#                                           metadata, with llama.cpp's own test strings
#   templates/*.jinja                       real chat templates (Llama 3.x, Qwen2.5, Qwen3,
#                                           Mistral-Nemo, SmolLM3, ...)
#   llama-cpp-python-VERSION.tar.gz         the sdist itself (bench/ builds llama.cpp from it)
# Nothing of it is committed. The archive is fetched straight from PyPI's files (pip download
# would run the package's build backend just to read its metadata: minutes). Idempotent: does
# nothing when DIR/.complete names this version.
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/models/llamacpp}
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
URL=https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-$VERSION.tar.gz
if [ -f "$DEST/.complete" ] && [ "$(cat "$DEST/.complete")" = "$VERSION" ]; then exit 0; fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "fetching llama.cpp's vocabularies and chat templates (llama-cpp-python $VERSION sdist) into $DEST"
ARCHIVE="$TMP/llama_cpp_python-$VERSION.tar.gz"
curl -sSfL --retry 3 -o "$ARCHIVE" "$URL"
echo "$SHA256  $ARCHIVE" | sha256sum -c --quiet -
rm -rf "$DEST.part"
mkdir -p "$DEST.part/vocab" "$DEST.part/templates"
tar -xzf "$ARCHIVE" -C "$TMP" \
  --wildcards "*/vendor/llama.cpp/models/ggml-vocab-*" "*/vendor/llama.cpp/models/templates/*"
mv "$TMP"/llama_cpp_python-$VERSION/vendor/llama.cpp/models/ggml-vocab-* "$DEST.part/vocab/"
mv "$TMP"/llama_cpp_python-$VERSION/vendor/llama.cpp/models/templates/* "$DEST.part/templates/"
mv "$ARCHIVE" "$DEST.part/"
echo "$VERSION" > "$DEST.part/.complete"
rm -rf "$DEST"
mv "$DEST.part" "$DEST"
