"""PyTorch/transformers references for tests/test_gpt.c (GPT-2, include/attn_gpt.h).

Writes into OUT/gpt/ several random-weight GPT-2 model directories made by transformers'
save_pretrained (safe_serialization), each with reference outputs beside it in OUT/gpt/NAME.ref/:
  ref.json        {"ids": [[...]] (B, T), "prompt": [...], "greedy": [...] (the new tokens of
                   model.generate(do_sample=False)), "targets": [[...]], "loss": float, ...}
  logits.npy      (B, T, V) float32, model(ids).logits in eval mode
  hidden.npy      (L + 1, B, T, C) float32, output_hidden_states
  grads.safetensors  d loss / d parameter for every parameter (HF names, tied weights once),
                  computed in float64 (model.double()), stored as F64
Models (shapes chosen to cover the configuration space):
  tiny       2 layers, n_embd 64, 4 heads, vocab 97, gelu_new, tied         (GPT2LMHeadModel)
  odd        3 layers, n_embd 48, 3 heads, vocab 101, n_inner 80, gelu (erf), untied lm_head
  relu       2 layers, n_embd 32, 2 heads, relu, scale_attn_by_inverse_layer_idx, eps 1e-6
  trunk_f16  the tiny shape saved by GPT2Model (no "transformer." prefix) in float16; its
             references use the float16-rounded weights
  sharded    the tiny shape saved in several shards (model.safetensors.index.json), bfloat16
Weights are drawn larger than GPT-2's initialization (std 0.2, random biases and LayerNorm
weights) so that every parameter matters and greedy generation has clear margins.

Usage: python tools/ref_gpt.py OUT_DIR
"""
import json
import os
import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

hf_logging.set_verbosity_error()

# Debian's torch 1.13 under Python 3.11 cannot import torch.distributed.fsdp, which generate()
# probes; nothing here is distributed.
try:
    import transformers.generation.utils as _gen_utils
    _gen_utils.is_fsdp_managed_module = lambda module: False
except (ImportError, AttributeError):
    pass


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or \
                    name.endswith("ln_f.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))


def save_st_f64(path, tensors):
    import stfile
    stfile.save(path, {k: v.detach().double().numpy() for k, v in tensors.items()})


def make(out, name, cfg_kwargs, seed, B=2, T=None, trunk=False, dtype=None, shard=None):
    gen = torch.Generator().manual_seed(seed)
    cfg = GPT2Config(**cfg_kwargs)
    model = GPT2LMHeadModel(cfg).eval()
    randomize(model, gen)
    if dtype is not None:
        # The references use the weights as stored (rounded to the storage type).
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(dtype).float())
    d = os.path.join(out, "gpt", name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    saver = model.transformer if trunk else model
    if dtype is not None:
        saver = saver.to(dtype)
    kw = {"safe_serialization": True}
    if shard:
        kw["max_shard_size"] = shard
    saver.save_pretrained(d, **kw)
    if dtype is not None:
        model = model.float()
        saver.float()
    if trunk:
        # GPT2Model's config says GPT2Model; attn reads it as the LM with tied embeddings.
        pass

    V, P = cfg.vocab_size, cfg.n_positions
    T = T or min(P, 13)
    ids = torch.randint(0, V, (B, T), generator=gen)
    rd = os.path.join(out, "gpt", name + ".ref")
    os.makedirs(rd, exist_ok=True)
    with torch.no_grad():
        o = model(ids, output_hidden_states=True)
    np.save(os.path.join(rd, "logits.npy"), o.logits.float().numpy().astype(np.float32))
    hid = torch.stack(o.hidden_states, 0)  # (L + 1, B, T, C)
    np.save(os.path.join(rd, "hidden.npy"), hid.float().numpy().astype(np.float32))

    # Greedy generation from a prompt (B = 1), 20 new tokens.
    Tp = min(7, P - 20)
    prompt = torch.randint(0, V, (1, Tp), generator=gen)
    with torch.no_grad():
        g = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                           max_new_tokens=20, min_new_tokens=20, pad_token_id=0,
                           eos_token_id=None)
    greedy = g[0, Tp:].tolist()
    # The top-2 margin of every greedy step (from a full recompute), so the test can tell a
    # genuine mismatch from a near tie.
    with torch.no_grad():
        full = model(g).logits[0, Tp - 1:-1]
    top2 = torch.topk(full, 2, dim=-1).values
    margin = float((top2[:, 0] - top2[:, 1]).min())

    # One training step's loss and gradients in float64 (eval mode: no dropout).
    targets = torch.randint(0, V, (B, T), generator=gen)
    targets[0, 0] = -1
    targets[B - 1, T - 1] = -1
    m64 = GPT2LMHeadModel(cfg).eval()
    m64.load_state_dict(model.state_dict())
    m64 = m64.double()
    logits = m64(ids).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1),
                                             ignore_index=-1)
    loss.backward()
    grads = {}
    for n, p in m64.named_parameters():  # tied weights appear once (as transformer.wte.weight)
        grads[n] = p.grad
    save_st_f64(os.path.join(rd, "grads.safetensors"), grads)

    ref = {"ids": ids.tolist(), "prompt": prompt[0].tolist(), "greedy": greedy,
           "greedy_min_margin": margin, "targets": targets.tolist(), "loss": float(loss),
           "max_abs_logit": float(o.logits.abs().max())}
    with open(os.path.join(rd, "ref.json"), "w") as f:
        json.dump(ref, f)
    print(f"  gpt/{name}: V={V} C={cfg.n_embd} L={cfg.n_layer} H={cfg.n_head} "
          f"loss={float(loss):.6f} greedy margin {margin:.3g}")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    torch.manual_seed(0)
    make(out, "tiny", dict(vocab_size=97, n_positions=32, n_embd=64, n_layer=2, n_head=4), 1)
    make(out, "odd", dict(vocab_size=101, n_positions=40, n_embd=48, n_layer=3, n_head=3,
                          n_inner=80, activation_function="gelu", tie_word_embeddings=False,
                          layer_norm_epsilon=1e-5), 2, B=3, T=11)
    make(out, "relu", dict(vocab_size=50, n_positions=30, n_embd=32, n_layer=2, n_head=2,
                           activation_function="relu", scale_attn_by_inverse_layer_idx=True,
                           layer_norm_epsilon=1e-6), 3, B=1, T=30)
    make(out, "trunk_f16", dict(vocab_size=97, n_positions=32, n_embd=64, n_layer=2, n_head=4),
         4, trunk=True, dtype=torch.float16)
    make(out, "sharded", dict(vocab_size=97, n_positions=32, n_embd=64, n_layer=2, n_head=4),
         5, dtype=torch.bfloat16, shard="20KB")


if __name__ == "__main__":
    main()
