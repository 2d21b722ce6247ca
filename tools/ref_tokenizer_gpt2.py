"""Reference GPT-2-style byte-level BPE tokenizers for tests/test_tokenizer_gpt2.c, made by Hugging
Face `tokenizers`. Usage: ref_tokenizer_gpt2.py OUTDIR.

Trains a byte-level BPE (vocabulary 4000) on ../shared/data/tinyshakespeare/input.txt with GPT-2's
exact settings (ByteLevel pre-tokenizer: add_prefix_space false, trim_offsets true, use_regex true;
ByteLevel decoder; ByteLevel post-processor; all 256 byte characters in the alphabet) and appends
"<|endoftext|>" as the last id and a special added token, as GPT-2's files have it. Writes
  gpt2_<variant>.json       tokenizer.json as `tokenizers` saves it
  gpt2-vocab.json, gpt2-merges.txt   the same model as model.save() writes it (GPT-2's layout)
  gpt2_cases.json           {"version", "variants": {variant: {"tokenizer", "cases": [{"text",
                            "ids", "decode", "decode_keep"}]}}, "decodes": [{"ids", "decode",
                            "decode_keep"}] (random id sequences, partial UTF-8 included),
                            "corpus_ids": ids of the whole input.txt encoded as one text,
                            "char_classes": how the pattern classifies code points (runs)}
Variants:
  gpt2         the configuration above (the cases also hold 3000 corpus lines)
  prefix       pre-tokenizer ByteLevel(add_prefix_space=true) (RoBERTa's)
  noregex      pre-tokenizer ByteLevel(use_regex=false)
  seq          pre-tokenizer and decoder each a one-element Sequence, post_processor null
"""
import json
import os
import random
import sys

from tokenizers import Tokenizer, __version__, decoders, models, pre_tokenizers, processors
from tokenizers import trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")
EOT = "<|endoftext|>"

HARD_CASES = [
    "", " ", "  ", "   ", "\n", "\n\n", "\n\n\n", "\t", "\t\t", " \n", "\n ", " \t \n ",
    "Hello world", " Hello world", "  Hello  world  ", "Hello\n\nworld", "Hello \n world",
    "a  b   c    d     e", "x \t \n y", "tab\there", "crlf\r\nend\r\n", "trailing   ",
    "line one\n  indented\n\tTabbed\n", "\u00a0nbsp\u00a0 x", "a\u3000b\u3000\u3000c",
    "a\u0085b\u0085\u0085 c", "x\u2028y\u2029z", "a\u1680b\u2000c\u200ad\u202fe\u205ff",
    "a\u180eb\u200bc\ufeffd", "a\x0bb\x0cc\x1cd\x1de\x1ff", "  \u00a0\u00a0x",
    "I'm you're he's it'd we'll they've can't don't", "IT'S I'M YOU'RE WE'LL THEY'VE DON'T",
    "It'S 'tis 'twas o'er ma'am", "'s", "'", "''", "'''s", " 's", "rock'n'roll",
    "don’t (curly)", "l'amour d'été",
    "café naïve résumé", "cafe\u0301 nai\u0308ve (NFD)", "Ærøskøbing Œuvre ßtraße", "ﬁ ligature",
    "Ünïcödé", "Привет мир", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
    "ก ข ค", "한국어 텍스트", "日本語のテキスト", "知识就是力量。", "他们在公园里踢足球，我们去看吧！",
    "Mixed中文English混合text", "𠜎𠜱 (CJK extension B)", "鬱龘靐齉",
    "emoji 😀👍🏽 and 👨‍👩‍👧 family", "😀", "👍🏿👍🏻", "🏳️‍🌈 flag", "🇫🇷🇯🇵", "❤️", "a😀b",
    "1234567890 3.14159 $100 50% 1,000,000", "٣٤٥ ①②③ ½ Ⅻ", "x2 2x 2nd 10th", "0x1F -42 +7",
    "!!!???...", "...", "--- ***", "Hello, world! (Yes.) [no] {maybe} <tag/>", "a.b,c;d:e",
    "“quotes” ‘single’ «guillemets»", "—–-", "…", "@user #tag http://x.y/z?a=b&c=d",
    "C:\\path\\to\\file.txt", "email@example.com", "~`^_|\\",
    EOT, "Hello" + EOT + "world", "a " + EOT + " b", EOT + EOT, "<|endoftext|", "|endoftext|>",
    " " + EOT, EOT + "\n", "x<|endoftext|>y<|endoftext|>z", "<|ENDOFTEXT|>",
    "control \x01\x02\x7f chars", "nul \x00 inside", "\ufeffBOM", "\u200bzero\u200dwidth",
    "ＦＵＬＬＷＩＤＴＨ", "ｶﾀｶﾅ", "ℕ ⊆ ℤ ⊂ ℚ", "\u0100\u017f\u0180",
    "The quick brown fox jumps over the lazy dog.",
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n",
    "a" * 300, "supercalifragilisticexpialidocious" * 20, "你" * 200, " " * 100, "\n" * 50,
    "ab" * 150 + " " + "ba" * 150, "😀" * 50, "x" * 5000,
]


