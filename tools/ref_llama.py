"""transformers references for tests/test_llama.c: the Llama family (LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM) as attn_gpt.h loads it from Hugging Face directories.

    .venv/bin/python tools/ref_llama.py OUTDIR
      ->  OUTDIR/llama/<model>/{config.json, model.safetensors, generation_config.json}
          OUTDIR/llama.safetensors   (inputs and expected values)

Tiny random models, several shapes per family: grouped-query ratios 1, 3 and 8 (multi-query),
head_dim equal to and different from hidden / heads, tied and untied embeddings, every
rope_scaling type attn reads (none, linear, llama3), q/k/v (and o, MLP) biases, Mistral's sliding
window shorter than the sequence. The weights are drawn in float32 (larger than transformers'
initializer_range, so every path carries signal) and saved in float32 — one model in bfloat16 and
one in float16, and one split into two shards, so the loader's conversions and the sharded index
are exercised. The expected logits, hidden states, loss and gradients come from the same model in
float64 (model.double(), eager attention; transformers still builds the rotary angles in float32,
as attn does), so the C test measures attn's own float32 error. Stored per model M:
  M.ids, M.targets (B, T) int32: a batch and its next-token targets (-100: ignored);
  M.logits (B, T, V) float64 model's logits, M.logits_f32 the float32 model's;
  M.hidden (L + 1, B, T, C) output_hidden_states (the last entry after the final norm);
  M.attn (L, B, H, T, T) output_attentions: every query head's probabilities;
  M.loss () cross_entropy(logits, targets, ignore_index=-100);
  M.grad.NAME d loss / d parameter for every tensor NAME;
  M.prompt (P) int32 and M.greedy (N) int32: greedy decoding of the float32 model with its KV
  cache (transformers' past_key_values), N = 64 new tokens; M.greedy_gap (N) the top-1 minus
  top-2 logit at each step (how far each choice is from a tie);
  M.inv_freq the rotary module's inv_freq (float32);
  M.logits_kv16 (B, T, V) the float64 model's logits with every key (after the rotary embedding)
  and value rounded to float16 before attention reads it: what attn's float16 KV cache
  (attn_gpt_kv_params.f16, --kv-type f16) stores.
Metadata "models": the names, comma-separated; "B", "T"."""
import copy
import importlib
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig,  # noqa: E402
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)

COMMON = dict(max_position_embeddings=128, vocab_size=97, rms_norm_eps=1e-6)
MODELS = [
    # (name, class, config class, kwargs, save dtype, shard size)
    ("llama_mha_tied", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, intermediate_size=96,
          num_hidden_layers=2, tie_word_embeddings=True, rope_theta=10000.0), None, None),
    ("llama_gqa3_linear_bf16", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=48, num_attention_heads=6, num_key_value_heads=2, head_dim=12,
          intermediate_size=80, num_hidden_layers=2, tie_word_embeddings=False,
          rope_scaling={"rope_type": "linear", "factor": 2.0}, rms_norm_eps=1e-5),
     torch.bfloat16, None),
    ("llama_mqa8_llama3_bias", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=1, head_dim=8,
          intermediate_size=72, num_hidden_layers=3, tie_word_embeddings=False,
          attention_bias=True, mlp_bias=True, rope_theta=500000.0,
          rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
     None, "64KB"),
    ("mistral_window5_f16", MistralForCausalLM, MistralConfig,
     dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
          num_hidden_layers=2, tie_word_embeddings=False, sliding_window=5), torch.float16, None),
    ("qwen2_gqa3_tied", Qwen2ForCausalLM, Qwen2Config,
     dict(hidden_size=48, num_attention_heads=6, num_key_value_heads=2, intermediate_size=64,
          num_hidden_layers=2, tie_word_embeddings=True, rope_theta=1000000.0), None, None),
]
B, T = 2, 16
PROMPT, NEW = 8, 64


def init_weights(model):
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight") or "layernorm" in pname:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif "embed_tokens" in pname:
                p.copy_(torch.randn_like(p))
            elif pname.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "lm_head" in pname:
                p.copy_(0.3 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))


def greedy(model, prompt):
    """Greedy decoding with transformers' KV cache; the tokens and each step's top-2 gap."""
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


