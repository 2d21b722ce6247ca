"""References for tests/test_gguf_models.c: tiny random decoders (and a BERT encoder) made by
transformers, written as
GGUF files with the gguf package's GGUFWriter (F32, F16, Q8_0, Q4_0, Q4_1 via gguf.quants), and
the logits and greedy tokens of transformers on the very weights each file holds.

    .venv/bin/python tools/ref_gguf_models.py OUTDIR            (transformers 4.49, gguf 0.17.1)
      ->  OUTDIR/gguf_models/<model>.gguf
          OUTDIR/gguf_models.safetensors   (inputs and expected values)
          OUTDIR/gguf_bert.safetensors     (BertModel: ids, types, lengths, last hidden states)
    .venv-bench/bin/python tools/refnew_gguf_qwen3.py OUTDIR    (Qwen3: the newest transformers)
      ->  OUTDIR/gguf_models/qwen3_*.gguf, OUTDIR/gguf_qwen3.safetensors

The files are written as llama.cpp's convert_hf_to_gguf.py writes these architectures, the
metadata keys and tensor names included: the llama architecture's q and k weights with their rows
permuted per head (for llama.cpp's rotation of adjacent pairs; qwen2 and qwen3 are not permuted),
GPT-2's Conv1D weights transposed to (out, in), 1-D tensors (norms, biases) always F32, matrices in
the file's type. Quantization rounds along each row of 32, so permuting rows and quantizing
commute: the weights a file holds are dequantize(quantize(W)) (gguf.quants, the reference
dequantizer attn's is bit-identical to) for the quantized files, W rounded to float16 for the F16
ones. The references are transformers' model with exactly those weights: logits in float64 (eager
attention), greedy decoding of the float32 model with its KV cache.

Stored per model M (metadata "models": the names):
  M.ids (B, T) int32; M.logits (B, T, V) float32 of the float64 model;
  M.prompt (P) int32; M.greedy (N) int32 and M.greedy_gap (N) the top-1 minus top-2 logit."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

B, T = 2, 16
PROMPT, NEW = 6, 32


def init_weights(model):
    """Weights larger than transformers' initializer_range, so every path carries signal."""
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight") or "layernorm" in pname or ".ln_" in pname:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif "embed_tokens" in pname or "wte" in pname or "wpe" in pname:
                p.copy_(torch.randn_like(p))
            elif pname.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "lm_head" in pname:
                p.copy_(0.3 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))


