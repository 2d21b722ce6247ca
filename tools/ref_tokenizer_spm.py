"""Reference results for tests/test_tokenizer_spm.c, made live by SentencePiece (PyPI
`sentencepiece`, pinned in tools/install_deps.sh), transformers' MarianTokenizer and
NllbTokenizerFast, and tokenizers. Usage: ref_tokenizer_spm.py OUTDIR.

Trains two tiny SentencePiece models with SentencePiece's own trainer on the English and Chinese
sentences of ../shared/data/tatoeba-eng-cmn/cmn.txt (deterministic: one thread):
  spm/uni.model   unigram, 3000 pieces, character_coverage 0.995 (rare Chinese characters are
                  unknown), the default normalizer nmt_nfkc
  spm/bpe.model   BPE, 3000 pieces, byte_fallback
and from them, under OUTDIR/spm/:
  marian_shared/  MarianTokenizer files: source.spm = uni.model, target.spm = bpe.model, one
                  vocab.json over both models' pieces in an order of its own (ids remapped: "</s>" 0,
                  "<unk>" 1, pieces in reverse, every 29th piece left out so that it becomes
                  "<unk>", two language codes ">>fra<<" ">>cmn_Hans<<", "<pad>" last)
  marian_sep/     the same with separate_vocabs: vocab.json over uni.model's pieces,
                  target_vocab.json over bpe.model's
  nllb_uni/, nllb_bpe/, nllb_uni_legacy/
                  NllbTokenizerFast made by transformers' converter from the slow NllbTokenizer
                  (tokenizer.json: Unigram or BPE model, Precompiled normalizer, Metaspace,
                  the 202 language codes as special added tokens); legacy_behaviour in
                  tokenizer_config.json
  t5_uni/, t5_bpe/, xlmr_uni/
                  T5TokenizerFast and XLMRobertaTokenizerFast tokenizer.json files the same way
  spm_cases.json  {"texts": [...],
                   "spm": [{"model", "i", "ids", "decode"}]             SentencePieceProcessor
                   "json": [{"dir", "i", "ids", "decode", "decode_keep"}]   tokenizers' Tokenizer
                   "marian": [{"dir", "i", "src", "tgt", "decode", "decode_keep", "src_decode"}]
                   "nllb": [{"dir", "i", "src_lang", "tgt_lang", "src", "tgt", "decode",
                             "decode_keep"}]
                   "decode_ids": [{"dir", "ids", "decode", "decode_keep"}]  arbitrary id runs}
Without the Tatoeba file nothing is written (the C test skips)."""
import json
import os
import random
import shutil
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "tatoeba-eng-cmn", "cmn.txt")

TEXTS = [
    "", " ", "   ", "\t\n", "Hello world.", "  Hello   world  ", "Knowledge is power.",
    "\tTabs\tand\nnewlines\r\nend", "I have 12345 apples and 3.14159 pies, 2024-01-31.",
    "你好，世界！", "我爱北京天安门。", "他说：“今天天气很好。”", "知识就是力量。",
    "unknown: 龘 𠀀 😀 ☃ ∮", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３！", "ﬁ ligature ① ㍻ ™ … ½ ²",
    "e\u0301 café naïve Å\u030a", "Supercalifragilisticexpialidocious" * 3, "a" * 200,
    "中" * 100, "Mixed 中文 and English 混合文本", "</s> inside <unk> text <pad>!",
    ">>fra<< language code", "x >>cmn_Hans<< inside", "punctuation!!! ??? ... --- ,,,",
    "don't can't won't I'm", "\u00a0nbsp\u3000ideographic space\u2003em", "zero\u200bwidth\u200djoin",
    "\u0000nul and \u0007bell", "ＡＢＣａｂｃ ｶﾀｶﾅ ﾊﾟ", "ЁЖИК Ελληνικά عربي हिन्दी", "\r\n\r\n", "▁already▁meta",
    "Tom's 3rd place, 100%.", "a\u0308\u0304 \u1100\u1161\u11a8 \U0001F469\u200d\U0001F4BB",
]

