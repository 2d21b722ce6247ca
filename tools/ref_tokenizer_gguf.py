"""Reference ids for tests/test_tokenizer_gguf.c that tools/ref_tokenizer_families.py does not
already give: BERT's. Usage: ref_tokenizer_gguf.py OUTDIR.

llama.cpp's BERT vocabulary (models/llamacpp/vocab/ggml-vocab-bert-bge.gguf, BAAI/bge-small-en-v1.5)
is bert-base-uncased's, the vocabulary of all-MiniLM-L6-v2 too (token for token, once llama.cpp's
phantom-space spelling is undone), and both ship the same tokenizer.json pipeline (BertNormalizer
lowercase, BertPreTokenizer, WordPiece, [CLS] $A [SEP]); so the reference is `tokenizers` on
models/all-MiniLM-L6-v2/tokenizer.json. Writes OUTDIR/gguf_tok_cases.json:
  {"version": tokenizers.__version__,
   "families": {"bert": {"tokenizer": path, "cases": [...], "decodes": [...]}}}
in families_cases.json's format (see ref_tokenizer_families.py), on the same texts: the hard
cases, llama.cpp's test strings for the vocabulary and 300 lines of tiny shakespeare. The other
families' references (Llama 3, Llama 2, Phi-3, Qwen2, GPT-2, SmolLM2, Mistral-Nemo's pattern) are
families_cases.json's."""
import json
import os
import random
import sys

from tokenizers import Tokenizer, __version__

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_tokenizer_families as F  # noqa: E402

MINILM = os.path.join(F.MODELS, "all-MiniLM-L6-v2", "tokenizer.json")


def main(out):
    os.makedirs(out, exist_ok=True)
    result = {"version": __version__, "families": {}}
    if os.path.exists(MINILM):
        lines = []
        if os.path.exists(F.CORPUS):
            with open(F.CORPUS, encoding="utf-8") as f:
                lines = [l for l in f.read().split("\n") if l]
        rng = random.Random(16)
        sample = rng.sample(lines, min(300, len(lines))) if lines else []
        tok = Tokenizer.from_file(MINILM)
        tok.no_truncation()  # the file's truncation (128) and padding: transformers ignores them
        tok.no_padding()
        texts = F.HARD + F.llamacpp_inputs("ggml-vocab-bert-bge.gguf.inp") + sample
        cases = []
        for t in texts:
            e = tok.encode(t)
            cases.append({"text": t, "ids": e.ids, "tokens": e.tokens,
                          "ids_plain": tok.encode(t, add_special_tokens=False).ids,
                          "decode": tok.decode(e.ids),
                          "decode_keep": tok.decode(e.ids, skip_special_tokens=False)})
        n = tok.get_vocab_size(with_added_tokens=True)
        decodes = []
        for _ in range(200):
            ids = [rng.randrange(n) if rng.random() < 0.7 else rng.choice([0, 100, 101, 102, 103])
                   for _ in range(rng.randrange(1, 10))]
            decodes.append({"ids": ids, "decode": tok.decode(ids),
                            "decode_keep": tok.decode(ids, skip_special_tokens=False)})
        result["families"]["bert"] = {"tokenizer": MINILM, "cases": cases, "decodes": decodes}
    with open(os.path.join(out, "gguf_tok_cases.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    print(f"ref_tokenizer_gguf: tokenizers {__version__}: "
          + (f"bert -> {out}" if result["families"] else f"{MINILM} missing: no bert cases"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ref_tokenizer_gguf.py OUTDIR")
    main(sys.argv[1])
