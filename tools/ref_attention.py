"""PyTorch references for tests/test_attention.c: scaled-dot-product attention forward (o, lse,
probabilities) and backward (dq, dk, dv, dbias) for every mask kind attn supports, grouped-query
attention (H_kv < H), batch-strided (KV-cache) layouts and additive score biases.

    .venv/bin/python tools/ref_attention.py OUTDIR   ->  OUTDIR/attention.safetensors

Inputs (q, k, v, dO) are drawn in float32 in attn's layout (B, T, H, D); the expected values are
computed by torch in float64 from those same float32 values (attention written out by hand —
torch 1.13 has no F.scaled_dot_product_attention —, gradients by autograd of sum(o * dO)) and
stored as float32, so the C test measures only the C kernels' error.

Tensors are named attn.CASE.NAME (CASE = 0, 1, ...); the C test walks CASE upward until
attn.CASE.q is absent. The case's parameters are the metadata string attn.CASE.params:
"B H Tq Tk D causal causal_offset fused scale H_kv extra bias bias_sb bias_sh bias_sq bias_off
window"
  fused = 1: the C test lays q, k, v out as one fused QKV buffer and o, dO with a padded row
             stride;
  H_kv:      K/V heads (k, v, dk, dv are (B, Tk, H_kv, D); query head h reads K/V head
             h // (H // H_kv));
  extra > 0: the C test gives every tensor T + extra rows per batch (batch strides (T+extra)·ld,
             a KV cache of capacity T + extra) with NaN in the unused rows;
  bias = 1:  attn.CASE.bias is the flat float32 bias buffer; the score bias of (b, h, i, j) is
             bias[bias_off + b·bias_sb + h·bias_sh + i·bias_sq + j] (strides may be 0, bias_sq
             may be -1: a relative-position vector read as a Toeplitz matrix); entries may be
             -inf. attn.CASE.dbias (B, H, Tq, Tk) is d loss / d bias per entry;
  window > 0: a sliding window (causal only): key j is hidden from query i when
             j <= i + causal_offset - window (transformers' sliding_window mask).
attn.CASE.kv_len (int32, (B)) is present when the case has key padding; attn.CASE.probs only for
small cases.

Where attn deliberately differs from PyTorch (documented in attn_kernels.h), the expected value
here is attn's: a query that sees no key gets o = 0, lse = -inf, probabilities 0 and no gradient
(PyTorch's masked softmax would give NaN) — also when the bias hides every visible key."""
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


def visible(B, Tq, Tk, causal, off, kv_len, window=0):
    """(B, 1, Tq, Tk) bool: key j visible to query i of batch b (attn_kernels.h)."""
    i = np.arange(Tq)[:, None]
    j = np.arange(Tk)[None, :]
    vis = np.ones((B, Tq, Tk), dtype=bool)
    if causal:
        vis &= (j <= i + off)[None]
    if window:
        assert causal
        vis &= (j > i + off - window)[None]
    if kv_len is not None:
        vis &= j[None] < np.asarray(kv_len)[:, None, None]
    return vis[:, None]


def dense_bias(Bb, Hb, Tqb, ninf=0.0, dead=(), scale=2.0):
    """A bias stored densely as (Bb, Hb, Tqb, Tk), Bb in {1, B}, Hb in {1, H}, Tqb in {1, Tq}
    (1: shared, stride 0). ninf: fraction of entries set to -inf; dead: (b, h, i, j_end) tuples
    whose entries [0, j_end) become -inf (with j_end >= the row's visible keys: a row with no
    visible key left)."""
    def make(B, H, Tq, Tk):
        x = scale * rng.randn(Bb, Hb, Tqb, Tk)
        x[rng.rand(*x.shape) < ninf] = -np.inf
        for b, h, i, j in dead:
            x[b, h, i, :j] = -np.inf
        st = (0 if Bb == 1 else Hb * Tqb * Tk, 0 if Hb == 1 else Tqb * Tk, 0 if Tqb == 1 else Tk)
        return x.reshape(-1), st, 0
    return make


