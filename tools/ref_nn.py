"""PyTorch references for tests/test_nn.c: the block layer (include/attn_nn.h) — linear maps,
norms, feed-forward blocks, attention (self and cross, fused or separate projections,
grouped-query and multi-query heads, Qwen3's per-head q/k RMSNorms, rotary embeddings, causal /
sliding-window / padding / variable-length masks, an additive score bias) and residual sub-layers
with dropout — forward and backward.

    .venv/bin/python tools/ref_nn.py OUTDIR   ->  OUTDIR/nn.safetensors

Inputs are drawn in float32; the expected outputs and gradients are computed by torch in float64
from those same float32 values (autograd for every gradient) and stored as float32, so the C test
measures only the C side's error. Tensors are named KIND.CASE.NAME (KIND = lin, norm, ffn, attn,
sub; CASE = 0, 1, ...); the parameters of a case are the JSON metadata string KIND.CASE; the
metadata "KIND.cases" is the number of cases. Every weight is stored in nn.Linear's (out, in)
layout; the C test builds the other layouts (GPT-2's (in, out), fused q|k|v, strided views) from
it. Backward references are d/d(inputs) of sum(dy · y) for the stored dy; where the C API
accumulates (weight gradients, dx with accumulate), the stored expected value already includes
the stored starting value (g0_* / dx0 + gradient).

q/k norms: Qwen3Attention's (transformers >= 4.51; the pinned 4.49 predates Qwen3, so written
out from its definition): q = q_norm(q_proj(x).view(..., H, D)), k = k_norm(k_proj(x).view(...,
H_kv, D)), each an RMSNorm over the head's D values with a (D) weight — x · rsqrt(mean(x²) + eps)
· w, as LlamaRMSNorm computes it (here in float64) — applied before the rotary embedding.
Sliding windows: the mask is transformers' own (Mistral's
_prepare_4d_causal_attention_mask_with_cache_position with config.sliding_window: key j hidden
from the query at position i when j > i or j <= i - sliding_window).

Rotary embeddings: half-split mode through transformers' own Llama apply_rotary_pos_emb on the
first R dims of each head (partial rotary as GPT-NeoX / Phi slice them), interleaved mode through
transformers' GPT-J apply_rotary_pos_emb (rotate_every_two); the angles are float32
pos · inv_freq as transformers computes them, their cosines and sines in float64 (what
attn_rope_tables rounds to float). Grouped-query heads: K and V repeat_interleave'd to H heads.

Dropout (sub-layers): attn_nn_dropout_fwd's mask re-implemented here in numpy from its
definition in attn_nn.h (SplitMix64 finalizer, element index global row · C + column, the global
row from attn_nn_rows), so the C test checks the sub-layer wiring and the mask's row numbering
against an independent twin."""
import json
import os
import sys
import types

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402
from transformers.models.gptj import modeling_gptj as gptj  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402
from transformers.models.mistral import modeling_mistral as mistral  # noqa: E402

rng = np.random.RandomState(20261201)
T, META = {}, {}
COUNT = {}

ACTS = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4}
ACT_FN = {"none": lambda t: t, "relu": F.relu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
          "gelu_erf": F.gelu, "silu": F.silu}


