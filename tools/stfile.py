"""Minimal safetensors writer/reader for the reference generators (the format is specified in
include/attn_io.h). Kept dependency-free so that Debian's torch 1.13 suffices."""
import json
import struct

import numpy as np

_DT = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("int64"): "I64",
       np.dtype("int32"): "I32", np.dtype("float16"): "F16", np.dtype("uint8"): "U8",
       np.dtype("int8"): "I8", np.dtype("int16"): "I16", np.dtype("bool"): "BOOL"}
_NP = {v: k for k, v in _DT.items()}


def save(path, tensors, metadata=None):
    """tensors: dict name -> numpy array (or torch tensor). metadata: dict str -> str."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, arr in tensors.items():
        if hasattr(arr, "detach"):
            arr = arr.detach().cpu().numpy()
        arr = np.array(arr, copy=False, order="C")  # keeps 0-d arrays 0-d
        b = arr.tobytes()
        header[name] = {"dtype": _DT[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[base + a:base + b], dtype=_NP[t["dtype"]]).reshape(t["shape"])
    return out, meta
