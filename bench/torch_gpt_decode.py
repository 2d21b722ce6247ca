"""PyTorch peer of bench/bench_gpt_decode.c: GPT-2-124M-shaped inference with a KV cache in plain
PyTorch (the same computation as transformers' GPT2LMHeadModel with use_cache, written out so
that .venv-bench needs only torch): random float32 weights, a 128-token prompt in one pass, then
128 greedy tokens one at a time, batch 1, at ATTN_BENCH_THREADS threads. Prints the same JSON
lines (tokens per second, best of ATTN_BENCH_REPEATS runs after a warm-up run).
ATTN_BENCH_GPT_LAYERS overrides the layer count, as on the C side."""
import json
import math
import os
import time

import torch
import torch.nn.functional as F

THREADS = int(os.environ.get("ATTN_BENCH_THREADS", "2"))
REPEATS = int(os.environ.get("ATTN_BENCH_REPEATS", "3"))
L = int(os.environ.get("ATTN_BENCH_GPT_LAYERS", "12"))
torch.set_num_threads(THREADS)
V, P, C, H = 50257, 1024, 768, 12
D = C // H
TP, NG = 128, 128

g = torch.Generator().manual_seed(0)


def w(*shape, std=0.02):
    return torch.randn(*shape, generator=g) * std


wte, wpe = w(V, C), w(P, C)
blocks = [dict(ln1=(torch.ones(C), torch.zeros(C)), attn=(w(C, 3 * C), torch.zeros(3 * C)),
               proj=(w(C, C), torch.zeros(C)), ln2=(torch.ones(C), torch.zeros(C)),
               fc=(w(C, 4 * C), torch.zeros(4 * C)), fc2=(w(4 * C, C), torch.zeros(C)))
          for _ in range(L)]
lnf = (torch.ones(C), torch.zeros(C))


def forward(ids, cache, pos0):
    """ids (1, T); cache: list of (k, v) per layer, each (1, H, past, D) or None."""
    T = ids.shape[1]
    x = wte[ids] + wpe[pos0:pos0 + T]
    for i, b in enumerate(blocks):
        h = F.layer_norm(x, (C,), *b["ln1"], 1e-5)
        qkv = torch.addmm(b["attn"][1], h.view(-1, C), b["attn"][0]).view(1, T, 3 * C)
        q, k, v = qkv.split(C, 2)
        q = q.view(1, T, H, D).transpose(1, 2)
        k = k.view(1, T, H, D).transpose(1, 2)
        v = v.view(1, T, H, D).transpose(1, 2)
        if cache[i] is not None:
            k = torch.cat([cache[i][0], k], 2)
            v = torch.cat([cache[i][1], v], 2)
        cache[i] = (k, v)
        # Causal within the new positions; every cached position is visible.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=pos0 == 0 and T > 1)
        y = y.transpose(1, 2).reshape(-1, C)
        x = x + torch.addmm(b["proj"][1], y, b["proj"][0]).view(1, T, C)
        h = F.layer_norm(x, (C,), *b["ln2"], 1e-5)
        h = F.gelu(torch.addmm(b["fc"][1], h.view(-1, C), b["fc"][0]), approximate="tanh")
        x = x + torch.addmm(b["fc2"][1], h, b["fc2"][0]).view(1, T, C)
    x = F.layer_norm(x[:, -1], (C,), *lnf, 1e-5)
    return x @ wte.t()


def main():
    prompt = torch.randint(0, V, (1, TP), generator=g)
    best_p = best_g = 0.0
    with torch.inference_mode():
        for r in range(REPEATS + 1):
            cache = [None] * L
            t0 = time.perf_counter()
            logits = forward(prompt, cache, 0)
            t1 = time.perf_counter()
            for i in range(NG):
                nxt = logits.argmax(-1).view(1, 1)
                logits = forward(nxt, cache, TP + i)
            t2 = time.perf_counter()
            if r:
                best_p = max(best_p, TP / (t1 - t0))
                best_g = max(best_g, NG / (t2 - t1))
    for case, v in ((f"gpt2-124M L{L} prompt {TP}", best_p), (f"gpt2-124M L{L} generate {NG}", best_g)):
        print(json.dumps({"bench": "gpt_decode", "case": case, "metric": "tokens/s",
                          "value": round(v, 2)}))


if __name__ == "__main__":
    main()
