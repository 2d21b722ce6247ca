"""transformers twin of `attn train --arch llama` for tests/test_gpt_train.c's Llama group.
Usage: ref_llama_train.py OUTDIR  (writes OUTDIR/llama_train/).

As tools/ref_gpt_train.py (whose sampler, schedule and training loop it reuses), with
transformers' own LlamaForCausalLM as the model: attn's initial checkpoint of a tiny Llama (2
layers, 4 query and 2 key/value heads, width 32, SwiGLU width 64, context 16, untied head) made
with --max-steps 0 is loaded into LlamaForCausalLM (eager attention) and
  - one step's loss and gradients (2 accumulated micro-batches) in float64: grads.safetensors;
  - the step-0 validation loss on attn's validation batches;
  - the 10-step loss trajectory (AdamW, decay on 2-D tensors, warmup + cosine, clipping,
    accumulation 2) in float32 and float64
go into ref.json, in the layout test_gpt_train.c reads."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import ref_gpt_train as g  # noqa: E402


class LlamaTwin:
    """transformers' LlamaForCausalLM behind the small interface ref_gpt_train's loop uses."""

    def __init__(self, init_dir, dtype):
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig.from_pretrained(init_dir)
        cfg._attn_implementation = "eager"
        self.model = LlamaForCausalLM(cfg).to(dtype)
        self.model.train()

    def parameters(self):
        return self.model.parameters()

    def named_hf(self):
        return list(self.model.named_parameters())

    def load_hf(self, tensors):
        with torch.no_grad():
            for n, p in self.named_hf():
                p.copy_(torch.from_numpy(np.array(tensors[n])).to(p.dtype))

    def loss(self, idx, targets):
        logits = self.model(input_ids=idx).logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               ignore_index=-1)

    def optimizer(self, lr, weight_decay, betas, eps=1e-8):
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        nodecay = [p for p in self.model.parameters() if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": nodecay, "weight_decay": 0.0}], lr=lr, betas=betas,
                                 eps=eps)


def main():
    cfg_in = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "hidden_size": 32, "intermediate_size": 64,
              "max_position_embeddings": 16, "rms_norm_eps": 1e-5, "initializer_range": 0.1}
    g.make_reference(sys.argv[1] if len(sys.argv) > 1 else "build/ref", "llama_train", "llama",
                     cfg_in, lambda init, cfg, dt: LlamaTwin(init, dt))


if __name__ == "__main__":
    main()
