"""transformers references for tests/test_explain_model.c: the intermediate steps of one attention
layer of real models, pulled with hooks, for `attn explain --model` (attn_explain_head_compute).

Models (evaluation mode, eager attention, batch 1, float64 so the reference carries no float32
error of its own; stored as float32):
  bert   all-MiniLM-L6-v2 (models/all-MiniLM-L6-v2; skipped when absent) on the article's sentence
         "The animal didn't cross the street because it was too tired", layer 3
  gpt    a random-weight GPT-2 (scale_attn_by_inverse_layer_idx: the scale depends on the layer),
         layer 1, saved to OUT/explain_model/gpt/
  llama  a random-weight Llama with grouped-query attention (6 query heads, 2 key/value heads),
         rotary embeddings and q/k/v biases, layer 1, saved to OUT/explain_model/llama/
Writes OUT/explain_model/NAME.ref.safetensors with, for the layer (H query heads, Hk key/value
heads, D per head, T tokens, C = d_model):
  ids (T) int32
  x (T, C)          the attention's input: the layer input (BERT, post-norm) or ln_1 / input_layernorm
                    of it (a forward hook on the norm)
  w_q (C, H·D), w_k, w_v (C, Hk·D), w_o (H·D, C)  the projections in the x·W convention
  q_pre (H, T, D), k_pre (Hk, T, D)  the projections (hooks on query/key, c_attn, q_proj/k_proj)
  q (H, T, D), k, v (Hk, T, D)       what the attention multiplies: after rotary embeddings
                    (transformers' apply_rotary_pos_emb with the model's own cos/sin)
  scores (H, T, T)  q·kᵀ (before scaling and masking; GQA: each query head with its kv head)
  probs (H, T, T)   output_attentions
  ctx (T, H·D)      the input of the output projection (a pre-hook on output.dense / c_proj /
                    o_proj): each head's weighted sum of values
  share (H, T, C)   ctx's head h block times W_O's rows for that head (the head's share)
Metadata: "layer", "scale" (what q·k is multiplied by), "causal" ("0"/"1").

Usage: python tools/ref_explain_model.py OUT_DIR
"""
import os
import shutil
import sys

import numpy as np
import torch
from transformers import (BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM)
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
from transformers.utils import logging as hf_logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

hf_logging.set_verbosity_error()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCE = "The animal didn't cross the street because it was too tired"


def f32(t):
    return np.ascontiguousarray(t.detach().double().numpy().astype(np.float32))


def heads(t, n):
    """(T, n·D) -> (n, T, D)"""
    T = t.shape[0]
    return t.reshape(T, n, -1).permute(1, 0, 2)


def save(out, name, ids, x, wq, wk, wv, wo, q_pre, k_pre, q, k, v, probs, ctx, layer, scale,
         causal):
    H, Hk = q.shape[0], k.shape[0]
    kk = k.repeat_interleave(H // Hk, dim=0)
    scores = q @ kk.transpose(-1, -2)
    D = q.shape[2]
    share = torch.stack([ctx[:, h * D:(h + 1) * D] @ wo[h * D:(h + 1) * D] for h in range(H)])
    t = {"ids": np.asarray(ids, dtype=np.int32), "x": f32(x), "w_q": f32(wq), "w_k": f32(wk),
         "w_v": f32(wv), "w_o": f32(wo), "q_pre": f32(q_pre), "k_pre": f32(k_pre), "q": f32(q),
         "k": f32(k), "v": f32(v), "scores": f32(scores), "probs": f32(probs), "ctx": f32(ctx),
         "share": f32(share)}
    meta = {"layer": str(layer), "scale": repr(float(scale)), "causal": "1" if causal else "0"}
    stfile.save(os.path.join(out, "explain_model", name + ".ref.safetensors"), t, meta)
    print("  explain_model/%s: layer %d, H=%d Hk=%d D=%d T=%d, max probability %.3f" %
          (name, layer, H, Hk, D, len(ids), float(probs.max())))


def hooks(modules):
    """Forward hooks keeping each module's output (and pre-hooks keeping inputs: name ending in
    '<')."""
    got, hs = {}, []
    for name, m in modules.items():
        if name.endswith("<"):
            hs.append(m.register_forward_pre_hook(
                lambda mod, inp, name=name: got.__setitem__(name, inp[0][0].detach())))
        else:
            hs.append(m.register_forward_hook(
                lambda mod, inp, out, name=name: got.__setitem__(
                    name, (out[0] if isinstance(out, tuple) else out)[0].detach())))
    return got, hs


def bert(out):
    d = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
    path = os.path.join(out, "explain_model", "bert.ref.safetensors")
    if os.path.exists(path):
        os.remove(path)
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        print("  explain_model/bert: models/all-MiniLM-L6-v2 absent (tools/get_minilm.sh): skipped")
        return
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    ids = tok.encode(SENTENCE).ids
    m = BertModel.from_pretrained(d, attn_implementation="eager").eval().double()
    layer = 3
    att = m.encoder.layer[layer].attention
    got, hs = hooks({"q": att.self.query, "k": att.self.key, "v": att.self.value,
                     "ctx<": att.output.dense})
    with torch.no_grad():
        o = m(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for h in hs:
        h.remove()
    H = m.config.num_attention_heads
    x = o.hidden_states[layer][0]
    q, k, v = (heads(got[n], H) for n in "qkv")
    save(out, "bert", ids, x, att.self.query.weight.T, att.self.key.weight.T,
         att.self.value.weight.T, att.output.dense.weight.T, q, k, q, k, v, o.attentions[layer][0],
         got["ctx<"], layer, 1.0 / np.sqrt(q.shape[2]), False)


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln" in name.split(".")[-2]:
                p.copy_((1.0 if name.endswith("weight") else 0.0) +
                        0.2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))


def fresh_dir(d):
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)


