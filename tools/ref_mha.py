"""PyTorch reference for multi-head attention (src/nn/mha.c): forward output, attention
probabilities and every gradient, computed in float64 with autograd, written to
OUTDIR/mha.safetensors for tests/test_mha.c. Weights use nn.Linear's (out, in) layout.

Semantics match torch.nn.functional.scaled_dot_product_attention with a boolean mask
(key j visible to query i iff (not causal or j <= i) and j < kv_len[b])."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

# (B, Tq, Tk, C, Ckv, H, D, bias, causal, kv_len or None, self)
CASES = [
    (2, 5, 5, 32, 32, 4, 8, True, False, None, True),        # encoder self-attention
    (2, 17, 17, 48, 48, 3, 16, True, True, None, True),      # decoder self-attention
    (3, 13, 13, 32, 32, 2, 16, True, False, [13, 7, 1], True),  # key padding
    (2, 6, 11, 32, 24, 4, 8, True, False, [11, 4], False),   # cross-attention + source padding
    (1, 33, 33, 40, 40, 5, 12, False, True, None, True),     # no bias, H*D != C
    (2, 64, 64, 128, 128, 8, 16, True, True, [64, 30], True),  # causal + padding
    (1, 20, 20, 64, 64, 16, 32, True, False, None, True),    # 16 heads, H*D = 512
    (1, 1, 1, 16, 16, 1, 16, True, True, None, True),        # T = 1
    (2, 1, 9, 32, 32, 2, 16, True, False, [9, 3], False),    # one query (decoding step)
]


def reference(case, gen):
    B, Tq, Tk, C, Ckv, H, D, bias, causal, kv_len, self_attn = case
    HD = H * D
    t = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64) * 0.5  # noqa: E731
    x = t(B, Tq, C).requires_grad_()
    kv = None if self_attn else t(B, Tk, Ckv).requires_grad_()
    src = x if self_attn else kv
    W = {"w_q": t(HD, C), "w_k": t(HD, Ckv), "w_v": t(HD, Ckv), "w_o": t(C, HD)}
    if bias:
        W.update({"b_q": t(HD), "b_k": t(HD), "b_v": t(HD), "b_o": t(C)})
    for v in W.values():
        v.requires_grad_()
    lin = lambda a, w, b: a @ w.T + (b if b is not None else 0)  # noqa: E731
    q = lin(x, W["w_q"], W.get("b_q")).view(B, Tq, H, D).transpose(1, 2)
    k = lin(src, W["w_k"], W.get("b_k")).view(B, Tk, H, D).transpose(1, 2)
    v = lin(src, W["w_v"], W.get("b_v")).view(B, Tk, H, D).transpose(1, 2)
    s = q @ k.transpose(-1, -2) / D ** 0.5
    vis = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
    if causal:
        vis &= torch.ones(Tq, Tk, dtype=torch.bool).tril()
    if kv_len is not None:
        vis &= (torch.arange(Tk)[None, :] < torch.tensor(kv_len)[:, None])[:, None, None, :]
    p = torch.softmax(s.masked_fill(~vis, float("-inf")), dim=-1)
    ctx = (p @ v).transpose(1, 2).reshape(B, Tq, HD)
    y = lin(ctx, W["w_o"], W.get("b_o"))
    dy = t(B, Tq, C)
    y.backward(dy)
    out = {"x": x, "dy": dy, "y": y, "probs": p, "dx": x.grad}
    if not self_attn:
        out["kv"] = kv
        out["dkv"] = kv.grad
    for name, w in W.items():
        out[name] = w
        out["g_" + name] = w.grad
    params = dict(B=B, Tq=Tq, Tk=Tk, C=C, Ckv=Ckv, H=H, D=D, bias=bias, causal=causal,
                  kv_len=kv_len, self=self_attn)
    return {k: v.detach().numpy().astype(np.float32) for k, v in out.items()}, params


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    gen = torch.Generator().manual_seed(1234)
    tensors, meta = {}, {"cases": str(len(CASES))}
    for i, case in enumerate(CASES):
        arrays, params = reference(case, gen)
        for k, v in arrays.items():
            tensors[f"case{i}.{k}"] = v
        meta[f"case{i}"] = json.dumps(params)
    stfile.save(os.path.join(outdir, "mha.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
