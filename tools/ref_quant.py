"""Reference for the quantized weight types (tests/test_quant.c), from the gguf Python package
(gguf.quants, pinned 0.17.1 by tools/install_deps.sh) and NumPy:

    .venv/bin/python tools/ref_quant.py OUTDIR   ->  OUTDIR/quant.safetensors

For each type T (f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K):
  deq.T.blocks (nb, bytes) U8   blocks of random bytes, plus blocks whose scale fields hold the
                                binary16 edge cases (±0, subnormals, the largest finite, ±inf,
                                quiet and signalling NaNs); for f16 and bf16 every one of the
                                65536 bit patterns
  deq.T.values (nb, B) F32      gguf.quants.dequantize of them
  quant.T.x (rows, 256) F32     floats of varied scale and shape (types gguf can quantize:
  quant.T.bytes (rows, ·) U8    f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1) and its quantize
and product cases prod.i (metadata "prod.i": type, M, N, K, beta, bias, act):
  prod.i.w (N, row bytes) U8    the weights (quantized by gguf where it can, else random blocks
                                with moderate scales), prod.i.x (M, K), prod.i.y0 (M, N) (the
                                initial y; NaN when beta == 0), prod.i.bias (N) when used,
  prod.i.expected (M, N) F32    act(x · dequantize(w)ᵀ + bias + beta·y0) in float64.
"""
import json
import os
import sys

import numpy as np

from gguf import GGMLQuantizationType as QT
from gguf import quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

TYPES = {"f16": QT.F16, "bf16": QT.BF16, "q8_0": QT.Q8_0, "q4_0": QT.Q4_0, "q4_1": QT.Q4_1,
         "q5_0": QT.Q5_0, "q5_1": QT.Q5_1, "q4_K": QT.Q4_K, "q5_K": QT.Q5_K, "q6_K": QT.Q6_K}
QUANTIZABLE = ["f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"]
# Byte offsets of each block's half-precision scale fields (include/attn_quant.h).
SCALES = {"q8_0": [0], "q4_0": [0], "q5_0": [0], "q4_1": [0, 2], "q5_1": [0, 2],
          "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208]}
EDGE_HALVES = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff,
               0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7d55]
