"""PyTorch / transformers peer of bench/bench_llama.c (issue 15's Llama-family speed targets), at
ATTN_BENCH_THREADS threads (torch.set_num_threads), float32 everywhere, in .venv-bench (the newest
torch and transformers). Run by `sh bench/run.sh BUILD llama` after bench_llama, from what it
left in $ATTN_BENCH_DIR.

Generation ("smollm2 ..." and "tinyllama-1.1b ..."): LlamaForCausalLM.from_pretrained of the very
directory attn ran (models/SmolLM2-135M-Instruct; $ATTN_BENCH_DIR/tinyllama, the random weights
bench_llama saved), attn_implementation="sdpa", eval, inference_mode; the same 128-token prompt
(llama_<name>.safetensors), generate(do_sample=False, no end-of-text stop):
  prompt tokens/s = 128 / t1, t1 = generate(max_new_tokens=1): the one-pass prefill plus one
                    greedy choice
  new tokens/s    = 127 / (t128 − t1): the 127 single-token passes of generate(max_new_tokens=128)
Each in up to three configurations (ATTN_BENCH_HF_MODES, default "dynamic,static,compile"):
  dynamic  generate's default cache (DynamicCache)
  static   cache_implementation="static" (max_cache_len 256 for both calls)
  compile  the static cache plus generate's own torch.compile of the decoding step
           (CompileConfig(fullgraph=True), _compile_all_devices: transformers compiles only on
           accelerators unless asked); its compilation happens in the warm-up
after a warm-up of each; best of ATTN_BENCH_ROUNDS (2) rounds; each metric reports the fastest
configuration (the note lines give all of them and which won). A note also says how many of
attn's 128 greedy tokens transformers' own greedy tokens repeat (the same model and prompt).

Training ("train llama 6L-384 ctx256 B8"): the twin is transformers' LlamaForCausalLM of the
config.json attn wrote (attn_implementation="sdpa"), loaded with attn's initial weights, trained on
the same batches: logits → F.cross_entropy, backward, clip_grad_norm_(1.0),
torch.optim.AdamW(fused=True where this torch has the fused CPU kernel; betas 0.9/0.99, weight
decay 0.1 on the 2-D tensors), tokens/s over the same timed steps after the same warm-up steps —
eager, and torch.compile'd (the model's forward and backward; compilation falls in the warm-up
steps, ATTN_BENCH_COMPILE_WARMUP (3) more of them); the ratio is against the faster of the two
(both reported). Check: the loss of batch 0 at the initial weights beside attn's.
Environment: ATTN_BENCH_THREADS, ATTN_BENCH_DIR, ATTN_BENCH_ROUNDS, ATTN_BENCH_HF_MODES,
ATTN_BENCH_LLAMA_CASES, ATTN_BENCH_TRAIN_MODES ("eager,compile")."""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import stfile  # noqa: E402
import benchlib  # noqa: E402  (bench/ is on sys.path: the script's directory)

torch.set_num_threads(int(os.environ.get("ATTN_BENCH_THREADS", "2")))
BENCH_DIR = os.environ.get("ATTN_BENCH_DIR")


def emit(case, value):
    print(json.dumps({"bench": "llama", "case": case, "metric": "tokens/s", "value": round(value, 1)}))
    sys.stdout.flush()


def generation(label, name, model_dir):
    from transformers import CompileConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    path = os.path.join(BENCH_DIR or "", name + ".safetensors")
    if not BENCH_DIR or not os.path.exists(path):
        sys.exit(f"torch_llama.py: needs $ATTN_BENCH_DIR/{name}.safetensors from bench_llama")
    t, _ = stfile.load(path)
    prompt = torch.from_numpy(t["prompt"].astype("int64"))[None]
    attn_out = t["generated"].astype("int64").tolist()
    rounds = int(os.environ.get("ATTN_BENCH_ROUNDS", "2"))
    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                             attn_implementation="sdpa").eval()
    NP, NG = prompt.shape[1], len(attn_out)
    base = dict(do_sample=False, attention_mask=torch.ones_like(prompt), eos_token_id=None,
                pad_token_id=0)
    modes = {"dynamic": {}, "static": dict(cache_implementation="static", max_cache_len=NP + NG)}
    cc = CompileConfig(fullgraph=True)
    cc._compile_all_devices = True
    modes["compile"] = dict(modes["static"], compile_config=cc)
    wanted = (os.environ.get("ATTN_BENCH_HF_MODES") or "dynamic,static,compile").split(",")
    results, same = {}, None
    for mode in wanted:
        kw = dict(base, **modes[mode])

        def timed(n):
            t0 = time.perf_counter()
            with torch.inference_mode():
                out = model.generate(prompt, max_new_tokens=n, min_new_tokens=n, **kw)
            dt = time.perf_counter() - t0
            assert out.shape[1] == NP + n
            return dt, out[0, NP:].tolist()

        tw = time.perf_counter()
        timed(1), timed(4)  # warm-up (and the compile mode's compilation)
        tw = time.perf_counter() - tw
        best_p = best_g = 0.0
        for _ in range(rounds):
            t1, _ = timed(1)
            t128, toks = timed(NG)
            best_p = max(best_p, NP / t1)
            best_g = max(best_g, (NG - 1) / (t128 - t1))
        if same is None:
            same = next((i for i, (a, b) in enumerate(zip(toks, attn_out)) if a != b), NG)
        results[mode] = (best_p, best_g)
        print(f"note: {label} transformers {mode}: prompt {best_p:.1f} tokens/s, new "
              f"{best_g:.1f} tokens/s (warm-up {tw:.1f} s)")
    import transformers
    bp = max(results, key=lambda k: results[k][0])
    bg = max(results, key=lambda k: results[k][1])
    print(f"note: {label}: transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{model.config.num_hidden_layers} layers; fastest prompt: {bp}, fastest generation: "
          f"{bg}; transformers' greedy tokens equal attn's for the first {same} of {NG}")
    emit(f"{label} prompt {NP}", results[bp][0])
    emit(f"{label} generate {NG}", results[bg][1])
    del model


