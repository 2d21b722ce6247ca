"""Reference results for tests/test_tokenizer_wordpiece.c, made live by Hugging Face `tokenizers`
(and sentence-transformers / transformers for the MiniLM check). Usage: ref_tokenizer_wordpiece.py OUTDIR.

Needs models/all-MiniLM-L6-v2/tokenizer.json (sh tools/get_minilm.sh); without it, writes nothing
and the C test skips with a message. Writes:
  wp_<variant>.json     tokenizer.json variants made by editing MiniLM's (saved by `tokenizers`):
      minilm      the file as it is (BertNormalizer, BertPreTokenizer, WordPiece, TemplateProcessing,
                  WordPiece decoder, truncation 128 and padding Fixed 128 in the file)
      cased       lowercase false (strip_accents null: follows lowercase, so no stripping either)
      strip       lowercase false, strip_accents true
      nostrip     lowercase true, strip_accents false
      nochinese   handle_chinese_chars false
      noclean     clean_text false
      bertproc    BertProcessing instead of TemplateProcessing, decoder cleanup false
      nopost      post_processor null, decoder null (tokens joined by " ")
      tiny        a 60-token vocabulary, max_input_chars_per_word 10 (unknown words, long words ->
                  [UNK]) and a template "[CLS] $B:1 [SEP]:1 $A [SEP2]" with a two-id special token
      nounk       tiny without [UNK] in its vocabulary: encoding an unknown word is an error
      gen_nfd     normalizer Sequence[NFD, Lowercase, StripAccents], pre_tokenizer Whitespace
      gen_nfkc    normalizer Sequence[NFKC, Strip], pre_tokenizer WhitespaceSplit
      gen_nfc     normalizer Sequence[NFC, Lowercase], pre_tokenizer Sequence[WhitespaceSplit,
                  Punctuation]
      gen_nfkd    normalizer NFKD, pre_tokenizer BertPreTokenizer
  wp_cases.json  {"version", "cases": [...], "batches": [...], "decodes": [...], "classes": {...}}
      case:   {"variant", "text", "pair" (or null), "params", then either "error": true or
               "ids", "type_ids", "attention_mask", "special_tokens_mask"}
              params: "file" (the tokenizer.json's own truncation/padding, as Tokenizer.encode
              uses them) or {"add_special_tokens", "truncation": null | {"max_length",
              "strategy", "direction"}, "padding": null | {"length" (null: batch longest),
              "multiple", "direction", "pad_id", "pad_type_id"}}
      batch:  {"variant", "texts", "pairs" (or null), "params", "source", "encodings": [...]}
              source "tokenizers" (encode_batch) or "sentence-transformers" (SentenceTransformer.
              tokenize, max_seq_length 256) or "transformers" (AutoTokenizer(..., padding=True,
              truncation=True, max_length=256))
      decode: {"variant", "ids", "skip_special", "text"}
      norms:  {"norm", "text", "out"}: one normalizer (nfd nfkd nfc nfkc lower strip_accents strip
              lstrip rstrip bert bert_cased bert_strip) on texts that exercise composition,
              reordering and the characters tokenizers' old tables do not know
      classes: how each code point (surrogates excepted) comes out of single components, as runs
               [first, last, output] (output the same for the whole run; code points not listed
               are unchanged; "S" in "chinese" means " c "): "clean", "chinese", "strip"
               (BertNormalizer with one option on),
               "lower" (Lowercase), "nfd", "nfkd", "nfc", "nfkc", "strip_accents", "nfd_order" ("R" where NFD
               moves U+0334 before c: c's combining class is above 1); and classes of
               pre-tokenizers: "bert_pre" (W removed as whitespace, P isolated as punctuation),
               "ws_pre" (Whitespace: W space, O neither word nor space), "wss_pre" (W)."""
import json
import os
import sys

from tokenizers import Tokenizer, __version__, normalizers, pre_tokenizers, processors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINILM = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tatoeba-eng-cmn", "cmn.txt")

