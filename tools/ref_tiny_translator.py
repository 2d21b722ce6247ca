"""A small trained translator for the tests that need one of attn's own encoder-decoder models
(test_explain_model, test_serve, python/tests): 40 training steps of configs/demo-en-zh.json on
the Tatoeba pairs with a 1000-token vocabulary (enough to end its outputs: "我。"), by this build's `attn train` (ATTN_BUILD,
set by tests/run.sh). A clean checkout has no models/demo-en-zh (`make demo` trains that one for
minutes); the tests check attn against itself on it (CLI, library, server, Python), which any
weights do. About 5 seconds.

Writes OUT/tiny-en-zh/ (attn's model directory: config.json, model.safetensors, tokenizer.json,
test.src, ...). Usage: python tools/ref_tiny_translator.py OUT_DIR
"""
import os
import shutil
import subprocess
import sys


def main():
    out = os.path.join(sys.argv[1], "tiny-en-zh")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    attn = os.path.join(os.environ.get("ATTN_BUILD", os.path.join(root, "build")), "attn")
    data = os.path.join(root, "..", "shared", "data", "tatoeba-eng-cmn", "cmn.txt")
    if not os.path.exists(data):
        print(f"ref_tiny_translator: {data} missing: no {out}")
        return 0
    if not os.access(attn, os.X_OK):
        print(f"ref_tiny_translator: {attn} missing (make): no {out}")
        return 0
    shutil.rmtree(out, ignore_errors=True)
    cmd = [attn, "--threads", "2", "train", "--data", data, "--config",
           os.path.join(root, "configs", "demo-en-zh.json"), "--vocab-size", "1000",
           "--valid-size", "50", "--test-size", "50", "--max-steps", "40", "--max-tokens", "1500",
           "--lr", "2e-3", "--warmup-steps", "10", "--seed", "1", "--out", out]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode:
        print(r.stdout)
        print("ref_tiny_translator: attn train failed:", " ".join(cmd))
        return 1
    os.remove(os.path.join(out, "optimizer.safetensors"))
    print(f"ref_tiny_translator: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
