"""Reference encodings of added and special tokens, flag by flag, for tests/test_tokenizer_added.c,
made by Hugging Face `tokenizers`. Usage: ref_tokenizer_added.py OUTDIR.

A small BPE (vocabulary 400, trained on the start of tiny shakespeare, or on a built-in text
when the corpus is missing) in four pipelines:
  legacy     Llama 2's: normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, Llama's
             decoder (Replace, ByteFallback, Fuse, Strip), template "<s> $A"
  metaspace  Mistral v0.3's: Metaspace("▁", prepend_scheme "first", split false)
  bytelevel  Llama 3's: Split(Regex) + ByteLevel(use_regex false), ByteLevel decoder
  lowercase  Lowercase + NFKC normalizers, Whitespace pre-tokenizer, WordPiece-style decoder
             (normalized tokens match by their normalized content)
and, for each, one variant per combination of the five AddedToken flags (single_word, lstrip,
rstrip, normalized, special) given to every added token, plus two variants with mixed flags.
The added tokens overlap on purpose ("<|x|>", "<|x", "x|>"), look like words ("xyz"), hold
whitespace (" sep", "\n") or case ("ABC" and "abc", equal once lowercased).
Writes OUTDIR/added_cases.json:
  {"version", "variants": [{"name", "tokenizer" (the tokenizer.json text), "error" (null, or
   tokenizers' message when it refuses the file), "cases": [{"text", "ids", "ids_plain",
   "decode", "decode_keep"} or {"text", "panic"}]}]}
"panic": tokenizers 0.21.4 panics ("AddedVocabulary bad split") when an lstrip token's match
reaches back into whitespace that an rstrip match before it already took, which happens here
with the whitespace tokens " sep" and "\n"; attn encodes those texts without failing and the
test compares nothing there."""
import itertools
import json
import os
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, __version__, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")
META = "\u2581"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

ADDED = ["<|x|>", "<|x", "x|>", "xyz", " sep", "\n", "ABC", "abc", "<y>", "é!"]

TEXTS = [
    "", " ", "<|x|>", "a<|x|>b", "a <|x|> b", "  <|x|>  ", "<|x|>\n\nfoo", "foo\n\n<|x|>",
    "<|x|><|x|>", "<|x|> <|x|>", "<|x|>  \t\n <|x|>", "<|x", "x|>", "<|x|>|>", "<<|x|>",
    "<|x<|x|>x|>", "xyz", "axyz", "xyzb", "a xyz b", "xyz.", ".xyz", "_xyz", "xyz_", "éxyz",
    "xyzé", "xyz123", "1xyz", "xyz xyz", "xyzxyz", " xyz ", "\txyz\t", "a\u00a0xyz\u3000b",
    "xyz\u0301", "xyz\u200d", "\u200dxyz", " sep", "a sep b", "asep", "a  sep", "sep", "\n",
    "a\nb", "\n\n", " \n ", "a \n b", "ABC", "abc", "aBc", "xABCx", "x ABC x", "<y>", "X<y>Y",
    "<Y>", "▁<y>", "<y>▁", "é!", "e\u0301!", "café!", "<|x|>xyz<y>", "xyz <|x|> abc\n<y>",
    "Hello, world! <|x|> How are you?\n", "  leading and trailing  ", "<s>", "<s> hi",
]


def corpus():
    if os.path.exists(CORPUS):
        with open(CORPUS, encoding="utf-8") as f:
            return f.read()[:20000].split("\n")
    return ["The quick brown fox jumps over the lazy dog."] * 50


def base(kind):
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True,
                               byte_fallback=kind in ("legacy", "metaspace")))
    if kind == "legacy":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(META),
                                               normalizers.Replace(" ", META)])
    elif kind == "metaspace":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(META, prepend_scheme="first", split=False)
    elif kind == "bytelevel":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Lowercase(), normalizers.NFKC()])
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
    alphabet = pre_tokenizers.ByteLevel.alphabet() if kind == "bytelevel" else []
    specials = ["<unk>", "<s>", "</s>"] + (["<0x%02X>" % b for b in range(256)]
                                           if kind in ("legacy", "metaspace") else [])
    tr = trainers.BpeTrainer(vocab_size=400 + len(specials), special_tokens=specials,
                             initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(corpus(), tr)
    if kind in ("legacy", "metaspace"):
        tok.decoder = decoders.Sequence([decoders.Replace(META, " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s>:1 $B:1",
            special_tokens=[("<s>", tok.token_to_id("<s>"))])
    elif kind == "bytelevel":
        tok.decoder = decoders.ByteLevel()
    else:
        tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    return json.loads(tok.to_str())


def variant(j, flags_of):
    """j with the added tokens ADDED, flags per token from flags_of(i)."""
    tok = Tokenizer.from_str(json.dumps(j))
    toks = []
    for i, content in enumerate(ADDED):
        sw, ls, rs, norm, sp = flags_of(i)
        toks.append(AddedToken(content, single_word=sw, lstrip=ls, rstrip=rs, normalized=norm,
                               special=sp))
    for t in toks:  # one at a time: the special and the other ones keep the list's order
        if t.special:
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])
    return tok.to_str()


def quiet_stderr():
    """Rust prints each panic with a backtrace on fd 2: send it to /dev/null while encoding."""
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    return saved


def cases(text_json):
    tok = Tokenizer.from_str(text_json)
    out = []
    for t in TEXTS:
        try:
            ids = tok.encode(t).ids
            plain = tok.encode(t, add_special_tokens=False).ids
        except BaseException as e:  # noqa: BLE001 (a Rust panic: see "panic" below)
            out.append({"text": t, "panic": str(e)})
            continue
        out.append({"text": t, "ids": ids, "ids_plain": plain, "decode": tok.decode(ids),
                    "decode_keep": tok.decode(ids, skip_special_tokens=False)})
    return out


def main(out):
    os.makedirs(out, exist_ok=True)
    variants = []
    for kind in ("legacy", "metaspace", "bytelevel", "lowercase"):
        j = base(kind)
        for combo in itertools.product([False, True], repeat=5):
            name = kind + ":" + "".join(c for c, on in zip("wlrns", combo) if on)
            variants.append((name, variant(j, lambda i, c=combo: c)))
        for seed in (1, 2):
            mixed = [tuple(bool((seed * 7 + i * 13 + k * 5) % 3 == 0) for k in range(5))
                     for i in range(len(ADDED))]
            variants.append((f"{kind}:mixed{seed}", variant(j, lambda i, m=mixed: m[i])))
    result = {"version": __version__, "variants": []}
    saved = quiet_stderr()
    for name, tj in variants:
        try:
            cs, err = cases(tj), None
        except Exception as e:  # noqa: BLE001 (tokenizers refuses: the C side must too)
            cs, err = [], str(e)
        result["variants"].append({"name": name, "tokenizer": tj, "error": err, "cases": cs})
    os.dup2(saved, 2)
    os.close(saved)
    with open(os.path.join(out, "added_cases.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    n = sum(len(v["cases"]) for v in result["variants"])
    print(f"ref_tokenizer_added: tokenizers {__version__}: {len(variants)} tokenizers, {n} cases "
          f"-> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ref_tokenizer_added.py OUTDIR")
    main(sys.argv[1])