HARD = [
    "Hello, world!", "Café", "naïve café résumé", "Ångström", "straße STRASSE ß ẞ", "İstanbul ıi",
    "Ελληνικά: άέήίόύώ ΐΰ ΆΈΉΊΌΎΏ", "ΣΊΣΥΦΟΣ σίσυφος", "ǅungla ǈ ǋ", "ﬁ ﬂ ligatures", "½ ² ℌ ℡ ㎏",
    "中文", "日本語のテキスト", "한국어 텍스트", "知识就是力量。Knowledge is power.", "mixed中文and English混合",
    "😀👍🏽 👨‍👩‍👧 family", "🥰 🫠 newer emoji", "a\x01b\x7fc\x1bd", "nul\x00inside", "tab\tand\nnewline\r\nend",
    "   runs    of   spaces   ", "!!!???...,,,", "(a)[b]{c}<d>", "don't won't I'm you're they've we'll she'd",
    "1234567890 3.14159 $100 50% 1,000,000", "a" * 99, "a" * 100, "a" * 101, "a" * 102, "a" * 103,
    "supercalifragilistic" * 6, "x" * 300 + " after", "", " ", "\t\n", "\x00", "\x01\x02", "\u200b\u200d\ufeff",
    "\ufffd", "a\ufffdb", "[CLS] [SEP] [MASK] [PAD] [UNK]", "The capital of France is [MASK].", "[mask] [Mask]",
    "a[MASK]b", "[MASK][MASK]", "Ünïcödé", "cafe\u0301", "e\u0301\u0302\u0323 stacked", "\u0345 ypogegrammeni",
    "Привет мир", "مرحبا بالعالم", "שלום", "नमस्ते दुनिया", "สวัสดี ก ข ค", "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ", "ｶﾀｶﾅ",
    "“quotes” ‘single’ «guillemets» — – …", "¿Qué? ¡Sí!", "email@example.com http://x.y/z?q=1&r=2",
    "#hashtag @user ~tilde^ `back` \\slash |pipe", "\u3000ideographic\u3000space", "\xa0nbsp\xa0",
    "\u2028line\u2029sep", "next\x85line", "𠜎𠜱 extension B", "\U0002B820\U0002B81F gap", "\U00030000 ext G",
    "㐀 ext A", "豈 compat 丽", "ⅷ Ⅻ roman", "x² H₂O", "① Ⓐ ⓐ", "A\u030a vs Å", "U.S.A. e.g. ... -- 'q' \"d\"",
    "\U000E0001tag\U000E0041", "\ue000private\U000F0000", "\u0378unassigned\u0380", "\u061c\u2066bidi\u2069",
    "\u180emongolian\u180e", "soft\xadhyphen", "ﷺ ﷻ", "ǰ ΐ ẖ", "\u1e9e\u00df\u0130", "Ⅰ ⅰ ⓧ Ⓧ",
    "the quick brown fox jumps over the lazy dog " * 5, "unaffable unbelievable misunderstanding",
    "Mr. Smith's car isn't here; it's there: 10:30 a.m.", "C++ / C# & F#", "¡¿", "⁂※", "…‥",
]

PAIRS = [("How are you?", "I am fine, thanks."), ("", "only second"), ("only first", ""), ("", ""),
         ("知识就是力量", "Knowledge is power."), ("[MASK] is here.", "a [SEP] b"),
         ("short", "a much longer second sentence with many words in it"),
         ("a much longer first sentence with many words in it", "short")]


_CACHE = {}


def load(path, fresh=False):
    """One Tokenizer per file (reconfigured by each call), or a fresh one with the file's settings."""
    if fresh:
        return Tokenizer.from_file(path)
    if path not in _CACHE:
        _CACHE[path] = Tokenizer.from_file(path)
    return _CACHE[path]


