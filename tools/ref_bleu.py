"""sacreBLEU reference for `attn bleu` (src/eval/bleu.c), computed live with the pinned sacrebleu
(tools/install_deps.sh). Usage: ref_bleu.py OUTDIR

Builds test sets and writes OUTDIR/bleu_cases.json:
  datasets  name -> {"hyps": [...], "refs": [[stream 1], [stream 2], ...]} (a null reference is
            sacreBLEU's None: no reference of that stream for the segment), or {"files": true}
            for the large set, whose segments are only in the files below
  cases     one scoring each: dataset, tokenize, lowercase, what sacreBLEU's corpus_score gives
            (score, precisions, bp, ratio, sys_len, ref_len, counts, totals), the text line of
            its BLEUScore.format(), and "tok_hyps"/"tok_refs": every segment as BLEU sees it
            (' '.join(_preprocess_segment(seg).split()))
  zh_ranges, whitespace, lower
            sacreBLEU's Chinese-character test, Python's str.isspace() and str.lower() over all
            of Unicode, for the character-level checks
Datasets without null references or newlines inside segments are also written as text files
OUTDIR/bleu_NAME.hyp and bleu_NAME.ref1, .ref2 ... (one segment per line) for the CLI test.

Sets: (a) Chinese references from the Tatoeba eng-cmn corpus with synthetic hypotheses
(deleted, replaced, shuffled characters, empty, identical, longer), 1 and 2 reference streams;
(b) English with punctuation, numbers, hyphens, quotes and entities for 13a; (c) tricky cases:
empty hypotheses, everything empty, a hypothesis longer than its references, mixed
Chinese/English/digits/fullwidth punctuation, Unicode whitespace, case mapping (final sigma,
dotted I), length ties, clipping, None references, random strings of punctuation, digits,
entities and whitespace; and the whole corpus (28k segments) for
speed and the CLI."""
import json
import os
import random
import sys

import sacrebleu
from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

HERE = os.path.dirname(os.path.abspath(__file__))
CMN = os.path.join(HERE, "..", "..", "shared", "data", "tatoeba-eng-cmn", "cmn.txt")


def load_cmn():
    with open(CMN, encoding="utf-8-sig") as f:
        pairs = [line.rstrip("\n").split("\t")[:2] for line in f if "\t" in line]
    by_en = {}
    for en, zh in pairs:
        by_en.setdefault(en, []).append(zh)
    return pairs, by_en


# ---------------------------------------------------------------- synthetic hypotheses

