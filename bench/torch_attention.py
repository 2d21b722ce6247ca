"""PyTorch peer of bench/bench_attention.c: F.scaled_dot_product_attention on the same cases, at
ATTN_BENCH_THREADS threads, printing the same JSON lines (iterations per second, higher is better).

PyTorch's natural layout is (B, H, T, D) while attn's is (B, T, H, D); each side uses its own
natural layout, since the comparison is op against op. Timing method (same as the C side): warm up,
then 7 rounds of at least 0.2 s each; report the best round's iterations per second (the machine
may be shared, and the best round is the one least disturbed by other processes). A sliding
window (window > 0) is the boolean mask of transformers' sliding_window: key j visible to query i
when i - window < j <= i."""
import json
import os
import time

import torch
import torch.nn.functional as F

THREADS = int(os.environ.get("ATTN_BENCH_THREADS", "2"))
torch.set_num_threads(THREADS)

# (name, B, H, T, D, causal, train, window) — keep in sync with bench/bench_attention.c.
CASES = [
    ("fwd+bwd B8 H6 T256 D64 causal", 8, 6, 256, 64, True, True, 0),
    ("fwd B1 H12 T1024 D64", 1, 12, 1024, 64, False, False, 0),
    ("fwd+bwd B4 H12 T512 D64", 4, 12, 512, 64, False, True, 0),
    ("fwd B1 H12 T2048 D64 causal", 1, 12, 2048, 64, True, False, 0),
    ("fwd+bwd B2 H8 T1024 D128 causal", 2, 8, 1024, 128, True, True, 0),
    ("fwd B1 H8 T4096 D64 causal", 1, 8, 4096, 64, True, False, 0),
    ("fwd B1 H8 T4096 D64 causal window512", 1, 8, 4096, 64, True, False, 512),
    ("fwd+bwd B1 H8 T4096 D64 causal", 1, 8, 4096, 64, True, True, 0),
    ("fwd+bwd B1 H8 T4096 D64 causal window512", 1, 8, 4096, 64, True, True, 512),
]


def measure(step):
    for _ in range(3):
        step()
    rates = []
    for _ in range(7):
        n, t0 = 0, time.perf_counter()
        while True:
            step()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= 0.2:
                break
        rates.append(n / dt)
    return max(rates)


def main():
    print(f"torch {torch.__version__} threads={torch.get_num_threads()} "
          f"cpu={torch.backends.cpu.get_cpu_capability()}")
    g = torch.Generator().manual_seed(0)
    for name, B, H, T, D, causal, train, window in CASES:
        q, k, v = (torch.randn(B, H, T, D, generator=g) for _ in range(3))
        kw = {"is_causal": causal}
        if window:
            i = torch.arange(T)[:, None]
            j = torch.arange(T)[None, :]
            kw = {"attn_mask": (j <= i) & (j > i - window)}
        if train:
            for t in (q, k, v):
                t.requires_grad_(True)

            def step():
                out = F.scaled_dot_product_attention(q, k, v, **kw)
                out.sum().backward()
        else:
            def step():
                with torch.inference_mode():
                    F.scaled_dot_product_attention(q, k, v, **kw)
        rate = measure(step)
        print(json.dumps({"bench": "attention", "case": name, "metric": "iter/s",
                          "value": round(rate, 3)}), flush=True)


if __name__ == "__main__":
    main()
