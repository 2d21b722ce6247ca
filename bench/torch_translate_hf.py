"""PyTorch translation with a KV cache (issue 17): transformers' generate on the Hugging Face
directory that `attn export --format hf-m2m100` wrote (bench/ct2_export.sh makes it), the same
source ids that bench/ct2_export.py gives CTranslate2 and attn (OUT_DIR/src.ids), num_beams and
the rest from the export's generation_config.json (transformers' defaults: use_cache=True, so
every step runs the decoder on the new token only, with the cached keys and values; the
encoder's cross-attention keys/values are computed once).

    .venv-bench/bin/python bench/torch_translate_hf.py HF_DIR IDS [--beam K] [--threads N]
        [--precision f32|int8|bf16] [--batch B] [--compare ATTN.ids]
        [--early-stopping true|false|never]

Batches of B sentences sorted by source length (padding on the right, with the attention mask),
torch.inference_mode(), torch.set_num_threads(N); a warm-up generate on the first batch is not
timed. Precisions: f32; bf16 = the model in torch.bfloat16 (oneDNN's AVX512-BF16 kernels where
the CPU has them); int8 = torch.ao.quantization.quantize_dynamic on every nn.Linear (int8
weights with one scale per tensor, activations quantized per call: PyTorch's CPU int8 for
transformers). Target tokens are counted as on the other two sides: the generated ids without
the decoder start, </s> and the padding after it. --compare: how many outputs are identical to
another side's ids (one line per sentence, in input order)."""
import argparse
import json
import os
import time

import torch
from transformers import AutoModelForSeq2SeqLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("ids")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="f32", choices=["f32", "int8", "bf16"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--early-stopping", default=None, choices=["true", "false", "never"],
                    help="generate's early_stopping (default: generation_config.json's)")
    ap.add_argument("--compare", default=None)
    ap.add_argument("--out", default=None, help="write the outputs' ids here")
    ap.add_argument("--summary", default=None,
                    help="ct2_export.py's summary.json: print attn's best / torch")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    with open(a.ids) as f:
        srcs = [[int(x) for x in ln.split()] for ln in f if ln.strip()]
    with open(os.path.join(a.hf_dir, "config.json")) as f:
        cfg = json.load(f)
    pad, eos, start = cfg["pad_token_id"], cfg["eos_token_id"], cfg["decoder_start_token_id"]
    model = AutoModelForSeq2SeqLM.from_pretrained(a.hf_dir, dtype=torch.float32).eval()
    if a.precision == "bf16":
        model = model.to(torch.bfloat16)
    elif a.precision == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                       dtype=torch.qint8)
    order = sorted(range(len(srcs)), key=lambda i: (len(srcs[i]), i))
    batches = [order[i:i + a.batch] for i in range(0, len(order), a.batch)]

    def run(idx):
        T = max(len(srcs[i]) for i in idx)
        ids = torch.full((len(idx), T), pad, dtype=torch.long)
        mask = torch.zeros((len(idx), T), dtype=torch.long)
        for r, i in enumerate(idx):
            ids[r, :len(srcs[i])] = torch.tensor(srcs[i])
            mask[r, :len(srcs[i])] = 1
        with torch.inference_mode():
            kw = {}
            if a.early_stopping:
                kw["early_stopping"] = {"true": True, "false": False}.get(a.early_stopping,
                                                                        "never")
            return model.generate(input_ids=ids, attention_mask=mask, num_beams=a.beam,
                                  use_cache=True, **kw)

    run(batches[0])  # warm-up
    outs = [None] * len(srcs)
    t0 = time.perf_counter()
    for idx in batches:
        g = run(idx).tolist()
        for r, i in enumerate(idx):
            seq = g[r][1:] if g[r] and g[r][0] == start else g[r]
            cut = []
            for t in seq:
                if t == eos or t == pad:
                    break
                cut.append(t)
            outs[i] = cut
    dt = time.perf_counter() - t0
    n = sum(len(o) for o in outs)
    print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), transformers "
          f"generate with KV cache, {a.precision}, beam {a.beam}, {a.threads} threads, batches "
          f"of {a.batch}: {len(srcs)} sentences in {dt:.2f} s: {n / dt:.1f} target tokens/s "
          f"({len(srcs) / dt:.1f} sentences/s)")
    if a.out:
        with open(a.out, "w") as f:
            for o in outs:
                f.write(" ".join(map(str, o)) + "\n")
    if a.compare:
        with open(a.compare) as f:
            other = [[int(x) for x in ln.split()] for ln in f]
        same = sum(x == y for x, y in zip(outs, other))
        print(f"  {same} of {len(srcs)} outputs identical to {a.compare}'s")
    if a.summary:
        with open(a.summary) as f:
            best = json.load(f)["attn"]
        print(f"ratio attn / torch ({a.precision}, beam {a.beam}): {best['tokens_per_s'] / (n / dt):.2f}x "
              f"(attn: {best['setting']}, {best['tokens_per_s']:.1f} tokens/s)")


if __name__ == "__main__":
    main()