def relative_bias(Hb, scale=1.0):
    """A relative-position bias r (Hb, Tq+Tk-1): entry (i, j) is r[h, Tq-1-i+j], read by attn
    through bias_sq = -1 from r + Tq-1, shared across the batch."""
    def make(B, H, Tq, Tk):
        n = Tq + Tk - 1
        x = scale * rng.randn(Hb, n)
        return x.reshape(-1), (0, 0 if Hb == 1 else n, -1), Tq - 1
    return make


def case(B, H, Tq, Tk, D, causal=False, off=0, kv_len=None, fused=False, scale=None, H_kv=None,
         extra=0, bias=None, window=0):
    n = len(META)
    if scale is None:
        scale = 1.0 / np.sqrt(D)
    scale = float(np.float32(scale))  # the C side holds it as float
    assert not fused or Tq == Tk  # one QKV buffer holds as many keys as queries
    Hk = H if H_kv is None else H_kv
    assert H % Hk == 0
    q = f32(rng.randn(B, Tq, H, D))
    k, v = (f32(rng.randn(B, Tk, Hk, D)) for _ in range(2))
    do = f32(rng.randn(B, Tq, H, D))
    leaves = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v)]
    qh = leaves[0].permute(0, 2, 1, 3)  # (B, H, Tq, D)
    # query head h reads K/V head h // (H // Hk): repeat each K/V head over its group
    kh, vh = (t.repeat_interleave(H // Hk, dim=2).permute(0, 2, 1, 3) for t in leaves[1:])
    s = scale * (qh @ kh.transpose(-1, -2))  # (B, H, Tq, Tk)
    bflat, bst, boff = None, (0, 0, 0), 0
    if bias is not None:
        bflat, bst, boff = bias(B, H, Tq, Tk)
        bflat = f32(bflat)
        idx = (boff + np.arange(B)[:, None, None, None] * bst[0]
               + np.arange(H)[None, :, None, None] * bst[1]
               + np.arange(Tq)[None, None, :, None] * bst[2] + np.arange(Tk)[None, None, None, :])
        bfull = torch.tensor(bflat.astype(np.float64)[idx], requires_grad=True)  # (B, H, Tq, Tk)
        s = s + bfull
    vis = torch.tensor(visible(B, Tq, Tk, causal, off, kv_len, window))
    s = torch.where(vis, s, torch.tensor(-np.inf, dtype=torch.float64))
    alive = (s > -np.inf).any(-1, keepdim=True)  # (B, H, Tq, 1): the query sees some key
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
    if bias is not None:
        T[f"{pre}.bias"] = bflat
        T[f"{pre}.dbias"] = f32(bfull.grad.numpy())
    META[f"{pre}.params"] = (f"{B} {H} {Tq} {Tk} {D} {int(causal)} {off} {int(fused)} "
                             f"{scale!r} {Hk} {extra} {int(bias is not None)} "
                             f"{bst[0]} {bst[1]} {bst[2]} {boff} {window}")


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
# Grouped-query / multi-query attention.
case(2, 8, 40, 40, 64, causal=True, H_kv=2)                  # GQA 8/2, causal
case(2, 8, 20, 70, 32, kv_len=[70, 33], H_kv=2)              # GQA cross-attention with padding
case(3, 4, 33, 33, 48, causal=True, kv_len=[33, 10, 0], H_kv=1)  # multi-query, causal + padded
case(2, 4, 50, 50, 64, causal=True, fused=True, H_kv=1)      # multi-query, fused QKV
case(1, 4, 100, 100, 160, causal=True, H_kv=2)               # D > 128 (32-row blocks), 4 blocks
# Batch strides: every tensor T + extra rows per batch (a KV cache of capacity Tk + extra).
case(2, 8, 5, 77, 64, causal=True, off=72, H_kv=2, extra=51)  # decode step from a GQA cache
case(3, 2, 16, 100, 80, kv_len=[100, 64, 1], extra=28)       # cache with padding
# Additive score bias (dbias by autograd).
case(3, 4, 30, 30, 64, bias=dense_bias(1, 4, 30))            # shared across the batch (sb = 0)
case(2, 3, 24, 57, 40, kv_len=[57, 31], bias=dense_bias(2, 1, 24))  # per batch, heads shared
case(2, 2, 70, 70, 64, causal=True,                          # -inf entries + fully masked rows,
     bias=dense_bias(2, 2, 70, ninf=0.3,                     # some only with the causal mask
                     dead=[(0, 0, 5, 70), (1, 1, 69, 70), (0, 1, 3, 4), (1, 0, 66, 67)]))
case(2, 4, 33, 45, 32, kv_len=[45, 20], H_kv=2,              # with padding and GQA: rows dead
     bias=dense_bias(2, 4, 33, ninf=0.2, dead=[(1, 2, 7, 20), (0, 3, 32, 45)]))  # only with kv_len
case(2, 2, 20, 20, 16, bias=dense_bias(2, 1, 1, ninf=0.25))  # (B, 1, 1, Tk) mask bias, sq = 0
case(2, 4, 65, 65, 64, causal=True, bias=relative_bias(4))   # relative positions, bias_sq = -1
case(2, 6, 40, 40, 72, causal=True, fused=True, H_kv=3, extra=9,  # everything at once
     bias=dense_bias(1, 6, 40, ninf=0.1, dead=[(0, 4, 11, 12)]))
# Sliding windows (Mistral / Qwen2): sizes 1, 2, below T (multiples of the 64-key tile or not),
# >= T, with KV-cache offsets (Tq = 1 and > 1), padding, GQA, fused strides, biases.
case(2, 2, 17, 17, 32, causal=True, window=1)                # each query sees only itself
case(1, 3, 40, 40, 64, causal=True, window=2)                # itself and the one before
case(2, 4, 150, 150, 64, causal=True, H_kv=2, window=37)     # GQA, window < T, 37 % 64 != 0
case(1, 2, 300, 300, 48, causal=True, window=64)             # a window of exactly one tile
case(1, 2, 200, 200, 32, causal=True, window=130)            # window spanning 3 tiles
case(1, 2, 50, 50, 48, causal=True, window=50)               # window = T: plain causal
case(2, 2, 30, 30, 40, causal=True, window=1000)             # window > T: plain causal
case(2, 4, 1, 300, 64, causal=True, off=299, H_kv=2, extra=20, window=100)  # decode step
case(2, 2, 9, 200, 80, causal=True, off=191, kv_len=[200, 100],  # 9 queries after a cache;
     window=70)                                              # batch 1: rows left with no key
case(2, 2, 64, 64, 48, causal=True, kv_len=[64, 40], window=24)  # padding
case(1, 2, 24, 24, 40, causal=True, off=-3, window=5)        # negative offset: empty rows
case(2, 3, 130, 130, 72, causal=True, fused=True, extra=5, window=65)  # fused, cache strides
case(1, 2, 100, 100, 160, causal=True, window=45)            # D > 128 (32-row blocks)
case(2, 2, 70, 70, 64, causal=True, window=33,               # bias with -inf entries + dbias
     bias=dense_bias(2, 2, 70, ninf=0.2, dead=[(0, 1, 50, 70)]))
case(1, 4, 90, 90, 64, causal=True, H_kv=1, window=7,        # multi-query, relative positions
     bias=relative_bias(4))

out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
os.makedirs(out, exist_ok=True)
stfile.save(os.path.join(out, "attention.safetensors"), T, META)
print(f"wrote {len(META)} attention cases to {out}/attention.safetensors")
