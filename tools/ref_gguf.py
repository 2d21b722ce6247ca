"""GGUF files written by the `gguf` Python package (GGUFWriter, llama.cpp's own writer) for
tests/test_gguf.c, and a check that the package reads what attn writes. Usage:

  ref_gguf.py OUTDIR
      writes OUTDIR/gguf/types.gguf      every metadata type (scalars, strings with NUL bytes and
                                         non-ASCII text, arrays of every type, arrays of
                                         arrays) and tensors of 17 types (F32, F16, BF16, F64,
                                         I8..I64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K,
                                         IQ2_XXS) with 1 to 4 dimensions
             OUTDIR/gguf/align64.gguf    general.alignment 64 and tensors of odd sizes
      and OUTDIR/gguf_expect.json: for each file, its path, alignment, the metadata in the order
      written and the tensors (name, ggml type, ne with ne[0] contiguous, offset in the data
      section, byte size, bytes in hex), all from the values given to the writer. Values:
      {"key", "type", "value"}: integers as JSON numbers (u64 / i64 as decimal strings), f32 /
      f64 as the hex of their IEEE bits, bools as JSON booleans, strings as the hex of their
      bytes, arrays as {"elem": type, "value": [...]}. Also "smollm2": the tensor infos of
      models/SmolLM2-135M-Instruct.Q4_1.gguf as GGUFReader sees them (when the file is there).

  ref_gguf.py --check FILE OUTDIR/gguf_expect.json NAME
      reads FILE (written by attn from the expectation NAME) with gguf.GGUFReader and exits
      non-zero naming the first difference from the expectation: every key, type and value (the
      reader flattens arrays of arrays: compared flattened, with the types of the first
      elements), every tensor's name, type, shape, offset and bytes.
"""
import json
import os
import random
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOLLM2 = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

TYPE_NAMES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64",
              "i64", "f64"]


def enc(vtype, val):
    """val of GGUF value type vtype (a name) in the expectation's JSON encoding."""
    if vtype == "f32":
        return "%08x" % struct.unpack("<I", struct.pack("<f", val))[0]
    if vtype == "f64":
        return "%016x" % struct.unpack("<Q", struct.pack("<d", val))[0]
    if vtype in ("u64", "i64"):
        return str(int(val))
    if vtype == "bool":
        return bool(val)
    if vtype == "string":
        return (val.encode("utf-8") if isinstance(val, str) else bytes(val)).hex()
    if vtype == "array":
        elem, items = val
        return {"elem": elem, "value": [enc(elem, x) for x in items]}
    return int(val)


# (key, type, value); arrays: (elem type, items), arrays of arrays: items are (elem, items)
METADATA = [
    ("test.u8", "u8", 255), ("test.i8", "i8", -128), ("test.u16", "u16", 65535),
    ("test.i16", "i16", -32768), ("test.u32", "u32", 4294967295), ("test.i32", "i32", -2147483648),
    ("test.f32", "f32", -1.5), ("test.f32_tiny", "f32", 1e-45), ("test.f32_inf", "f32", float("inf")),
    ("test.f32_nan", "f32", float("nan")), ("test.f32_negzero", "f32", -0.0),
    ("test.bool_true", "bool", True), ("test.bool_false", "bool", False),
    ("test.string", "string", "Knowledge is power. 知识就是力量。 😀"),
    ("test.string_empty", "string", ""), ("test.string_nul", "string", "a\x00b\x00"),
    ("test.u64", "u64", 18446744073709551615), ("test.i64", "i64", -9223372036854775808),
    ("test.f64", "f64", 3.141592653589793), ("test.f64_denormal", "f64", 5e-324),
    ("test.arr_u8", "array", ("u8", [0, 1, 255])), ("test.arr_i8", "array", ("i8", [-128, 0, 127])),
    ("test.arr_u16", "array", ("u16", [0, 65535])), ("test.arr_i16", "array", ("i16", [-2, 3])),
    ("test.arr_u32", "array", ("u32", [7, 4294967295])),
    ("test.arr_i32", "array", ("i32", [-1, 2147483647, 5])),
    ("test.arr_f32", "array", ("f32", [0.5, -2.25, float("inf")])),
    ("test.arr_bool", "array", ("bool", [True, False, True])),
    ("test.arr_string", "array", ("string", ["", "▁Hello", "a b", "\x00", "日本"])),
    ("test.arr_u64", "array", ("u64", [0, 18446744073709551615])),
    ("test.arr_i64", "array", ("i64", [-9223372036854775808, 1])),
    ("test.arr_f64", "array", ("f64", [1e300, -1e-300])),
    ("test.arr_arr", "array", ("array", [("i32", [1, 2, 3]), ("i32", [4])])),
    ("test.arr_arr_str", "array", ("array", [("string", ["x", "yz"]), ("string", ["w"])])),
    ("tokenizer.chat_template", "string", "{% for m in messages %}{{ m['content'] }}{% endfor %}"),
]


