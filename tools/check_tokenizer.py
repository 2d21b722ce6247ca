"""Check a tokenizer.json written by attn against Hugging Face `tokenizers`.
Usage: check_tokenizer.py CASES.json   (run by tests/test_tokenizer*.c)

CASES.json: {"tokenizer": PATH, "file_settings": bool (default true),
             "cases": [{"text": str, "ids": [int], "decode": str,
                        "pair": str (optional), "type_ids": [int] (optional),
                        "error": true (optional: encoding must fail)}, ...]}
where ids, type_ids and decode are what attn's encoder and decoder produced. The file must load
with Tokenizer.from_file; with file_settings false its truncation and padding are switched off
first (attn_tok_encode ignores them, as transformers does). For every case encode(text, pair).ids
must equal ids (and type_ids when given), or raise when error is set, and decode(ids) must equal
decode (when given). Prints one summary line; exits 1 on any difference (the first few are
shown)."""
import json
import sys

from tokenizers import Tokenizer, __version__


def main(path):
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    tok = Tokenizer.from_file(spec["tokenizer"])
    if not spec.get("file_settings", True):
        tok.no_truncation()
        tok.no_padding()
    bad = 0
    for i, c in enumerate(spec["cases"]):
        pair = c.get("pair")
        try:
            e = tok.encode(c["text"], pair)
            ids, types, err = e.ids, e.type_ids, None
        except Exception as ex:  # noqa: BLE001 - tokenizers raises a plain Exception
            ids, types, err = None, None, str(ex)
        if c.get("error"):
            ok = err is not None
            dec = None
        else:
            dec = tok.decode(c["ids"]) if "decode" in c else None
            ok = (err is None and ids == c["ids"] and ("type_ids" not in c or types == c["type_ids"])
                  and ("decode" not in c or dec == c["decode"]))
        if not ok:
            bad += 1
            if bad <= 5:
                print(f"check_tokenizer: case {i} {c['text']!r} pair {pair!r}:\n  attn ids {c.get('ids')}\n"
                      f"  hf   ids {ids} ({err})\n  attn decode {c.get('decode')!r}\n  hf   decode {dec!r}")
    n = len(spec["cases"])
    print(f"check_tokenizer: tokenizers {__version__}: {n - bad}/{n} cases identical "
          f"(vocab {tok.get_vocab_size()})")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: check_tokenizer.py CASES.json")
    sys.exit(main(sys.argv[1]))
