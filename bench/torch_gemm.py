"""PyTorch peer of bench/bench_gemm.c: the same GEMM cases, the same case strings, the same
statistic (best of 7 timed repeats of ~0.1 s after a ~0.1 s warm-up), printed as JSON lines
{"bench":"gemm","case":"MxNxK OP","metric":"GFLOP/s","value":...}.

OP names op(A) and op(B): "NT" is x·Wᵀ with W stored (N, K) — nn.Linear — and "TN" is xᵀ·dy.
Transposes are views (a.t()), as autograd produces them, so PyTorch picks its own kernel for
each combination. Threads: ATTN_BENCH_THREADS (default 2) via torch.set_num_threads."""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import best_rate  # noqa: E402

# (M, N, K, trans_a, trans_b, epilogue) — keep in step with bench_gemm.c.
CASES = [
    (256, 256, 256, False, False, None),
    (512, 512, 512, False, False, None),
    (1024, 1024, 1024, False, False, None),
    (2048, 2048, 2048, False, False, None),
    (1024, 1024, 1024, False, True, None),
    (1024, 1024, 1024, True, False, None),
    (1024, 1024, 1024, True, True, None),
    (2048, 1152, 384, False, False, None),
    (2048, 384, 384, False, False, None),
    (2048, 1536, 384, False, False, None),
    (2048, 384, 1536, False, False, None),
    (2048, 1152, 384, False, True, None),
    (2048, 384, 384, False, True, None),
    (2048, 384, 1536, False, True, None),
    (2048, 384, 1152, False, False, None),
    (384, 1152, 2048, True, False, None),
    (1536, 384, 2048, True, False, None),
    (1152, 384, 2048, True, False, None),
    (2048, 1536, 384, False, True, "bias+gelu_tanh"),
]


def best_gflops(fn, work):
    return best_rate(fn, work, rounds=7)


def main():
    threads = int(os.environ.get("ATTN_BENCH_THREADS", "2") or 2)
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"MKL {torch.backends.mkl.is_available()}")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for M, N, K, ta, tb, epi in CASES:
            a = torch.rand((K, M) if ta else (M, K), generator=g) * 2 - 1
            b = torch.rand((N, K) if tb else (K, N), generator=g) * 2 - 1
            opa = a.t() if ta else a
            opb = b.t() if tb else b
            c = torch.empty(M, N)
            if epi == "bias+gelu_tanh":
                bias = torch.rand(N, generator=g) - 0.5
                fn = lambda: F.gelu(F.linear(a, b, bias), approximate="tanh")  # noqa: E731
            else:
                fn = lambda: torch.mm(opa, opb, out=c)  # noqa: E731
            v = best_gflops(fn, 2.0 * M * N * K)
            name = f"{M}x{N}x{K} {'T' if ta else 'N'}{'T' if tb else 'N'}"
            if epi:
                name += " +" + epi
            print(json.dumps({"bench": "gemm", "case": name, "metric": "GFLOP/s",
                              "value": round(v, 2)}), flush=True)


if __name__ == "__main__":
    main()