def byte_level(tok):
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                 use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)


def train(text):
    tok = Tokenizer(models.BPE())
    byte_level(tok)
    tr = trainers.BpeTrainer(vocab_size=4000, min_frequency=2, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text.split("\n"), tr)
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    eot = max(vocab.values()) + 1
    vocab[EOT] = eot                          # GPT-2: the last id, in vocab.json too
    tok = Tokenizer.from_str(json.dumps(j))
    tok.add_special_tokens([EOT])
    return json.loads(tok.to_str())


def char_classes():
    """How GPT-2's pattern (in tokenizers, through Oniguruma) classifies each code point of planes
    0-3 and U+E0000..U+E01FF: L (\\p{L}), N (\\p{N}), S (\\s) or O (anything else), found from
    the pieces of three probe texts. Returned as runs [[first code point, class], ...]."""
    f = pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str
    runs = []
    for cp in list(range(0x40000)) + list(range(0xE0000, 0xE0200)):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        if len(f("!" + c + "!")) == 1:
            k = "O"
        elif len(f("x" + c + "x")) == 1:
            k = "L"
        elif len(f("1" + c + "1")) == 1:
            k = "N"
        else:
            k = "S"
        if not runs or runs[-1][1] != k or cp == 0xE000 or cp == 0xE0000:
            runs.append([cp, k])
    return runs


def cases_for(tok, texts):
    out = []
    for t in texts:
        ids = tok.encode(t).ids
        out.append({"text": t, "ids": ids, "decode": tok.decode(ids),
                    "decode_keep": tok.decode(ids, skip_special_tokens=False)})
    return out


def main(out):
    os.makedirs(out, exist_ok=True)
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read()
    base = train(text)
    variants = {"gpt2": base}
    j = json.loads(json.dumps(base))
    j["pre_tokenizer"]["add_prefix_space"] = True
    variants["prefix"] = j
    j = json.loads(json.dumps(base))
    j["pre_tokenizer"]["use_regex"] = False
    variants["noregex"] = j
    j = json.loads(json.dumps(base))
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [j["pre_tokenizer"]]}
    j["decoder"] = {"type": "Sequence", "decoders": [j["decoder"]]}
    j["post_processor"] = None
    variants["seq"] = j

    lines = [l for l in text.split("\n") if l]
    rng = random.Random(5)
    held = rng.sample(lines, 3000)
    result = {"version": __version__, "variants": {}}
    for name, jj in variants.items():
        fname = "gpt2_%s.json" % name
        path = os.path.join(out, fname)
        tok = Tokenizer.from_str(json.dumps(jj))
        tok.save(path)
        tok = Tokenizer.from_file(path)
        texts = HARD_CASES + (held if name == "gpt2" else held[:300])
        result["variants"][name] = {"tokenizer": fname, "cases": cases_for(tok, texts)}
        if name == "gpt2":
            tok.model.save(out, "gpt2")       # gpt2-vocab.json, gpt2-merges.txt
            result["corpus_ids"] = tok.encode(text).ids
            n = tok.get_vocab_size()
            decs = []
            for _ in range(400):
                ids = [rng.randrange(n) for _ in range(rng.randrange(1, 8))]
                decs.append({"ids": ids, "decode": tok.decode(ids),
                             "decode_keep": tok.decode(ids, skip_special_tokens=False)})
            result["decodes"] = decs
            result["char_classes"] = char_classes()
    with open(os.path.join(out, "gpt2_cases.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    n = sum(len(v["cases"]) for v in result["variants"].values())
    print(f"ref_tokenizer_gpt2: tokenizers {__version__}: {len(variants)} tokenizers, {n} cases, "
          f"{len(result['corpus_ids'])} corpus ids -> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ref_tokenizer_gpt2.py OUTDIR")
    if not os.path.exists(CORPUS):
        print(f"ref_tokenizer_gpt2: {CORPUS} not found: no reference tokenizers written")
        sys.exit(0)
    main(sys.argv[1])
