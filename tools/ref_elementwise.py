"""PyTorch references for tests/test_elementwise.c: softmax, layer norm, activations, embedding,
cross-entropy, and the Llama family's SiLU, RMSNorm (transformers' LlamaRMSNorm), rotary embeddings
(transformers' rotary modules and apply_rotary_pos_emb) and gated linear units, forward and
backward.

    .venv/bin/python tools/ref_elementwise.py OUTDIR   ->  OUTDIR/elementwise.safetensors

Inputs are drawn in float32; the expected outputs and gradients are computed by torch in float64
from those same float32 values (autograd for every gradient) and stored as float32, so the C test
measures only the C kernels' error. Tensors are named KERNEL.CASE.NAME (CASE = 0, 1, ...); the C
test walks CASE upward until KERNEL.CASE.x is absent. Scalar options of a case are metadata
strings under the same prefix (e.g. "ce.3.label_smoothing").

Where attn deliberately differs from PyTorch (documented in attn_kernels.h), the expected value
here is attn's: a softmax row that is entirely -inf is zeros (PyTorch: NaN), and cross-entropy
with every target ignored is loss 0 with zero gradients (PyTorch: NaN)."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

rng = np.random.RandomState(1234)
T, META = {}, {}


def f32(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def leaf(a):
    """float64 tensor holding the exact values of the float32 array a, requiring grad."""
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def put(prefix, **arrays):
    for k, v in arrays.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().numpy()
        T[f"{prefix}.{k}"] = v if v.dtype == np.int32 else f32(v)


# ---- softmax ---------------------------------------------------------------------------------
def softmax_case(k, x):
    x = f32(x)
    dy = f32(rng.randn(*x.shape))
    xt = leaf(x)
    y = F.softmax(xt, dim=-1)
    (y * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    y, dx = y.detach().numpy().copy(), xt.grad.numpy().copy()
    dead = np.all(np.isneginf(x), axis=-1)
    y[dead], dx[dead] = 0, 0  # attn's convention for rows with no finite entry
    put(f"softmax.{k}", x=x, dy=dy, y=y, dx=dx)
    ly = F.log_softmax(leaf(x), dim=-1).detach().numpy().copy()
    ly[dead] = -np.inf  # attn's convention: log 0 (PyTorch: NaN)
    put(f"log_softmax.{k}", x=x, y=ly)


cases = [rng.randn(1, 1), rng.randn(3, 7) * 3, rng.randn(5, 17), rng.randn(4, 100) * 5,
         rng.randn(8, 1000), rng.randn(2, 50257) * 2,
         rng.randn(6, 100) * 1e4,  # huge logits: exp must not overflow
         rng.randn(3, 33) * 1e-6]  # nearly uniform
neg = rng.randn(4, 19)
neg[0, ::3] = -np.inf  # some masked entries
neg[1, :] = -np.inf    # a fully masked row
neg[2, 5] = -np.inf
cases.append(neg)
for k, x in enumerate(cases):
    softmax_case(k, x)

# ---- layer norm ------------------------------------------------------------------------------
def layernorm_case(k, x, affine, eps=1e-5, backward=True):
    x = f32(x)
    N, C = x.shape
    w = f32(1 + 0.5 * rng.randn(C))
    b = f32(0.5 * rng.randn(C))
    dy = f32(rng.randn(N, C))
    xt = leaf(x)
    wt = leaf(w) if affine in ("wb", "w") else None
    bt = leaf(b) if affine == "wb" else None
    y = F.layer_norm(xt, (C,), wt, bt, eps)
    (y * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    xd = torch.tensor(x, dtype=torch.float64)
    mean = xd.mean(-1)
    rstd = 1 / torch.sqrt(xd.var(-1, unbiased=False) + eps)
    put(f"layernorm.{k}", x=x, w=w, b=b, dy=dy, y=y, mean=mean, rstd=rstd, dx=xt.grad,
        dw=wt.grad if wt is not None else np.zeros(C),
        db=bt.grad if bt is not None else np.zeros(C))
    META[f"layernorm.{k}.affine"] = affine
    META[f"layernorm.{k}.eps"] = repr(eps)
    META[f"layernorm.{k}.backward"] = "1" if backward else "0"


const = rng.randn(4, 768)
const[1, :] = 3.25       # constant rows: variance exactly 0
const[3, :] = -1e3
shifted = 100 + rng.randn(5, 300)  # |mean| >> std: the mean must not cancel
# Forward only: the backward receives the mean as float32 (as in PyTorch), whose rounding,
# half an ulp of 1e4 = 5e-4, is then a 5e-4 error in x - mean, beyond the tolerance.
far = 1e4 + rng.randn(3, 200)
lncases = [(rng.randn(1, 1), "wb"), (rng.randn(3, 7), "wb"), (rng.randn(5, 17) * 4, "w"),
           (rng.randn(4, 100), "none"), (rng.randn(8, 1000) + 2, "wb"), (rng.randn(2, 50257), "wb"),
           (const, "wb"), (shifted, "wb"), (rng.randn(6, 64) * 1e-3, "none")]
for k, (x, aff) in enumerate(lncases):
    layernorm_case(k, x, aff)
layernorm_case(len(lncases), far, "wb", backward=False)

# ---- activations -----------------------------------------------------------------------------
ACTS = {"relu": F.relu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_erf": lambda x: F.gelu(x)}
for name, fn in ACTS.items():
    for k, n in enumerate([1, 7, 17, 100, 1000, 50257]):
        x = rng.randn(n) * 3
        if n >= 100:  # the tails and the kink
            x[:12] = [0.0, -0.0, 1e-30, -1e-30, 1e-4, -1e-4, 9.0, -9.0, 30.0, -30.0, 100.0, -100.0]
        x = f32(x)
        dy = f32(rng.randn(n))
        xt = leaf(x)
        y = fn(xt)
        (y * torch.tensor(dy, dtype=torch.float64)).sum().backward()
        put(f"{name}.{k}", x=x, dy=dy, y=y, dx=xt.grad)

# ---- embedding -------------------------------------------------------------------------------
for k, (N, V, C) in enumerate([(1, 1, 1), (7, 5, 17), (100, 50, 100), (64, 1000, 768),
                               (33, 3, 1000)]):
    ids = rng.randint(0, V, size=N).astype(np.int32)  # small V: many repeated ids
    table = f32(rng.randn(V, C))
    dout = f32(rng.randn(N, C))
    tt = leaf(table)
    out = F.embedding(torch.tensor(ids, dtype=torch.long), tt)
    (out * torch.tensor(dout, dtype=torch.float64)).sum().backward()
    put(f"embedding.{k}", ids=ids, table=table, dout=dout, out=out, dtable=tt.grad)

# ---- cross-entropy ---------------------------------------------------------------------------
def ce_case(k, logits, targets, ignore_index, smoothing):
    logits = f32(logits)
    targets = np.asarray(targets, dtype=np.int32)
    lt = leaf(logits)
    kept = targets != ignore_index
    if kept.any():
        loss = F.cross_entropy(lt, torch.tensor(targets, dtype=torch.long),
                               ignore_index=ignore_index, label_smoothing=smoothing,
                               reduction="mean")
        loss.backward()
        loss, dl = loss.detach().numpy().reshape(1), lt.grad.numpy()
    else:  # attn's convention: nothing to average, loss 0, no gradient
        loss, dl = np.zeros(1), np.zeros_like(logits)
    put(f"ce.{k}", x=logits, targets=targets, loss=loss, dx=dl)
    META[f"ce.{k}.ignore_index"] = str(ignore_index)
    META[f"ce.{k}.label_smoothing"] = repr(smoothing)


def tg(N, V):
    return rng.randint(0, V, size=N)


ce_case(0, rng.randn(1, 1), [0], -100, 0.0)
ce_case(1, rng.randn(3, 7) * 2, tg(3, 7), -100, 0.0)
ce_case(2, rng.randn(5, 17), tg(5, 17), -100, 0.1)
t = tg(8, 100)
t[[1, 4]] = -100
ce_case(3, rng.randn(8, 100) * 3, t, -100, 0.0)
ce_case(4, rng.randn(4, 1000) * 1e3, tg(4, 1000), -100, 0.2)  # large logits
t = tg(3, 50257)
t[1] = 2
ce_case(5, rng.randn(3, 50257) * 2, t, 2, 0.1)  # ignore_index that is also a valid class
ce_case(6, rng.randn(3, 9), [-1, -1, -1], -1, 0.3)  # every row ignored
t = tg(6, 333)
t[0] = -100
ce_case(7, rng.randn(6, 333), t, -100, 1.0)  # full smoothing
ce_case(8, rng.randn(64, 128) * 2, tg(64, 128), -100, 0.05)

# ---- the Llama-family kernels: SiLU, RMSNorm, RoPE, gated linear units ------------------------
# Their own generator, so that the cases above keep their random draws.
rng2 = np.random.RandomState(4321)
TAILS = [0.0, -0.0, 1e-30, -1e-30, 1e-4, -1e-4, 9.0, -9.0, 30.0, -30.0, 100.0, -100.0,
         -88.0, -90.0, -1.2784645]  # -88/-90: exp(-x) overflows float; -1.278: silu'(x) = 0

for k, n in enumerate([1, 7, 17, 100, 1000, 50257]):
    x = rng2.randn(n) * 4
    if n >= 100:
        x[:len(TAILS)] = TAILS
    x = f32(x)
    dy = f32(rng2.randn(n))
    xt = leaf(x)
    y = F.silu(xt)
    (y * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    put(f"silu.{k}", x=x, dy=dy, y=y, dx=xt.grad)


# RMSNorm. transformers' LlamaRMSNorm casts its input to float32 inside forward, so the float64
# expected values come from its formula written out here (variance = mean(x²), x·rsqrt(var + eps),
# then · weight); the module itself runs in float32 on the same inputs, its output is checked
# against the float64 one here (the formula is the module's) and stored as y_hf for the C test.
from transformers.models.llama.modeling_llama import LlamaRMSNorm  # noqa: E402


def rmsnorm_case(k, x, affine, eps):
    x = f32(x)
    N, C = x.shape
    w = f32(1 + 0.5 * rng2.randn(C)) if affine else np.ones(C, dtype=np.float32)
    dy = f32(rng2.randn(N, C))
    xt, wt = leaf(x), leaf(w)
    var = xt.pow(2).mean(-1, keepdim=True)
    y = wt * (xt * torch.rsqrt(var + eps))
    (y * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    rstd = torch.rsqrt(var.detach() + eps).reshape(N)
    mod = LlamaRMSNorm(C, eps=eps)
    with torch.no_grad():
        mod.weight.copy_(torch.from_numpy(w))
        y_hf = mod(torch.from_numpy(x)).double()
    scale = max(float(y.detach().abs().max()), 1e-30)
    err = float((y_hf - y.detach()).abs().max()) / scale
    assert err < 1e-5, f"rmsnorm.{k}: LlamaRMSNorm (float32) differs from the formula by {err}"
    put(f"rmsnorm.{k}", x=x, w=w, dy=dy, y=y, y_hf=y_hf, rstd=rstd, dx=xt.grad,
        dw=wt.grad)
    META[f"rmsnorm.{k}.affine"] = "1" if affine else "0"
    META[f"rmsnorm.{k}.eps"] = repr(eps)


zero = rng2.randn(3, 33)
zero[1, :] = 0  # mean(x²) = 0: rstd = 1/sqrt(eps), y = 0
rmcases = [(rng2.randn(1, 1), True, 1e-6), (rng2.randn(3, 7), True, 1e-5),
           (rng2.randn(5, 17) * 4, True, 1e-6), (rng2.randn(4, 100), False, 1e-6),
           (rng2.randn(8, 1000) + 2, True, 1e-5), (rng2.randn(2, 50257), True, 1e-6),
           (rng2.randn(4, 4096), True, 1e-5),       # Llama-7B width
           (rng2.randn(6, 64) * 1e-3, True, 1e-6),  # eps matters
           (zero, True, 1e-6), (rng2.randn(3, 200) * 1e4, True, 1e-6)]
for k, (x, aff, eps) in enumerate(rmcases):
    rmsnorm_case(k, x, aff, eps)


# Rotary embeddings. HALF: transformers' own rotary modules and apply_rotary_pos_emb (Llama, full
# rotary; GPT-NeoX and Phi, partial rotary, which slice the first R dims); INTERLEAVED: Meta's
# original complex-number form (view_as_complex · polar), written here in complex128.
# Stored per case: x (N, ld) the rows (heads at h·D, padding after H·D), pos (N), inv_freq (R/2),
# the module's float32 tables cos_hf, sin_hf (P, R/2) (also what the C apply uses, so the apply is
# judged on its own), cos, sin (P, R/2) = cos/sin of the same float32 angles in float64, y (N, ld)
# the rotated rows and dx (N, ld) = d/dx sum(dy · y) for dy (N, ld) (autograd through the
# transformers function), with the padding passed through.
from transformers import GPTNeoXConfig, LlamaConfig, PhiConfig  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox as neox  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402
from transformers.models.phi import modeling_phi as phi  # noqa: E402


def rope_case(k, family, N, H, D, P, pad, factor=1.0, theta=10000.0, mode="half"):
    if family == "llama":
        cfg = LlamaConfig(hidden_size=H * D, num_attention_heads=H, head_dim=D, rope_theta=theta,
                          max_position_embeddings=P)
        rot, apply = llama.LlamaRotaryEmbedding(cfg), llama.apply_rotary_pos_emb
    elif family == "neox":
        cfg = GPTNeoXConfig(hidden_size=H * D, num_attention_heads=H, rotary_pct=factor,
                            rotary_emb_base=theta, max_position_embeddings=P)
        rot, apply = neox.GPTNeoXRotaryEmbedding(cfg), neox.apply_rotary_pos_emb
    else:
        cfg = PhiConfig(hidden_size=H * D, num_attention_heads=H, partial_rotary_factor=factor,
                        rope_theta=theta, max_position_embeddings=P)
        rot, apply = phi.PhiRotaryEmbedding(cfg), phi.apply_rotary_pos_emb
    inv_freq = rot.inv_freq.float()
    R = 2 * inv_freq.numel()
    dummy = torch.zeros(1, dtype=torch.float32)
    cos_full, sin_full = rot(dummy, torch.arange(P)[None])  # (1, P, R), float32
    assert cos_full.dtype == torch.float32 and cos_full.shape == (1, P, R)
    cos_hf, sin_hf = cos_full[0, :, :R // 2].numpy(), sin_full[0, :, :R // 2].numpy()
    # the same float32 angles, their cos/sin in float64 (what attn_rope_tables rounds)
    ang = (torch.arange(P, dtype=torch.float32)[:, None] * inv_freq[None, :]).double()
    ld = H * D + pad
    x = f32(rng2.randn(N, ld))
    dy = f32(rng2.randn(N, ld))
    pos = rng2.randint(0, P, size=N).astype(np.int32)
    pos[0] = P - 1  # the last table row
    xt = leaf(x)
    q = xt[:, :H * D].reshape(1, N, H, D).transpose(1, 2)  # (B=1, H, T=N, D)
    c64 = torch.from_numpy(cos_hf).double()[pos]  # (N, R/2)
    s64 = torch.from_numpy(sin_hf).double()[pos]
    if mode == "half":
        cos_in = torch.cat([c64, c64], -1)[None]  # (1, N, R): transformers' cat(freqs, freqs)
        sin_in = torch.cat([s64, s64], -1)[None]
        if family == "phi":  # PhiAttention slices the rotary part itself, then concatenates
            qr, _ = apply(q[..., :R], q[..., :R], cos_in, sin_in)
            qr = torch.cat([qr, q[..., R:]], -1)
        else:  # Llama: R == D; GPT-NeoX's apply_rotary_pos_emb slices and concatenates
            qr, _ = apply(q, q, cos_in, sin_in)
    else:
        qc = torch.view_as_complex(q[..., :R].reshape(1, H, N, R // 2, 2).contiguous())
        qr = torch.view_as_real(qc * torch.complex(c64, s64)[None, None]).reshape(1, H, N, R)
        qr = torch.cat([qr, q[..., R:]], -1)
    y = torch.cat([qr.transpose(1, 2).reshape(N, H * D), xt[:, H * D:]], -1)
    (y * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    put(f"rope.{k}", x=x, dy=dy, pos=pos, inv_freq=inv_freq, cos_hf=cos_hf, sin_hf=sin_hf,
        cos=torch.cos(ang), sin=torch.sin(ang), y=y, dx=xt.grad)
    # "H D R P ld mode family", mode 0 = ATTN_ROPE_HALF, 1 = ATTN_ROPE_INTERLEAVED
    META[f"rope.{k}.dims"] = f"{H} {D} {R} {P} {ld} {0 if mode == 'half' else 1} {family}"


rope_case(0, "llama", 1, 1, 2, 1, 0)
rope_case(1, "llama", 7, 4, 64, 128, 0)                      # Llama-sized heads
rope_case(2, "llama", 33, 2, 128, 4096, 5, theta=500000.0)   # Llama-3 theta, far positions
rope_case(3, "neox", 9, 4, 64, 256, 3, factor=0.25)          # GPT-NeoX / Pythia: R = 16
rope_case(4, "phi", 6, 3, 80, 2048, 0, factor=0.4)           # Phi-2: R = 32 of 80
rope_case(5, "neox", 5, 2, 24, 50, 2 * 2 * 24, factor=0.5)   # R = 12 (odd R/2), fused QKV stride
rope_case(6, "llama", 11, 3, 6, 40, 1)                       # R/2 = 3: vector tails only
rope_case(7, "llama", 7, 4, 64, 128, 0, mode="interleaved")
rope_case(8, "neox", 9, 4, 64, 256, 3, factor=0.25, mode="interleaved")
rope_case(9, "phi", 6, 3, 80, 2048, 7, factor=0.4, mode="interleaved")
rope_case(10, "llama", 11, 3, 6, 40, 1, mode="interleaved")
rope_case(11, "llama", 3, 2, 2, 9, 0, mode="interleaved")


# Gated linear units: g and u are the two halves of one (N, 2F) product gu, as a fused gate/up
# projection gives them; h = act(g) ⊙ u and the gradients of sum(dh · h) w.r.t. gu (dg, du in the
# same halves), all in float64 through torch's own activations.
GLU_ACTS = {"none": (0, lambda t: t), "relu": (1, F.relu),
            "gelu_tanh": (2, lambda t: F.gelu(t, approximate="tanh")), "gelu_erf": (3, F.gelu),
            "silu": (4, F.silu)}
for name, (code, fn) in GLU_ACTS.items():
    for k, (N, Fd) in enumerate([(1, 1), (3, 7), (5, 17), (4, 100), (16, 688), (3, 2752)]):
        gu = rng2.randn(N, 2 * Fd) * 3
        if N * Fd >= 100:
            gu[0, :len(TAILS)] = TAILS  # in the gate half
        gu = f32(gu)
        dh = f32(rng2.randn(N, Fd))
        gt = leaf(gu)
        h = fn(gt[:, :Fd]) * gt[:, Fd:]
        (h * torch.tensor(dh, dtype=torch.float64)).sum().backward()
        put(f"glu_{name}.{k}", gu=gu, dh=dh, h=h, dgu=gt.grad)
        META[f"glu_{name}.{k}.act"] = str(code)

out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
os.makedirs(out, exist_ok=True)
stfile.save(os.path.join(out, "elementwise.safetensors"), T, META)
