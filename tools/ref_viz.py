"""transformers references for tests/test_viz_models.c: attention probabilities
(output_attentions) of random-weight GPT-2 and BERT models, and of the real all-MiniLM-L6-v2 when
models/all-MiniLM-L6-v2 is present.

Writes into OUT/viz/:
  gpt/, bert/          model directories (save_pretrained, safetensors; no tokenizer)
  gpt.ref.safetensors  "ids" (T,) I32 and "self.L" (H, T, T) F32 for every layer: the
  bert.ref.safetensors attentions transformers returns with output_attentions=True (eager
                       attention, evaluation mode, batch 1, no padding)
  minilm.ref.safetensors  the same for all-MiniLM-L6-v2 on the article's sentence
                       "The animal didn't cross the street because it was too tired"
                       (ids from the model's own tokenizer, [CLS] ... [SEP])
Weights are drawn larger than the models' initialization (std 0.2, random biases and LayerNorm
weights) so that the attention is far from uniform and every parameter matters.

Usage: python tools/ref_viz.py OUT_DIR
"""
import os
import shutil
import sys

import numpy as np
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

hf_logging.set_verbosity_error()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name.split(".")[-2].lower() or "LayerNorm" in name:
                if name.endswith("weight"):
                    p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
                else:
                    p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))


def save(path, ids, attentions):
    t = {"ids": np.asarray(ids, dtype=np.int32)}
    for layer, a in enumerate(attentions):
        t["self.%d" % layer] = a[0].float().numpy().astype(np.float32)  # (H, T, T)
    stfile.save(path, t)


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
    d = os.path.join(out, "viz", "gpt")
    fresh_dir(d)
    m.save_pretrained(d, safe_serialization=True)
    ids = torch.randint(0, cfg.vocab_size, (1, 17), generator=gen)
    with torch.no_grad():
        o = m(ids, output_attentions=True)
    save(os.path.join(out, "viz", "gpt.ref.safetensors"), ids[0].tolist(), o.attentions)
    print("  viz/gpt: L=%d H=%d T=%d, max attention %.3f" %
          (cfg.n_layer, cfg.n_head, ids.shape[1], max(float(a.max()) for a in o.attentions)))


def bert(out, gen):
    cfg = BertConfig(vocab_size=101, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=80, max_position_embeddings=64,
                     attn_implementation="eager")
    m = BertModel(cfg, add_pooling_layer=True).eval()
    randomize(m, gen)
    d = os.path.join(out, "viz", "bert")
    fresh_dir(d)
    m.save_pretrained(d, safe_serialization=True)
    ids = torch.randint(0, cfg.vocab_size, (1, 15), generator=gen)
    with torch.no_grad():
        o = m(ids, output_attentions=True)
    save(os.path.join(out, "viz", "bert.ref.safetensors"), ids[0].tolist(), o.attentions)
    print("  viz/bert: L=%d H=%d T=%d, max attention %.3f" %
          (cfg.num_hidden_layers, cfg.num_attention_heads, ids.shape[1],
           max(float(a.max()) for a in o.attentions)))


def minilm(out):
    d = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
    path = os.path.join(out, "viz", "minilm.ref.safetensors")
    if os.path.exists(path):
        os.remove(path)
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        print("  viz/minilm: models/all-MiniLM-L6-v2 absent (tools/get_minilm.sh): skipped")
        return
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    ids = tok.encode("The animal didn't cross the street because it was too tired").ids
    m = BertModel.from_pretrained(d, attn_implementation="eager").eval()
    with torch.no_grad():
        o = m(torch.tensor([ids]), output_attentions=True)
    save(path, ids, o.attentions)
    print("  viz/minilm: %d tokens, %d layers" % (len(ids), len(o.attentions)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(os.path.join(out, "viz"), exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(6)
    gpt(out, gen)
    bert(out, gen)
    minilm(out)


if __name__ == "__main__":
    main()
