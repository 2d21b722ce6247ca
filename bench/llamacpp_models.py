"""The GGUF files of bench/run_llamacpp.sh (issue 16's side-by-side with llama.cpp), made once
into OUT (bench/llama.cpp-build/models; never committed):

  gpt2-124m-random/                 GPT2LMHeadModel(GPT2Config()) (GPT-2-124M's shape: 12 layers,
                                    width 768, 12 heads, 1024 positions, vocabulary 50257) with
                                    random weights (torch.manual_seed(1234), transformers' own
                                    initialization), save_pretrained (safetensors), and GPT-2's
                                    real tokenizer (models/tokenizers/gpt2/tokenizer.json, saved
                                    through GPT2TokenizerFast so the directory is complete);
                                    config.json also gets the real GPT-2's "n_ctx": 1024, which
                                    the converter reads
  gpt2-124m-random.{F32,F16,Q8_0}.gguf   that directory through llama.cpp's own
                                    convert_hf_to_gguf.py --outtype f32|f16|q8_0 (from the
                                    llama-cpp-python sdist's vendor/llama.cpp, with its gguf-py)

Run with .venv-bench's python (torch, transformers):
  .venv-bench/bin/python bench/llamacpp_models.py LLAMACPP_SRC OUT
Files already there are kept (delete OUT to make them again)."""

import json
import os
import shutil
import subprocess
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(out, exist_ok=True)
    d = os.path.join(out, "gpt2-124m-random")
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

        tok_json = os.path.join(root, "models", "tokenizers", "gpt2", "tokenizer.json")
        if not os.path.exists(tok_json):
            sys.exit(f"llamacpp_models: {tok_json} missing (sh tools/get_llamacpp_assets.sh)")
        torch.manual_seed(1234)
        model = GPT2LMHeadModel(GPT2Config()).eval()
        tmp = d + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp, safe_serialization=True)
        # convert_hf_to_gguf.py reads n_ctx, which the real gpt2 config.json has and
        # transformers 5 no longer writes
        cfg_path = os.path.join(tmp, "config.json")
        with open(cfg_path) as fh:
            cfg = json.load(fh)
        cfg.setdefault("n_ctx", cfg["n_positions"])
        with open(cfg_path, "w") as fh:
            json.dump(cfg, fh, indent=2)
        # model_max_length as the real gpt2's tokenizer_config.json (else transformers writes
        # its 1e30 placeholder)
        tok = GPT2TokenizerFast(tokenizer_file=tok_json, model_max_length=1024)
        tok.save_pretrained(tmp)
        shutil.rmtree(d, ignore_errors=True)
        os.replace(tmp, d)
        print(f"llamacpp_models: {d}: {sum(p.numel() for p in model.parameters())} parameters")
    for outtype, tag in (("f32", "F32"), ("f16", "F16"), ("q8_0", "Q8_0")):
        f = os.path.join(out, f"gpt2-124m-random.{tag}.gguf")
        if os.path.exists(f):
            continue
        print(f"llamacpp_models: convert_hf_to_gguf.py --outtype {outtype} -> {f}", flush=True)
        r = subprocess.run([sys.executable, os.path.join(src, "convert_hf_to_gguf.py"), d,
                            "--outtype", outtype, "--outfile", f + ".tmp"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            print(r.stdout[-4000:])
            sys.exit(f"llamacpp_models: convert_hf_to_gguf.py failed for {outtype}")
        os.replace(f + ".tmp", f)


if __name__ == "__main__":
    main()