def add_kv(w, key, vtype, val):
    from gguf import GGUFValueType as T
    types = {n: T(i) for i, n in enumerate(TYPE_NAMES)}
    if vtype == "array":
        elem, items = val

        def py(e, x):  # arrays of arrays: lists, typed by their first element
            return [py(x2[0], x2[1]) for x2 in x] if e == "array" else x
        if elem == "array":
            # GGUFWriter types an inner list by its first element (an int is i32, a str string)
            w.add_key_value(key, [py(e2, x2) for e2, x2 in items], T.ARRAY, sub_type=T.ARRAY)
        else:
            w.add_key_value(key, list(items), T.ARRAY, sub_type=types[elem])
    else:
        w.add_key_value(key, val, types[vtype])


def tensors(rng, kinds):
    """(name, ggml type, ne, bytes) for each (name, type name, ne) in kinds: float types from
    normal draws, integer types from random integers, quantized types as random blocks (every
    byte pattern is a valid file)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as Q
    out = []
    for name, tname, ne in kinds:
        q = Q[tname]
        bs, ts = GGML_QUANT_SIZES[q]
        n = int(np.prod(ne))
        shape = tuple(reversed(ne))
        if tname in ("F32", "F16", "F64"):
            arr = rng.standard_normal(n).astype({"F32": np.float32, "F16": np.float16,
                                                 "F64": np.float64}[tname]).reshape(shape)
        elif tname in ("I8", "I16", "I32", "I64"):
            dt = {"I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64}[tname]
            info = np.iinfo(dt)
            arr = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True).reshape(shape)
        else:  # BF16 and the block types: raw bytes, one row of bytes per row of elements
            row = ne[0] // bs * ts
            arr = rng.integers(0, 256, n // ne[0] * row, dtype=np.uint8)
            arr = arr.reshape(shape[:-1] + (row,))
        out.append((name, q, ne, arr))
    return out


TENSORS_TYPES = [
    ("t.f32", "F32", [4, 3]), ("t.f16", "F16", [5]), ("t.bf16", "BF16", [6, 2]),
    ("t.f64", "F64", [3]), ("t.i8", "I8", [7]), ("t.i16", "I16", [2, 2]), ("t.i32", "I32", [3]),
    ("t.i64", "I64", [2]), ("blk.0.q4_0", "Q4_0", [64, 2]), ("blk.0.q4_1", "Q4_1", [32, 3]),
    ("blk.0.q5_0", "Q5_0", [32]), ("blk.0.q5_1", "Q5_1", [96]), ("blk.0.q8_0", "Q8_0", [32, 2, 2]),
    ("blk.0.q4_k", "Q4_K", [256, 2]), ("blk.0.q5_k", "Q5_K", [256]),
    ("blk.0.q6_k", "Q6_K", [256, 1, 1, 2]), ("blk.0.iq2_xxs", "IQ2_XXS", [256]),
]
TENSORS_ALIGN64 = [("a", "F32", [3]), ("b", "Q8_0", [32]), ("c", "F16", [1]), ("d", "I8", [65])]


def write_file(path, metadata, kinds, seed, alignment=None):
    import gguf
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "attn-test")
    kv = [("general.architecture", "string", "attn-test")]
    if alignment is not None:
        w.add_custom_alignment(alignment)
        kv.append(("general.alignment", "u32", alignment))
    for key, vtype, val in metadata:
        add_kv(w, key, vtype, val)
        kv.append((key, vtype, val))
    ts = tensors(rng, kinds)
    for name, q, ne, arr in ts:
        if q in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16,
                 gguf.GGMLQuantizationType.F64, gguf.GGMLQuantizationType.I8,
                 gguf.GGMLQuantizationType.I16, gguf.GGMLQuantizationType.I32,
                 gguf.GGMLQuantizationType.I64):
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    align = alignment or 32
    out_t, off = [], 0
    for name, q, ne, arr in ts:
        b = arr.tobytes()
        out_t.append({"name": name, "type": int(q), "ne": ne, "offset": off, "nbytes": len(b),
                      "hex": b.hex()})
        off += (len(b) + align - 1) // align * align
    return {"path": os.path.abspath(path), "alignment": align,
            "kv": [{"key": k, "type": t, "value": enc(t, v)} for k, t, v in kv],
            "tensors": out_t}


def smollm2_infos():
    if not os.path.exists(SMOLLM2):
        return None
    import gguf
    r = gguf.GGUFReader(SMOLLM2)
    return {"path": SMOLLM2, "n_kv": len([k for k in r.fields if not k.startswith("GGUF.")]),
            "tensors": [{"name": t.name, "type": int(t.tensor_type),
                         "ne": [int(x) for x in t.shape], "offset": int(t.data_offset),
                         "nbytes": int(t.n_bytes),
                         "head": bytes(np.asarray(t.data).view(np.uint8).reshape(-1)[:16]).hex()}
                        for t in r.tensors]}


def main(out):
    d = os.path.join(out, "gguf")
    os.makedirs(d, exist_ok=True)
    files = {
        "types": write_file(os.path.join(d, "types.gguf"), METADATA, TENSORS_TYPES, 16),
        "align64": write_file(os.path.join(d, "align64.gguf"),
                              [("test.note", "string", "odd sizes")], TENSORS_ALIGN64, 17, 64),
    }
    import gguf
    result = {"gguf": getattr(gguf, "__version__", None) or package_version(), "files": files,
              "smollm2": smollm2_infos()}
    with open(os.path.join(out, "gguf_expect.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)
    print(f"ref_gguf: gguf {result['gguf']}: {', '.join(files)} -> {d}"
          + ("" if result["smollm2"] else f" ({SMOLLM2} missing: tools/get_smollm2.sh)"))


def package_version():
    from importlib.metadata import version
    return version("gguf")


# ---- --check ----

def fail(msg):
    sys.exit(f"ref_gguf.py --check: {msg}")


def flat(vtype, v):
    """The leaf values and the types GGUFReader reports for an expectation value."""
    if vtype != "array":
        return [v], [vtype]
    elem, items = v["elem"], v["value"]
    leaves, types = [], None
    for x in items:
        lv, ty = flat(elem, x)
        leaves += lv
        types = types or ty
    return leaves, ["array"] + (types or [elem])


def got_value(vtype, part):
    """One leaf of a GGUFReader field in the expectation's encoding."""
    a = np.asarray(part)
    if vtype == "string":
        return bytes(a.view(np.uint8)).hex()
    if vtype == "f32":
        return "%08x" % int(a.view(np.uint32)[0])
    if vtype == "f64":
        return "%016x" % int(a.view(np.uint64)[0])
    if vtype == "bool":
        return bool(a[0])
    if vtype in ("u64", "i64"):
        return str(int(a[0]))
    return int(a[0])


