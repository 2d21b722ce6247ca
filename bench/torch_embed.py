"""PyTorch peer of bench/bench_embed.c (issue 5's embedding targets): sentence-transformers
(pinned in bench/setup.sh, newest torch) with models/all-MiniLM-L6-v2 on CPU at
ATTN_BENCH_THREADS threads, on the same 1,000 texts ($ATTN_BENCH_DIR/embed_sentences.txt,
written by bench_embed just before).

  throughput  SentenceTransformer.encode(texts, batch_size=32) — its own length sorting, padding
              to the batch's longest, tokenization included — best of ATTN_BENCH_ROUNDS (3)
              passes after a warm-up pass: sentences/s
  latency     encode([text]) for texts 0..49 in turn after a warm-up call, ATTN_BENCH_LAT_ROUNDS (5)
              passes over the 50; the median of all the calls' times, reported as
              calls/s = 1 / median (the note line gives milliseconds)
Under torch.inference_mode() (encode sets it itself). The note line also gives the agreement with
attn's embeddings (embed_attn.npy): the smallest cosine over the 1,000 texts."""
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = int(os.environ.get("ATTN_BENCH_THREADS", "2"))
ROUNDS = int(os.environ.get("ATTN_BENCH_ROUNDS", "3"))
LAT_ROUNDS = max(1, int(os.environ.get("ATTN_BENCH_LAT_ROUNDS", "5")))
torch.set_num_threads(THREADS)


def main():
    from sentence_transformers import SentenceTransformer

    d = os.environ.get("ATTN_BENCH_DIR")
    if not d:
        print("torch_embed.py: ATTN_BENCH_DIR is not set (run through bench/run.sh)", file=sys.stderr)
        sys.exit(1)
    with open(os.path.join(d, "embed_sentences.txt"), encoding="utf-8") as f:
        texts = f.read().split("\n")[:-1]
    model = SentenceTransformer(os.path.join(ROOT, "models", "all-MiniLM-L6-v2"), device="cpu")
    model.eval()
    emb = model.encode(texts, batch_size=32, show_progress_bar=False, convert_to_numpy=True)
    best = 0.0
    for _ in range(ROUNDS):
        t = time.perf_counter()
        model.encode(texts, batch_size=32, show_progress_bar=False, convert_to_numpy=True)
        best = max(best, len(texts) / (time.perf_counter() - t))
    model.encode([texts[0]], show_progress_bar=False)
    lat = []
    for _ in range(LAT_ROUNDS):
        for i in range(50):
            t = time.perf_counter()
            model.encode([texts[i]], show_progress_bar=False, convert_to_numpy=True)
            lat.append(time.perf_counter() - t)
    med = statistics.median(lat)
    note = ""
    p = os.path.join(d, "embed_attn.npy")
    if os.path.exists(p):
        a = np.load(p).astype(np.float64)
        b = emb.astype(np.float64)
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        note = f"; min cosine to attn's embeddings {cos.min():.8f}"
    import sentence_transformers
    print(f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, "
          f"{THREADS} threads: single-text median latency {1e3 * med:.2f} ms ({len(lat)} calls){note}")
    print(json.dumps({"bench": "embed", "case": "MiniLM 1000 texts, batch 32",
                      "metric": "sent/s", "value": best}))
    print(json.dumps({"bench": "embed", "case": "MiniLM single text (1/median)",
                      "metric": "calls/s", "value": 1.0 / med}))


if __name__ == "__main__":
    main()