ACTS = {"none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4}
# (type, M, N, K, beta, bias, act)
PRODUCTS = [
    ("q8_0", 1, 40, 96, 0.0, False, "none"),
    ("q4_0", 3, 33, 608, 0.0, True, "none"),
    ("q4_1", 8, 17, 256, 1.0, True, "silu"),
    ("q5_0", 9, 24, 320, 0.0, False, "gelu_tanh"),
    ("q5_1", 2, 65, 160, -0.5, True, "relu"),
    ("q4_K", 1, 48, 512, 0.0, False, "none"),
    ("q5_K", 5, 31, 256, 0.0, True, "gelu_erf"),
    ("q6_K", 17, 40, 768, 0.0, False, "none"),
    ("f16", 4, 37, 100, 0.0, True, "none"),
    ("bf16", 12, 29, 70, 0.0, False, "relu"),
    ("q4_1", 64, 96, 576, 0.0, True, "none"),
    ("q6_K", 1, 130, 256, 0.5, False, "none"),
]


def act_f64(y, act):
    if act == "relu":
        return np.maximum(y, 0.0)
    if act == "gelu_tanh":
        return 0.5 * y * (1.0 + np.tanh(0.7978845608028654 * (y + 0.044715 * y ** 3)))
    if act == "gelu_erf":
        from math import erf
        return 0.5 * y * (1.0 + np.vectorize(erf)(y / np.sqrt(2.0)))
    if act == "silu":
        return y / (1.0 + np.exp(-y))
    return y


def sizes(name):
    block, size = quants.GGML_QUANT_SIZES[TYPES[name]]
    return block, size


def dequant_blocks(name, rng):
    block, size = sizes(name)
    if name in ("f16", "bf16"):
        return np.arange(65536, dtype=np.uint16).view(np.uint8).reshape(65536, 2)
    b = rng.randint(0, 256, size=(96, size)).astype(np.uint8)
    edge = np.repeat(rng.randint(0, 256, size=(1, size)).astype(np.uint8),
                     len(EDGE_HALVES) * len(SCALES[name]), axis=0)
    for k, off in enumerate(SCALES[name]):
        for j, h in enumerate(EDGE_HALVES):
            edge[k * len(EDGE_HALVES) + j, off:off + 2] = np.frombuffer(
                np.uint16(h).tobytes(), np.uint8)
    return np.concatenate([b, edge])


def quant_inputs(name, rng):
    rows = [rng.standard_normal(256), rng.uniform(-1, 1, 256), rng.standard_normal(256) * 1e-3,
            rng.standard_normal(256) * 1e3, rng.standard_cauchy(256), np.zeros(256),
            np.full(256, 0.75), rng.standard_normal(256) * 3e5, rng.standard_normal(256) * 1e-8,
            np.abs(rng.standard_normal(256)), -np.abs(rng.standard_normal(256))]
    # Blocks with ties of the largest magnitude (Q4_0's and Q5_0's first-index rule), integers.
    t = rng.standard_normal(256)
    t[::32] = 4.0
    t[5::32] = -4.0
    rows.append(t)
    rows.append(np.round(rng.standard_normal(256) * 8))
    x = np.stack(rows).astype(np.float32)
    if name == "f16":  # the float16 cast's range: overflow, subnormals, ties
        extra = np.array([65504, 65519, 65520, 1e5, -1e6, 6e-8, 3e-8, 2.98e-8, 1e-9, 6.1e-5,
                          np.inf, -np.inf, -0.0, 1.00048828125, 1.000244140625], np.float32)
        x = np.concatenate([x.ravel(), extra, np.zeros(256 - extra.size, np.float32)])
        x = x.reshape(-1, 256)
    if name == "bf16":
        extra = np.array([np.inf, -np.inf, np.nan, -np.nan, 1e-40, -3e38, 3.4e38, 1.00390625,
                          1.01171875], np.float32)
        x = np.concatenate([x.ravel(), extra, np.zeros(256 - extra.size, np.float32)])
        x = x.reshape(-1, 256)
    return x


def product_weights(name, N, K, rng):
    """The (N, K) weights of a product case as blocks: quantized by gguf where it can, else
    random bytes with moderate scales (positive d, dmin around 1e-2)."""
    if name in QUANTIZABLE:
        return quants.quantize(rng.standard_normal((N, K)).astype(np.float32), TYPES[name])
    block, size = sizes(name)
    nb = N * K // block
    b = rng.randint(0, 256, size=(nb, size)).astype(np.uint8)
    for off in SCALES[name]:
        h = rng.uniform(2e-3, 2e-2, nb).astype(np.float16).view(np.uint8).reshape(nb, 2)
        b[:, off:off + 2] = h
    return b.reshape(N, K // block * size)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.RandomState(20261201)
    tensors, meta = {}, {}
    with np.errstate(all="ignore"):
        for name, qt in TYPES.items():
            blocks = dequant_blocks(name, rng)
            tensors[f"deq.{name}.blocks"] = blocks
            tensors[f"deq.{name}.values"] = quants.dequantize(blocks, qt).astype(np.float32)
            if name in QUANTIZABLE:
                x = quant_inputs(name, rng)
                tensors[f"quant.{name}.x"] = x
                q = quants.quantize(x, qt)
                tensors[f"quant.{name}.bytes"] = np.ascontiguousarray(q).view(np.uint8).reshape(
                    x.shape[0], -1)
    for i, (name, M, N, K, beta, use_bias, act) in enumerate(PRODUCTS):
        w = product_weights(name, N, K, rng)
        wf = quants.dequantize(w, TYPES[name]).astype(np.float64).reshape(N, K)
        x = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        y0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
        if beta == 0.0:
            y0[:] = np.nan
        bias = rng.uniform(-0.5, 0.5, N).astype(np.float32)
        y = x.astype(np.float64) @ wf.T
        if beta != 0.0:
            y = y + beta * y0.astype(np.float64)
        if use_bias:
            y = y + bias
        y = act_f64(y, act)
        p = f"prod.{i}."
        tensors[p + "w"] = np.ascontiguousarray(w).view(np.uint8).reshape(N, -1)
        tensors[p + "x"] = x
        tensors[p + "y0"] = y0
        if use_bias:
            tensors[p + "bias"] = bias
        tensors[p + "expected"] = y.astype(np.float32)
        meta[f"prod.{i}"] = json.dumps({"type": name, "M": M, "N": N, "K": K, "beta": beta,
                                        "act": ACTS[act]})
    stfile.save(os.path.join(out_dir, "quant.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
