"""PyTorch reference for `attn explain` (src/viz/explain.c): single-head self-attention with the
article's convention q = x·W_Q, once bidirectional and once causal, every intermediate in float64.
Writes OUTDIR/explain{i}_in.safetensors (x, w_q, w_k, w_v, metadata "tokens") and
OUTDIR/explain{i}_ref.safetensors (encoder.* and decoder.* matrices)."""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

CASES = [  # (T, d_model, d_k, tokens)
    (3, 4, 3, ["Knowledge", "is", "power"]),
    (12, 16, 8, "The animal didn't cross the street because it was too tired .".split()),
    (1, 8, 5, ["alone"]),
]


def passes(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    scores = q @ k.T
    out = {}
    for name, causal in (("encoder", False), ("decoder", True)):
        scaled = scores / math.sqrt(q.shape[1])
        if causal:
            T = x.shape[0]
            scaled = scaled.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        w = torch.softmax(scaled, dim=-1)
        for key, val in (("q", q), ("k", k), ("v", v), ("scores", scores), ("scaled", scaled),
                         ("weights", w), ("output", w @ v)):
            out[f"{name}.{key}"] = val.numpy().astype(np.float32)
    return out


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    gen = torch.Generator().manual_seed(42)
    for i, (T, dm, dk, tokens) in enumerate(CASES):
        x = torch.randn(T, dm, generator=gen, dtype=torch.float64)
        w = [torch.randn(dm, dk, generator=gen, dtype=torch.float64) for _ in range(3)]
        # The C side reads float32; compute the reference from exactly those values.
        x, w = x.float().double(), [m.float().double() for m in w]
        stfile.save(os.path.join(outdir, f"explain{i}_in.safetensors"),
                    {"x": x.float().numpy(), "w_q": w[0].float().numpy(),
                     "w_k": w[1].float().numpy(), "w_v": w[2].float().numpy()},
                    {"tokens": json.dumps(tokens)})
        stfile.save(os.path.join(outdir, f"explain{i}_ref.safetensors"), passes(x, *w),
                    {"T": str(T), "d_model": str(dm), "d_k": str(dk)})
    with open(os.path.join(outdir, "explain_cases.txt"), "w") as f:
        f.write(f"{len(CASES)}\n")


if __name__ == "__main__":
    main()
