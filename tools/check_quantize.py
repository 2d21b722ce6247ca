"""Checks a GGUF file attn quantize wrote, with the gguf package's GGUFReader (tests/test_quantize.c).

    .venv/bin/python tools/check_quantize.py OUT.gguf HF_DIR TYPE [--pure] [--from IN.gguf]
    .venv/bin/python tools/check_quantize.py --batch < JOBS   (one such argument list a line:
                                                               one process for many files)

From HF_DIR (no --from): the metadata convert_hf_to_gguf.py writes (the architecture keys from
config.json; tokenizer.ggml.tokens / token_type as its get_vocab_base builds them from
transformers' AutoTokenizer; merges, special ids, add_*_token and the chat template as
gguf.SpecialVocab finds them), every tensor under llama.cpp's name with its shape, the type
llama-quantize's rules give it (written out again here from llama-quant.cpp), and its bytes:
identical to gguf.quants.quantize of the float weights (llama's q/k rows permuted, GPT-2's
Conv1D weights transposed) for F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; for Q4_K, Q5_K,
Q6_K (which gguf.quants only dequantizes) the dequantized values within a relative RMS error of
the weights (bound per type below).
With --from IN.gguf (a requantized file): every key of IN kept (file_type replaced), every
tensor's bytes gguf.quants.quantize(gguf.quants.dequantize(IN's tensor)) where gguf implements
the type, else within the bound of IN's dequantized values.
Prints one summary line; exit status 1 and the differences on any mismatch."""
import json
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

FTYPES = {"f32": (0, Q.F32), "f16": (1, Q.F16), "bf16": (32, Q.BF16), "q8_0": (7, Q.Q8_0),
          "q4_0": (2, Q.Q4_0), "q4_1": (3, Q.Q4_1), "q5_0": (8, Q.Q5_0), "q5_1": (9, Q.Q5_1),
          "q4_k_s": (14, Q.Q4_K), "q4_k_m": (15, Q.Q4_K), "q5_k_s": (16, Q.Q5_K),
          "q5_k_m": (17, Q.Q5_K), "q6_k": (18, Q.Q6_K)}
GGUF_QUANTIZES = {Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1}
KQ_BOUND = {Q.Q4_K: 0.12, Q.Q5_K: 0.06, Q.Q6_K: 0.03}  # relative RMS error of a k-quant
BLOCK = {t: quants.GGML_QUANT_SIZES[t][0] for t in Q if t in quants.GGML_QUANT_SIZES}

errors = []


def err(msg):
    errors.append(msg)


def more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def expected_type(name, ne0, ndims, ftype, pure, n_layer, tied, counters):
    """llama-quant.cpp's choice for attn's ftypes (written from its source)."""
    if ndims < 2 or not name.endswith("weight") or "_norm.weight" in name or \
            name in ("position_embd.weight", "token_types.weight"):
        return Q.F32
    ft, default = FTYPES[ftype]
    if default in (Q.F32, Q.F16, Q.BF16):
        return default
    t = default
    if not pure:
        if name == "output.weight" or (tied and name == "token_embd.weight"):
            t = Q.Q8_0 if ne0 % BLOCK[default] else (Q.Q6_K if default != Q.Q8_0 else t)
        elif name == "token_embd.weight":
            pass
        elif "attn_v.weight" in name or "attn_qkv.weight" in name:
            i = counters["v"]
            if ftype in ("q4_k_m", "q5_k_m") and more_bits(i, counters["nv"]):
                t = Q.Q6_K
            elif ftype == "q4_k_s" and i < 4:
                t = Q.Q5_K
            counters["v"] += 1
        elif "ffn_down" in name:
            i = counters["d"]
            if ftype in ("q4_k_m", "q5_k_m") and more_bits(i, n_layer):
                t = Q.Q6_K
            elif ftype == "q4_k_s" and i < n_layer // 8:
                t = Q.Q5_K
            counters["d"] += 1
    if ne0 % BLOCK[t]:
        t = {Q.Q4_K: Q.Q5_0, Q.Q5_K: Q.Q5_1, Q.Q6_K: Q.Q8_0}.get(t, t)
        if ne0 % BLOCK[t]:
            t = Q.F16
    return t


