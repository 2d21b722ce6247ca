"""The table of bench/run_llamacpp.sh: llama.cpp's llama-bench (-o jsonl) and attn's bench_gguf on
the same GGUF files, side by side.

  python3 bench/compare_llamacpp.py DIR NAME...

DIR/NAME.lcpp.jsonl   llama-bench's lines (one per test: pp with n_gen 0, tg with n_prompt 0)
DIR/NAME.attn.jsonl   bench_gguf's lines ("pp512", "tg128", "info"), int8 activations
DIR/NAME.attnf32.jsonl  the same with float32 activations (its tg line is printed)
DIR/membw.jsonl       bench_membw's line: the machine's read bandwidth (the ceiling of tg)
DIR/NAME.{lcpp,attn}.rss   peak resident set size in KB (/usr/bin/time -f %M)

Prints, per file: pp and tg tokens/s of both as mean ± sd over the repetitions (llama-bench's
avg_ts ± stddev_ts, and bench_gguf's the same way), the ratios attn / llama.cpp, peak RSS of
both, and the weight bandwidth each generation figure implies: weight bytes read per token
(bench_gguf's count: the file's bytes for llama.cpp, the bytes attn keeps for attn) × tokens/s.
Standard library only."""

import json
import os
import sys


def read_jsonl(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def read_rss_mb(path):
    try:
        with open(path) as f:
            lines = [ln.strip() for ln in f if ln.strip()]
        return int(lines[-1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return float("nan")


def fmt(mean, sd):
    return f"{mean:.2f} ± {sd:.2f}"


def main():
    d, names = sys.argv[1], sys.argv[2:]
    rows = []
    meta = None
    for name in names:
        lc = read_jsonl(os.path.join(d, name + ".lcpp.jsonl"))
        at = read_jsonl(os.path.join(d, name + ".attn.jsonl"))
        lpp = next(r for r in lc if r["n_prompt"] > 0 and r["n_gen"] == 0)
        ltg = next(r for r in lc if r["n_gen"] > 0 and r["n_prompt"] == 0)
        app = next(r for r in at if r["case"].startswith("pp"))
        atg = next(r for r in at if r["case"].startswith("tg"))
        info = next(r for r in at if r["case"] == "info")
        f32 = []
        p32 = os.path.join(d, name + ".attnf32.jsonl")
        if os.path.exists(p32):
            f32 = [r for r in read_jsonl(p32) if r["case"].startswith("tg")]
        meta = meta or lpp
        rows.append({
            "file": name,
            "type": lpp.get("model_type", ""),
            "pp": (lpp["n_prompt"], lpp["avg_ts"], lpp["stddev_ts"], app["value"], app["sd"]),
            "tg": (ltg["n_gen"], ltg["avg_ts"], ltg["stddev_ts"], atg["value"], atg["sd"]),
            "rss": (read_rss_mb(os.path.join(d, name + ".lcpp.rss")),
                    read_rss_mb(os.path.join(d, name + ".attn.rss"))),
            "bytes": (info["weight_bytes_file"], info["weight_bytes_attn"]),
            "packed": info.get("packed", False),
            "tg_f32": (f32[0]["value"], f32[0]["sd"]) if f32 else None,
            "samples": (lpp["samples_ts"], app["samples"], ltg["samples_ts"], atg["samples"]),
        })
    if meta:
        print(f"llama.cpp: build {meta.get('build_commit')} ({meta.get('build_number')}), "
              f"{meta.get('backends')}, cpu {meta.get('cpu_info')}, threads {meta.get('n_threads')}, "
              f"n_batch {meta.get('n_batch')}, n_ubatch {meta.get('n_ubatch')}, "
              f"flash_attn {meta.get('flash_attn')}, KV cache {meta.get('type_k')}/{meta.get('type_v')}, "
              f"repack {meta.get('repack')}, load_mode {meta.get('load_mode', meta.get('use_mmap'))}")
    bw = None
    mp = os.path.join(d, "membw.jsonl")
    if os.path.exists(mp):
        bw = read_jsonl(mp)[0]["gbps"]
        print(f"memory read bandwidth (bench_membw, same threads): {bw:.2f} GB/s")
    print()
    print("| file | test | llama.cpp t/s | attn t/s | attn / llama.cpp |")
    print("|---|---|---|---|---|")
    for r in rows:
        for key in ("pp", "tg"):
            n, lm, ls, am, asd = r[key]
            print(f"| {r['file']} | {key}{n} | {fmt(lm, ls)} | {fmt(am, asd)} | "
                  f"**{am / lm:.2f}×** |")
        if r["tg_f32"]:
            n, lm = r["tg"][0], r["tg"][1]
            am, asd = r["tg_f32"]
            print(f"| {r['file']} | tg{n}, attn float32 activations | {fmt(lm, r['tg'][2])} | "
                  f"{fmt(am, asd)} | {am / lm:.2f}× |")
    print()
    print("| file | peak RSS llama.cpp MB | peak RSS attn MB | attn / llama.cpp | "
          "weights/token llama.cpp MB | weights/token attn MB | tg bandwidth llama.cpp GB/s | "
          "tg bandwidth attn GB/s | tg ceiling t/s (bandwidth / attn's bytes) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lr, ar = r["rss"]
        lb, ab = r["bytes"]
        ltg, atg = r["tg"][1], r["tg"][3]
        ceil = f"{bw * 1e9 / ab:.1f}" if bw else "?"
        print(f"| {r['file']} | {lr:.0f} | {ar:.0f} | {ar / lr:.2f} | {lb / 1e6:.1f} | "
              f"{ab / 1e6:.1f} | {lb * ltg / 1e9:.2f} | {ab * atg / 1e9:.2f} | {ceil} |")
    print()
    print("Every repetition's tokens/s (llama.cpp pp, attn pp, llama.cpp tg, attn tg):")
    for r in rows:
        s = r["samples"]
        print(f"  {r['file']}: " + " / ".join(
            "[" + ", ".join(f"{x:.2f}" for x in v) + "]" for v in s))
    if any(r["packed"] for r in rows):
        print("attn ran with ATTN_BENCH_PACK=1 (float matrices packed: a second copy in memory)")


if __name__ == "__main__":
    main()
