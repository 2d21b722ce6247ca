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
attn's embeddings (embed_attn.npy): the smallest cosine over the 1,000 texts.
When bench_embed measured attn's opt-in bf16 (embed_attn_bf16.npy present), the float32 figures
are given again as the peer of attn bf16, and the model is measured once more in bfloat16
(model.to(torch.bfloat16), the same-precision peer).
Embeddings are taken as tensors (convert_to_numpy=False) so that bfloat16 ones convert too;
the timed calls do the same in both precisions."""
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
    emb, best, med, n_lat = measure(model, texts)
    note = ""
    p = os.path.join(d, "embed_attn.npy")
    if os.path.exists(p):
        note = f"; min cosine to attn's embeddings {min_cos(np.load(p), emb):.8f}"
    import sentence_transformers
    print(f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, "
          f"{THREADS} threads: single-text median latency {1e3 * med:.2f} ms ({n_lat} calls){note}")
    out = [("MiniLM 1000 texts, batch 32", "sent/s", best),
           ("MiniLM single text (1/median)", "calls/s", 1.0 / med)]
    p16 = os.path.join(d, "embed_attn_bf16.npy")
    if os.path.exists(p16):
        # attn's opt-in bf16 against sentence-transformers' default float32 (the issue's peer)
        # and against sentence-transformers in bfloat16 (the same-precision peer).
        out += [("MiniLM 1000 texts, attn bf16 vs ST f32", "sent/s", best),
                ("MiniLM single text, attn bf16 vs ST f32", "calls/s", 1.0 / med)]
        model16 = model.to(torch.bfloat16)
        emb16, best16, med16, _ = measure(model16, texts)
        a16 = np.load(p16)
        print(f"sentence-transformers in bfloat16: single-text median latency {1e3 * med16:.2f} ms; "
              f"min cosine to its float32 {min_cos(emb16, emb):.6f}; attn bf16's min cosine to "
              f"sentence-transformers float32 {min_cos(a16, emb):.6f}")
        out += [("MiniLM 1000 texts, attn bf16 vs ST bf16", "sent/s", best16),
                ("MiniLM single text, attn bf16 vs ST bf16", "calls/s", 1.0 / med16)]
    for case, metric, value in out:
        print(json.dumps({"bench": "embed", "case": case, "metric": metric, "value": value}))


def min_cos(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return ((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min()


def measure(model, texts):
    """(embeddings, best sentences/s, median single-text seconds, number of single calls)."""
    emb = model.encode(texts, batch_size=32, show_progress_bar=False, convert_to_numpy=False)
    emb = torch.stack(emb).float().numpy()
    best = 0.0
    for _ in range(ROUNDS):
        t = time.perf_counter()
        model.encode(texts, batch_size=32, show_progress_bar=False, convert_to_numpy=False)
        best = max(best, len(texts) / (time.perf_counter() - t))
    model.encode([texts[0]], show_progress_bar=False)
    lat = []
    for _ in range(LAT_ROUNDS):
        for i in range(50):
            t = time.perf_counter()
            model.encode([texts[i]], show_progress_bar=False, convert_to_numpy=False)
            lat.append(time.perf_counter() - t)
    return emb, best, statistics.median(lat), len(lat)


if __name__ == "__main__":
    main()
