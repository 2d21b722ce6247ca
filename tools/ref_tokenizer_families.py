"""Reference ids and texts of the Llama-family tokenizers for tests/test_tokenizer_families.c, made
by Hugging Face `tokenizers` from the families' real tokenizer.json files. Usage:
ref_tokenizer_families.py OUTDIR.

Tokenizers (made by tools/install_deps.sh; a missing one is left out, and the C test says so):
  models/tokenizers/<family>/tokenizer.json    tools/tok_families.py: llama3, qwen2, llama2,
                                               mistral, phi3, gpt2, nemo (from llama.cpp's GGUFs)
  models/SmolLM2-135M-Instruct/tokenizer.json  tools/get_smollm2.sh: smollm2
Writes OUTDIR/families_cases.json:
  {"version": tokenizers.__version__,
   "families": {name: {"tokenizer": absolute path,
                       "cases": [{"text", "ids" (add_special_tokens=True), "ids_plain" (False),
                                  "decode" (decode(ids)), "decode_keep" (skip_special_tokens=False),
                                  "tokens" (the tokens of ids)}],
                       "decodes": [{"ids", "decode", "decode_keep"}]}}}
and "numeric": the code points Digits splits off ([first, last] runs). The texts: a table of hard cases (the same for every family, plus each family's special tokens
inside text), the strings of llama.cpp's own tokenizer tests for the family's vocabulary
(models/llamacpp/vocab/*.gguf.inp) and 300 lines of tiny shakespeare; decodes: random id sequences
(any id, special tokens included, partial UTF-8 and lone byte-fallback tokens)."""
import json
import os
import random
import sys

from tokenizers import Tokenizer, __version__

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models")
VOCAB = os.path.join(MODELS, "llamacpp", "vocab")
CORPUS = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")

# family -> (tokenizer.json, llama.cpp test strings of the same vocabulary, or None)
FAMILIES = {
    "llama3": ("tokenizers/llama3", "ggml-vocab-llama-bpe.gguf.inp"),
    "llama2": ("tokenizers/llama2", "ggml-vocab-llama-spm.gguf.inp"),
    "mistral": ("tokenizers/mistral", "ggml-vocab-llama-spm.gguf.inp"),
    "phi3": ("tokenizers/phi3", "ggml-vocab-phi-3.gguf.inp"),
    "qwen2": ("tokenizers/qwen2", "ggml-vocab-qwen2.gguf.inp"),
    "gpt2": ("tokenizers/gpt2", "ggml-vocab-gpt-2.gguf.inp"),
    "nemo": ("tokenizers/nemo", "ggml-vocab-gpt-2.gguf.inp"),
    "smollm2": ("SmolLM2-135M-Instruct", None),
}

HARD = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n", "\n ",
    "trailing spaces   ", "   leading spaces", "a  b   c    d", "tab\there\t\tthere",
    "x \t \n y", "line one\n  indented\n\tTabbed\n", " \n\n \n", "end\n\n\n\n",
    "Hello world", " Hello world", "Hello World!", "hello, world.", "HELLO WORLD",
    "I'M", "DON'T", "I'm", "don't", "THEY'LL WE'VE YOU'RE HE'D IT'S", "it's 'tis o'clock",
    "IT'ſ (long s)", "'S'T'RE", "rock'n'roll", "don’t (curly)", "l'amour d'été",
    "1", "12", "123", "1234", "1234567890", "3.14159", "$1,000,000.99", "2024-12-01",
    "x2 2x 2nd 10th", "٣٤٥ ①②③ ½ Ⅻ", "0x1F -42 +7e10",
    "café naïve résumé", "cafe\u0301 nai\u0308ve (NFD)", "Å Å Å", "ñ n\u0303",
    "Ærøskøbing Œuvre ßtraße", "ﬁ ligature", "ＦＵＬＬＷＩＤＴＨ", "ｶﾀｶﾅ",
    "Привет мир", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
    "ก ข ค", "한국어 텍스트", "日本語のテキスト", "知识就是力量。", "他们在公园里踢足球，我们去看吧！",
    "Mixed中文English混合text", "𠜎𠜱 (CJK extension B)", "鬱龘靐齉", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝒷𝑜𝓁𝒹",
    "emoji 😀👍🏽 and 👨‍👩‍👧 family", "😀", "👍🏿👍🏻", "🏳️‍🌈 flag", "🇫🇷🇯🇵", "❤️", "a😀b",
    "🧑🏽‍💻 and 🫠🫨", "\U0001FAE8\U0001FAE9 (new emoji)", "\U000E0067 tag",
    "def f(x):\n    return x ** 2  # square\n", "if (a && b) { c[i] = d->e; }",
    "for i in range(10):\n\tprint(i)", "<div class=\"x\">&amp;</div>", "SELECT * FROM t;",
    "https://example.com/path?q=1&r=two#frag", "user@example.com", "C:\\path\\to\\file.txt",
    "~`^_|\\", "!!!???...", "...", "--- ***", "“quotes” ‘single’ «guillemets»", "—–-", "…",
    "\u2581", "a\u2581b", "\u2581\u2581x", " \u2581 ", "▁Hello▁world",
    "<0x41>", "<0xE4><0xBD><0xA0>", "<unk>", "<s>", "</s>", "<s>hello</s>", "x <s> y", " <s> ",
    "<|im_start|>", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|eot_id|>", "<|begin_of_text|>Hello<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\nHi",
    "<|endoftext|>", "a<|endoftext|>b", "<|user|>\nHi<|end|>\n<|assistant|>  answer",
    "<|end|>   \n x", "</s>  \n tail", "<|system|>", "<|im_start", "im_start|>",
    "control \x01\x02\x7f chars", "nul \x00 inside", "\ufeffBOM", "\u200bzero\u200dwidth",
    "\u00a0nbsp\u00a0 x", "a\u3000b", "x\u2028y\u2029z", "a\u0085b", "\x0b\x0c\x1c",
    "The quick brown fox jumps over the lazy dog.",
    "a" * 300, "supercalifragilisticexpialidocious" * 20, "你" * 200, " " * 100, "\n" * 50,
    "ab" * 150 + " " + "ba" * 150, "😀" * 50, "1" * 100, "x" * 3000,
]


