"""transformers references for tests/test_compose.c: a Llama-style decoder composed from the
block layer (include/attn_nn.h) checked against transformers' own LlamaForCausalLM.

    .venv/bin/python tools/ref_compose.py OUTDIR
      ->  OUTDIR/compose/<model>/{config.json, model.safetensors}   (save_pretrained, float32)
          OUTDIR/compose.safetensors                                (inputs and expected values)

Two tiny random models (grouped-query heads, untied lm_head, no biases): rope_theta 10000 with
head_dim = hidden / heads, and rope_theta 500000 with multi-query heads and head_dim != hidden /
heads. The weights are drawn in float32 (larger than transformers' initializer_range, so every
path carries signal) and saved as float32; the expected logits, loss and gradients come from the
same model in float64 (model.double(), eager attention; transformers still builds the rotary
angles in float32, as attn_rope_tables does), so the C test measures only its own error.
Stored per model M:
  M.ids, M.targets (B, T) int32: the batch and its next-token targets (-100: ignored);
  M.logits (B, T, V) float64 model's logits; M.logits_f32 the float32 model's (for comparison);
  M.loss () cross_entropy(logits, targets, ignore_index=-100), mean over the counted rows;
  M.grad.NAME d loss / d parameter for every tensor NAME of model.safetensors;
  M.inv_freq the rotary module's inv_freq (float32).
Metadata "models": the model names, comma-separated."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

MODELS = [
    ("llama_gqa_theta1e4", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                head_dim=16, intermediate_size=96, num_hidden_layers=2,
                                vocab_size=97, rope_theta=10000.0, rms_norm_eps=1e-6)),
    ("llama_mqa_theta5e5", dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                                head_dim=24, intermediate_size=80, num_hidden_layers=2,
                                vocab_size=97, rope_theta=500000.0, rms_norm_eps=1e-5)),
]
B, T = 2, 12


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(os.path.join(outdir, "compose"), exist_ok=True)
    torch.manual_seed(20261201)
    tensors = {}
    for name, kw in MODELS:
        cfg = LlamaConfig(max_position_embeddings=64, tie_word_embeddings=False,
                          attention_bias=False, mlp_bias=False, **kw)
        cfg._attn_implementation = "eager"
        model = LlamaForCausalLM(cfg).float().eval()
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname.endswith("norm.weight") or "layernorm" in pname:
                    p.copy_(1 + 0.2 * torch.randn_like(p))
                elif "embed_tokens" in pname:
                    p.copy_(torch.randn_like(p))
                else:
                    p.copy_(0.1 * torch.randn_like(p))
        model.save_pretrained(os.path.join(outdir, "compose", name), safe_serialization=True)

        g = torch.Generator().manual_seed(7)
        ids = torch.randint(0, cfg.vocab_size, (B, T), generator=g)
        targets = torch.cat([ids[:, 1:], torch.full((B, 1), -100)], 1)
        targets[1, 4] = -100  # an ignored row inside the sequence
        with torch.no_grad():
            logits32 = model(input_ids=ids).logits
        m64 = model.double()
        logits = m64(input_ids=ids).logits
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), targets.reshape(-1),
                               ignore_index=-100)
        loss.backward()
        p = name + "."
        tensors[p + "ids"] = ids.to(torch.int32).numpy()
        tensors[p + "targets"] = targets.to(torch.int32).numpy()
        tensors[p + "logits"] = logits.detach().float().numpy()
        tensors[p + "logits_f32"] = logits32.numpy()
        tensors[p + "loss"] = np.array(loss.item(), dtype=np.float32)
        tensors[p + "inv_freq"] = m64.model.rotary_emb.inv_freq.float().numpy()
        for pname, prm in m64.named_parameters():
            tensors[p + "grad." + pname] = prm.grad.float().numpy()
    stfile.save(os.path.join(outdir, "compose.safetensors"), tensors,
                {"models": ",".join(n for n, _ in MODELS), "B": str(B), "T": str(T)})


if __name__ == "__main__":
    main()
