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
