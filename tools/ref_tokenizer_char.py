"""Reference results for tests/test_tokenizer_char.c, made live by Hugging Face `tokenizers`.
Usage: ref_tokenizer_char.py OUTDIR.

Writes:
  char_shakespeare.json  nanoGPT's shakespeare-char tokenizer built with tokenizers: WordLevel over
                         sorted(set(text)) of ../shared/data/tinyshakespeare/input.txt (unk_token
                         "<unk>", not in the vocabulary), pre_tokenizer Split(Regex "[\\s\\S]",
                         Isolated), decoder Fuse. Its ids are checked here to equal nanoGPT's
                         stoi[c] for every character of the whole text.
  char_words.json        WordLevel over the 2,000 most frequent words of the text plus "[UNK]",
                         pre_tokenizer Whitespace, no decoder: unknown words become [UNK].
  char_cases.json        {"version", "texts": [...], "shakespeare_ids": ids of the whole text (by
                         the char tokenizer), "encodes": [{"tokenizer", "text", "ids" or "error",
                         "decode"}], "splits": [{"pre_tokenizer": {...}, "text", "pieces": [...]}]}
      classes: {pattern: [[first, last], ...]}: the code points each one-class regex (\\w \\s
              \\d \\h \\p{L} \\p{N} . ...) matches in Oniguruma, over every code point
      splits: Split with String and Regex patterns (Oniguruma specifics: \\s, \\w, \\h, (?m), {,n},
              empty matches, anchors, GPT-2's and Llama 3's patterns), every behaviour, inverted
              or not; Punctuation with every behaviour; Whitespace; WhitespaceSplit;
              BertPreTokenizer — the pieces pre_tokenize_str gives for hard texts.
Without the tiny shakespeare file nothing is written (the C test skips)."""
import collections
import json
import os
import sys

from tokenizers import Regex, Tokenizer, __version__, decoders, models, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")

HARD = ["", "a", "\n", "\n\n\n", "\r\n", "a\nb", " ", "   ", "\t", "First Citizen:\nBefore we proceed",
        "Hello, world!  How are   you?", "don't won't I'm", "naïve café", "中文 字符", "😀 emoji",
        "tab\tand\nnewline\r\nend", "x \t \n y", "a\u00a0b\u2028c\u0085d\u3000e", "1234 56.78 $9",
        "!!!...???", "aaa bbb aaa", "abab ab", "  leading", "trailing  ", "\u200bzero\u200dwidth",
        "e\u0301 combining", "ÀÉÎÕÜ", "ab\nab\n", "x" * 50, "a-b_c.d", "HeLLo WoRLD", "deadbeef 0x1F"]

PATTERNS = [("String", " "), ("String", "ab"), ("String", "\n"), ("Regex", r"\s+"), ("Regex", r"\s"),
            ("Regex", r"\S+"), ("Regex", r"\w+|[^\w\s]+"), ("Regex", r"[\s\S]"), ("Regex", r"(?m)."),
            ("Regex", r"."), ("Regex", r"a*"), ("Regex", r"x?"), ("Regex", r"^\w+"), ("Regex", r"\w+$"),
            ("Regex", r"\d+"), ("Regex", r"\h+"), ("Regex", r"\H+"), ("Regex", r"[\s\d]+"),
            ("Regex", r"[^\s]{,3}"), ("Regex", r"\p{L}+"), ("Regex", r"(?i)ab"), ("Regex", r"\u00e9|\u00e0"),
            ("Regex", r"\W+"), ("Regex", r"[\S&&[^a]]"),
            ("Regex", r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"),
            ("Regex", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                      r"|\s*[\r\n]+|\s+(?!\S)|\s+")]
BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]
JSON_BEHAVIOR = {"removed": "Removed", "isolated": "Isolated", "merged_with_previous": "MergedWithPrevious",
                 "merged_with_next": "MergedWithNext", "contiguous": "Contiguous"}


CLASS_PATTERNS = [r"\w", r"\s", r"\d", r"\h", r"\p{L}", r"\p{N}", r"."]


