"""PyTorch references for tests/test_attention.c: scaled-dot-product attention forward (o, lse,
probabilities) and backward (dq, dk, dv) for every mask kind attn supports.

    .venv/bin/python tools/ref_attention.py OUTDIR   ->  OUTDIR/attention.safetensors

Inputs (q, k, v, dO) are drawn in float32 in attn's layout (B, T, H, D); the expected values are
computed by torch in float64 from those same float32 values (attention written out by hand —
torch 1.13 has no F.scaled_dot_product_attention —, gradients by autograd of sum(o * dO)) and
stored as float32, so the C test measures only the C kernels' error.

Tensors are named attn.CASE.NAME (CASE = 0, 1, ...); the C test walks CASE upward until
attn.CASE.q is absent. The case's parameters are the metadata string attn.CASE.params:
"B H Tq Tk D causal causal_offset fused scale" (fused = 1: the C test lays q, k, v out as one fused
QKV buffer and o, dO with a padded row stride). attn.CASE.kv_len (int32, (B)) is present when the
case has key padding; attn.CASE.probs only for small cases.

Where attn deliberately differs from PyTorch (documented in attn_kernels.h), the expected value
here is attn's: a query that sees no key gets o = 0, lse = -inf, probabilities 0 and no gradient
(PyTorch's masked softmax would give NaN)."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

rng = np.random.RandomState(20240611)
T, META = {}, {}
PROBS_MAX = 1 << 21  # store probabilities only up to this many elements


def f32(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def visible(B, Tq, Tk, causal, off, kv_len):
    """(B, 1, Tq, Tk) bool: key j visible to query i of batch b (attn_kernels.h)."""
    i = np.arange(Tq)[:, None]
    j = np.arange(Tk)[None, :]
    vis = np.ones((B, Tq, Tk), dtype=bool)
    if causal:
        vis &= (j <= i + off)[None]
    if kv_len is not None:
        vis &= j[None] < np.asarray(kv_len)[:, None, None]
    return vis[:, None]


def case(B, H, Tq, Tk, D, causal=False, off=0, kv_len=None, fused=False, scale=None):
    n = len(META)
    if scale is None:
        scale = 1.0 / np.sqrt(D)
    scale = float(np.float32(scale))  # the C side holds it as float
    assert not fused or Tq == Tk  # one QKV buffer holds as many keys as queries
    q, k, v = (f32(rng.randn(B, t, H, D)) for t in (Tq, Tk, Tk))
    do = f32(rng.randn(B, Tq, H, D))
    leaves = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v)]
    qh, kh, vh = (t.permute(0, 2, 1, 3) for t in leaves)  # (B, H, T, D)
    s = scale * (qh @ kh.transpose(-1, -2))  # (B, H, Tq, Tk)
    vis = torch.tensor(visible(B, Tq, Tk, causal, off, kv_len))
    alive = vis.any(-1, keepdim=True)  # (B, 1, Tq, 1): the query sees some key
    s = torch.where(vis, s, torch.tensor(-np.inf, dtype=torch.float64))
    s = torch.where(alive, s, torch.zeros((), dtype=torch.float64))  # dead rows: no NaN, no grad
    p = torch.softmax(s, dim=-1) * alive
    lse = torch.where(alive[..., 0], torch.logsumexp(s, dim=-1),
                      torch.tensor(-np.inf, dtype=torch.float64))
    o = (p @ vh).permute(0, 2, 1, 3)  # (B, Tq, H, D)
    (o * torch.tensor(do.astype(np.float64))).sum().backward()
    pre = f"attn.{n}"
    T[f"{pre}.q"], T[f"{pre}.k"], T[f"{pre}.v"], T[f"{pre}.do"] = q, k, v, do
    T[f"{pre}.o"] = f32(o.detach().numpy())
    T[f"{pre}.lse"] = f32(lse.detach().numpy())
    if B * H * Tq * Tk <= PROBS_MAX:
        T[f"{pre}.probs"] = f32(p.detach().numpy())
    for name, t in zip(("dq", "dk", "dv"), leaves):
        T[f"{pre}.{name}"] = f32(t.grad.numpy())
    if kv_len is not None:
        T[f"{pre}.kv_len"] = np.asarray(kv_len, dtype=np.int32)
    META[f"{pre}.params"] = (f"{B} {H} {Tq} {Tk} {D} {int(causal)} {off} {int(fused)} "
                             f"{scale!r}")


case(2, 3, 1, 1, 32)                                         # T = 1
case(2, 2, 17, 17, 64, causal=True)                          # odd size, causal
case(3, 4, 33, 33, 80, kv_len=[33, 20, 0])                   # key padding; batch 2 fully masked
case(1, 16, 100, 100, 32, causal=True)                       # 16 heads
case(2, 4, 20, 45, 96, kv_len=[45, 30])                      # cross-attention
case(2, 2, 7, 40, 128, causal=True, off=33)                  # KV cache: last 7 of 40 positions
case(2, 3, 50, 50, 64, causal=True, fused=True)              # fused QKV strides
case(1, 1, 2048, 2048, 32)                                   # long sequence, no mask
case(2, 2, 64, 64, 48, causal=True, kv_len=[64, 40])         # decoder with padding, D % 16 != 0
case(1, 2, 24, 24, 40, causal=True, off=-3)                  # first 3 queries see nothing
case(2, 3, 30, 30, 36, kv_len=[30, 17])                      # D % 8 != 0
case(2, 1, 5, 70, 72, causal=True, off=65, kv_len=[70, 50])  # KV cache with padding
case(1, 2, 130, 130, 128, scale=0.3)                         # several blocks, D = 128, own scale
case(2, 6, 256, 256, 64, causal=True, fused=True)            # the training benchmark's shape

out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
os.makedirs(out, exist_ok=True)
stfile.save(os.path.join(out, "attention.safetensors"), T, META)
print(f"wrote {len(META)} attention cases to {out}/attention.safetensors")