def variant_jsons():
    base = json.load(open(os.path.join(MINILM, "tokenizer.json"), encoding="utf-8"))
    out = {"minilm": base}

    def edit(fn):
        j = json.loads(json.dumps(base))
        fn(j)
        return j

    def norm(**kw):
        def f(j):
            j["normalizer"].update(kw)
        return f

    out["cased"] = edit(norm(lowercase=False, strip_accents=None))
    out["strip"] = edit(norm(lowercase=False, strip_accents=True))
    out["nostrip"] = edit(norm(lowercase=True, strip_accents=False))
    out["nochinese"] = edit(norm(handle_chinese_chars=False))
    out["noclean"] = edit(norm(clean_text=False))

    def bertproc(j):
        j["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}
        j["decoder"]["cleanup"] = False
    out["bertproc"] = edit(bertproc)

    def nopost(j):
        j["post_processor"] = None
        j["decoder"] = None
        j["truncation"] = None
        j["padding"] = None
    out["nopost"] = edit(nopost)

    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz") + \
           ["##" + c for c in "aeinost"] + ["the", "un", "##able", "hello", "world", ".", ",", "!",
                                               "'", "中", "文", "é", "##é", "caf", "##ing", "##ed", "quick"]
    tiny_vocab = {t: i for i, t in enumerate(toks)}

    def tiny(j):
        j["model"]["vocab"] = tiny_vocab
        j["model"]["max_input_chars_per_word"] = 10
        j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] in tiny_vocab]
        for a in j["added_tokens"]:
            a["id"] = tiny_vocab[a["content"]]
        j["truncation"] = None
        j["padding"] = None
        tp = processors.TemplateProcessing(
            single="[CLS] $A [SEP2]", pair="[CLS] $B:1 [SEP]:1 $A [SEP2]",
            special_tokens=[("[CLS]", 2), ("[SEP]", 3),
                            {"id": "[SEP2]", "ids": [3, 4], "tokens": ["[SEP]", "[MASK]"]}])
        j["post_processor"] = json.loads(tp.__getstate__())
    out["tiny"] = edit(tiny)
    nounk = json.loads(json.dumps(out["tiny"]))
    nounk["model"]["vocab"]["[NOTUNK]"] = nounk["model"]["vocab"].pop("[UNK]")
    nounk["added_tokens"] = [a for a in nounk["added_tokens"] if a["content"] != "[UNK]"]
    out["nounk"] = nounk

    def gen(normalizer, pre, cleanup=True):
        def f(j):
            j["normalizer"] = json.loads(normalizer.__getstate__())
            j["pre_tokenizer"] = json.loads(pre.__getstate__())
            j["decoder"]["cleanup"] = cleanup
            j["truncation"] = None
            j["padding"] = None
        return f
    out["gen_nfd"] = edit(gen(normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                                    normalizers.StripAccents()]),
                              pre_tokenizers.Whitespace(), cleanup=False))
    out["gen_nfkc"] = edit(gen(normalizers.Sequence([normalizers.NFKC(), normalizers.Strip()]),
                               pre_tokenizers.WhitespaceSplit()))
    out["gen_nfc"] = edit(gen(normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()]),
                              pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                       pre_tokenizers.Punctuation()])))
    out["gen_nfkd"] = edit(gen(normalizers.NFKD(), pre_tokenizers.BertPreTokenizer()))
    return out


def enc_dict(e):
    return {"ids": e.ids, "type_ids": e.type_ids, "attention_mask": e.attention_mask,
            "special_tokens_mask": e.special_tokens_mask}


def configure(tok, params):
    """Set the call's truncation/padding on tok (a fresh copy per call)."""
    tok.no_truncation()
    tok.no_padding()
    tr = params.get("truncation")
    if tr:
        tok.enable_truncation(tr["max_length"], strategy=tr["strategy"], direction=tr["direction"])
    pd = params.get("padding")
    if pd:
        tok.enable_padding(direction=pd["direction"], pad_id=pd["pad_id"], pad_type_id=pd["pad_type_id"],
                           pad_token="[PAD]", length=pd["length"], pad_to_multiple_of=pd["multiple"])


def encode_case(files, variant, text, pair, params):
    tok = load(files[variant], fresh=params == "file")
    add = True
    if params != "file":
        configure(tok, params)
        add = params["add_special_tokens"]
    c = {"variant": variant, "text": text, "pair": pair, "params": params}
    try:
        e = tok.encode(text, pair, add_special_tokens=add)
    except Exception as ex:  # noqa: BLE001 - tokenizers raises a plain Exception
        c["error"] = True
        c["message"] = str(ex)
        return c
    c.update(enc_dict(e))
    return c


def P(add=True, tr=None, pad=None):
    return {"add_special_tokens": add, "truncation": tr, "padding": pad}


def TR(n, strategy="longest_first", direction="right"):
    return {"max_length": n, "strategy": strategy, "direction": direction}


def PAD(length=None, multiple=None, direction="right", pad_id=0, pad_type_id=0):
    return {"length": length, "multiple": multiple, "direction": direction, "pad_id": pad_id,
            "pad_type_id": pad_type_id}


def runs_of(cps, outs):
    """[[first, last, out], ...] for the code points whose output differs from themselves."""
    runs = []
    for i in [i for i, (c, o) in enumerate(zip(cps, outs)) if len(o) != 1 or ord(o) != c]:
        c, o = cps[i], outs[i]
        if runs and runs[-1][1] == c - 1 and runs[-1][2] == o:
            runs[-1][1] = c
        else:
            runs.append([c, c, o])
    return runs


