"""Reference tokenizers for tests/test_tokenizer.c, made by Hugging Face `tokenizers` (the library
attn's tokenizer.json files must agree with). Usage: ref_tokenizer.py OUTDIR.

Trains small BPE tokenizers with the `tokenizers` trainer on a sample of the Tatoeba English-Chinese
corpus (../shared/data/tatoeba-eng-cmn/cmn.txt), in several configurations, and writes for each
  tok_<variant>.json        the tokenizer.json, exactly as `tokenizers` saves it
and one file
  tok_cases.json            {"version": tokenizers.__version__,
                             "variants": {variant: {"tokenizer": "tok_<variant>.json",
                               "cases": [{"text", "ids", "decode", "decode_keep"}, ...]}}}
where ids = encode(text).ids, decode = decode(ids), decode_keep = decode(ids,
skip_special_tokens=False). The C side must reproduce every ids and decode exactly.

Variants:
  sp         what attn's trainer writes: normalizer Prepend("▁") + Replace(" ", "▁"), Metaspace
             (prepend_scheme never, split) + Punctuation(isolated), decoder Replace/ByteFallback/Fuse/Strip; BPE with
             byte_fallback and the 256 <0xHH> tokens; the alphabet limited so that rarer Chinese
             characters go through byte fallback. Its cases include 3000 corpus lines.
  llama      the same vocabulary without a pre-tokenizer (Llama-2's tokenizer.json layout)
  metaspace  the same with Metaspace alone as pre-tokenizer
  meta_first normalizer null, Metaspace(prepend_scheme "first") as pre-tokenizer and decoder
  unk        no byte fallback: unknown characters become <unk>, one per character (fuse_unk off)
  unk_fused  the same with fuse_unk on
  affix      trained with continuing_subword_prefix "##" and end_of_word_suffix "</w>"
"""
import json
import os
import sys

from tokenizers import Tokenizer, __version__, decoders, models, normalizers, pre_tokenizers
from tokenizers import trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tatoeba-eng-cmn", "cmn.txt")
SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
META = "\u2581"

HARD_CASES = [
    "Knowledge is power.", "知识就是力量。", "Tom said, \"I don't know.\"", "我不知道汤姆在哪里。",
    "Hello 世界! 你好, world.", "", " ", "  ", "   leading spaces", "trailing spaces   ",
    "a  b   c    d", "tab\there", "\t", "new\nline", "\n\n", "crlf\r\nend", "x \t \n y",
    "emoji 😀👍🏽 and 👨‍👩‍👧 family", "😀", "café naïve résumé", "cafe\u0301 (NFD)", "Ærøskøbing Œuvre",
    "ﬁ ligature", "Ünïcödé", "𠜎𠜱 (CJK extension B)", "鬱龘靐齉 rare characters", "ℕ ⊆ ℤ ⊂ ℚ",
    "Привет мир", "مرحبا", "שלום", "नमस्ते", "ก ข ค", "한국어", "日本語のテキスト",
    "<s>", "</s>", "<s>hello</s>", "a<pad>b", "<s><s></s>", "<s", "s>", "<unk>", "x <s> y",
    " <s> ", "<0x41>", "<0xE4><0xBD><0xA0>", "\u2581", "a\u2581b", "\u2581\u2581x",
    "control \x01\x02\x7f chars", "nul \x00 inside", "\ufeffBOM", "\u200bzero\u200dwidth",
    "1234567890 3.14159 $100 50%", "!!!???...", "ＦＵＬＬＷＩＤＴＨ", "ｶﾀｶﾅ",
    "The quick brown fox jumps over the lazy dog.", "他们在公园里踢足球，我们去看吧！",
    "Mixed中文English混合text", "“quotes” ‘single’ «guillemets»", "—–-", "…",
    "a" * 300, "你" * 200, "ab" * 150 + " " + "ba" * 150,
]


