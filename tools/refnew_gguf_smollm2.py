"""transformers' answers for the real SmolLM2-135M-Instruct GGUF file (Q4_1, embeddings Q8_0) for
tests/test_gguf_models.c: 20 prompts (14 plain texts, 6 chat turns rendered by the chat
template), their token ids, the logits at every position, and greedy decoding of 32 tokens.

    .venv-bench/bin/python tools/refnew_gguf_smollm2.py OUTDIR
      ->  OUTDIR/gguf_smollm2.safetensors: pN.ids (T) int32, pN.logits (T, V) float32,
          pN.greedy (32) int32, pN.greedy_gap (32) float32 (top-1 minus top-2 logit);
          metadata "prompts" (the count), "texts" (JSON list of the prompt texts),
          "tf_gguf_ids" (JSON: transformers' tokenizer built from the GGUF file itself,
          AutoTokenizer.from_pretrained(dir, gguf_file=...), on each text, without special tokens)

The model is transformers' own reading of the GGUF file: models/SmolLM2-135M-Instruct is what
AutoModelForCausalLM.from_pretrained(dir, gguf_file=...) builds from
models/SmolLM2-135M-Instruct.Q4_1.gguf (every tensor dequantized to float32; tools/get_smollm2.py
made the directory that way and checked its logits against the GGUF model's), run here in float32
as transformers runs it. Greedy decoding runs 32 tokens whatever they are (an end-of-text token
included), as a loop over transformers' KV cache. Without the model nothing is written and the
test skips.

It runs with .venv-bench (tests/run.sh runs every tools/refnew_*.py with it) only for speed: the
newest torch's BLAS takes ~40 s here where Debian's torch 1.13 (reference BLAS) took ~260 s. The
gguf package (for the tokenizer read from the GGUF file) comes from the project venv (.venv), as in
tools/refnew_gguf_qwen3.py. Both venvs give the same ids, greedy tokens and tokenizer ids, and
logits within 1e-5 of each other relative to their largest."""
import glob
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stfile  # noqa: E402

try:
    import gguf  # noqa: F401
except ImportError:
    sys.path += glob.glob(os.path.join(HERE, "..", ".venv", "lib", "python3*", "site-packages"))
    import gguf  # noqa: F401,E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct")
GGUF = MODEL + ".Q4_1.gguf"
NEW = 32
PLAIN = [
    "Once upon a time",
    "The capital of France is",
    "def fibonacci(n):",
    "The three primary colors are",
    "In 1969, Neil Armstrong",
    "Water boils at a temperature of",
    "The quick brown fox",
    "Photosynthesis is the process by which",
    "import numpy as np\n",
    "My favourite recipe for pancakes:",
    "The Transformer architecture uses self-attention to",
    "12 + 30 =",
    "Paris, London, Berlin and",
    "Knowledge is power.",
]
CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Name three primary colors."}],
    [{"role": "user", "content": "Write a haiku about the sea."}],
    [{"role": "system", "content": "You are a concise assistant."},
     {"role": "user", "content": "What is 2 + 2?"}],
    [{"role": "user", "content": "Translate 'good morning' into French."}],
    [{"role": "user", "content": "Why is the sky blue?"}],
]


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    out = os.path.join(outdir, "gguf_smollm2.safetensors")
    if not (os.path.isfile(os.path.join(MODEL, "model.safetensors")) and os.path.isfile(GGUF)):
        print(f"refnew_gguf_smollm2: no {MODEL} or {GGUF} (sh tools/get_smollm2.sh): nothing written")
        if os.path.exists(out):
            os.remove(out)
        return
    os.environ.setdefault("TQDM_DISABLE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    torch.set_num_threads(int(os.environ.get("ATTN_REF_THREADS", "2")))  # tests/run.sh: 1 per lane
    tok = AutoTokenizer.from_pretrained(MODEL)
    gtok = AutoTokenizer.from_pretrained(os.path.dirname(GGUF), gguf_file=os.path.basename(GGUF))
    model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32).eval()
    texts = list(PLAIN) + [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
                           for c in CHATS]
    tensors, tf_gguf = {}, []
    for i, text in enumerate(texts):
        ids = tok.encode(text, add_special_tokens=False)
        tf_gguf.append(gtok.encode(text, add_special_tokens=False))
        out_ids, gaps = [], []
        with torch.no_grad():
            res = model(input_ids=torch.tensor([ids]), use_cache=True)
            tensors[f"p{i}.logits"] = res.logits[0].float().numpy()
            for _ in range(NEW):
                last = res.logits[0, -1]
                top = torch.topk(last, 2).values
                nxt = int(torch.argmax(last))
                out_ids.append(nxt)
                gaps.append(float(top[0] - top[1]))
                res = model(input_ids=torch.tensor([[nxt]]), past_key_values=res.past_key_values,
                            use_cache=True)
        tensors[f"p{i}.ids"] = np.array(ids, dtype=np.int32)
        tensors[f"p{i}.greedy"] = np.array(out_ids, dtype=np.int32)
        tensors[f"p{i}.greedy_gap"] = np.array(gaps, dtype=np.float32)
        print(f"refnew_gguf_smollm2: {text[-40:]!r} -> {tok.decode(out_ids)[:60]!r}")
    stfile.save(out, tensors, {"prompts": str(len(texts)), "texts": json.dumps(texts),
                               "tf_gguf_ids": json.dumps(tf_gguf)})


if __name__ == "__main__":
    main()