class LlamaTwin:
    """transformers' LlamaForCausalLM from attn's config and initial weights, with GPTTwin's
    interface for benchlib.timed_train: loss(x, y), optimizer(lr, wd, betas)."""

    def __init__(self, cfg, tensors, compiled):
        from transformers import LlamaConfig, LlamaForCausalLM

        conf = LlamaConfig(**{k: v for k, v in cfg.items() if k not in ("architectures",)})
        self.model = LlamaForCausalLM(conf).to(torch.float32)
        self.model.config._attn_implementation = "sdpa"
        sd = {k[2:]: torch.from_numpy(v.copy()) for k, v in tensors.items() if k.startswith("w.")}
        missing, unexpected = self.model.load_state_dict(sd, strict=False)
        if [m for m in missing if not m.endswith("rotary_emb.inv_freq")] or unexpected:
            sys.exit(f"torch_llama.py: weights do not match: missing {missing}, unexpected {unexpected}")
        self.fwd = torch.compile(self.model) if compiled else self.model

    def loss(self, x, y):
        logits = self.fwd(input_ids=x, use_cache=False).logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-1)

    def optimizer(self, lr, weight_decay, betas):
        ps = list(self.model.parameters())
        groups = [{"params": [p for p in ps if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in ps if p.dim() < 2], "weight_decay": 0.0}]
        try:
            return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=1e-8, fused=True), True
        except (RuntimeError, ValueError):
            return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=1e-8), False


def training():
    t, meta, cfg, x, y = benchlib.load_train("llama_train")
    warm, steps = int(meta["n_warmup"]), int(meta["n_steps"])
    res = {}
    for mode in (os.environ.get("ATTN_BENCH_TRAIN_MODES") or "eager,compile").split(","):
        compiled = mode == "compile"
        twin = LlamaTwin(cfg, t, compiled)
        twin.model.eval()
        with torch.no_grad():
            first = twin.loss(x[0], y[0]).item()
        twin.model.train()
        opt, fused = twin.optimizer(float(meta["lr"]), float(meta["weight_decay"]),
                                    (float(meta["beta1"]), float(meta["beta2"])))
        extra = int(os.environ.get("ATTN_BENCH_COMPILE_WARMUP", "3")) if compiled else 0
        xs, ys = torch.cat([x[:extra], x]), torch.cat([y[:extra], y])
        tw = time.perf_counter()
        tok_s, last = benchlib.timed_train(twin.loss, twin.model.parameters(), opt, xs, ys,
                                           warm + extra, steps, float(meta["grad_clip"]))
        tw = time.perf_counter() - tw
        res[mode] = tok_s
        print(f"note: train {mode}: first loss {first:.6f} (attn {float(meta['first_loss']):.6f}), "
              f"last loss {last:.4f}, fused AdamW {fused}, sdpa, torch {torch.__version__}, "
              f"{steps} timed steps after {warm + extra}, {tok_s:.1f} tokens/s ({tw:.0f} s in all)")
    best = max(res, key=res.get)
    print(f"note: train: the faster twin is {best}")
    emit("train llama 6L-384 ctx256 B8", res[best])


if __name__ == "__main__":
    cases = os.environ.get("ATTN_BENCH_LLAMA_CASES") or "smollm2,tinyllama,train"
    if "smollm2" in cases:
        generation("smollm2", "llama_smollm2", os.path.join(ROOT, "models/SmolLM2-135M-Instruct"))
    if "tinyllama" in cases:
        generation("tinyllama-1.1b", "llama_tinyllama", os.path.join(BENCH_DIR or "", "tinyllama"))
    if "train" in cases:
        training()
