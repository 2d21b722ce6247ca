"""CTranslate2 on attn's exported translator (issue 17): `attn export` wrote HF_DIR
(MarianMTModel or M2M100ForConditionalGeneration with attn's tokenizer.json); this converts it with
ct2-transformers-converter and translates SRC with CTranslate2, writing one line per sentence, so
bench/ct2_export.sh can compare with `attn translate --model HF_DIR` (the same model in attn,
decoded as transformers' generate).

    .venv-bench/bin/python bench/ct2_export.py HF_DIR CT2_DIR SRC OUT [--beam K] [--threads N]
                                               [--compute-type T]   (default, float32, int8...)

The source tokens are what attn gives its own models: the tokenizer's tokens, then </s>; the
decoder starts from the model's decoder_start_token_id (config.json). CTranslate2 drops the
decoder start from its output and stops at </s>; its length penalty is transformers' form
(length_penalty 1), so beam search matches `attn translate` on the export."""
import argparse
import json
import os
import subprocess
import sys
import time

import ctranslate2
from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("ct2_dir")
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compute-type", default="default")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.ct2_dir, "model.bin")):
        conv = os.path.join(os.path.dirname(sys.executable), "ct2-transformers-converter")
        subprocess.run([conv, "--model", a.hf_dir, "--output_dir", a.ct2_dir, "--force"],
                       check=True)
    tok = Tokenizer.from_file(os.path.join(a.hf_dir, "tokenizer.json"))
    with open(os.path.join(a.hf_dir, "config.json")) as f:
        cfg = json.load(f)
    eos = tok.id_to_token(cfg["eos_token_id"])
    with open(a.src, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f]
    batch = [tok.encode(ln).tokens + [eos] for ln in lines]
    tr = ctranslate2.Translator(a.ct2_dir, device="cpu", inter_threads=1,
                                intra_threads=a.threads, compute_type=a.compute_type)
    t0 = time.perf_counter()
    with open(os.path.join(a.hf_dir, "generation_config.json")) as f:
        gen = json.load(f)
    # generate's conventions: </s> may come first (CTranslate2's min_decoding_length is 1 by
    # default), a sequence reaching max_length ends with a forced </s> (max_length counts the
    # start: max_length - 2 tokens before it), the bad words are never generated
    res = tr.translate_batch(batch, beam_size=a.beam, max_batch_size=32,
                             min_decoding_length=0,
                             max_decoding_length=gen["max_length"] - 2,
                             suppress_sequences=[[tok.id_to_token(w[0])]
                                                 for w in gen.get("bad_words_ids", [])],
                             length_penalty=1.0)
    dt = time.perf_counter() - t0
    with open(a.out, "w", encoding="utf-8") as f:
        for r in res:
            ids = [tok.token_to_id(t) for t in r.hypotheses[0]]
            f.write(tok.decode(ids, skip_special_tokens=True) + "\n")
    print(f"ctranslate2 {ctranslate2.__version__}: {len(lines)} sentences, beam {a.beam}, "
          f"{a.threads} threads, compute_type {a.compute_type}: {dt:.2f} s")


if __name__ == "__main__":
    main()