def kv16_logits(model, ids):
    """model's logits on ids with each key (after the rotary embedding) and each value rounded to
    float16 and back before attention reads it, as a float16 KV cache holds them (llama.cpp's
    default cache type; attn's --kv-type f16). The family's own apply_rotary_pos_emb (in its
    modeling module) is wrapped for the keys, and a hook on v_proj rounds the values (after
    their bias)."""
    mod = importlib.import_module(type(model).__module__)  # the family's modeling_*.py
    saved = [(mod, mod.apply_rotary_pos_emb)]

    def rounding(rope):
        def wrapped(q, k, *args, **kwargs):
            q, k = rope(q, k, *args, **kwargs)
            return q, k.half().to(k.dtype)
        return wrapped

    hooks = [layer.self_attn.v_proj.register_forward_hook(
        lambda _m, _i, out: out.half().to(out.dtype)) for layer in model.model.layers]
    try:
        for mod, rope in saved:
            mod.apply_rotary_pos_emb = rounding(rope)
        with torch.no_grad():
            return model(input_ids=ids).logits.float().numpy()
    finally:
        for mod, rope in saved:
            mod.apply_rotary_pos_emb = rope
        for h in hooks:
            h.remove()


def run(models, outdir, name):
    """Writes OUTDIR/NAME/<model>/ and OUTDIR/NAME.safetensors for models (MODELS' layout)."""
    os.makedirs(os.path.join(outdir, name), exist_ok=True)
    torch.manual_seed(20261202)
    tensors = {}
    for mname, cls, cfg_cls, kw, dtype, shard in models:
        cfg = cfg_cls(**dict(COMMON, **kw))
        cfg._attn_implementation = "eager"
        model = cls(cfg).float().eval()
        init_weights(model)
        if dtype is not None:
            # Round the weights to the stored type, so that float32 and float64 references are
            # the model attn loads.
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(p.to(dtype).float())
        d = os.path.join(outdir, name, mname)
        # A copy is converted for saving: .to() would also round the rotary inv_freq buffer.
        save = copy.deepcopy(model).to(dtype) if dtype is not None else model
        kwargs = {"safe_serialization": True}
        if shard:
            kwargs["max_shard_size"] = shard
        save.save_pretrained(d, **kwargs)
        del save

        g = torch.Generator().manual_seed(11)
        ids = torch.randint(0, cfg.vocab_size, (B, T), generator=g)
        targets = torch.cat([ids[:, 1:], torch.full((B, 1), -100)], 1)
        targets[1, 5] = -100
        prompt = torch.randint(0, cfg.vocab_size, (PROMPT,), generator=g)
        with torch.no_grad():
            logits32 = model(input_ids=ids).logits
        toks, gaps = greedy(model, prompt)
        m64 = model.double()
        out = m64(input_ids=ids, output_hidden_states=True, output_attentions=True)
        loss = F.cross_entropy(out.logits.reshape(-1, cfg.vocab_size), targets.reshape(-1),
                               ignore_index=-100)
        loss.backward()
        p = mname + "."
        tensors[p + "ids"] = ids.to(torch.int32).numpy()
        tensors[p + "targets"] = targets.to(torch.int32).numpy()
        tensors[p + "logits"] = out.logits.detach().float().numpy()
        tensors[p + "logits_f32"] = logits32.numpy()
        tensors[p + "hidden"] = torch.stack(out.hidden_states).detach().float().numpy()
        tensors[p + "attn"] = torch.stack(out.attentions).detach().float().numpy()
        tensors[p + "loss"] = np.array(loss.item(), dtype=np.float32)
        tensors[p + "prompt"] = prompt.to(torch.int32).numpy()
        tensors[p + "greedy"] = toks
        tensors[p + "greedy_gap"] = gaps
        tensors[p + "inv_freq"] = m64.model.rotary_emb.inv_freq.float().numpy()
        tensors[p + "logits_kv16"] = kv16_logits(m64, ids)
        for pname, prm in m64.named_parameters():
            tensors[p + "grad." + pname] = prm.grad.float().numpy()
        print(f"ref {name}: {mname}: {cls.__name__}, min greedy gap {gaps.min():.3g}")
    stfile.save(os.path.join(outdir, name + ".safetensors"), tensors,
                {"models": ",".join(m[0] for m in models), "B": str(B), "T": str(T)})


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    run(MODELS, outdir, "llama")


if __name__ == "__main__":
    main()