def perturb_chars(rng, s, pool):
    """A plausible imperfect translation of s, character by character."""
    c = list(s)
    kind = rng.random()
    if kind < 0.08:
        return s  # identical
    if kind < 0.13:
        return ""  # empty output
    if not c:
        return "".join(rng.choice(pool) for _ in range(rng.randint(1, 5)))
    if kind < 0.35:  # deletions
        for _ in range(rng.randint(1, max(1, len(c) // 4))):
            if c:
                del c[rng.randrange(len(c))]
    elif kind < 0.55:  # replacements
        for _ in range(rng.randint(1, max(1, len(c) // 3))):
            c[rng.randrange(len(c))] = rng.choice(pool)
    elif kind < 0.7:  # shuffle a window
        i = rng.randrange(len(c))
        j = min(len(c), i + rng.randint(2, 6))
        w = c[i:j]
        rng.shuffle(w)
        c[i:j] = w
    elif kind < 0.8:  # truncate
        c = c[: rng.randint(1, len(c))]
    elif kind < 0.9:  # longer: insertions, sometimes Latin or digits
        for _ in range(rng.randint(1, 6)):
            ins = rng.choice(pool) if rng.random() < 0.7 else rng.choice(
                ["Tom", " OK ", "3", "2023", "，", "。", " the ", "Mary"])
            c.insert(rng.randrange(len(c) + 1), ins)
    else:  # shuffle everything
        rng.shuffle(c)
    return "".join(c)


def perturb_words(rng, s, vocab):
    """The same for English, word by word."""
    w = s.split(" ")
    kind = rng.random()
    if kind < 0.08:
        return s
    if kind < 0.12:
        return ""
    if kind < 0.35 and len(w) > 1:
        del w[rng.randrange(len(w))]
    elif kind < 0.55:
        w[rng.randrange(len(w))] = rng.choice(vocab)
    elif kind < 0.7 and len(w) > 1:
        i = rng.randrange(len(w) - 1)
        w[i], w[i + 1] = w[i + 1], w[i]
    elif kind < 0.8:
        i = rng.randrange(len(w))
        w[i] = w[i].upper() if rng.random() < 0.5 else w[i].lower()
    elif kind < 0.9:
        for _ in range(rng.randint(1, 4)):
            w.insert(rng.randrange(len(w) + 1), rng.choice(vocab))
    else:
        rng.shuffle(w)
    out = " ".join(w)
    if rng.random() < 0.1:  # punctuation drift
        out = out.replace(".", " .").replace(",", " ,") if rng.random() < 0.5 else out.rstrip(".!?")
    return out


EN_EXTRA = [
    'He said "hello" and left.', "It costs $1,000.50 -- or 3.14 euros.", "The 2-3 year-old's toy.",
    "Call 555-1234 at 10:30 a.m., please.", "Visit https://example.com/a?b=1&c=2 now!",
    "&quot;Quoted&quot; &amp; escaped &lt;tags&gt; here.", "Use <skipped> tokens sparingly.",
    "U.S.A. and e.g. are abbreviations.", "Numbers: 1,234,567.89 and .5 and 5. and -5.",
    "Ranges 1-2-3, 10-20, x-y, 2020-2021.", "He's 'quoted' twice; she isn't.", "50% of C++ users (a) [b] {c}.",
    "#tag @user ~tilde^ `tick` |pipe| back\\slash", "a.,b a,.b a..b 1.,2 1,.2 a. b .a",
    "Mr. Smith paid 3.50, not 3,50.", "Dr. O'Neil -- well-known -- arrived.",
]

MIXED = [
    "我有3个apple，价格是$1,000.50元！", "他说：“Hello, world!”", "２０２３年１２月３１日",
    "iPhone 15 Pro Max售价8999元。", "COVID-19疫情期间，e-mail地址是a.b@c.com。",
    "Ｈｅｌｌｏ　Ｗｏｒｌｄ！", "价格：€100—€200…", "①②③ ⑴⑵ ⒈⒉", "☀️天气☂️不错✔", "𠀀𠀁是扩展B区，⺀⻳是部首",
    "ｶﾀｶﾅ和ひらがな和カタカナ", "한국어 텍스트와 중문", "😀表情😂符号🚀", "“引号”和‘单引号’《书名》",
    "温度是-5℃到30°C之间", "3.14159是π的近似值", "版本v2.0.1发布了!!!", "Tom和Mary在1999年结婚。",
    "网址：https://www.example.cn/路径?查询=值", "第1-3章，第4，5节。", "A-B-C 1-2-3 甲-乙-丙",
    "　全角空格　开头和结尾　", "Ⅰ Ⅱ Ⅲ Ⅳ ⅰⅱ", "\u2e80\u2f81\u2fa1\u2fa2\u2fdf\u2ff0\u3000\u303f\u31c0",
    "\u4db5\u4db6\u9fa5\u9fbb\u9fbc\u9fff\ufa2d\ufa2e\ufe10\ufe1f\ufe30\ufe4f\uff00\uffef\ufff0",
    "\u2000x\u2001y\u2a6dz\u2a6e", "abc。def，ghi！", "1.5倍,2.0倍。3,000人",
]

WHITESPACE = [
    "a\tb", "a\u3000b", "a\xa0b", "a\u2009b", "a\u200bb", "a\x85b", "a\u2028b", "a\x1cb", "a\x0bb",
    "  lead and trail  ", "\t\ttabs\t", "a\rb", "tail\r", "\u3000中文\u3000", "x\u1680y\u202fz\u205fw",
    "a \u2000 b\u200ac", "\ufeffbom at start", "mixed\u00a0中\u00a0文",
]

CASE = [
    "ΟΔΟΣ ΣΟΦΟΣ.", "ΣΑΣ", "Σ", "aΣ", "aΣb", "aΣ'", "AΣ.", "Σa", "ΑΣ'Α", "ΑΣ\u0301", "İstanbul İ",
    "ǅemal ǅ", "STRASSE ẞ", "Hello World HELLO world", "ÀÉÎÕÜ àéîõü", "ΑΒΓ αβγ", "КИРИЛЛИЦА кириллица",
    "ⅠⅡ Ⓐⓑ", "ªΣ ºΣ", "ABC中文DEF", "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ", "ΣΣ", "AΣΣ", "Σ.Σ",
]


def tricky_sets():
    """name -> (hyps, [ref streams])"""
    sets = {}
    sets["empty_hyps"] = (["", "", ""], [["这是一个测试。", "Another one.", "第三个"]])
    sets["all_empty"] = (["", "", ""], [["", "", ""]])
    sets["long_hyp"] = (["我 我 我 我 我 我 我 我 我 我 我 我 我 我 我 是 学生 。 我是学生。我是学生。", "好的"],
                        [["我是学生。", "好的。"]])
    sets["mixed"] = (
        [perturb_chars(random.Random(i), s, list("的了是我你他")) if i % 3 else s
         for i, s in enumerate(MIXED)],
        [MIXED, [s[::-1] if i % 2 else s for i, s in enumerate(MIXED)]])
    sets["whitespace"] = (WHITESPACE, [[s.replace("a", "A") for s in WHITESPACE], WHITESPACE[::-1]])
    sets["case"] = (CASE, [[s.lower() for s in CASE], [s.upper() for s in CASE]])
    sets["en_specials"] = (
        [s.replace(",", " ,") if i % 2 else s for i, s in enumerate(EN_EXTRA)], [EN_EXTRA])
    # closest reference length: hyp 5 tokens vs refs 4 and 6 (tie -> shorter), in both orders,
    # and 3 vs 7; then 5 vs 2 and 8 (2 closer? |5-2|=3, |5-8|=3: tie -> 2)
    h5 = "a b c d e"
    sets["ties"] = ([h5, h5, h5, h5],
                    [["a b c d", "a b c d e f", "a b c", "a b"],
                     ["a b c d e f", "a b c d", "a b c d e f g", "a b c d e f g h"]])
    sets["short"] = (["a b c", "d e", "f"], [["a b c", "d e", "f g"]])  # no 4-grams at all
    sets["no_high_match"] = (["a b c d e f", "g h i j"], [["a b x c d y e f", "g h z i j"]])
    sets["no_match"] = (["x y z w", "q r s t"], [["a b c d", "e f g h"]])
    sets["clipping"] = (["the the the the the the the", "on the mat on the mat"],
                        [["the cat is on the mat", "the mat"], ["there is a cat on the mat", "on the mat"]])
    sets["identical"] = (["猫坐在垫子上。"], [["猫坐在垫子上。"]])
    sets["none_refs"] = (["我是学生。", "他是老师。", "你好"],
                         [["我是学生。", None, "你好！"], [None, "他是一个老师。", "您好"]])
    # random strings over the characters every rule looks at: checks the regular expressions'
    # left-to-right scanning, entities, whitespace and case mapping in odd combinations
    rng = random.Random(13)
    alphabet = (list("..,,--''\"&;<>/:@[]{}()!?$%^`~|+*=#_\\0123456789aAbBzZ  ") +
                ["&quot;", "&amp;", "&lt;", "&gt;", "<skipped>", "\t", "\r", "\u3000", "\xa0",
                 "\u2009", "\x85", "中", "文", "。", "，", "１", "Ａ", "…", "“", "Σ", "İ", "ß",
                 "é", "😀", "\u0301", "\u2028", "ｶ", "\u200b"])
    rand = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(600)]
    sets["random"] = (rand[:300], [rand[300:], [x[::-1] for x in rand[:300]]])
    sets["newline"] = (["a-\nb c\nd", "x <skipped> y", "line\nbreak 3-\n4"],
                       [["ab c d", "x y", "line break 34"]])
    return sets


def zh_set(rng, pairs, by_en, n):
    pool = [ch for _, zh in pairs[::7] for ch in zh]
    picked = rng.sample(range(len(pairs)), n)
    hyps, r1, r2 = [], [], []
    for i in picked:
        en, zh = pairs[i]
        others = [z for z in by_en[en] if z != zh]
        alt = rng.choice(others) if others else perturb_chars(rng, zh, pool)
        r1.append(zh)
        r2.append(alt)
        hyps.append(alt if others and rng.random() < 0.1 else perturb_chars(rng, zh, pool))
    return hyps, [r1], [r1, r2]


def en_set(rng, pairs, n):
    sents = [en for en, _ in rng.sample(pairs, n)] + EN_EXTRA
    vocab = [w for s in sents for w in s.split(" ")]
    hyps = [perturb_words(rng, s, vocab) for s in sents]
    r2 = [perturb_words(rng, s, vocab) for s in sents]
    return hyps, [sents], [sents, r2]


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    rng = random.Random(2017)
    pairs, by_en = load_cmn()

    datasets = {}  # name -> (hyps, refs)
    zh_h, zh_r1, zh_r2 = zh_set(rng, pairs, by_en, 2000)
    datasets["zh1"] = (zh_h, zh_r1)
    datasets["zh2"] = (zh_h, zh_r2)
    en_h, en_r1, en_r2 = en_set(rng, pairs, 1500)
    datasets["en1"] = (en_h, en_r1)
    datasets["en2"] = (en_h, en_r2)
    datasets.update(tricky_sets())
    pool = [ch for _, zh in pairs[::5] for ch in zh]
    big_refs = [zh for _, zh in pairs]
    datasets["big"] = ([perturb_chars(rng, z, pool) for z in big_refs], [big_refs])

    cases = []  # (dataset, tokenize, lowercase)
    for ds in datasets:
        if ds == "big":
            continue
        toks = ["zh", "13a", "none"]
        for tok in toks:
            for lc in (False, True):
                cases.append((ds, tok, lc))
    cases.append(("big", "zh", False))

    out_sets, out_cases = {}, []
    for name, (hyps, refs) in datasets.items():
        file_safe = all(s is not None and "\n" not in s and "\0" not in s
                        for stream in [hyps] + refs for s in stream)
        entry = {"n": len(hyps), "nrefs": len(refs), "file_safe": file_safe}
        if name != "big":
            entry["hyps"], entry["refs"] = hyps, refs
        if file_safe:
            for suffix, lines in [("hyp", hyps)] + [(f"ref{r + 1}", s) for r, s in enumerate(refs)]:
                with open(os.path.join(outdir, f"bleu_{name}.{suffix}"), "wb") as f:
                    f.write("".join(s + "\n" for s in lines).encode("utf-8"))
        out_sets[name] = entry

    for ds, tok, lc in cases:
        hyps, refs = datasets[ds]
        bleu = BLEU(tokenize=tok, lowercase=lc)
        s = bleu.corpus_score(hyps, refs)
        c = {"dataset": ds, "tokenize": tok, "lowercase": lc, "score": s.score,
             "precisions": list(s.precisions), "bp": s.bp, "ratio": s.ratio,
             "sys_len": s.sys_len, "ref_len": s.ref_len, "counts": list(s.counts),
             "totals": list(s.totals), "text": s.format(width=2)}
        if ds != "big":
            prep = lambda x: " ".join(bleu._preprocess_segment(x).split())  # noqa: E731
            c["tok_hyps"] = [prep(h) for h in hyps]
            c["tok_refs"] = [[None if x is None else prep(x) for x in st] for st in refs]
        out_cases.append(c)

    zh_ranges, start = [], None
    is_zh = TokenizerZh._is_chinese_char
    for cp in range(0x110001):
        v = cp <= 0x10FFFF and not (0xD800 <= cp < 0xE000) and is_zh(chr(cp))
        if v and start is None:
            start = cp
        elif not v and start is not None:
            zh_ranges.append([start, cp - 1])
            start = None
    chars = [chr(cp) for cp in range(0x110000) if not (0xD800 <= cp < 0xE000)]
    doc = {
        "sacrebleu_version": sacrebleu.__version__,
        "python_unicode": __import__("unicodedata").unidata_version,
        "datasets": out_sets,
        "cases": out_cases,
        "zh_ranges": zh_ranges,
        "whitespace": [ord(ch) for ch in chars if ch.isspace()],
        "lower": [[ord(ch), ch.lower()] for ch in chars if ch.lower() != ch],
    }
    with open(os.path.join(outdir, "bleu_cases.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=True)
    print(f"ref_bleu: sacrebleu {sacrebleu.__version__}: {len(out_cases)} cases over "
          f"{len(out_sets)} data sets -> {outdir}/bleu_cases.json")


if __name__ == "__main__":
    main()