def check(path, expect_path, name):
    import gguf
    want = json.load(open(expect_path, encoding="utf-8"))["files"][name]
    r = gguf.GGUFReader(path)
    fields = [(k, f) for k, f in r.fields.items() if not k.startswith("GGUF.")]
    if [k for k, _ in fields] != [e["key"] for e in want["kv"]]:
        fail(f"keys {[k for k, _ in fields]} != {[e['key'] for e in want['kv']]}")
    for (k, f), e in zip(fields, want["kv"]):
        leaves, types = flat(e["type"], e["value"])
        got_types = [TYPE_NAMES[int(t)] for t in f.types]
        if got_types != types:
            fail(f"key {k}: types {got_types}, expected {types}")
        leaf_type = types[-1]
        got = [got_value(leaf_type, f.parts[i]) for i in f.data]
        if got != leaves:
            fail(f"key {k}: values {got[:8]}, expected {leaves[:8]}")
    if len(r.tensors) != len(want["tensors"]):
        fail(f"{len(r.tensors)} tensors, expected {len(want['tensors'])}")
    data_start = min((t.data_offset - e["offset"] for t, e in zip(r.tensors, want["tensors"])),
                     default=0)
    if data_start % want["alignment"]:
        fail(f"data section at {data_start}, not aligned to {want['alignment']}")
    for t, e in zip(r.tensors, want["tensors"]):
        if t.name != e["name"] or int(t.tensor_type) != e["type"]:
            fail(f"tensor {t.name} type {int(t.tensor_type)}, expected {e['name']} {e['type']}")
        if [int(x) for x in t.shape] != e["ne"]:
            fail(f"tensor {t.name}: ne {list(t.shape)}, expected {e['ne']}")
        if t.data_offset - data_start != e["offset"] or int(t.n_bytes) != e["nbytes"]:
            fail(f"tensor {t.name}: offset {t.data_offset - data_start} size {t.n_bytes}, "
                 f"expected {e['offset']} {e['nbytes']}")
        if bytes(np.asarray(t.data).view(np.uint8).reshape(-1)).hex() != e["hex"]:
            fail(f"tensor {t.name}: bytes differ")
    print(f"ref_gguf.py --check: {path}: {len(fields)} keys and {len(r.tensors)} tensors as "
          f"expected (gguf {package_version()})")


if __name__ == "__main__":
    random.seed(0)
    if len(sys.argv) == 5 and sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