LANG_PAIRS = [("eng_Latn", "zho_Hans"), ("zho_Hans", "eng_Latn"), ("fra_Latn", "deu_Latn")]


def lines():
    out = []
    with open(DATA, encoding="utf-8-sig") as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) >= 2:
                out += [p[0], p[1]]
    return out


def train(spm, data, prefix, kind, **kw):
    spm.SentencePieceTrainer.train(sentence_iterator=iter(data), model_prefix=prefix, vocab_size=3000,
                                   model_type=kind, num_threads=1, character_coverage=0.995,
                                   minloglevel=2, **kw)


def marian_vocab(pieces):
    """{token: id}: "</s>" 0, "<unk>" 1, the pieces in reverse with every 7th left out, two
    language codes, "<pad>" last."""
    v = {"</s>": 0, "<unk>": 1}
    kept = [p for k, p in enumerate(reversed(pieces)) if k % 29 != 3 and p not in v and p != "<s>"]
    for p in kept + [">>fra<<", ">>cmn_Hans<<"]:
        if p not in v:
            v[p] = len(v)
    v["<pad>"] = len(v)
    return v


def main():
    out = sys.argv[1]
    if not os.path.exists(DATA):
        print(f"{DATA} missing: no SentencePiece references")
        return
    warnings.filterwarnings("ignore")
    import sentencepiece as spm
    import tokenizers
    import transformers
    from transformers import MarianTokenizer, NllbTokenizerFast, T5TokenizerFast, XLMRobertaTokenizerFast
    transformers.logging.set_verbosity_error()
    d = os.path.join(out, "spm")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    data = lines()
    train(spm, data, os.path.join(d, "uni"), "unigram")
    train(spm, data, os.path.join(d, "bpe"), "bpe", byte_fallback=True)
    uni, bpe = os.path.join(d, "uni.model"), os.path.join(d, "bpe.model")
    sp = {"uni.model": spm.SentencePieceProcessor(model_file=uni),
          "bpe.model": spm.SentencePieceProcessor(model_file=bpe)}
    cases = {"versions": {"sentencepiece": spm.__version__, "transformers": transformers.__version__,
                          "tokenizers": tokenizers.__version__},
             "texts": TEXTS, "spm": [], "json": [], "marian": [], "nllb": [], "decode_ids": []}
    rng = random.Random(17)
    for name, p in sp.items():
        for i, t in enumerate(TEXTS):
            ids = p.encode(t)
            cases["spm"].append({"model": name, "i": i, "ids": ids, "decode": p.decode(ids)})
        for _ in range(20):
            ids = [rng.randrange(p.get_piece_size()) for _ in range(rng.randrange(1, 12))]
            cases["spm"].append({"model": name, "i": -1, "ids": ids, "decode": p.decode(ids)})

    # Marian: one shared vocabulary, and separate ones.
    def pieces(p):
        return [p.id_to_piece(k) for k in range(p.get_piece_size())]
    both = pieces(sp["uni.model"]) + [x for x in pieces(sp["bpe.model"]) if x not in set(pieces(sp["uni.model"]))]
    for name, sep in (("marian_shared", False), ("marian_sep", True)):
        md = os.path.join(d, name)
        os.makedirs(md)
        shutil.copy(uni, os.path.join(md, "source.spm"))
        shutil.copy(bpe, os.path.join(md, "target.spm"))
        with open(os.path.join(md, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(marian_vocab(pieces(sp["uni.model"]) if sep else both), f, ensure_ascii=False)
        cfg = {"source_lang": "en", "target_lang": "zh", "separate_vocabs": sep, "model_max_length": 512,
               "tokenizer_class": "MarianTokenizer"}
        if sep:
            with open(os.path.join(md, "target_vocab.json"), "w", encoding="utf-8") as f:
                json.dump(marian_vocab(pieces(sp["bpe.model"])), f, ensure_ascii=False)
        with open(os.path.join(md, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f)
        tok = MarianTokenizer.from_pretrained(md)
        nv = len(tok.decoder)
        for i, t in enumerate(TEXTS):
            src = tok(t).input_ids
            tgt = tok(text_target=t).input_ids
            cases["marian"].append({"dir": name, "i": i, "src": src, "tgt": tgt,
                                    "decode": tok.decode(tgt, skip_special_tokens=True),
                                    "decode_keep": tok.decode(tgt, skip_special_tokens=False)})
        for _ in range(30):
            ids = [rng.randrange(nv) for _ in range(rng.randrange(1, 12))]
            cases["decode_ids"].append({"dir": name, "ids": ids,
                                        "decode": tok.decode(ids, skip_special_tokens=True),
                                        "decode_keep": tok.decode(ids, skip_special_tokens=False)})

    # NLLB's fast tokenizer, converted from the slow one.
    for name, model, legacy in (("nllb_uni", uni, False), ("nllb_bpe", bpe, False),
                                ("nllb_uni_legacy", uni, True)):
        md = os.path.join(d, name)
        NllbTokenizerFast(vocab_file=model, legacy_behaviour=legacy).save_pretrained(md)
        tok = NllbTokenizerFast.from_pretrained(md)
        assert tok.legacy_behaviour == legacy
        for sl, tl in LANG_PAIRS:
            tok.src_lang, tok.tgt_lang = sl, tl
            for i, t in enumerate(TEXTS):
                src = tok(t).input_ids
                tgt = tok(text_target=t).input_ids
                cases["nllb"].append({"dir": name, "i": i, "src_lang": sl, "tgt_lang": tl, "src": src,
                                      "tgt": tgt, "decode": tok.decode(tgt, skip_special_tokens=True),
                                      "decode_keep": tok.decode(tgt, skip_special_tokens=False)})
        for _ in range(30):
            ids = [rng.randrange(len(tok)) for _ in range(rng.randrange(1, 12))]
            cases["decode_ids"].append({"dir": name, "ids": ids,
                                        "decode": tok.decode(ids, skip_special_tokens=True),
                                        "decode_keep": tok.decode(ids, skip_special_tokens=False)})

    # T5's and XLM-R's tokenizer.json, run by tokenizers itself.
    for name, cls, model in (("t5_uni", T5TokenizerFast, uni), ("t5_bpe", T5TokenizerFast, bpe),
                             ("xlmr_uni", XLMRobertaTokenizerFast, uni)):
        md = os.path.join(d, name)
        cls(vocab_file=model).save_pretrained(md)
        for f in os.listdir(md):  # tokenizer.json alone
            if f != "tokenizer.json":
                os.remove(os.path.join(md, f))
    for name in ("t5_uni", "t5_bpe", "xlmr_uni", "nllb_uni", "nllb_bpe"):
        tk = tokenizers.Tokenizer.from_file(os.path.join(d, name, "tokenizer.json"))
        for i, t in enumerate(TEXTS):
            ids = tk.encode(t).ids
            cases["json"].append({"dir": name, "i": i, "ids": ids,
                                  "decode": tk.decode(ids, skip_special_tokens=True),
                                  "decode_keep": tk.decode(ids, skip_special_tokens=False)})
        for _ in range(20):
            ids = [rng.randrange(tk.get_vocab_size()) for _ in range(rng.randrange(1, 12))]
            cases["decode_ids"].append({"dir": name + "/tokenizer.json", "ids": ids,
                                        "decode": tk.decode(ids, skip_special_tokens=True),
                                        "decode_keep": tk.decode(ids, skip_special_tokens=False)})
    with open(os.path.join(out, "spm_cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
    print(f"spm_cases.json: {len(cases['spm'])} sentencepiece, {len(cases['json'])} tokenizer.json, "
          f"{len(cases['marian'])} Marian, {len(cases['nllb'])} NLLB cases, "
          f"{len(cases['decode_ids'])} decodes of arbitrary ids")


if __name__ == "__main__":
    main()