def llamacpp_inputs(name):
    """llama.cpp's test strings (separated by __ggml_vocab_test__ lines)."""
    if not name:
        return []
    path = os.path.join(VOCAB, name)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        parts = f.read().split("\n__ggml_vocab_test__\n")
    return [p for p in parts if p != ""]


def numeric_runs():
    """The code points tokenizers' Digits pre-tokenizer (Rust's char::is_numeric) splits off, as
    [first, last] runs: every code point but the surrogates, in one pre-tokenization."""
    from tokenizers import pre_tokenizers
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    s = "a".join(chr(c) for c in cps)
    num = sorted(ord(p) for p, _ in
                 pre_tokenizers.Digits(individual_digits=True).pre_tokenize_str(s)
                 if len(p) == 1 and p != "a")
    runs = []
    for c in num:
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return runs


def main(out):
    os.makedirs(out, exist_ok=True)
    lines = []
    if os.path.exists(CORPUS):
        with open(CORPUS, encoding="utf-8") as f:
            lines = [l for l in f.read().split("\n") if l]
    rng = random.Random(15)
    sample = rng.sample(lines, min(300, len(lines))) if lines else []
    result = {"version": __version__, "families": {}, "numeric": numeric_runs()}
    missing = []
    for name, (rel, inp) in FAMILIES.items():
        path = os.path.join(MODELS, rel, "tokenizer.json")
        if not os.path.exists(path):
            missing.append(name)
            continue
        tok = Tokenizer.from_file(path)
        texts = HARD + llamacpp_inputs(inp) + sample
        cases = []
        for t in texts:
            e = tok.encode(t)
            cases.append({"text": t, "ids": e.ids, "tokens": e.tokens,
                          "ids_plain": tok.encode(t, add_special_tokens=False).ids,
                          "decode": tok.decode(e.ids),
                          "decode_keep": tok.decode(e.ids, skip_special_tokens=False)})
        n = tok.get_vocab_size(with_added_tokens=True)
        specials = [v for k, v in tok.get_vocab(with_added_tokens=True).items()
                    if k in {a.content for a in tok.get_added_tokens_decoder().values()}]
        decodes = []
        for _ in range(300):
            k = rng.randrange(1, 10)
            ids = [rng.choice(specials) if specials and rng.random() < 0.1 else
                   rng.randrange(min(n, 300)) if rng.random() < 0.3 else rng.randrange(n)
                   for _ in range(k)]
            decodes.append({"ids": ids, "decode": tok.decode(ids),
                            "decode_keep": tok.decode(ids, skip_special_tokens=False)})
        result["families"][name] = {"tokenizer": path, "cases": cases, "decodes": decodes}
    with open(os.path.join(out, "families_cases.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    print(f"ref_tokenizer_families: tokenizers {__version__}: "
          f"{len(result['families'])} families -> {out}"
          + (f" (missing: {' '.join(missing)}: run sh tools/install_deps.sh)" if missing else ""))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ref_tokenizer_families.py OUTDIR")
    main(sys.argv[1])
