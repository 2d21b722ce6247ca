"""PyTorch peer of bench/bench_gpt.c's generation cases: transformers' GPT2LMHeadModel with a
GPT-2-124M configuration (GPT2Config() defaults: 12 layers, 12 heads, width 768, vocabulary 50257,
context 1024), random weights, float32, eval mode, at ATTN_BENCH_THREADS threads; a 128-token
prompt (the ids bench_gpt wrote to $ATTN_BENCH_DIR/gpt_generate.safetensors, else random), then
128 new tokens with generate(do_sample=False, use_cache=True) — the KV cache — and no early stop.

  prompt tokens/s = 128 / t1, where t1 is generate(max_new_tokens=1): the one-pass prefill (plus
                    one greedy choice)
  new tokens/s    = 127 / (t128 − t1): the 127 single-token passes of generate(max_new_tokens=128)
Both the best of ATTN_BENCH_ROUNDS (2) rounds. The same definitions as attn's side (bench_gpt.c:
the prompt pass, then 127 decode steps). ATTN_BENCH_GEN_LAYERS overrides the layer count (smoke
runs; it must match bench_gpt's). Standalone: .venv-bench/bin/python bench/torch_gpt_generate.py"""
import json
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))


def run():
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging
    import stfile

    hf_logging.set_verbosity_error()
    torch.set_num_threads(int(os.environ.get("ATTN_BENCH_THREADS", "2")))
    layers = int(os.environ.get("ATTN_BENCH_GEN_LAYERS", "12"))
    rounds = int(os.environ.get("ATTN_BENCH_ROUNDS", "2"))
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers)
    model = GPT2LMHeadModel(cfg).float().eval()
    d = os.environ.get("ATTN_BENCH_DIR")
    p = os.path.join(d, "gpt_generate.safetensors") if d else None
    if p and os.path.exists(p):
        prompt = torch.from_numpy(stfile.load(p)[0]["prompt"].astype("int64"))[None]
    else:
        prompt = torch.randint(0, cfg.vocab_size, (1, 128))
    mask = torch.ones_like(prompt)
    kw = dict(do_sample=False, use_cache=True, attention_mask=mask, pad_token_id=cfg.eos_token_id,
              eos_token_id=None)

    def timed(n):
        t = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(prompt, max_new_tokens=n, min_new_tokens=n, **kw)
        t = time.perf_counter() - t
        assert out.shape[1] == prompt.shape[1] + n
        return t

    timed(4)  # warm-up
    best_p = best_g = 0.0
    for _ in range(rounds):
        t1 = timed(1)
        t128 = timed(128)
        best_p = max(best_p, prompt.shape[1] / t1)
        best_g = max(best_g, 127 / (t128 - t1))
    import transformers
    print(f"note: transformers {transformers.__version__}, torch {torch.__version__}, "
          f"attn_implementation={model.config._attn_implementation}, {layers} layers")
    for case, v in (("generate 124M prompt 128", best_p), ("generate 124M new 128", best_g)):
        print(json.dumps({"bench": "gpt", "case": case, "metric": "tokens/s", "value": round(v, 1)}))
    sys.stdout.flush()


if __name__ == "__main__":
    run()
