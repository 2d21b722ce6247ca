"""Check files written by tests/test_io.c from Python: a .safetensors read with tools/stfile.py
(plus a strict look at its header layout) and torch, and a .npy read with numpy.
Usage: check_io.py FILE.safetensors FILE.npy — exits non-zero with a message on any mismatch."""
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

BF16 = np.dtype([("bf16", "<u2")])
stfile._NP.setdefault("BF16", BF16)


def check(cond, what):
    if not cond:
        sys.exit(f"check_io.py: {what}")


def main(st_path, npy_path):
    raw = open(st_path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    check(n % 8 == 0, f"header length {n} is not a multiple of 8")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    check(raw[8:8 + n].rstrip(b" ").endswith(b"}"), "header is not padded with spaces")
    end = 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        check(a == end, f"{name}: tensors are not contiguous")
        end = b
    check(8 + n + end == len(raw), "data buffer size mismatch")

    t, meta = stfile.load(st_path)
    check(meta == {"writer": "attn", "format": "pt"}, f"metadata {meta}")
    f32 = np.array([0.5, -1.25, 3.0, 1e-3, -0.0, 65504.0], dtype=np.float32).reshape(2, 3)
    check(t["f32"].dtype == np.float32 and np.array_equal(t["f32"], f32), "f32")
    check(np.array_equal(t["f16"], np.array([1, -2, np.inf], dtype=np.float16)), "f16")
    bf = torch.from_numpy(t["bf16"].view(np.int16).copy()).view(torch.bfloat16).float()
    check(torch.equal(bf, torch.tensor([1.0, 3.140625, -float("inf")])), f"bf16 {bf}")
    check(np.array_equal(t["f64"], np.array([[0.1, -2.5]])), "f64")
    check(t["i64"].dtype == np.int64 and list(t["i64"]) == [1, -2, 2 ** 40], "i64")
    check(t["scalar"].shape == () and t["scalar"] == 0.5, "scalar")

    a = np.load(npy_path)
    check(a.dtype == np.float32 and a.shape == (2, 3) and np.array_equal(a, f32), "npy")
    print("check_io.py: C-written files read correctly by Python")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: check_io.py FILE.safetensors FILE.npy")
    main(sys.argv[1], sys.argv[2])