def f32(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def rnd(*shape, s=1.0):
    return f32(rng.randn(*shape) * s)


def leaf(a):
    """float64 tensor holding the exact values of the float32 array a, requiring grad."""
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def d64(a):
    return torch.tensor(np.asarray(a, dtype=np.float64))


def put(prefix, **arrays):
    for k, v in arrays.items():
        if v is None:
            continue
        if isinstance(v, torch.Tensor):
            v = v.detach().numpy()
        v = np.asarray(v)
        T[f"{prefix}.{k}"] = v if v.dtype == np.int32 else f32(v)


def new_case(kind, params):
    k = COUNT.get(kind, 0)
    COUNT[kind] = k + 1
    META[f"{kind}.{k}"] = json.dumps(params)
    return f"{kind}.{k}"


def grad(t):
    return t.grad if t.grad is not None else torch.zeros_like(t)


# ---- linear ------------------------------------------------------------------------------------
# y = act(x·Wᵀ + b + beta·y0); backward of the map without activation: dx = dy·W,
# dW = dyᵀ·x, db = colsum(dy). Stored: dx (overwrite), dx_acc = dx0 + dx, gw = g0_w + dW,
# gb = g0_b + db.
def lin_case(M, K, N, layout, bias, act, padw=0, padx=0, pady=0, beta=0.0):
    p = new_case("lin", dict(M=M, K=K, N=N, layout=layout, bias=bias, act=ACTS[act], padw=padw,
                             padx=padx, pady=pady, beta=beta))
    x, w, b, y0 = rnd(M, K), rnd(N, K, s=0.3), rnd(N), rnd(M, N)
    dy, dx0, g0w, g0b = rnd(M, N), rnd(M, K), rnd(N, K), rnd(N)
    xt, wt, bt = leaf(x), leaf(w), leaf(b)
    z = xt @ wt.T + (bt if bias else 0) + beta * d64(y0)
    y_act = ACT_FN[act](z)
    (z * d64(dy)).sum().backward()
    put(p, x=x, w=w, b=b if bias else None, y0=y0, dy=dy, dx0=dx0, g0w=g0w,
        g0b=g0b if bias else None, y=y_act, dx=xt.grad, dx_acc=d64(dx0) + xt.grad,
        gw=d64(g0w) + wt.grad, gb=(d64(g0b) + bt.grad) if bias else None)


lin_case(7, 19, 23, "oi", True, "none")
lin_case(33, 64, 48, "oi", False, "gelu_tanh", padw=5)
lin_case(17, 40, 72, "io", True, "gelu_erf")
lin_case(9, 31, 50, "io", False, "silu", padw=3, padx=2, pady=7, beta=1.0)
lin_case(64, 96, 130, "oi", True, "relu", padw=2, padx=1, pady=3, beta=1.0)
lin_case(1, 8, 5, "io", True, "none", padw=1)
lin_case(130, 33, 17, "oi", True, "silu", padw=1)
lin_case(20, 24, 36, "io", True, "relu", padw=4, beta=1.0)


# ---- norms -------------------------------------------------------------------------------------
# kind 0 = LayerNorm (w, b optional), 1 = RMSNorm as LlamaRMSNorm: x · rsqrt(mean(x²) + eps) · w.
def norm_case(M, C, kind, w, b, eps, scale=1.0, shift=0.0):
    p = new_case("norm", dict(M=M, C=C, kind=kind, w=w, b=b, eps=eps))
    x = rnd(M, C, s=scale) + np.float32(shift)
    wv, bv = f32(1 + 0.3 * rng.randn(C)), rnd(C, s=0.5)
    dy, dx0, g0w, g0b = rnd(M, C), rnd(M, C), rnd(C), rnd(C)
    xt, wt, bt = leaf(x), leaf(wv), leaf(bv)
    if kind == 0:
        y = F.layer_norm(xt, (C,), wt if w else None, bt if b else None, eps)
    else:
        y = xt * torch.rsqrt(xt.pow(2).mean(-1, keepdim=True) + eps)
        if w:
            y = y * wt
    (y * d64(dy)).sum().backward()
    put(p, x=x, w=wv if w else None, b=bv if b else None, dy=dy, dx0=dx0,
        g0w=g0w if w else None, g0b=g0b if b else None, y=y, dx=xt.grad,
        dx_acc=d64(dx0) + xt.grad, gw=(d64(g0w) + wt.grad) if w else None,
        gb=(d64(g0b) + bt.grad) if b else None)


norm_case(6, 32, 0, True, True, 1e-5)
norm_case(5, 48, 0, True, False, 1e-5, shift=2.0)      # LayerNorm without bias (OLMo, T5-ish)
norm_case(3, 17, 0, False, False, 1e-6)                 # no affine parameters at all
norm_case(9, 64, 1, True, False, 1e-6)                  # LlamaRMSNorm
norm_case(4, 33, 1, False, False, 1e-5, scale=3.0)      # RMSNorm without gain
norm_case(5, 384, 0, True, True, 1e-12, scale=0.2)      # BERT width and eps
norm_case(7, 256, 1, True, False, 1e-5, scale=1e-3)     # eps matters


# ---- feed-forward ------------------------------------------------------------------------------
# plain: down(act(up(x))); gated: down(act(gate(x)) ⊙ up(x)). y = ffn(x) + beta·y0. fused: the C
# test lays gate|up out as one (2F, C) matrix (one GEMM); gfused: their gradients likewise.
def ffn_case(M, C, Fd, kind, act, bias, fused=False, gfused=False, beta=0.0):
    p = new_case("ffn", dict(M=M, C=C, F=Fd, kind=kind, act=ACTS[act], bias=bias, fused=fused,
                             gfused=gfused, beta=beta))
    W = {"w_up": rnd(Fd, C, s=0.25), "w_down": rnd(C, Fd, s=0.2)}
    if kind == 1:
        W["w_gate"] = rnd(Fd, C, s=0.25)
    if bias:
        W["b_up"], W["b_down"] = rnd(Fd, s=0.3), rnd(C, s=0.3)
        if kind == 1:
            W["b_gate"] = rnd(Fd, s=0.3)
    x, y0, dy, dx0 = rnd(M, C), rnd(M, C), rnd(M, C), rnd(M, C)
    G0 = {k: rnd(*v.shape) for k, v in W.items()}
    xt = leaf(x)
    Wt = {k: leaf(v) for k, v in W.items()}
    lin = lambda a, n: a @ Wt["w_" + n].T + (Wt["b_" + n] if bias else 0)  # noqa: E731
    if kind == 0:
        h = ACT_FN[act](lin(xt, "up"))
    else:
        h = ACT_FN[act](lin(xt, "gate")) * lin(xt, "up")
    y = lin(h, "down") + beta * d64(y0)
    (y * d64(dy)).sum().backward()
    put(p, x=x, y0=y0, dy=dy, dx0=dx0, y=y, dx=xt.grad, dx_acc=d64(dx0) + xt.grad, **W)
    put(p, **{"g0_" + k: v for k, v in G0.items()})
    put(p, **{"g_" + k: d64(G0[k]) + Wt[k].grad for k in W})


ffn_case(13, 32, 64, 0, "relu", True)
ffn_case(9, 48, 96, 0, "gelu_erf", True)                     # BERT
ffn_case(20, 40, 72, 0, "gelu_tanh", False, beta=1.0)        # GPT-2, residual as C operand
ffn_case(5, 24, 50, 0, "silu", True)
ffn_case(11, 64, 96, 1, "silu", False, fused=True, gfused=True)   # SwiGLU, one gate|up GEMM
ffn_case(7, 32, 48, 1, "silu", True)                         # SwiGLU, separate gate and up
ffn_case(16, 40, 80, 1, "gelu_tanh", True, fused=True, beta=1.0)  # GeGLU fused, grads separate
ffn_case(3, 16, 40, 1, "gelu_erf", False, gfused=True)       # GeGLU separate, grads adjacent


# ---- rotary embeddings and attention -----------------------------------------------------------
def rope_ref(t, pos, inv_freq, R, mode):
    """t (M, nh, D) float64 rows; rotate the first R dims of each head at positions pos (M)."""
    ang = (torch.from_numpy(pos.astype(np.float32))[:, None] *
           torch.from_numpy(inv_freq)[None, :]).double()  # float32 angles, as transformers
    c, s = torch.cos(ang), torch.sin(ang)  # (M, R/2)
    rot, rest = t[..., :R], t[..., R:]
    if mode == 0:  # half-split: Llama's apply_rotary_pos_emb on (1, nh, M, R)
        q = rot.transpose(0, 1)[None]
        cos, sin = torch.cat([c, c], -1)[None], torch.cat([s, s], -1)[None]
        r, _ = llama.apply_rotary_pos_emb(q, q, cos, sin)
        r = r[0].transpose(0, 1)
    else:  # interleaved: GPT-J's apply_rotary_pos_emb on (1, M, nh, R)
        r = gptj.apply_rotary_pos_emb(rot[None], s[None], c[None])[0]
    return torch.cat([r, rest], -1)


def inv_freq_of(R, theta):
    # transformers: 1 / (base ** (arange(0, dim, 2).float() / dim)), in float32
    return (1.0 / (theta ** (torch.arange(0, R, 2, dtype=torch.int64).float() / R))).numpy()


def rms_heads(t, w, eps):
    """Qwen3's q_norm / k_norm: RMSNorm over the last dim (each head's D values), weight w (D)."""
    return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps) * w


