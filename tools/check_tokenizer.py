"""Check a tokenizer.json written by attn against Hugging Face `tokenizers`.
Usage: check_tokenizer.py CASES.json   (run by tests/test_tokenizer.c)

CASES.json: {"tokenizer": PATH, "cases": [{"text": str, "ids": [int], "decode": str}, ...]} where
ids and decode are what attn's encoder and decoder produced. The file must load with
Tokenizer.from_file, and for every case encode(text).ids must equal ids and decode(ids) must equal
decode. Prints one summary line; exits 1 on any difference (the first few are shown)."""
import json
import sys

from tokenizers import Tokenizer, __version__


def main(path):
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    tok = Tokenizer.from_file(spec["tokenizer"])
    bad = 0
    for i, c in enumerate(spec["cases"]):
        ids = tok.encode(c["text"]).ids
        dec = tok.decode(c["ids"])
        if ids != c["ids"] or dec != c["decode"]:
            bad += 1
            if bad <= 5:
                print(f"check_tokenizer: case {i} {c['text']!r}:\n  attn ids {c['ids']}\n  hf   ids {ids}\n"
                      f"  attn decode {c['decode']!r}\n  hf   decode {dec!r}")
    n = len(spec["cases"])
    print(f"check_tokenizer: tokenizers {__version__}: {n - bad}/{n} cases identical "
          f"(vocab {tok.get_vocab_size()})")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: check_tokenizer.py CASES.json")
    sys.exit(main(sys.argv[1]))