def per_char(fn, cps, sep, spaced=False):
    """Apply a str -> str function to each code point at once, joined by sep (which must pass
    unchanged and alone); sep itself is done separately. With spaced, an output " c " (the
    character between two spaces) is written "S" (so that the runs stay short)."""
    k = cps.index(ord(sep))
    todo = cps[:k] + cps[k + 1:]
    out = fn(sep.join(map(chr, todo))).split(sep)
    assert len(out) == len(todo), (len(out), len(todo))
    out.insert(k, fn(sep))
    if spaced:
        out = ["S" if len(o) == 3 and o[0] == o[2] == " " and ord(o[1]) == c else o
               for c, o in zip(cps, out)]
    return runs_of(cps, out)


def pre_classes(pre, cps, word_class):
    """Classify code points by how a pre-tokenizer treats 'a' c 'a': not covered (W), a piece
    of its own (P or O), or merged with the letters around it (not listed). In chunks: the
    Python binding's offset conversion is slow on long texts."""
    outs = []
    for at in range(0, len(cps), 4096):
        chunk = cps[at:at + 4096]
        s = "a" + "a".join(map(chr, chunk)) + "a"
        covered = bytearray(len(s))
        single = bytearray(len(s))
        for _, (a, b) in pre.pre_tokenize_str(s):
            covered[a:b] = b"\x01" * (b - a)
            if b - a == 1:
                single[a] = 1
        outs += ["W" if not covered[1 + 2 * i] and c != 0x61 else
                 word_class if single[1 + 2 * i] and c != 0x61 else chr(c)
                 for i, c in enumerate(chunk)]
    return runs_of(cps, outs)


def classes():
    cps = [c for c in range(0x110000) if not (0xD800 <= c < 0xE000)]
    bn = normalizers.BertNormalizer
    res = {}
    res["clean"] = per_char(bn(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                               lowercase=False).normalize_str, cps, "|")
    res["chinese"] = per_char(bn(clean_text=False, handle_chinese_chars=True, strip_accents=False,
                                 lowercase=False).normalize_str, cps, "\x01", spaced=True)
    res["strip"] = per_char(bn(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                               lowercase=False).normalize_str, cps, "\x01")
    for name, n in [("lower", normalizers.Lowercase()), ("nfd", normalizers.NFD()),
                    ("nfkd", normalizers.NFKD()), ("nfc", normalizers.NFC()), ("nfkc", normalizers.NFKC()),
                    ("strip_accents", normalizers.StripAccents())]:
        res[name] = per_char(n.normalize_str, cps, "\x01")
    # canonical reordering: "R" where NFD(c + U+0334) is not NFD(c) + U+0334, i.e. where c (or its
    # decomposition's last character) has a combining class above 1
    nfd = normalizers.NFD().normalize_str
    todo = [c for c in cps if c != 1]
    a = nfd("\x01".join(map(chr, todo))).split("\x01")
    b = nfd("\u0334\x01".join(map(chr, todo)) + "\u0334").split("\x01")
    assert len(a) == len(b) == len(todo)
    outs = ["R" if y != x + "\u0334" else chr(c) for c, x, y in zip(todo, a, b)]
    outs.insert(1, "\x01")
    res["nfd_order"] = runs_of(cps, outs)
    res["bert_pre"] = pre_classes(pre_tokenizers.BertPreTokenizer(), cps, "P")
    res["ws_pre"] = pre_classes(pre_tokenizers.Whitespace(), cps, "O")
    res["wss_pre"] = pre_classes(pre_tokenizers.WhitespaceSplit(), cps, "?")
    return res


NORM_TEXTS = ["\U00011935\U00011930", "a\U00011935\U00011930b", "e\u0301\u0316", "e\u0316\u0301",
              "\u1100\u1161\u11a8", "\u07fd\u0301", "a\u0301\u07fd\u0316", "\u0898\u0301\u0316",
              "\U00011938\u0301", "\u32ff\u0301", "\u00c5\u0301", "A\u030a\u0301", "\ufb01\u0301",
              "\u1e9b\u0323", "\u0f73\u0f75", "\u1734\u0301", "\u1cf2x", "  \t lead and trail \n ",
              "\u3000\u00a0x\u2029", "x" * 70 + "\u0301" * 30]
