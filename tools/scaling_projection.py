#!/usr/bin/env python3
"""scaling_projection.py: docs/distributed-scaling.md's projection of data-parallel training
throughput on N machines, from measured inputs (standard library only).

Every machine runs one rank that computes TOKENS tokens per optimizer step (its micro-batches,
gradient accumulation included) in STEP_S seconds (measured on one machine), then the ranks sum
the float32 gradients (4 * PARAMS bytes) with a ring all-reduce:
    t_comm(N) = 2(N-1)/N * S / BW  +  buckets * 2(N-1) * ALPHA
(every rank sends and receives 2(N-1)/N of the S bytes over its link at BW bytes/s each way
(the measured bus bandwidth); each bucket's ring takes 2(N-1) latency-bound steps of ALPHA).
  no overlap:  t_step = STEP_S + t_comm
  overlap:     t_step = max(STEP_S, (1 - BWD) * STEP_S + t_comm) + t_bucket
(buckets leave as the backward pass (the fraction BWD of the step) finishes them, so the sum hides
behind the backward; what cannot hide: the time by which it outlasts the backward, and the last
bucket, which can only start when the backward ends). With --cpu-ms-per-mb C both also add
C * 2(N-1)/N * S/1e6 ms: the CPU the TCP transfers and the sum take from the computation on a
machine whose cores all compute (measured on the development machine; 0 by default).
tokens/s = N * TOKENS / t_step; efficiency = STEP_S / t_step. Not modelled: stragglers, the
rank-0 checkpoint, contention in the network's core.

    python3 tools/scaling_projection.py --step-s 9.1 --tokens 1024 [--params 124439808]
        [--bwd 0.6] [--alpha-us 30] [--bucket-mib 4] [--cpu-ms-per-mb 0] [--machines 1,2,4,...]
        [--links "1 GbE=0.118;10 GbE=1.18;25 GbE=2.9;100 Gb/s=11.5"]   (NAME=GB/s;...)
Prints a Markdown table per link.
"""
import argparse
import math


def project(step_s, tokens, params, bwd, alpha_s, bucket_bytes, bw, n, cpu_s_per_byte=0.0):
    s = 4.0 * params
    if n == 1:
        return step_s, step_s, tokens / step_s, tokens / step_s, 0.0
    buckets = math.ceil(s / bucket_bytes)
    ring = 2.0 * (n - 1) / n
    t_comm = ring * s / bw + buckets * 2 * (n - 1) * alpha_s
    t_bucket = ring * min(s, bucket_bytes) / bw + 2 * (n - 1) * alpha_s
    t_cpu = cpu_s_per_byte * ring * s
    t_plain = step_s + t_cpu + t_comm
    t_overlap = max(step_s + t_cpu, (1 - bwd) * step_s + t_cpu + t_comm) + t_bucket
    return t_plain, t_overlap, n * tokens / t_plain, n * tokens / t_overlap, t_comm


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--step-s", type=float, required=True, help="one machine's step time (s)")
    ap.add_argument("--tokens", type=int, required=True, help="tokens per machine per step")
    ap.add_argument("--params", type=int, default=124439808, help="parameters (GPT-2-124M)")
    ap.add_argument("--bwd", type=float, default=0.6, help="backward's share of the step")
    ap.add_argument("--alpha-us", type=float, default=30.0, help="latency per ring step (us)")
    ap.add_argument("--bucket-mib", type=float, default=4.0, help="all-reduce bucket (MiB)")
    ap.add_argument("--cpu-ms-per-mb", type=float, default=0.0,
                    help="CPU time the all-reduce takes from the computation per MB sent")
    ap.add_argument("--machines", default="1,2,4,8,16,32,64")
    ap.add_argument("--links", default="1 GbE=0.118;10 GbE=1.18;25 GbE=2.9;100 Gb/s=11.5")
    a = ap.parse_args()
    ns = [int(x) for x in a.machines.split(",")]
    print(f"S = {4 * a.params / 1e6:.1f} MB of float32 gradients per step; one machine: "
          f"{a.tokens} tokens in {a.step_s:.3f} s = {a.tokens / a.step_s:.1f} tokens/s; "
          f"backward {a.bwd:.0%} of the step; latency {a.alpha_us:g} us per ring step; "
          f"buckets of {a.bucket_mib:g} MiB; the all-reduce's CPU cost {a.cpu_ms_per_mb:g} ms/MB")
    for link in a.links.split(";"):
        name, gbs = link.split("=")
        bw = float(gbs) * 1e9
        print(f"\n{name.strip()} ({float(gbs):g} GB/s each way)\n")
        print("| machines | all-reduce per step | step, no overlap | tokens/s, no overlap "
              "| efficiency | step, overlap | tokens/s, overlap | efficiency |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in ns:
            r = project(a.step_s, a.tokens, a.params, a.bwd, a.alpha_us * 1e-6,
                        a.bucket_mib * 2**20, bw, n, a.cpu_ms_per_mb * 1e-9)
            comm = f"{r[4]:.3f} s" if n > 1 else "-"
            print(f"| {n} | {comm} | {r[0]:.3f} s | {r[2]:.0f} | {a.step_s / r[0]:.0%} "
                  f"| {r[1]:.3f} s | {r[3]:.0f} | {a.step_s / r[1]:.0%} |")


if __name__ == "__main__":
    main()