def read_corpus():
    texts = []
    with open(CORPUS, encoding="utf-8-sig") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 2:
                texts += [cols[0], cols[1]]
    return texts


def sp_pipeline(tok):
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(META), normalizers.Replace(" ", META)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=META, prepend_scheme="never", split=True),
        pre_tokenizers.Punctuation("isolated")])
    tok.decoder = decoders.Sequence([decoders.Replace(META, " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])


def train(sample, vocab_size, limit_alphabet, **bpe):
    model_args = {k: v for k, v in bpe.items() if k in ("continuing_subword_prefix", "end_of_word_suffix")}
    tok = Tokenizer(models.BPE(unk_token="<unk>", **model_args))
    sp_pipeline(tok)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS,
                             limit_alphabet=limit_alphabet, show_progress=False, **model_args)
    tok.train_from_iterator(sample, tr)
    return json.loads(tok.to_str())


def with_bytes(j):
    """Add the 256 byte tokens after the learned ones and turn byte fallback on."""
    vocab = j["model"]["vocab"]
    nxt = max(vocab.values()) + 1
    for b in range(256):
        name = "<0x%02X>" % b
        if name not in vocab:
            vocab[name] = nxt
            nxt += 1
    j["model"]["byte_fallback"] = True
    j["model"]["fuse_unk"] = True
    return j


def cases_for(tok, texts):
    out = []
    for t in texts:
        ids = tok.encode(t).ids
        out.append({"text": t, "ids": ids, "decode": tok.decode(ids),
                    "decode_keep": tok.decode(ids, skip_special_tokens=False)})
    return out


def main(out):
    os.makedirs(out, exist_ok=True)
    corpus = read_corpus()
    sample = corpus[::7]                      # ~8k texts, both languages
    held = corpus[3::19][:3000]               # corpus lines for the ids comparison

    base = train(sample, 3000, 1200)
    variants = {}
    variants["sp"] = with_bytes(json.loads(json.dumps(base)))
    j = with_bytes(json.loads(json.dumps(base)))
    j["pre_tokenizer"] = None
    variants["llama"] = j
    j = with_bytes(json.loads(json.dumps(base)))
    j["pre_tokenizer"] = j["pre_tokenizer"]["pretokenizers"][0]
    variants["metaspace"] = j
    j = with_bytes(json.loads(json.dumps(base)))
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": META, "prepend_scheme": "first",
                          "split": True}
    j["decoder"] = {"type": "Metaspace", "replacement": META, "prepend_scheme": "first", "split": True}
    variants["meta_first"] = j
    j = json.loads(json.dumps(base))
    j["model"]["fuse_unk"] = False
    variants["unk"] = j
    j = json.loads(json.dumps(base))
    j["model"]["fuse_unk"] = True
    variants["unk_fused"] = j
    variants["affix"] = train(sample[::2], 2000, 800, continuing_subword_prefix="##",
                              end_of_word_suffix="</w>")

    result = {"version": __version__, "variants": {}}
    for name, j in variants.items():
        fname = "tok_%s.json" % name
        path = os.path.join(out, fname)
        tok = Tokenizer.from_str(json.dumps(j))
        tok.save(path)                        # the library's own serialization
        tok = Tokenizer.from_file(path)
        texts = HARD_CASES + (held if name == "sp" else held[:300])
        result["variants"][name] = {"tokenizer": fname, "cases": cases_for(tok, texts)}
    with open(os.path.join(out, "tok_cases.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    n = sum(len(v["cases"]) for v in result["variants"].values())
    print(f"ref_tokenizer: tokenizers {__version__}: {len(variants)} tokenizers, {n} cases -> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ref_tokenizer.py OUTDIR")
    if not os.path.exists(CORPUS):
        # The C test skips what needs these files, with a message.
        print(f"ref_tokenizer: {CORPUS} not found: no reference tokenizers written")
        sys.exit(0)
    main(sys.argv[1])