def field(r, key):
    f = r.fields.get(key)
    if f is None:
        return None
    v = f.contents()
    return v


def permute(w, n_head):
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def hf_tensors(d, cfg):
    """{gguf name: float32 array as convert_hf_to_gguf.py writes it}"""
    from safetensors.numpy import load_file
    sd = load_file(os.path.join(d, "model.safetensors"))
    arch = cfg["model_type"]
    out = {}
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
           "output_norm.weight", "lm_head.weight": "output.weight",
           "transformer.wte.weight": "token_embd.weight",
           "transformer.wpe.weight": "position_embd.weight",
           "transformer.ln_f.weight": "output_norm.weight",
           "transformer.ln_f.bias": "output_norm.bias"}
    blk = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
           "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
           "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
           "ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
           "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for k, v in sd.items():
        v = v.astype(np.float32)
        if k.endswith((".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")):
            continue
        if k == "lm_head.weight" and cfg.get("tie_word_embeddings", arch == "gpt2"):
            continue
        if k in top:
            out[top[k]] = v
            continue
        parts = k.split(".")
        pre = 2 if k.startswith(("model.layers.", "transformer.h.")) else None
        l, stem, suf = parts[pre], ".".join(parts[pre + 1:-1]), parts[-1]
        if arch == "llama" and stem == "self_attn.q_proj":
            v = permute(v, cfg["num_attention_heads"])
        if arch == "llama" and stem == "self_attn.k_proj":
            v = permute(v, cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
        if arch == "gpt2" and suf == "weight" and stem.startswith(("attn.", "mlp.")):
            v = np.ascontiguousarray(v.T)
        out[f"blk.{l}.{blk[stem]}.{suf}"] = v
    return out


def expected_meta(d, cfg, ftype_id):
    arch = cfg["model_type"]
    a = "llama" if arch in ("llama", "mistral") else arch
    m = {"general.architecture": a, "general.type": "model",
         "general.name": os.path.basename(os.path.normpath(d)),
         "general.file_type": ftype_id, "general.quantization_version": 2}
    if arch == "gpt2":
        m.update({f"{a}.block_count": cfg["n_layer"], f"{a}.context_length": cfg["n_positions"],
                  f"{a}.embedding_length": cfg["n_embd"],
                  f"{a}.feed_forward_length": 4 * cfg["n_embd"],
                  f"{a}.attention.head_count": cfg["n_head"],
                  f"{a}.attention.layer_norm_epsilon": cfg["layer_norm_epsilon"]})
    else:
        m.update({f"{a}.block_count": cfg["num_hidden_layers"],
                  f"{a}.context_length": cfg["max_position_embeddings"],
                  f"{a}.embedding_length": cfg["hidden_size"],
                  f"{a}.feed_forward_length": cfg["intermediate_size"],
                  f"{a}.attention.head_count": cfg["num_attention_heads"],
                  f"{a}.attention.head_count_kv": cfg["num_key_value_heads"],
                  f"{a}.rope.freq_base": cfg["rope_theta"],
                  f"{a}.attention.layer_norm_rms_epsilon": cfg["rms_norm_eps"]})
        if cfg.get("head_dim") is not None:
            m[f"{a}.attention.key_length"] = cfg["head_dim"]
            m[f"{a}.attention.value_length"] = cfg["head_dim"]
        if a == "llama":
            m[f"{a}.vocab_size"] = cfg["vocab_size"]
            m[f"{a}.rope.dimension_count"] = cfg.get("head_dim") or \
                cfg["hidden_size"] // cfg["num_attention_heads"]
    # the tokenizer: convert_hf_to_gguf.py's get_vocab_base and gguf.SpecialVocab
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(d)
    V = cfg["vocab_size"]
    rev = {i: t for t, i in tok.vocab.items()}
    added = tok.get_added_vocab()
    dec = tok.added_tokens_decoder
    tokens, types = [], []
    for i in range(V):
        if i not in rev:
            tokens.append(f"[PAD{i}]")
            types.append(5)
            continue
        t = rev[i]
        if t in added:
            looks = t.startswith("<|") and t.endswith("|>")
            if dec[i].special or looks:
                types.append(3)
            else:
                t = t.replace("\u2581", " ")
                types.append(4)
        else:
            types.append(1)
        tokens.append(t)
    m["tokenizer.ggml.model"] = "gpt2"
    m["tokenizer.ggml.tokens"] = tokens
    m["tokenizer.ggml.token_type"] = types
    sv = special_vocab()(d, load_merges=True)
    m["tokenizer.ggml.merges"] = sv.merges
    for typ, tid in sv.special_token_ids.items():
        m[f"tokenizer.ggml.{typ}_token_id"] = tid
    for typ, v in sv.add_special_token.items():
        m[f"tokenizer.ggml.add_{typ}_token"] = v
    if sv.chat_template is not None:
        m["tokenizer.chat_template"] = sv.chat_template
    return m


SDIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "llamacpp",
                     "llama_cpp_python-0.3.36.tar.gz")
