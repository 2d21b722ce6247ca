"""Load a decoder model directory (e.g. one attn wrote with attn_gpt_save_dir: GPT-2 or the Llama
family) with transformers' AutoModelForCausalLM.from_pretrained (the class config.json names) and
write its logits for the given ids as a float32 .npy, so tests/test_gpt.c and tests/test_llama.c
can check that transformers reads attn's files and computes the same thing.

Usage: python tools/check_gpt_hf.py DIR 3,1,4,1,5 OUT.npy
"""
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging


def main():
    d, ids, out = sys.argv[1], sys.argv[2], sys.argv[3]
    hf_logging.set_verbosity_error()
    # Strict: every weight must come from the file (no "newly initialized" tensors).
    model, info = AutoModelForCausalLM.from_pretrained(d, output_loading_info=True)
    missing = [k for k in info["missing_keys"] if not k.endswith("attn.bias")
               and not k.endswith("attn.masked_bias")]
    if missing or info["unexpected_keys"] or info["mismatched_keys"]:
        sys.exit(f"{d}: transformers load problems: {info}")
    model.eval()
    x = torch.tensor([[int(t) for t in ids.split(",")]])
    with torch.no_grad():
        logits = model(x).logits[0]
    np.save(out, logits.float().numpy().astype(np.float32))


if __name__ == "__main__":
    main()
