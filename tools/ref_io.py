"""Reference files for tests/test_io.c, written by numpy and tools/stfile.py (the Python side of
the interop checks). Usage: ref_io.py OUTDIR. The values are fixed and mirrored in test_io.c.

  io_py.safetensors   F32, F16, BF16 (from torch.bfloat16), F64, I64, BOOL, U8 tensors
                      and __metadata__ {"format": "pt", "source": "tools/ref_io.py"}
  io_numpy*.npy       np.save / np.lib.format.write_array output: float32 (2, 3), float64 (3,),
                      a 0-d scalar, versions 2.0 and 3.0, a 1-d array and an empty (0, 3) array
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

# stfile.py knows no BF16 (numpy has no bfloat16): carry BF16 bits in a one-field uint16 record
# dtype that maps to "BF16".
BF16 = np.dtype([("bf16", "<u2")])
stfile._DT.setdefault(BF16, "BF16")
stfile._NP.setdefault("BF16", BF16)


def main(out):
    os.makedirs(out, exist_ok=True)
    bf16 = torch.tensor([1.0, 3.140625, -2.5, float("inf"), -0.0], dtype=torch.bfloat16)
    bf16 = bf16.view(torch.int16).numpy().view(np.uint16).view(BF16)
    tensors = {
        "f32": (np.arange(12, dtype=np.float32) / 8).reshape(3, 4),
        "f16": np.array([1, -2, 65504, 2.0 ** -24, np.inf, 0.333251953125], dtype=np.float16),
        "bf16": bf16,
        "f64": np.array([0.1, -1e300, 1e-320], dtype=np.float64),
        "i64": np.array([0, -1, 2 ** 31 - 1, -2 ** 31], dtype=np.int64),
        "i64_big": np.array([5, 2 ** 40], dtype=np.int64),
        "bool": np.array([True, False, True]),
        "u8": np.array([0, 200, 255], dtype=np.uint8),
    }
    stfile.save(os.path.join(out, "io_py.safetensors"), tensors,
                {"format": "pt", "source": "tools/ref_io.py"})
    # (No 0-d tensor: stfile.save's np.ascontiguousarray turns shape () into (1,).)
    # Read back with stfile to make sure the file is what we meant.
    back, meta = stfile.load(os.path.join(out, "io_py.safetensors"))
    assert meta["format"] == "pt" and back["bf16"].tobytes() == bf16.tobytes()

    np.save(os.path.join(out, "io_numpy.npy"),
            (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3))
    np.save(os.path.join(out, "io_numpy_f8.npy"), np.array([1 / 3, 0.5, 1e40], dtype=np.float64))
    np.save(os.path.join(out, "io_numpy_scalar.npy"), np.array(7.25, dtype=np.float32))
    np.save(os.path.join(out, "io_numpy_1d.npy"), np.arange(70, dtype=np.float32))
    np.save(os.path.join(out, "io_numpy_empty.npy"), np.zeros((0, 3), dtype=np.float32))
    for ver, arr, name in [((2, 0), np.arange(4, dtype=np.float32), "io_numpy_v2.npy"),
                           ((3, 0), np.array([[-1.0, 1.0]], dtype=np.float32), "io_numpy_v3.npy")]:
        with open(os.path.join(out, name), "wb") as f:
            np.lib.format.write_array(f, arr, version=ver)
    print(f"ref_io: wrote io_py.safetensors and io_numpy*.npy to {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ref_io.py OUTDIR")
    main(sys.argv[1])
