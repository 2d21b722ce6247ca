"""Overhead of the Python package: model.embed on 1,000 sentences against `attn embed` on the
same sentences (the CLI's time minus its model load, measured by embedding nothing), best of N.
  .venv/bin/python bench/python_embed.py [MODEL_DIR] [N]      (attn importable: pip install ./python)
Prints both times and the ratio; the target is python / cli <= 1.05."""
import os
import subprocess
import sys
import tempfile
import time

import attn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
cli = os.path.join(os.environ.get("ATTN_BUILD", os.path.join(ROOT, "build")), "attn")

words = ("attention query key value softmax encoder decoder layer token model knowledge power "
         "translation sentence embedding vector head weight matrix sequence").split()
sents = [" ".join(words[(i * 7 + k * 3) % len(words)] for k in range(8 + i % 17)) + "."
         for i in range(1000)]
data = ("\n".join(sents) + "\n").encode()


def cli_time(lines: bytes) -> float:
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        subprocess.run([cli, "embed", "--model", model, "--out", os.path.join(d, "e.npy")],
                       input=lines, check=True)
        return time.perf_counter() - t


best_cli = min(cli_time(data) - cli_time(b"") for _ in range(reps))
with attn.load(model) as m:
    m.embed(["warm up"])
    best_py = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        m.embed(sents)
        best_py = min(best_py, time.perf_counter() - t)
print("attn embed (CLI, load excluded): %.3f s   model.embed: %.3f s   ratio %.3f"
      % (best_cli, best_py, best_py / best_cli))