def class_runs():
    """For each pattern (one character class), the code points it matches (Oniguruma), as runs
    [first, last]: Split(Regex(p), "removed") over the text of all code points (in chunks: the
    Python binding's offset conversion is slow on long texts), and what no piece covers."""
    cps = [c for c in range(0x110000) if not (0xD800 <= c < 0xE000)]
    out = {}
    for pat in CLASS_PATTERNS:
        split = pre_tokenizers.Split(Regex(pat), "removed")
        matched = []
        for at in range(0, len(cps), 8192):
            chunk = cps[at:at + 8192]
            covered = bytearray(len(chunk))
            for _, (a, b) in split.pre_tokenize_str("".join(map(chr, chunk))):
                covered[a:b] = b"\x01" * (b - a)
            matched += [c for c, v in zip(chunk, covered) if not v]
        runs = []
        for c in matched:
            if runs and runs[-1][1] == c - 1:
                runs[-1][1] = c
            else:
                runs.append([c, c])
        out[pat] = runs
    return out


def char_tokenizer(text):
    chars = sorted(set(text))
    tok = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")
    tok.decoder = decoders.Fuse()
    return tok, chars


def main(out):
    os.makedirs(out, exist_ok=True)
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    tok, chars = char_tokenizer(text)
    path = os.path.join(out, "char_shakespeare.json")
    tok.save(path)
    tok = Tokenizer.from_file(path)
    ids = tok.encode(text).ids
    stoi = {c: i for i, c in enumerate(chars)}
    assert ids == [stoi[c] for c in text], "the char tokenizer differs from nanoGPT's stoi"
    assert tok.decode(ids) == text
    words = collections.Counter(text.split())
    wl = {w: i for i, (w, _) in enumerate(words.most_common(2000))}
    wl["[UNK]"] = len(wl)
    wtok = Tokenizer(models.WordLevel(wl, unk_token="[UNK]"))
    wtok.pre_tokenizer = pre_tokenizers.Whitespace()
    wpath = os.path.join(out, "char_words.json")
    wtok.save(wpath)
    wtok = Tokenizer.from_file(wpath)

    lines = text.split("\n")
    samples = [text[i:i + 300] for i in range(0, len(text), len(text) // 40)]
    encodes = []
    for name, t in (("char_shakespeare.json", tok), ("char_words.json", wtok)):
        for s in HARD + samples + lines[:200:7]:
            c = {"tokenizer": name, "text": s}
            try:
                c["ids"] = t.encode(s).ids
                c["decode"] = t.decode(c["ids"])
            except Exception as ex:  # noqa: BLE001 - unknown character, no unk in the vocabulary
                c["error"] = True
                c["message"] = str(ex)
            encodes.append(c)

    texts = HARD + lines[:60:3]
    splits = []
    pres = []
    for kind, pat in PATTERNS:
        for bh in BEHAVIORS:
            for inv in (False, True):
                p = Regex(pat) if kind == "Regex" else pat
                try:
                    pre = pre_tokenizers.Split(p, bh, invert=inv)
                except Exception:  # noqa: BLE001 - a pattern Oniguruma refuses
                    continue
                pres.append(({"type": "Split", "pattern": {kind: pat}, "behavior": JSON_BEHAVIOR[bh],
                              "invert": inv}, pre))
    for bh in BEHAVIORS:
        pres.append(({"type": "Punctuation", "behavior": JSON_BEHAVIOR[bh]}, pre_tokenizers.Punctuation(bh)))
    pres.append(({"type": "Whitespace"}, pre_tokenizers.Whitespace()))
    pres.append(({"type": "WhitespaceSplit"}, pre_tokenizers.WhitespaceSplit()))
    pres.append(({"type": "BertPreTokenizer"}, pre_tokenizers.BertPreTokenizer()))
    for js, pre in pres:
        for s in texts:
            splits.append({"pre_tokenizer": js, "text": s, "pieces": [p for p, _ in pre.pre_tokenize_str(s)]})
    result = {"version": __version__, "texts": HARD, "shakespeare_ids": ids, "encodes": encodes,
              "splits": splits, "classes": class_runs()}
    with open(os.path.join(out, "char_cases.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    print(f"ref_tokenizer_char: tokenizers {__version__}: vocab {len(chars)} characters, {len(ids)} ids of "
          f"input.txt, {len(encodes)} encodes, {len(pres)} pre-tokenizers x {len(texts)} texts -> {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ref_tokenizer_char.py OUTDIR")
    if not os.path.exists(TEXT):
        print(f"ref_tokenizer_char: {TEXT} not found: no references written")
        sys.exit(0)
    main(sys.argv[1])