def causal_vis(Tq, Tk, window):
    """(Tq, Tk) bool: causal visibility of queries 0.. over keys 0.., with a sliding window
    through transformers' Mistral mask (None: plain causal)."""
    if not window:
        return torch.ones(Tq, Tk, dtype=torch.bool).tril()
    cfg = types.SimpleNamespace(sliding_window=window)
    m = mistral.MistralModel._prepare_4d_causal_attention_mask_with_cache_position(
        None, Tq, Tk, torch.float64, "cpu", torch.arange(Tq), 1, cfg, None)
    return m[0, 0] == 0


def sdpa(q, k, v, vis, bias, scale):
    """q (B, Tq, H, D), k, v (B, Tk, Hk, D), vis (B, 1|H, Tq, Tk) bool, bias (B, H, Tq, Tk)."""
    H, Hk = q.shape[2], k.shape[2]
    k = k.repeat_interleave(H // Hk, dim=2)
    v = v.repeat_interleave(H // Hk, dim=2)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    s = q @ k.transpose(-1, -2) * scale
    if bias is not None:
        s = s + bias
    p = torch.softmax(s.masked_fill(~vis, float("-inf")), dim=-1)
    return (p @ v).transpose(1, 2), p  # (B, Tq, H, D), (B, H, Tq, Tk)


def attn_case(B, Tq, C, H, Hk, D, Tk=None, Ckv=None, cross=False, causal=False, pbias=True,
              scale=0.0, rope=None, pos0=0, explicit_pos=False, kv_len=None, off=None,
              sbias=None, ninf=False, window=0, qk_norm=False, eps=1e-6):
    """One attention case. rope: (R, mode, P, theta). sbias: None, "shared" (one (H, Tq, Tk)
    bias for the batch: bias_sb = 0), "batch" ((B, H, Tq, Tk)) or "heads" ((B, 1, Tq, Tk):
    bias_sh = 0). off: variable-length packed rows (self-attention; Tq = Tk = T). window: a
    sliding window (causal). qk_norm: Qwen3's q_norm / k_norm (weights qn, kn (D), eps)."""
    Tk = Tq if Tk is None else Tk
    Ckv = C if Ckv is None else Ckv
    HD, KD = H * D, Hk * D
    Mq = off[-1] if off else B * Tq
    Mk = B * Tk if cross else Mq
    sc = scale if scale else 1.0 / D ** 0.5
    R, mode, P, theta = rope if rope else (0, 0, 0, 0.0)
    prm = dict(B=B, Tq=Tq, Tk=Tk, C=C, Ckv=Ckv, H=H, Hk=Hk, D=D, cross=cross, causal=causal,
               pbias=pbias, scale=scale, R=R, mode=mode, P=P, pos0=pos0, pos=explicit_pos,
               kv_len=kv_len, off=off, sbias=sbias is not None, window=window,
               qk_norm=qk_norm, eps=eps)
    W = {"wq": rnd(HD, C, s=0.3), "wk": rnd(KD, Ckv, s=0.3), "wv": rnd(KD, Ckv, s=0.3),
         "wo": rnd(C, HD, s=0.3)}
    if pbias:
        W.update(bq=rnd(HD, s=0.3), bk=rnd(KD, s=0.3), bv=rnd(KD, s=0.3), bo=rnd(C, s=0.3))
    if qk_norm:
        W.update(qn=f32(1 + 0.3 * rng.randn(D)), kn=f32(1 + 0.3 * rng.randn(D)))
    x, dy = rnd(Mq, C), rnd(Mq, C)
    src = rnd(Mk, Ckv) if cross else None
    xt = leaf(x)
    st = leaf(src) if cross else xt
    Wt = {k: leaf(v) for k, v in W.items()}
    lin = lambda a, n: a @ Wt["w" + n].T + (Wt["b" + n] if pbias else 0)  # noqa: E731
    q = lin(xt, "q").view(Mq, H, D)
    kk = lin(st, "k").view(Mk, Hk, D)
    vv = lin(st, "v").view(Mk, Hk, D)
    if qk_norm:
        q, kk = rms_heads(q, Wt["qn"], eps), rms_heads(kk, Wt["kn"], eps)
    arrays = {}
    if R:
        inv = inv_freq_of(R, theta)
        if explicit_pos:
            pos = rng.randint(0, P, size=Mq).astype(np.int32)
            pos[0] = P - 1
            arrays["pos"] = pos
        elif off:
            pos = np.concatenate([pos0 + np.arange(off[b + 1] - off[b]) for b in range(B)])
        else:
            pos = pos0 + np.tile(np.arange(Tq), B)
        assert pos.max() < P
        arrays["inv_freq"] = inv
        q, kk = rope_ref(q, pos, inv, R, mode), rope_ref(kk, pos, inv, R, mode)
    bfull = None
    if sbias is not None:
        nb = 1 if sbias == "shared" else B
        nh = 1 if sbias == "heads" else H
        bias = rng.randn(nb, nh, Tq, Tk) * 1.5
        if ninf:  # a few hidden entries, never a whole row
            bias[..., 1:, 0] = -np.inf
            bias[0, 0, 0, Tk - 1] = -np.inf
        bias = f32(bias)
        arrays["sbias"] = bias
        prm["bias_sb"] = 0 if nb == 1 else nh * Tq * Tk
        prm["bias_sh"] = 0 if nh == 1 else Tq * Tk
        prm["bias_sq"] = Tk
        bfull = leaf(np.broadcast_to(bias, (B, H, Tq, Tk)).copy())
    if off:  # each packed sequence attends over its own rows
        ctx = torch.zeros(Mq, H, D, dtype=torch.float64)
        probs = torch.zeros(B, H, Tq, Tq, dtype=torch.float64)
        parts = []
        for b in range(B):
            r0, r1 = off[b], off[b + 1]
            n = r1 - r0
            if n == 0:
                continue
            vis = torch.ones(1, 1, n, n, dtype=torch.bool)
            if causal:
                vis &= causal_vis(n, n, window)
            o, pb = sdpa(q[None, r0:r1], kk[None, r0:r1], vv[None, r0:r1], vis, None, sc)
            parts.append(o[0])
            probs[b, :, :n, :n] = pb[0].detach()
        ctx = torch.cat(parts, 0)
        probs_out = probs
    else:
        vis = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
        if causal:
            vis &= causal_vis(Tq, Tk, window)
        if kv_len is not None:
            vis &= (torch.arange(Tk)[None, :] < torch.tensor(kv_len)[:, None])[:, None, None, :]
        o, probs_out = sdpa(q.view(B, Tq, H, D), kk.view(B, Tk, Hk, D), vv.view(B, Tk, Hk, D),
                            vis, bfull, sc)
        ctx = o.reshape(Mq, H, D)
    y = lin(ctx.reshape(Mq, HD), "o")
    (y * d64(dy)).sum().backward()
    p = new_case("attn", prm)
    put(p, x=x, src=src, dy=dy, y=y, probs=probs_out, dx=xt.grad,
        dsrc=st.grad if cross else None, dbias=bfull.grad if bfull is not None else None,
        **W, **arrays)
    put(p, **{"g_" + k: v.grad for k, v in Wt.items()})


# 0: encoder self-attention, multi-head, biases
attn_case(2, 5, 32, 4, 4, 8)
# 1: decoder, grouped-query (3 query heads per K/V head), full half-split RoPE, no biases
attn_case(2, 9, 48, 6, 2, 8, causal=True, pbias=False, rope=(8, 0, 16, 10000.0))
# 2: multi-query, causal + padding, partial interleaved RoPE (8 of 16 dims)
attn_case(2, 7, 32, 4, 1, 16, causal=True, kv_len=[7, 4], rope=(8, 1, 12, 10000.0))
# 3: H·D != C, partial half-split RoPE (6 of 12), explicit positions, Llama-3 theta, own scale
attn_case(1, 11, 40, 4, 2, 12, causal=True, scale=0.2, rope=(6, 0, 64, 500000.0),
          explicit_pos=True)
# 4: score bias shared over the batch (bias_sb = 0) with hidden (-inf) entries, GQA, RoPE from
#    position 3 (pos0 without a cache)
attn_case(2, 6, 32, 4, 2, 8, sbias="shared", ninf=True, rope=(8, 0, 16, 10000.0), pos0=3)
# 5: per-sequence bias shared over heads (bias_sh = 0), causal + padding
attn_case(2, 6, 32, 2, 2, 16, causal=True, kv_len=[6, 3], sbias="heads")
# 6: variable-length packed rows (BERT), GQA + RoPE, probabilities in the padded capture layout
attn_case(3, 7, 32, 4, 2, 8, off=[0, 5, 6, 13], rope=(8, 0, 8, 10000.0))
# 7: variable-length packed rows with a causal decoder config (packed GPT rows)
attn_case(2, 6, 32, 4, 2, 8, off=[0, 6, 10], causal=True)
# 8: cross-attention, GQA, source padding, d_kv != d_model
attn_case(2, 5, 32, 4, 2, 8, Tk=9, Ckv=24, cross=True, kv_len=[9, 4])
# 9: cross-attention, multi-query, no biases, with a score bias per sequence
attn_case(1, 3, 16, 2, 1, 12, Tk=7, Ckv=40, cross=True, pbias=False, sbias="batch")
# 10: a longer decoder sequence (several key blocks), GQA, RoPE, biases
attn_case(1, 40, 64, 8, 2, 8, causal=True, rope=(8, 0, 48, 10000.0))
# 11: one token
attn_case(2, 1, 16, 2, 2, 8, causal=True, rope=(8, 1, 4, 10000.0))
# 12: decoder self-attention with per-batch bias, multi-query, interleaved RoPE, padding
attn_case(2, 8, 24, 3, 1, 8, causal=True, kv_len=[8, 5], sbias="batch",
          rope=(4, 1, 8, 10000.0))
# 13: Qwen3: q/k norms, GQA, head_dim 16 != C/H = 8, full half-split RoPE, no biases
attn_case(2, 9, 32, 4, 2, 16, causal=True, pbias=False, qk_norm=True,
          rope=(16, 0, 16, 1000000.0))
# 14: q/k norms after biased projections, partial RoPE (8 of 16), padding, eps 1e-5
attn_case(2, 10, 40, 6, 2, 16, causal=True, kv_len=[10, 6], qk_norm=True, eps=1e-5,
          rope=(8, 0, 16, 10000.0))
# 15: Mistral: sliding window 3, GQA, RoPE
attn_case(2, 12, 32, 4, 2, 8, causal=True, pbias=False, window=3, rope=(8, 0, 16, 10000.0))
# 16: window 5 + q/k norms + multi-query + a score bias + padding + interleaved RoPE
attn_case(2, 9, 24, 3, 1, 8, causal=True, kv_len=[9, 7], sbias="batch", window=5,
          qk_norm=True, rope=(8, 1, 12, 10000.0))
# 17: variable-length packed rows with a sliding window (causal) and q/k norms
attn_case(3, 7, 32, 4, 2, 8, off=[0, 7, 9, 16], causal=True, window=4, qk_norm=True,
          rope=(8, 0, 8, 10000.0))
# 18: a longer window over several key blocks, q/k norms, multi-query
attn_case(1, 70, 32, 4, 1, 8, causal=True, pbias=False, window=20, qk_norm=True,
          rope=(8, 0, 72, 10000.0))
# 19: window 1 (each query sees itself only) and window >= T (plain causal), one case each
attn_case(1, 6, 16, 2, 2, 8, causal=True, window=1)
attn_case(1, 6, 16, 2, 2, 8, causal=True, window=6, qk_norm=True)


# ---- dropout twin (attn_nn.h) ------------------------------------------------------------------
M64 = (1 << 64) - 1


def mix64_int(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def mix64_np(z):
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def keep_mask(seed, step, site, p, row0, tl, tg, M, C):
    key = mix64_int(mix64_int(mix64_int(seed) ^ step) ^ site)
    thr = int(float(np.float32(p)) * 16777216.0 + 0.5)
    r = np.arange(M, dtype=np.uint64)[:, None]
    c = np.arange(C, dtype=np.uint64)[None, :]
    g = (np.uint64(row0) + r // np.uint64(tl)) * np.uint64(tg) + r % np.uint64(tl)
    with np.errstate(over="ignore"):
        idx = g * np.uint64(C) + c
        h = mix64_np(np.uint64(key) ^ (idx * np.uint64(0xD6E8FEB86659FD93)))
    return (h >> np.uint64(40)) >= np.uint64(thr)


# ---- sub-layers --------------------------------------------------------------------------------
# pre-norm: out = x + drop(f(norm(x))); post-norm: out = norm(x + drop(f(x))). f: attention
# (self or cross) or FFN. The dropout mask (training, p > 0) from the twin above with the case's
# rows (row0, t_local, t_global), seed, step and site; kept elements scaled by float32 1/(1 − p).
def sub_case(kind, pre_norm, norm_kind, B, Tq, C, attn=None, ffn=None, p_drop=0.0,
             rows=None, seed=0, step=0, site=0, Tk=None, Ckv=None, kv_len=None, window=0,
             qk_norm=False):
    M = B * Tq
    rows = rows or (0, Tq, Tq)
    prm = dict(kind=kind, pre_norm=pre_norm, norm=norm_kind, B=B, Tq=Tq, C=C, p_drop=p_drop,
               row0=rows[0], t_local=rows[1], t_global=rows[2], seed=seed, step=step, site=site,
               kv_len=kv_len, eps=1e-5 if norm_kind == 0 else 1e-6)
    x, dy = rnd(M, C), rnd(M, C)
    nw, nb = f32(1 + 0.3 * rng.randn(C)), rnd(C, s=0.3)
    arrays = dict(x=x, dy=dy, norm_w=nw, norm_b=nb if norm_kind == 0 else None)
    xt = leaf(x)
    P = {"norm_w": leaf(nw)}
    if norm_kind == 0:
        P["norm_b"] = leaf(nb)

    def norm(t):
        if norm_kind == 0:
            return F.layer_norm(t, (C,), P["norm_w"], P["norm_b"], 1e-5)
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * P["norm_w"]

    src_t = None
    if kind == 0:
        H, Hk, D, causal, cross, rope = attn
        Tk = Tq if Tk is None else Tk
        Ckv = C if Ckv is None else Ckv
        HD, KD = H * D, Hk * D
        prm.update(H=H, Hk=Hk, D=D, causal=causal, cross=cross, Tk=Tk, Ckv=Ckv,
                   R=rope[0] if rope else 0, mode=rope[1] if rope else 0,
                   P=rope[2] if rope else 0, window=window, qk_norm=qk_norm)
        for n, shp in (("wq", (HD, C)), ("wk", (KD, Ckv)), ("wv", (KD, Ckv)), ("wo", (C, HD))):
            arrays[n] = rnd(*shp, s=0.3)
            P[n] = leaf(arrays[n])
        if qk_norm:  # eps 1e-6, Qwen3's
            for n in ("qn", "kn"):
                arrays[n] = f32(1 + 0.3 * rng.randn(D))
                P[n] = leaf(arrays[n])
        if cross:
            arrays["src"] = rnd(B * Tk, Ckv)
            src_t = leaf(arrays["src"])
        if rope:
            arrays["inv_freq"] = inv_freq_of(rope[0], rope[3])

        def f(t):
            s = src_t if cross else t
            Mk = s.shape[0]
            q = (t @ P["wq"].T).view(M, H, D)
            k = (s @ P["wk"].T).view(Mk, Hk, D)
            v = (s @ P["wv"].T).view(Mk, Hk, D)
            if qk_norm:
                q, k = rms_heads(q, P["qn"], 1e-6), rms_heads(k, P["kn"], 1e-6)
            if rope:
                pos = np.tile(np.arange(Tq), B)
                q = rope_ref(q, pos, arrays["inv_freq"], rope[0], rope[1])
                k = rope_ref(k, pos, arrays["inv_freq"], rope[0], rope[1])
            vis = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
            if causal:
                vis &= causal_vis(Tq, Tk, window)
            if kv_len is not None:
                vis &= (torch.arange(Tk)[None, :] < torch.tensor(kv_len)[:, None])[:, None, None]
            o, _ = sdpa(q.view(B, Tq, H, D), k.view(B, Tk, Hk, D), v.view(B, Tk, Hk, D), vis,
                        None, 1.0 / D ** 0.5)
            return o.reshape(M, HD) @ P["wo"].T
    else:
        fkind, act, Fd = ffn
        prm.update(fkind=fkind, act=ACTS[act], F=Fd)
        names = [("w_up", (Fd, C)), ("b_up", (Fd,)), ("w_down", (C, Fd)), ("b_down", (C,))]
        if fkind == 1:
            names += [("w_gate", (Fd, C)), ("b_gate", (Fd,))]
        for n, shp in names:
            arrays[n] = rnd(*shp, s=0.25)
            P[n] = leaf(arrays[n])

        def f(t):
            u = t @ P["w_up"].T + P["b_up"]
            if fkind == 0:
                h = ACT_FN[act](u)
            else:
                h = ACT_FN[act](t @ P["w_gate"].T + P["b_gate"]) * u
            return h @ P["w_down"].T + P["b_down"]

    def drop(t):
        if p_drop <= 0:
            return t
        keep = keep_mask(seed, step, site, p_drop, rows[0], rows[1], rows[2], M, C)
        scale = float(np.float32(1.0) / (np.float32(1.0) - np.float32(p_drop)))
        return t * d64(keep.astype(np.float64)) * scale

    if pre_norm:
        out = xt + drop(f(norm(xt)))
    else:
        out = norm(xt + drop(f(xt)))
    (out * d64(dy)).sum().backward()
    p = new_case("sub", prm)
    put(p, out=out, dx=xt.grad, dsrc=grad(src_t) if src_t is not None else None, **arrays)
    put(p, **{"g_" + k: grad(v) for k, v in P.items()})


# 0: pre-norm (RMSNorm) decoder self-attention, GQA + RoPE (Llama)
sub_case(0, True, 1, 2, 6, 32, attn=(4, 2, 8, True, False, (8, 0, 16, 10000.0)))
# 1: post-norm (LayerNorm) encoder self-attention with key padding (BERT)
sub_case(0, False, 0, 2, 5, 32, attn=(4, 4, 8, False, False, None), kv_len=[5, 3])
# 2: pre-norm SwiGLU FFN (Llama)
sub_case(1, True, 1, 2, 5, 32, ffn=(1, "silu", 48))
# 3: post-norm GELU FFN (BERT)
sub_case(1, False, 0, 3, 4, 24, ffn=(0, "gelu_erf", 64))
# 4: pre-norm attention with residual dropout (GPT-2 training)
sub_case(0, True, 0, 2, 6, 32, attn=(4, 4, 8, True, False, None), p_drop=0.25, seed=7, step=3,
         site=11)
# 5: post-norm FFN with dropout (BERT training)
sub_case(1, False, 0, 2, 5, 40, ffn=(0, "gelu_tanh", 80), p_drop=0.1, seed=99, step=12345,
         site=2)
# 6: pre-norm GeGLU FFN with dropout, rows of a data-parallel replica: its sequences are 3.. of
#    the whole batch, its length 5 of the batch's 8
sub_case(1, True, 1, 2, 5, 32, ffn=(1, "gelu_tanh", 40), p_drop=0.3, rows=(3, 5, 8), seed=5,
         step=1, site=7)
# 7: pre-norm cross-attention (decoder), source padding, dropout
sub_case(0, True, 0, 2, 4, 32, attn=(4, 2, 8, False, True, None), Tk=7, Ckv=24, kv_len=[7, 2],
         p_drop=0.2, seed=3, step=4, site=5)
# 8: pre-norm (RMSNorm) Qwen3 self-attention: q/k norms, GQA, head_dim 12 != C/H, partial RoPE,
#    a sliding window of 4 (Qwen2 / Mistral), dropout
sub_case(0, True, 1, 2, 9, 32, attn=(4, 2, 12, True, False, (8, 0, 16, 1000000.0)), window=4,
         qk_norm=True, p_drop=0.1, seed=8, step=2, site=3)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(outdir, exist_ok=True)
    for kind, n in COUNT.items():
        META[f"{kind}.cases"] = str(n)
    stfile.save(os.path.join(outdir, "nn.safetensors"), T, META)


if __name__ == "__main__":
    main()
