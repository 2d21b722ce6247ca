"""Timing shared by the PyTorch peers in bench/: the same method as the C benches (calibrate the
calls per round to ~0.1 s, then keep the best of several rounds)."""
import math
import time


def best_rate(fn, work, rounds=5):
    """Best work-per-second (work units per call, e.g. FLOP or bytes) over `rounds` rounds, in
    units of 1e9 per second."""
    t0 = time.perf_counter()
    calls = 0
    while time.perf_counter() - t0 < 0.1:
        fn()
        calls += 1
    per = max(1, math.ceil(0.1 * calls / (time.perf_counter() - t0)))
    best = 0.0
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(per):
            fn()
        t = time.perf_counter() - t
        best = max(best, work * per / t * 1e-9)
    return best


def timed_train(loss_fn, params, opt, x, y, warm, steps, clip, ctx=None):
    """warm + steps optimizer steps on the batches x[s], y[s] (zero_grad, loss_fn(x, y) under
    ctx(), backward, clip_grad_norm_(params, clip), opt.step()); (tokens/s over the `steps` timed
    steps after the `warm` untimed ones, the last loss)."""
    import contextlib
    import torch

    ctx = ctx or contextlib.nullcontext
    params = list(params)
    B, T = x.shape[1], x.shape[2]
    t0 = 0.0
    for s in range(warm + steps):
        if s == warm:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with ctx():
            loss = loss_fn(x[s], y[s])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
    dt = time.perf_counter() - t0
    return B * T * steps / dt, loss.item()


def load_train(name):
    """What bench_lm.h's lm_bench_train wrote to $ATTN_BENCH_DIR for the case `name`: (tensors,
    metadata, config dict, x, y) with x, y (steps, B, T) int64 tensors."""
    import json
    import os
    import sys

    import numpy as np
    import torch

    import stfile

    d = os.environ.get("ATTN_BENCH_DIR")
    path = os.path.join(d, name + ".safetensors") if d else None
    if not path or not os.path.exists(path):
        sys.exit(f"needs $ATTN_BENCH_DIR/{name}.safetensors from the C bench")
    t, meta = stfile.load(path)
    with open(os.path.join(d, name + "_config.json")) as f:
        cfg = json.load(f)
    x = torch.from_numpy(t["x"].astype(np.int64))
    y = torch.from_numpy(t["y"].astype(np.int64))
    return t, meta, cfg, x, y
