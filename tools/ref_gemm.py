"""PyTorch reference for attn_gemm (tests/test_gemm.c):

    .venv/bin/python tools/ref_gemm.py OUTDIR   ->  OUTDIR/gemm.safetensors

Each case i stores its inputs exactly as the C call receives them — gemm.i.A (rows, lda),
gemm.i.B (rows, ldb), gemm.i.C (M, ldc, the initial C; NaN when beta == 0, to prove C is not
read), gemm.i.bias (N) when used — and gemm.i.expected (M, ldc): act(alpha·op(A)·op(B) + beta·C +
bias) computed by torch in float64 from those float32 values, with the padding columns of C
(ldc > N) left as they were, so the C test also checks nothing is written outside the matrix.
The scalar parameters are JSON in the metadata key "gemm.i". The C test walks i upward until the
key is absent."""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

ACTS = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4}

# (M, N, K, trans_a, trans_b, alpha, beta, bias, act, ld_pad)
CASES = [
    (1, 1, 1, False, False, 1.0, 0.0, False, "none", 0),
    (7, 17, 33, False, False, 1.0, 0.0, False, "none", 0),
    (33, 17, 100, False, True, 0.5, 0.0, True, "none", 3),
    (17, 33, 100, True, False, -1.0, 1.0, True, "relu", 1),
    (100, 33, 7, True, True, 2.0, -0.5, True, "gelu_tanh", 5),
    (257, 100, 257, False, False, 1.0, 0.25, True, "gelu_erf", 0),
    (257, 257, 65, False, True, 1.0, 0.0, True, "gelu_tanh", 2),
    (64, 96, 0, False, False, 1.0, 0.5, True, "gelu_erf", 0),     # K = 0: act(beta C + bias)
    (512, 1536, 384, False, True, 1.0, 0.0, True, "gelu_tanh", 0),  # nn.Linear + GELU
    (384, 96, 2048, True, False, 1.0, 1.0, False, "none", 0),       # weight-gradient accumulate
    (2048, 128, 2048, False, False, 1.0, 0.0, False, "none", 0),    # 2048-sized, long K
    # Activation sweep: K = 0, beta = 1 makes C = act(C + bias) elementwise over a wide range.
    (16, 1024, 0, False, False, 1.0, 1.0, True, "gelu_tanh", 0),
    (16, 1024, 0, False, False, 1.0, 1.0, True, "gelu_erf", 0),
    (16, 1024, 0, False, False, 1.0, 1.0, True, "relu", 0),
    # SiLU (Llama's gate projection): a blocked product, a small-M one, and the sweep.
    (257, 100, 129, False, True, 1.0, 0.0, True, "silu", 2),
    (5, 300, 64, True, False, 1.0, 0.5, True, "silu", 1),
    (16, 1024, 0, False, False, 1.0, 1.0, True, "silu", 0),
]


def act_f64(y, act):
    if act == "relu":
        return torch.relu(y)
    if act == "gelu_tanh":
        return F.gelu(y, approximate="tanh")
    if act == "gelu_erf":
        return F.gelu(y)
    if act == "silu":
        return F.silu(y)
    return y


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.RandomState(20240611)
    tensors, meta = {}, {}
    for i, (M, N, K, ta, tb, alpha, beta, use_bias, act, pad) in enumerate(CASES):
        sweep = K == 0 and M == 16
        ra, ca = (K, M) if ta else (M, K)
        rb, cb = (N, K) if tb else (K, N)
        lda, ldb, ldc = max(1, ca + pad), max(1, cb + pad), N + pad
        A = rng.uniform(-1, 1, (ra, lda)).astype(np.float32)
        B = rng.uniform(-1, 1, (rb, ldb)).astype(np.float32)
        if sweep:
            C = np.linspace(-10, 10, M * ldc).reshape(M, ldc).astype(np.float32)
        else:
            C = rng.uniform(-1, 1, (M, ldc)).astype(np.float32)
        bias = (rng.uniform(-0.5, 0.5, N) if not sweep else np.zeros(N)).astype(np.float32)
        if beta == 0.0:
            C[:, :N] = np.nan
        a = torch.from_numpy(A[:, :ca]).double()
        b = torch.from_numpy(B[:, :cb]).double()
        opa = a.T if ta else a
        opb = b.T if tb else b
        y = alpha * (opa @ opb)
        if beta != 0.0:
            y = y + beta * torch.from_numpy(C[:, :N]).double()
        if use_bias:
            y = y + torch.from_numpy(bias).double()
        y = act_f64(y, act)
        expected = C.copy()
        expected[:, :N] = y.numpy().astype(np.float32)
        p = f"gemm.{i}."
        tensors[p + "A"] = A
        tensors[p + "B"] = B
        tensors[p + "C"] = C
        if use_bias:
            tensors[p + "bias"] = bias
        tensors[p + "expected"] = expected
        meta[f"gemm.{i}"] = json.dumps({"M": M, "N": N, "K": K, "trans_a": ta, "trans_b": tb,
                                        "alpha": alpha, "beta": beta, "act": ACTS[act],
                                        "lda": lda, "ldb": ldb, "ldc": ldc,
                                        "sweep": sweep})
    stfile.save(os.path.join(out_dir, "gemm.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