VOCAB_PY = "llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py/gguf/vocab.py"
SV_FROM = "gguf 0.17.1"


def special_vocab():
    """SpecialVocab of the llama.cpp that convert_hf_to_gguf.py belongs to (its gguf-py, read
    from the llama-cpp-python sdist), run against the installed gguf package; the installed
    package's own (older: no post-processor parsing) when the sdist is absent."""
    global SV_FROM
    import tarfile
    import types
    if not os.path.exists(SDIST):
        return gguf.SpecialVocab
    with tarfile.open(SDIST) as tf:
        src = tf.extractfile(VOCAB_PY).read().decode()
    mod = types.ModuleType("gguf._llamacpp_vocab")
    mod.__package__ = "gguf"
    exec(compile(src, VOCAB_PY, "exec"), mod.__dict__)
    SV_FROM = "llama.cpp's gguf-py"
    return mod.SpecialVocab


def same(a, b):
    if isinstance(b, float):
        return isinstance(a, (float, int)) and np.float32(a) == np.float32(b)
    return a == b


def check_bytes(name, t, want_type, src):
    """t: the ReaderTensor; src: float32 values (PyTorch order) it should hold."""
    raw = np.asarray(t.data)
    if want_type == Q.F32:
        if not np.array_equal(raw.reshape(-1).view(np.uint32),
                              src.reshape(-1).astype(np.float32).view(np.uint32)):
            err(f"{name}: F32 data differ")
        return "bytes"
    if want_type in GGUF_QUANTIZES:
        ref = quants.quantize(src.astype(np.float32), want_type)
        if raw.tobytes() != np.asarray(ref).tobytes():
            err(f"{name}: {want_type.name} bytes differ from gguf.quants.quantize")
        return "bytes"
    deq = quants.dequantize(raw, want_type).reshape(src.shape)
    rel = float(np.sqrt(np.mean((deq - src) ** 2)) / (np.sqrt(np.mean(src ** 2)) + 1e-30))
    if not rel <= KQ_BOUND[want_type]:
        err(f"{name}: {want_type.name} relative RMS error {rel:.3g} > {KQ_BOUND[want_type]}")
    return "close"