NORMS = {"nfd": normalizers.NFD(), "nfkd": normalizers.NFKD(), "nfc": normalizers.NFC(),
         "nfkc": normalizers.NFKC(), "lower": normalizers.Lowercase(), "strip_accents": normalizers.StripAccents(),
         "strip": normalizers.Strip(), "lstrip": normalizers.Strip(True, False),
         "rstrip": normalizers.Strip(False, True), "bert": normalizers.BertNormalizer(),
         "bert_cased": normalizers.BertNormalizer(lowercase=False),
         "bert_strip": normalizers.BertNormalizer(lowercase=False, strip_accents=True)}


def norm_cases():
    return [{"norm": k, "text": t, "out": n.normalize_str(t)} for k, n in NORMS.items()
            for t in NORM_TEXTS + HARD]


def corpus_lines(n):
    if not os.path.exists(CORPUS):
        return []
    texts = []
    with open(CORPUS, encoding="utf-8-sig") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 2:
                texts += [cols[0], cols[1]]
    return texts[::max(1, len(texts) // n)][:n]


def minilm_batches(lines):
    """sentence-transformers' own tokenization of MiniLM (max_seq_length 256), or transformers'
    with the same arguments when sentence-transformers cannot be imported."""
    longs = [" ".join(lines[i:i + k]) for i, k in ((0, 40), (50, 80), (200, 120), (400, 15), (600, 160))]
    longs.append("word " * 300)
    longs.append("知识就是力量" * 60)
    batches = [longs, lines[:32], lines[32:33], [longs[1]], ["", "x", " ".join(lines[:100])]]
    out = []
    try:
        import logging
        logging.disable(logging.WARNING)
        from sentence_transformers import SentenceTransformer
        m = SentenceTransformer(MINILM, device="cpu")
        assert m.max_seq_length == 256
        for b in batches:
            f = m.tokenize(b)
            out.append({"variant": "minilm", "texts": b, "pairs": None, "source": "sentence-transformers",
                        "params": P(True, TR(256), PAD()),
                        "encodings": [{"ids": f["input_ids"][i].tolist(),
                                       "type_ids": f["token_type_ids"][i].tolist(),
                                       "attention_mask": f["attention_mask"][i].tolist()}
                                      for i in range(len(b))]})
    except Exception as ex:  # noqa: BLE001
        print(f"ref_tokenizer_wordpiece: sentence-transformers unavailable ({ex}); transformers only")
    from transformers import AutoTokenizer
    at = AutoTokenizer.from_pretrained(MINILM)
    for b in batches:
        f = at(b, padding=True, truncation=True, max_length=256)
        out.append({"variant": "minilm", "texts": b, "pairs": None, "source": "transformers",
                    "params": P(True, TR(256), PAD()),
                    "encodings": [{"ids": f["input_ids"][i], "type_ids": f["token_type_ids"][i],
                                   "attention_mask": f["attention_mask"][i]} for i in range(len(b))]})
    a, b = longs[:4], [longs[4], "short", longs[0], ""]
    f = at(a, b, padding=True, truncation=True, max_length=256)
    out.append({"variant": "minilm", "texts": a, "pairs": b, "source": "transformers",
                "params": P(True, TR(256), PAD()),
                "encodings": [{"ids": f["input_ids"][i], "type_ids": f["token_type_ids"][i],
                               "attention_mask": f["attention_mask"][i]} for i in range(len(a))]})
    return out


def main(out):
    os.makedirs(out, exist_ok=True)
    files = {}
    for name, j in variant_jsons().items():
        path = os.path.join(out, "wp_%s.json" % name)
        Tokenizer.from_str(json.dumps(j)).save(path)  # the library's own serialization
        files[name] = path
    cases, decodes, batches = [], [], []
    lines = corpus_lines(4000)
    plain = P()
    for v in files:
        texts = HARD + (lines[:3000] if v == "minilm" else lines[:150])
        for t in texts:
            cases.append(encode_case(files, v, t, None, plain))
        for a, b in PAIRS:
            cases.append(encode_case(files, v, a, b, plain))
            cases.append(encode_case(files, v, a, b, P(False)))
        for t in HARD[:40]:
            cases.append(encode_case(files, v, t, None, P(False)))
    # the file's own settings (MiniLM: truncation 128, padding Fixed 128)
    long_text = " ".join(lines[:60]) if lines else "word " * 200
    for t in HARD[:20] + [long_text]:
        cases.append(encode_case(files, "minilm", t, None, "file"))
    cases.append(encode_case(files, "minilm", long_text, "and a pair", "file"))
    # truncation
    la, lb = " ".join(lines[:12]) or "a b c " * 30, " ".join(lines[20:27]) or "d e f " * 20
    for v in ("minilm", "tiny", "nopost", "bertproc"):
        for n in (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 17, 30, 64, 128):
            for strat in ("longest_first", "only_first", "only_second"):
                for d in ("right", "left"):
                    for add in (True, False):
                        cases.append(encode_case(files, v, la, lb, P(add, TR(n, strat, d))))
                        cases.append(encode_case(files, v, lb, la, P(add, TR(n, strat, d))))
                        cases.append(encode_case(files, v, la, "", P(add, TR(n, strat, d))))
                        cases.append(encode_case(files, v, la, None, P(add, TR(n, strat, d))))
    # padding
    for v in ("minilm", "tiny", "nopost"):
        for t, p in [("Hello world.", None), ("", None), ("How are you?", "Fine."), (la, lb)]:
            for pad in (PAD(16), PAD(3), PAD(None), PAD(None, 8), PAD(10, 8), PAD(20, None, "left", 7, 2),
                        PAD(None, 5, "left")):
                cases.append(encode_case(files, v, t, p, P(True, None, pad)))
                cases.append(encode_case(files, v, t, p, P(True, TR(12), pad)))
    # batches (tokenizers' encode_batch: padding to the longest of the batch)
    for v in ("minilm", "tiny", "bertproc"):
        tok = load(files[v])
        for texts, pairs, params in [
                (lines[:16], None, P(True, TR(32), PAD())), (HARD[:30], None, P(True, None, PAD(None, 8))),
                (lines[40:48], lines[50:58], P(True, TR(40), PAD(None, None, "left", 5, 1))),
                (["", "a", "b c"], None, P(False, None, PAD())), (lines[60:70], None, P(True, TR(20))),
                (["one"], None, P(True, None, PAD(9)))]:
            configure(tok, params)
            inp = list(zip(texts, pairs)) if pairs else texts
            es = tok.encode_batch(inp, add_special_tokens=params["add_special_tokens"])
            batches.append({"variant": v, "texts": texts, "pairs": pairs, "params": params,
                            "source": "tokenizers", "encodings": [enc_dict(e) for e in es]})
    batches += minilm_batches(lines or HARD)
    # decodes: every plain encoding of the hard cases, with and without special tokens
    for c in cases:
        if c["params"] == plain and c["pair"] is None and "ids" in c and c["text"] in HARD:
            tok = load(files[c["variant"]])
            for skip in (True, False):
                decodes.append({"variant": c["variant"], "ids": c["ids"], "skip_special": skip,
                                "text": tok.decode(c["ids"], skip_special_tokens=skip)})
    tok = load(files["minilm"])
    for ids in ([1005, 1055], [2079, 2025], [1012, 1029, 999, 1010], [7592, 1005, 1049, 2182],
                [2123, 1005, 1056], [1045, 1005, 2310], [2017, 1005, 2128], [1001, 1001, 1037],
                [7592, 1005, 1055, 1005, 1055], [2009, 1005, 1055, 1012], [101, 102, 0, 103, 100]):
        for v in ("minilm", "bertproc"):
            t2 = load(files[v])
            for skip in (True, False):
                decodes.append({"variant": v, "ids": ids, "skip_special": skip,
                                "text": t2.decode(ids, skip_special_tokens=skip)})
    del tok
    result = {"version": __version__, "files": {k: os.path.basename(p) for k, p in files.items()},
              "cases": cases, "batches": batches, "decodes": decodes, "classes": classes(),
              "norms": norm_cases()}
    with open(os.path.join(out, "wp_cases.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    print(f"ref_tokenizer_wordpiece: tokenizers {__version__}: {len(files)} tokenizers, {len(cases)} cases, "
          f"{len(batches)} batches, {len(decodes)} decodes -> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ref_tokenizer_wordpiece.py OUTDIR")
    if not os.path.exists(os.path.join(MINILM, "tokenizer.json")):
        print(f"ref_tokenizer_wordpiece: {MINILM}/tokenizer.json not found (sh tools/get_minilm.sh): "
              "no references written")
        sys.exit(0)
    main(sys.argv[1])
