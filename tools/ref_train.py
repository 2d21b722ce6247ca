"""PyTorch references for the training utilities (src/train/, include/attn_train.h), written to
OUTDIR/train.safetensors for tests/test_train.c:

  optimizer cases  torch.optim.Adam / AdamW / SGD in float32 (what the C code runs in) on a flat
                   parameter vector split into three tensors, the middle one in a weight_decay=0
                   parameter group (the C side's no-decay range); 10 steps with fixed gradients and
                   a learning rate that changes every step. Expected parameters after every step.
  clipping         torch.nn.utils.clip_grad_norm_ over three gradient tensors: the returned norm
                   and the clipped gradients, once clipping and once below the threshold.
  schedules        the reference formulas (nanoGPT get_lr, Hugging Face
                   get_linear_schedule_with_warmup driven through torch's LambdaLR, the Annotated
                   Transformer's Noam rate) evaluated at a set of steps, in float64.

Case parameters travel as JSON in the safetensors __metadata__."""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

N = 777
SPLIT = (300, 350)  # [300, 350) is the no-decay group
STEPS = 10

OPT_CASES = [
    # name, kind, kwargs, weight decay of the decay group
    ("adam", "adam", dict(betas=(0.9, 0.999), eps=1e-8), 0.0),
    ("adam_l2", "adam", dict(betas=(0.9, 0.98), eps=1e-9), 0.1),
    ("adamw", "adamw", dict(betas=(0.9, 0.95), eps=1e-8), 0.1),
    ("adamw_nowd", "adamw", dict(betas=(0.9, 0.999), eps=1e-6), 0.0),
    ("sgd_momentum", "sgd", dict(momentum=0.9, dampening=0.1), 0.01),
    ("sgd_nesterov", "sgd", dict(momentum=0.8, nesterov=True), 0.05),
    ("sgd_plain", "sgd", dict(), 0.0),
]


def lr_at(kind, t):
    base = 1e-2 if kind == "sgd" else 3e-3
    return base * (1.0 + 0.25 * math.sin(t))  # a schedule that moves every step


def optimizer_case(name, kind, kwargs, wd, gen, out, meta, ci):
    p0 = (torch.randn(N, generator=gen) * 0.7).float()
    # gradients of varied scale, including some tiny ones (exercise eps) and exact zeros
    grads = torch.randn(STEPS, N, generator=gen) * torch.logspace(-4, 1, N)[torch.randperm(N, generator=gen)]
    grads[:, ::37] = 0.0
    grads = grads.float()
    parts = [p0[:SPLIT[0]].clone(), p0[SPLIT[0]:SPLIT[1]].clone(), p0[SPLIT[1]:].clone()]
    for t in parts:
        t.requires_grad_(True)
    groups = [{"params": [parts[0], parts[2]], "weight_decay": wd},
              {"params": [parts[1]], "weight_decay": 0.0}]
    lr0 = lr_at(kind, 0)
    if kind == "adam":
        opt = torch.optim.Adam(groups, lr=lr0, **kwargs)
    elif kind == "adamw":
        opt = torch.optim.AdamW(groups, lr=lr0, **kwargs)
    else:
        opt = torch.optim.SGD(groups, lr=lr0, **kwargs)
    expect = np.zeros((STEPS, N), np.float32)
    lrs = []
    for t in range(STEPS):
        lr = lr_at(kind, t)
        lrs.append(lr)
        for g in opt.param_groups:
            g["lr"] = lr
        g = grads[t]
        parts[0].grad = g[:SPLIT[0]].clone()
        parts[1].grad = g[SPLIT[0]:SPLIT[1]].clone()
        parts[2].grad = g[SPLIT[1]:].clone()
        opt.step()
        expect[t] = torch.cat([x.detach() for x in parts]).numpy()
    out[f"opt{ci}.p0"] = p0.numpy()
    out[f"opt{ci}.grads"] = grads.numpy()
    out[f"opt{ci}.expect"] = expect
    beta = kwargs.get("betas", (0.9, 0.999))
    meta[f"opt{ci}"] = json.dumps({
        "name": name, "kind": kind, "weight_decay": wd, "lrs": lrs,
        "beta1": beta[0], "beta2": beta[1], "eps": kwargs.get("eps", 1e-8),
        "momentum": kwargs.get("momentum", 0.0), "dampening": kwargs.get("dampening", 0.0),
        "nesterov": kwargs.get("nesterov", False), "split": list(SPLIT), "n": N})


def clip_case(ci, max_norm, scale, gen, out, meta):
    sizes = [100, 1, 2000]
    gs = [(torch.randn(s, generator=gen) * scale).float() for s in sizes]
    params = [torch.zeros(s, requires_grad=True) for s in sizes]
    for p, g in zip(params, gs):
        p.grad = g.clone()
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    out[f"clip{ci}.grads"] = torch.cat(gs).numpy()
    out[f"clip{ci}.clipped"] = torch.cat([p.grad for p in params]).numpy()
    out[f"clip{ci}.norm"] = np.array([float(norm)], np.float64)
    meta[f"clip{ci}"] = json.dumps({"max_norm": max_norm})


def nanogpt_get_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    # nanoGPT train.py
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def hf_linear_lrs(base_lr, warmup, total, last):
    # transformers.get_linear_schedule_with_warmup: LambdaLR with this lambda
    def lr_lambda(current_step):
        if current_step < warmup:
            return float(current_step) / float(max(1, warmup))
        return max(0.0, float(total - current_step) / float(max(1, total - warmup)))
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base_lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    lrs = []
    for _ in range(last + 1):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return lrs


def noam_rate(step, factor, model_size, warmup):
    # The Annotated Transformer
    if step == 0:
        step = 1
    return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


def schedules(out, meta):
    steps = list(range(0, 40)) + [99, 100, 101, 250, 499, 500, 501, 999, 1000, 1001, 4000, 5000,
                                  5001, 12345]
    cos = dict(lr=6e-4, min_lr=6e-5, warmup=20, decay=5000)
    lin = dict(base=5e-4, warmup=30, total=1000)
    noam = dict(factor=2.0, d_model=512, warmup=4000)
    out["sched.steps"] = np.array(steps, np.int64)
    out["sched.cosine"] = np.array([nanogpt_get_lr(s, cos["lr"], cos["min_lr"], cos["warmup"],
                                                   cos["decay"]) for s in steps], np.float64)
    hf = hf_linear_lrs(lin["base"], lin["warmup"], lin["total"], max(steps))
    out["sched.linear"] = np.array([hf[s] for s in steps], np.float64)
    out["sched.noam"] = np.array([noam_rate(s, noam["factor"], noam["d_model"], noam["warmup"])
                                  for s in steps], np.float64)
    meta["sched"] = json.dumps({"cosine": cos, "linear": lin, "noam": noam})


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    out, meta = {}, {}
    for ci, (name, kind, kwargs, wd) in enumerate(OPT_CASES):
        optimizer_case(name, kind, kwargs, wd, gen, out, meta, ci)
    meta["n_opt"] = str(len(OPT_CASES))
    clip_case(0, 1.0, 0.5, gen, out, meta)   # norm ~ 23: clipped
    clip_case(1, 100.0, 0.5, gen, out, meta)  # below max_norm: unchanged
    meta["n_clip"] = "2"
    schedules(out, meta)
    stfile.save(os.path.join(outdir, "train.safetensors"), out, meta)


if __name__ == "__main__":
    main()