def check(argv):
    """One file (argv: OUT HF_DIR TYPE [--pure] [--from IN]): its summary line; False on any
    difference (each printed)."""
    global errors
    errors = []
    args = [a for a in argv if not a.startswith("--")]
    pure = "--pure" in argv
    src_gguf = argv[argv.index("--from") + 1] if "--from" in argv else None
    if src_gguf in args:
        args.remove(src_gguf)
    out, d, ftype = args[0], args[1], args[2]
    r = gguf.GGUFReader(out)
    ft_id = FTYPES[ftype][0]
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    if src_gguf:
        ri = gguf.GGUFReader(src_gguf)
        want = {k: field(ri, k) for k in ri.fields if not k.startswith("GGUF.")}
        want["general.file_type"] = ft_id
        srcs = {t.name: quants.dequantize(np.asarray(t.data), t.tensor_type)
                .reshape([int(x) for x in reversed(t.shape)]).astype(np.float32)
                for t in ri.tensors}
        n_layer = field(ri, f"{field(ri, 'general.architecture')}.block_count")
    else:
        want = expected_meta(d, cfg, ft_id)
        srcs = hf_tensors(d, cfg)
        n_layer = cfg.get("num_hidden_layers", cfg.get("n_layer"))
    got = {k: field(r, k) for k in r.fields if not k.startswith("GGUF.")}
    for k, v in want.items():
        if k not in got:
            err(f"metadata: no key {k}")
        elif not same(got[k], v):
            gv = got[k]
            err(f"metadata: {k} = {str(gv)[:80]!r}, expected {str(v)[:80]!r}")
    for k in got:
        if k not in want and k != "tokenizer.ggml.pre":
            err(f"metadata: unexpected key {k}")
    if not src_gguf:
        pre = {"llama8": "llama-bpe", "llama96": "gpt-2", "qwen2": "qwen2", "gpt2": "gpt-2"}
        exp = pre.get(os.path.basename(os.path.normpath(d)))
        if exp and got.get("tokenizer.ggml.pre") != exp:
            err(f"metadata: tokenizer.ggml.pre = {got.get('tokenizer.ggml.pre')}, expected {exp}")
    # tensors, in llama-quantize's order
    names = [t.name for t in r.tensors]
    if sorted(names) != sorted(srcs):
        err(f"tensors: {sorted(set(names) ^ set(srcs))} differ")

    def order(n):
        l = int(n.split(".")[1]) if n.startswith("blk.") else -1
        return (l, n)
    if names != sorted(names, key=order):
        err("tensors: not in llama-quantize's order")
    tied = "output.weight" not in srcs
    counters = {"v": 0, "d": 0, "nv": sum(1 for n in srcs if "attn_v.weight" in n
                                          or "attn_qkv.weight" in n)}
    kinds = {"bytes": 0, "close": 0}
    mix = {}
    for t in r.tensors:
        if t.name not in srcs:
            continue
        src = srcs[t.name]
        shape = [int(x) for x in reversed(t.shape)]
        if list(src.shape) != shape:
            err(f"{t.name}: shape {shape}, expected {list(src.shape)}")
            continue
        wt = expected_type(t.name, src.shape[-1], src.ndim, ftype, pure, n_layer, tied, counters)
        if t.tensor_type != wt:
            err(f"{t.name}: type {t.tensor_type.name}, expected {wt.name}")
            continue
        mix[wt.name] = mix.get(wt.name, 0) + 1
        kinds[check_bytes(t.name, t, wt, src)] += 1
    mixs = " ".join(f"{k}:{v}" for k, v in sorted(mix.items()))
    if errors:
        for e in errors[:30]:
            print("check_quantize: " + e)
        print(f"check_quantize: {out}: {len(errors)} differences")
        return False
    print(f"check_quantize: {os.path.basename(out)}: {len(got)} keys as expected, "
          f"{'' if src_gguf else '(SpecialVocab of ' + SV_FROM + ') '}{len(names)} tensors ({mixs}); {kinds['bytes']} byte-identical to gguf.quants, "
          f"{kinds['close']} k-quant tensors within bound")
    return True


def main():
    if sys.argv[1:] == ["--batch"]:
        import shlex
        ok = True
        for line in sys.stdin:
            if line.strip():
                ok = check(shlex.split(line)) and ok
        sys.exit(0 if ok else 1)
    sys.exit(0 if check(sys.argv[1:]) else 1)


if __name__ == "__main__":
    main()
