"""PyTorch references for tests/test_elementwise.c: softmax, layer norm, activations, embedding and
cross-entropy, forward and backward.

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

out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
os.makedirs(out, exist_ok=True)
stfile.save(os.path.join(out, "elementwise.safetensors"), T, META)
