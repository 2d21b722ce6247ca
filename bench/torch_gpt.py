"""PyTorch peer of bench/bench_gpt.c (issue 4's GPT targets), at ATTN_BENCH_THREADS threads.

The model is tools/ref_gpt_train.py's GPTTwin: nanoGPT's GPT written against Hugging Face's tensor
layout (pre-LN blocks, learned positions, tied embeddings, GELU tanh form), plain float32, eager,
F.scaled_dot_product_attention(is_causal=True) as nanoGPT uses it (torch >= 2), torch.optim.AdamW
with nanoGPT's parameter groups (weight decay on the 2-D tensors), clip_grad_norm_.

  torch_gpt.py                 (run by bench/run.sh after bench_gpt) the training-throughput twin
                               of bench_gpt's case (1): the same initial weights, batches and
                               settings from $ATTN_BENCH_DIR/gpt_train.safetensors, dropout with
                               torch's masks at the same places and rate; tokens/s over the same
                               timed steps; the check "first loss" (batch 0, initial weights, no
                               dropout) beside attn's. Then bench/torch_gpt_generate.py's cases.
  torch_gpt.py --shakespeare --init DIR --data FILE [--steps 2000 ...]
                               (run by bench/gpt_shakespeare.sh) nanoGPT's shakespeare-char CPU
                               run with the twin: from the initial weights of an attn checkpoint
                               DIR (attn train ... --max-steps 0), on the very batches attn draws
                               (tools/ref_gpt_train.py re-implements the trainer's Philox sampler),
                               lr warmup + cosine, clipping; at the end the validation loss over
                               the trainer's fixed validation batches. Prints one JSON line
                               {"val_loss", "train_loss", "seconds", "steps"}; seconds is the
                               wall time of the training loop plus the final evaluation."""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import stfile  # noqa: E402
import benchlib  # noqa: E402  (bench/ is on sys.path: the script's directory)
from ref_gpt_train import GPTTwin, get_lr, train_batch, valid_batch  # noqa: E402

torch.set_num_threads(int(os.environ.get("ATTN_BENCH_THREADS", "2")))


def throughput():
    t, meta, cfg, x, y = benchlib.load_train("gpt_train")
    warm, steps = int(meta["n_warmup"]), int(meta["n_steps"])
    B, T = x.shape[1], x.shape[2]
    tok_s, first, last, sdpa = train_steps(t, meta, cfg, x, y, warm, steps, False)
    print(f"note: train: first loss {first:.6f} (attn {float(meta['first_loss']):.6f}), last loss "
          f"{last:.4f}, dropout {cfg['resid_pdrop']:.2f}, sdpa {sdpa}, torch "
          f"{torch.__version__}, {steps} timed steps, {tok_s:.1f} tokens/s")
    rows = [("train char 6L-384 ctx256 B8", tok_s)]
    if meta.get("bf16") == "1":
        # attn's opt-in bf16 against this float32 twin (the peer) and against the twin
        # under CPU autocast to bfloat16 (the same-precision peer)
        rows.append(("train 6L, attn bf16 vs torch f32", tok_s))
        tok16, _, last16, _ = train_steps(t, meta, cfg, x, y, warm, steps, True)
        print(f"note: train autocast bf16: last loss {last16:.4f}, {tok16:.1f} tokens/s")
        rows.append(("train 6L, attn bf16 vs torch bf16", tok16))
    for case, v in rows:
        print(json.dumps({"bench": "gpt", "case": case, "metric": "tokens/s", "value": round(v, 1)}))
    sys.stdout.flush()


def train_steps(t, meta, cfg, x, y, warm, steps, bf16):
    """(tokens/s over the timed steps, first loss, last loss, sdpa) of the twin from the initial
    weights; bf16: under torch.autocast("cpu", dtype=torch.bfloat16)."""
    import contextlib
    model = GPTTwin(cfg, torch.float32)
    model.load_hf({k[2:]: v for k, v in t.items() if k.startswith("w.")})
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    model.eval()
    with torch.no_grad():
        first = model.loss(x[0], y[0]).item()
    model.train()
    opt = model.optimizer(float(meta["lr"]), float(meta["weight_decay"]),
                          (float(meta["beta1"]), float(meta["beta2"])))
    tok_s, last = benchlib.timed_train(model.loss, model.parameters(), opt, x, y, warm, steps,
                                       float(meta["grad_clip"]), ctx)
    return tok_s, first, last, model.sdpa


def shakespeare(a):
    with open(os.path.join(a.init, "config.json")) as f:
        cfg = json.load(f)
    weights, _ = stfile.load(os.path.join(a.init, "model.safetensors"))
    with open(a.data, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))  # nanoGPT's vocabulary = attn's character tokenizer
    assert len(chars) <= cfg["vocab_size"]
    stoi = {c: i for i, c in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.int64)
    n = len(ids)
    tr, va = ids[:int(n * 0.9)], ids[int(n * 0.9):]
    T = cfg["n_positions"]
    torch.manual_seed(a.seed)
    model = GPTTwin(cfg, torch.float32)
    model.load_hf(weights)
    model.train()
    opt = model.optimizer(a.lr, a.weight_decay, (a.beta1, a.beta2))
    t0 = time.perf_counter()
    loss = None
    for step in range(a.steps):
        lr = get_lr(step, a.lr, a.min_lr, a.warmup, a.decay or a.steps)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = train_batch(tr, a.batch, T, a.seed, step, 1, 0)
        loss = model.loss(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if a.log_every and (step + 1) % a.log_every == 0:
            print(f"  torch step {step + 1}: loss {loss.item():.4f}, {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr)
    model.eval()
    with torch.no_grad():
        vl = [model.loss(*map(torch.from_numpy, valid_batch(va, a.batch, T, a.seed, k))).item()
              for k in range(a.eval_iters)]
    dt = time.perf_counter() - t0
    print(json.dumps({"val_loss": sum(vl) / len(vl), "train_loss": loss.item() if loss is not None
                      else None, "seconds": dt, "steps": a.steps, "torch": torch.__version__}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--shakespeare", action="store_true")
    ap.add_argument("--init")
    ap.add_argument("--data")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--decay", type=int, default=0)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.99)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--eval-iters", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=0)
    args = ap.parse_args()
    if args.shakespeare:
        shakespeare(args)
    else:
        cases = os.environ.get("ATTN_BENCH_GPT_CASES") or "train,generate"
        if "train" in cases:
            throughput()
        if "generate" in cases:
            import torch_gpt_generate  # noqa: E402  (bench/ is on sys.path: the script's directory)
            torch_gpt_generate.run()