def gpt(out, gen):
    cfg = GPT2Config(vocab_size=97, n_positions=64, n_embd=48, n_layer=3, n_head=4,
                     activation_function="gelu_new", scale_attn_by_inverse_layer_idx=True,
                     attn_implementation="eager")
    m = GPT2LMHeadModel(cfg).eval()
    randomize(m, gen)
    d = os.path.join(out, "explain_model", "gpt")
    fresh_dir(d)
    m.save_pretrained(d, safe_serialization=True)
    m = m.double()
    ids = torch.randint(0, cfg.vocab_size, (1, 13), generator=gen)
    layer = 1
    blk = m.transformer.h[layer]
    got, hs = hooks({"x": blk.ln_1, "qkv": blk.attn.c_attn, "ctx<": blk.attn.c_proj})
    with torch.no_grad():
        o = m(ids, output_attentions=True)
    for h in hs:
        h.remove()
    H, C = cfg.n_head, cfg.n_embd
    q, k, v = (heads(t, H) for t in got["qkv"].split(C, dim=1))
    w = blk.attn.c_attn.weight  # Conv1D: (in, out) = x·W
    scale = 1.0 / np.sqrt(C // H) / (layer + 1)
    save(out, "gpt", ids[0].tolist(), got["x"], w[:, :C], w[:, C:2 * C], w[:, 2 * C:],
         blk.attn.c_proj.weight, q, k, q, k, v, o.attentions[layer][0], got["ctx<"], layer, scale,
         True)


def llama(out, gen):
    cfg = LlamaConfig(vocab_size=97, hidden_size=48, num_attention_heads=6, num_key_value_heads=2,
                      head_dim=8, intermediate_size=64, num_hidden_layers=2,
                      max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=100.0,
                      attention_bias=True, tie_word_embeddings=False,
                      attn_implementation="eager")
    m = LlamaForCausalLM(cfg).eval()
    randomize(m, gen)
    d = os.path.join(out, "explain_model", "llama")
    fresh_dir(d)
    m.save_pretrained(d, safe_serialization=True)
    m = m.double()
    T = 11
    ids = torch.randint(0, cfg.vocab_size, (1, T), generator=gen)
    layer = 1
    blk = m.model.layers[layer]
    a = blk.self_attn
    got, hs = hooks({"x": blk.input_layernorm, "q": a.q_proj, "k": a.k_proj, "v": a.v_proj,
                     "ctx<": a.o_proj})
    with torch.no_grad():
        o = m(ids, output_attentions=True)
        H, Hk, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        q_pre, k_pre, v = heads(got["q"], H), heads(got["k"], Hk), heads(got["v"], Hk)
        pos = torch.arange(T)[None]
        cos, sin = m.model.rotary_emb(got["x"][None], pos)
        q, k = apply_rotary_pos_emb(q_pre[None], k_pre[None], cos, sin)
    for h in hs:
        h.remove()
    save(out, "llama", ids[0].tolist(), got["x"], a.q_proj.weight.T, a.k_proj.weight.T,
         a.v_proj.weight.T, a.o_proj.weight.T, q_pre, k_pre, q[0], k[0], v,
         o.attentions[layer][0], got["ctx<"], layer, 1.0 / np.sqrt(D), True)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(os.path.join(out, "explain_model"), exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(22)
    bert(out)
    gpt(out, gen)
    llama(out, gen)


if __name__ == "__main__":
    main()
