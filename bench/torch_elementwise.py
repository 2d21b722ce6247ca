"""PyTorch peer of bench/bench_elementwise.c: the same cases, the same case strings, the same
nominal traffic count (tensors of N·D floats moved per call) and the same statistic (best of 5
timed repeats of ~0.1 s after a ~0.1 s warm-up), printed as JSON lines
{"bench":"elementwise","case":"layernorm fwd 4096x768","metric":"GB/s","value":...}.

Each case calls the ATen operator that does the same job as the attn kernel (e.g. the backward
operators directly, not through autograd), so neither side pays for autograd bookkeeping;
cross-entropy is the exception: PyTorch has no fused forward+backward operator, so it runs
log_softmax + nll (label smoothing 0.1) forward and backward through autograd, which is what a
training step does. Threads: ATTN_BENCH_THREADS (default 2) via torch.set_num_threads."""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import best_rate  # noqa: E402


def best_gbs(fn, work):
    return best_rate(fn, work, rounds=5)


def make(name, N, D, V):
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(N, D, generator=g) * 2 - 1) * (5.0 if name.startswith("cross") else 3.0)
    y, dy = torch.rand(N, D, generator=g), torch.rand(N, D, generator=g)
    w, b = torch.rand(D, generator=g), torch.rand(D, generator=g)
    if name == "softmax fwd":
        return lambda: torch.softmax(x, -1)
    if name == "softmax bwd":
        return lambda: torch._softmax_backward_data(dy, y, -1, torch.float32)
    if name == "layernorm fwd":
        return lambda: torch.native_layer_norm(x, (D,), w, b, 1e-5)
    if name == "layernorm bwd":
        _, mean, rstd = torch.native_layer_norm(x, (D,), w, b, 1e-5)
        return lambda: torch.ops.aten.native_layer_norm_backward(dy, x, (D,), mean, rstd, w, b,
                                                                 [True, True, True])
    if name == "gelu_tanh fwd":
        return lambda: F.gelu(x, approximate="tanh")
    if name == "gelu_tanh bwd":
        return lambda: torch.ops.aten.gelu_backward(dy, x, approximate="tanh")
    if name == "gelu_erf fwd":
        return lambda: F.gelu(x)
    if name == "gelu_erf bwd":
        return lambda: torch.ops.aten.gelu_backward(dy, x)
    if name == "relu fwd":
        return lambda: torch.relu(x)
    if name == "embedding fwd":
        table = torch.rand(V, D, generator=g)
        ids = torch.randint(0, V, (N,), generator=g)
        return lambda: F.embedding(ids, table)
    if name == "embedding bwd":
        ids = torch.randint(0, V, (N,), generator=g)
        return lambda: torch.ops.aten.embedding_dense_backward(dy, ids, V, -1, False)
    if name == "silu fwd":
        return lambda: F.silu(x)
    if name == "silu bwd":
        return lambda: torch.ops.aten.silu_backward(dy, x)
    if name in ("rmsnorm fwd", "rmsnorm bwd"):
        # transformers' LlamaRMSNorm.forward in float32 (no fused RMSNorm operator in ATen here)
        def rms(t, wt):
            return wt * (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6))
        if name == "rmsnorm fwd":
            return lambda: rms(x, w)
        xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
        with torch.enable_grad():
            out = rms(xg, wg)
        # the backward alone: autograd over the graph built once (no fused backward operator)
        return lambda: torch.autograd.grad(out, (xg, wg), dy, retain_graph=True)
    if name in ("swiglu fwd", "swiglu bwd"):
        # Llama's MLP: act_fn(gate_proj(x)) * up_proj(x), the two halves of one (N, 2D) product
        gu = (torch.rand(N, 2 * D, generator=g) * 2 - 1) * 4
        gt, ut = gu[:, :D], gu[:, D:]
        if name == "swiglu fwd":
            return lambda: F.silu(gt) * ut
        # what autograd computes for it: dg = silu'(g)·(dh·u), du = dh·silu(g)
        return lambda: (torch.ops.aten.silu_backward(dy * ut, gt), dy * F.silu(gt))
    if name == "rope fwd":
        # transformers' apply_rotary_pos_emb on (N, 32 heads, 64), positions 0 .. N−1
        H, Dh = D // 64, 64
        q = x.view(N, H, Dh)
        inv = 1.0 / (10000 ** (torch.arange(0, Dh, 2).float() / Dh))
        fr = torch.arange(N).float()[:, None] * inv[None, :]
        emb = torch.cat((fr, fr), -1)
        cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]

        def rotate_half(t):
            return torch.cat((-t[..., Dh // 2:], t[..., :Dh // 2]), -1)
        return lambda: q * cos + rotate_half(q) * sin
    if name == "cross_entropy fwd+bwd":
        xl = x.clone().requires_grad_(True)
        t = torch.randint(0, D, (N,), generator=g)

        def step():
            xl.grad = None
            with torch.enable_grad():
                F.cross_entropy(xl, t, label_smoothing=0.1).backward()
        return step
    raise ValueError(name)


# Keep in step with CASES in bench_elementwise.c: name, N, D, V, tensors moved.
CASES = [
    ("softmax fwd", 4096, 1024, 0, 2),
    ("softmax bwd", 4096, 1024, 0, 3),
    ("layernorm fwd", 4096, 768, 0, 2),
    ("layernorm bwd", 4096, 768, 0, 3),
    ("gelu_tanh fwd", 4096, 3072, 0, 2),
    ("gelu_tanh bwd", 4096, 3072, 0, 3),
    ("gelu_erf fwd", 4096, 3072, 0, 2),
    ("gelu_erf bwd", 4096, 3072, 0, 3),
    ("relu fwd", 4096, 3072, 0, 2),
    ("embedding fwd", 4096, 768, 50257, 2),
    ("embedding bwd", 4096, 768, 50257, 3),
    ("cross_entropy fwd+bwd", 512, 50257, 0, 2),
    ("silu fwd", 2048, 5632, 0, 2),
    ("silu bwd", 2048, 5632, 0, 3),
    ("rmsnorm fwd", 4096, 2048, 0, 2),
    ("rmsnorm bwd", 4096, 2048, 0, 3),
    ("swiglu fwd", 2048, 5632, 0, 3),
    ("swiglu bwd", 2048, 5632, 0, 5),
    ("rope fwd", 4096, 2048, 0, 2),
]


def main():
    threads = int(os.environ.get("ATTN_BENCH_THREADS", "2") or 2)
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    for name, N, D, V, tensors in CASES:
        fn = make(name, N, D, V)
        v = best_gbs(fn, tensors * N * D * 4)
        print(json.dumps({"bench": "elementwise", "case": f"{name} {N}x{D}", "metric": "GB/s",
                          "value": round(v, 3)}), flush=True)


if __name__ == "__main__":
    with torch.no_grad():
        main()