def permute(w, n_head):
    """The rows of a q or k weight (H·D, C) reordered per head so that each head's rotate_half
    pairs (i, i + D/2) become adjacent rows (2i, 2i + 1): convert_hf_to_gguf.py's layout."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def stored(gguf, arr, qtype):
    """(file array, raw dtype, the float32 values it holds) of a float32 matrix in qtype."""
    Q = gguf.GGMLQuantizationType
    if qtype == "f32" or arr.ndim == 1:
        return arr.astype(np.float32), None, arr.astype(np.float32)
    if qtype == "f16":
        h = arr.astype(np.float16)
        return h, None, h.astype(np.float32)
    t = {"q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1, "q5_0": Q.Q5_0}[qtype]
    q = gguf.quants.quantize(arr.astype(np.float32), t)
    return q, t, gguf.quants.dequantize(q, t).reshape(arr.shape).astype(np.float32)


def llama_tensors(model, cfg, arch):
    """(gguf name, float32 array, permute heads or 0) of a Llama-family model."""
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    out = [("token_embd.weight", sd["model.embed_tokens.weight"], 0)]
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for l in range(cfg.num_hidden_layers):
        for hf, gg in names.items():
            for suf in ("weight", "bias"):
                k = f"model.layers.{l}.{hf}.{suf}"
                if k not in sd:
                    continue
                heads = 0
                if arch == "llama" and hf == "self_attn.q_proj":
                    heads = cfg.num_attention_heads
                elif arch == "llama" and hf == "self_attn.k_proj":
                    heads = cfg.num_key_value_heads
                out.append((f"blk.{l}.{gg}.{suf}", sd[k], heads))
    out.append(("output_norm.weight", sd["model.norm.weight"], 0))
    if not cfg.tie_word_embeddings:
        out.append(("output.weight", sd["lm_head.weight"], 0))
    return out


def gpt2_tensors(model, cfg, with_output):
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    out = [("token_embd.weight", sd["transformer.wte.weight"], 0),
           ("position_embd.weight", sd["transformer.wpe.weight"], 0)]
    names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
             "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for l in range(cfg.n_layer):
        for hf, gg in names.items():
            for suf in ("weight", "bias"):
                a = sd[f"transformer.h.{l}.{hf}.{suf}"]
                if suf == "weight" and hf.startswith(("attn.", "mlp.")):
                    a = a.T.copy()  # Conv1D (in, out) -> (out, in)
                out.append((f"blk.{l}.{gg}.{suf}", a, 0))
    out.append(("output_norm.weight", sd["transformer.ln_f.weight"], 0))
    out.append(("output_norm.bias", sd["transformer.ln_f.bias"], 0))
    if with_output:  # convert_hf_to_gguf.py writes GPT-2's tied head as output.weight too
        out.append(("output.weight", sd["transformer.wte.weight"], 0))
    return out


def write_gguf(gguf, path, arch, cfg, tensors, qtype):
    """Writes the file; returns {gguf name: float32 values held} (unpermuted)."""
    w = gguf.GGUFWriter(path, arch)
    w.add_name("attn-test-" + os.path.basename(path))
    if arch == "gpt2":
        w.add_context_length(cfg.n_positions)
        w.add_embedding_length(cfg.n_embd)
        w.add_feed_forward_length(cfg.n_inner or 4 * cfg.n_embd)
        w.add_block_count(cfg.n_layer)
        w.add_head_count(cfg.n_head)
        w.add_layer_norm_eps(cfg.layer_norm_epsilon)
    else:
        D = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        w.add_context_length(cfg.max_position_embeddings)
        w.add_embedding_length(cfg.hidden_size)
        w.add_feed_forward_length(cfg.intermediate_size)
        w.add_block_count(cfg.num_hidden_layers)
        w.add_head_count(cfg.num_attention_heads)
        w.add_head_count_kv(cfg.num_key_value_heads)
        rp = getattr(cfg, "rope_parameters", None) or {}  # transformers 5
        w.add_rope_freq_base(getattr(cfg, "rope_theta", None) or rp["rope_theta"])
        w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
        w.add_rope_dimension_count(D)
        if D != cfg.hidden_size // cfg.num_attention_heads:
            w.add_key_length(D)
            w.add_value_length(D)
        if getattr(cfg, "model_type", "") == "mistral" and cfg.sliding_window:
            w.add_sliding_window(cfg.sliding_window)  # llama.attention.sliding_window
        rs = getattr(cfg, "rope_scaling", None) or rp
        if rs and rs.get("rope_type", rs.get("type")) == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rs["factor"])
        if rs and rs.get("rope_type", rs.get("type")) == "llama3":
            # Llama 3.1's scaling as convert_hf_to_gguf.py stores it: a rope_freqs tensor of
            # per-frequency divisors of the inverse frequencies
            base = getattr(cfg, "rope_theta", None) or rp["rope_theta"]
            inv = 1.0 / base ** (np.arange(0, D, 2, dtype=np.float64) / D)
            lo, hi = rs["low_freq_factor"], rs["high_freq_factor"]
            old = rs["original_max_position_embeddings"]
            f = []
            for x in inv:
                wl = 2 * np.pi / x
                if wl < old / hi:
                    f.append(1.0)
                elif wl > old / lo:
                    f.append(rs["factor"])
                else:
                    sm = (old / wl - lo) / (hi - lo)
                    f.append(1 / ((1 - sm) / rs["factor"] + sm))
            tensors = list(tensors) + [("rope_freqs.weight", np.array(f, dtype=np.float32), 0)]
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(1 if qtype == "f16" else 0)
    held = {}
    for name, arr, heads in tensors:
        a = permute(arr, heads) if heads else arr
        data, raw, vals = stored(gguf, a, qtype)
        if raw is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=raw)
        # the permutation moves whole rows; quantization works within rows
        held[name] = vals if not heads else stored(gguf, arr, qtype)[2]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return held


def load_held(model, held, arch, cfg):
    """The model's weights := the values the file holds."""
    if arch == "gpt2":
        tens = gpt2_tensors(model, cfg, False)
        rev = {"token_embd.weight": "transformer.wte.weight",
               "position_embd.weight": "transformer.wpe.weight",
               "output_norm.weight": "transformer.ln_f.weight",
               "output_norm.bias": "transformer.ln_f.bias"}
        names = {"attn_norm": "ln_1", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj",
                 "ffn_norm": "ln_2", "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
    else:
        tens = llama_tensors(model, cfg, arch)
        rev = {"token_embd.weight": "model.embed_tokens.weight",
               "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
        names = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
                 "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                 "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
                 "attn_k_norm": "self_attn.k_norm", "ffn_norm": "post_attention_layernorm",
                 "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    sd = model.state_dict()
    with torch.no_grad():
        for name, _, _ in tens:
            if name in rev:
                hf = rev[name]
            else:
                _, l, gg, suf = name.split(".")
                pre = "transformer.h" if arch == "gpt2" else "model.layers"
                hf = f"{pre}.{l}.{names[gg]}.{suf}"
            v = torch.from_numpy(held[name])
            if arch == "gpt2" and hf.endswith("weight") and (".attn." in hf or ".mlp." in hf):
                v = v.T.contiguous()
            sd[hf].copy_(v)
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()


def greedy(model, prompt):
    out, gaps = [], []
    with torch.no_grad():
        res = model(input_ids=prompt[None], use_cache=True)
        for _ in range(NEW):
            last = res.logits[0, -1]
            top = torch.topk(last, 2).values
            nxt = int(torch.argmax(last))
            out.append(nxt)
            gaps.append(float(top[0] - top[1]))
            res = model(input_ids=torch.tensor([[nxt]]), past_key_values=res.past_key_values,
                        use_cache=True)
    return np.array(out, dtype=np.int32), np.array(gaps, dtype=np.float32)


def run(models, outdir, name, seed):
    import gguf
    d = os.path.join(outdir, "gguf_models")
    os.makedirs(d, exist_ok=True)
    tensors = {}
    for mname, arch, cls, cfg, qtype, extra in models:
        torch.manual_seed(seed)
        cfg._attn_implementation = "eager"
        model = cls(cfg).float().eval()
        init_weights(model)
        if arch == "gpt2":
            tens = gpt2_tensors(model, cfg, extra == "output")
        else:
            tens = llama_tensors(model, cfg, arch)
        held = write_gguf(gguf, os.path.join(d, mname + ".gguf"), arch, cfg, tens, qtype)
        load_held(model, held, arch, cfg)
        g = torch.Generator().manual_seed(11)
        V = cfg.vocab_size
        ids = torch.randint(0, V, (B, T), generator=g)
        prompt = torch.randint(0, V, (PROMPT,), generator=g)
        toks, gaps = greedy(model, prompt)
        with torch.no_grad():
            logits = model.double()(input_ids=ids).logits
        p = mname + "."
        tensors[p + "ids"] = ids.to(torch.int32).numpy()
        tensors[p + "logits"] = logits.float().numpy()
        tensors[p + "prompt"] = prompt.to(torch.int32).numpy()
        tensors[p + "greedy"] = toks
        tensors[p + "greedy_gap"] = gaps
        print(f"ref {name}: {mname}: {cls.__name__} {qtype}, min greedy gap {gaps.min():.3g}")
    stfile.save(os.path.join(outdir, name + ".safetensors"), tensors,
                {"models": ",".join(m[0] for m in models), "B": str(B), "T": str(T)})


def models():
    from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                              MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)
    common = dict(max_position_embeddings=64, vocab_size=97, rms_norm_eps=1e-6)

    def llama(**kw):
        return LlamaConfig(**dict(common, **kw))

    gqa = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
               intermediate_size=96, num_hidden_layers=2, tie_word_embeddings=False)
    tied = dict(hidden_size=64, num_attention_heads=2, num_key_value_heads=2, head_dim=32,
                intermediate_size=64, num_hidden_layers=2, tie_word_embeddings=True,
                rope_scaling={"rope_type": "linear", "factor": 2.0}, rope_theta=500000.0)
    qwen = dict(common, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=96, num_hidden_layers=2, tie_word_embeddings=True,
                rope_theta=1000000.0)
    gpt2 = dict(vocab_size=97, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                activation_function="gelu_new")
    out = []
    for q in ("f32", "f16", "q8_0", "q4_0", "q4_1"):
        out.append((f"llama_gqa_{q}", "llama", LlamaForCausalLM, llama(**gqa), q, None))
    out.append(("llama_tied_linear_q8_0", "llama", LlamaForCausalLM, llama(**tied), "q8_0", None))
    l3 = dict(gqa, rope_theta=500000.0,
              rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
    out.append(("llama_llama3_f32", "llama", LlamaForCausalLM, llama(**l3), "f32", None))
    # Mistral (the llama architecture) with a sliding window shorter than the sequences: the
    # file carries llama.attention.sliding_window
    mis = dict(common, **dict(gqa, sliding_window=5))
    out.append(("mistral_window_q8_0", "llama", MistralForCausalLM, MistralConfig(**mis), "q8_0",
                None))
    for q in ("f32", "q8_0"):
        out.append((f"qwen2_{q}", "qwen2", Qwen2ForCausalLM, Qwen2Config(**qwen), q, None))
    out.append(("gpt2_f32", "gpt2", GPT2LMHeadModel, GPT2Config(**gpt2), "f32", None))
    out.append(("gpt2_f16_output", "gpt2", GPT2LMHeadModel, GPT2Config(**gpt2), "f16", "output"))
    out.append(("gpt2_q8_0", "gpt2", GPT2LMHeadModel, GPT2Config(**gpt2), "q8_0", None))
    return out


BERT_NAMES = {"attention.self.query": "attn_q", "attention.self.key": "attn_k",
              "attention.self.value": "attn_v", "attention.output.dense": "attn_output",
              "attention.output.LayerNorm": "attn_output_norm", "intermediate.dense": "ffn_up",
              "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm"}
BERT_TOP = {"embeddings.word_embeddings.weight": "token_embd.weight",
            "embeddings.position_embeddings.weight": "position_embd.weight",
            "embeddings.token_type_embeddings.weight": "token_types.weight",
            "embeddings.LayerNorm.weight": "token_embd_norm.weight",
            "embeddings.LayerNorm.bias": "token_embd_norm.bias"}


def bert(outdir):
    """BertModel (no pooler) as convert_hf_to_gguf.py writes it (arch "bert"), F32 and Q8_0;
    the reference: last_hidden_state of the float64 model on the weights the file holds, for a
    batch with token types and padding (attention_mask)."""
    import gguf
    from transformers import BertConfig, BertModel
    d = os.path.join(outdir, "gguf_models")
    os.makedirs(d, exist_ok=True)
    cfg = BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=64, type_vocab_size=2,
                     layer_norm_eps=1e-12, hidden_act="gelu")
    tensors, names = {}, []
    for q in ("f32", "q8_0"):
        torch.manual_seed(20261204)
        model = BertModel(cfg, add_pooling_layer=False).float().eval()
        init_weights(model)
        with torch.no_grad():  # LayerNorm gains near 1, embeddings larger
            for pname, p in model.named_parameters():
                if "LayerNorm.weight" in pname:
                    p.copy_(1 + 0.2 * torch.randn_like(p))
        sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()
              if not k.endswith("position_ids")}
        name = f"bert_{q}"
        w = gguf.GGUFWriter(os.path.join(d, name + ".gguf"), "bert")
        w.add_context_length(cfg.max_position_embeddings)
        w.add_embedding_length(cfg.hidden_size)
        w.add_feed_forward_length(cfg.intermediate_size)
        w.add_block_count(cfg.num_hidden_layers)
        w.add_head_count(cfg.num_attention_heads)
        w.add_layer_norm_eps(cfg.layer_norm_eps)
        w.add_causal_attention(False)
        w.add_file_type(0)
        held = {}
        for k, a in sd.items():
            if k in BERT_TOP:
                gn = BERT_TOP[k]
            else:
                _, _, l, rest = k.split(".", 3)
                stem, suf = rest.rsplit(".", 1)
                gn = f"blk.{l}.{BERT_NAMES[stem]}.{suf}"
            data, raw, vals = stored(gguf, a, q)
            w.add_tensor(gn, data, raw_dtype=raw) if raw is not None else w.add_tensor(gn, data)
            held[k] = vals
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with torch.no_grad():
            msd = model.state_dict()
            for k, v in held.items():
                msd[k].copy_(torch.from_numpy(v))
            g = torch.Generator().manual_seed(12)
            ids = torch.randint(0, cfg.vocab_size, (B, T), generator=g)
            types = torch.randint(0, 2, (B, T), generator=g)
            mask = torch.ones(B, T, dtype=torch.long)
            mask[1, 11:] = 0
            hid = model.double()(input_ids=ids, token_type_ids=types,
                                 attention_mask=mask).last_hidden_state
            hid = hid * mask[..., None]  # padded rows: 0, as attn writes them
        p = name + "."
        tensors[p + "ids"] = ids.to(torch.int32).numpy()
        tensors[p + "types"] = types.to(torch.int32).numpy()
        tensors[p + "lengths"] = mask.sum(1).to(torch.int32).numpy()
        tensors[p + "hidden"] = hid.float().numpy()
        names.append(name)
        print(f"ref gguf_bert: {name}: BertModel {q}")
    stfile.save(os.path.join(outdir, "gguf_bert.safetensors"), tensors,
                {"models": ",".join(names), "B": str(B), "T": str(T)})


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    run(models(), outdir, "gguf_models", 20261202)
    bert(outdir)


if __name__ == "__main__":
    main()
