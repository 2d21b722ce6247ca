"""The tokenizer.json files of the Llama-family tokenizers, built from llama.cpp's GGUF vocabularies
(models/llamacpp/vocab, tools/get_llamacpp_assets.sh) in the structure each family ships on the
Hugging Face Hub. Usage:
    tok_families.py [--out DIR] [--compare]     (DIR default models/tokenizers)
writes DIR/<family>/tokenizer.json for every family below whose GGUF is present, then
DIR/.complete (the recipe's version). Idempotent: when .complete names this version, a family
whose file exists is skipped. Nothing here is committed.

Why not transformers' own GGUF converter (AutoTokenizer.from_pretrained(dir, gguf_file=...))?
It builds a different pipeline from what the families ship (--compare prints the differences):
  - Llama 3 (tokenizer.ggml.pre "llama-bpe"): GPT-2's ByteLevel regex instead of the Split(Regex)
    + ByteLevel(use_regex false) pair, no ignore_merges, byte_fallback and an unk_token the real
    file lacks, a ByteFallback/Fuse/Replace/ByteLevel decoder sequence, no <|begin_of_text|>
    template;
  - Llama 2 / Phi-3 (SentencePiece BPE without merges in the GGUF): merges rebuilt in another order
    than transformers' LlamaConverter (generate_merges) builds them from the .model file, and the
    decoder steps in another order (ByteFallback, Fuse, Replace instead of Replace, ByteFallback,
    Fuse);
  - SmolLM2 (see tools/get_smollm2.py): no Digits pre-tokenizer.
So each file here is the GGUF's tokens and merges (for SentencePiece vocabularies: merges made by
transformers.convert_slow_tokenizer.generate_merges from the pieces and scores, exactly as
LlamaConverter makes them from tokenizer.model) wrapped in the real structure:

  llama3   ggml-vocab-llama-bpe: Meta-Llama-3-8B's tokenizer.json: normalizer null; pre_tokenizer
           Sequence[Split(Regex LLAMA3_PATTERN, Isolated), ByteLevel(false, true, false)];
           post_processor Sequence[ByteLevel, TemplateProcessing "<|begin_of_text|> $A"];
           decoder ByteLevel; model BPE ignore_merges true; the 256 special tokens as added tokens
  qwen2    ggml-vocab-qwen2: Qwen2's (transformers' Qwen2Converter): normalizer NFC; Split(Regex
           QWEN2_PATTERN) + ByteLevel(use_regex false); post_processor ByteLevel; special tokens
           <|endoftext|> <|im_start|> <|im_end|> (the GGUF's [PAD...] padding ids are not tokens
           of the real file and are left out)
  llama2   ggml-vocab-llama-spm: Llama 2 / TinyLlama / Mistral 7B v0.1 (LlamaConverter, legacy):
           normalizer Sequence[Prepend "▁", Replace " " -> "▁"], no pre_tokenizer, template
           "<s> $A", decoder Sequence[Replace "▁" -> " ", ByteFallback, Fuse, Strip(" ", 1, 0)],
           model BPE byte_fallback, fuse_unk, unk_token <unk>
  mistral  the same vocabulary with the non-legacy structure (Mistral 7B v0.3, LlamaConverter with
           legacy=False): no normalizer, pre_tokenizer Metaspace("▁", prepend_scheme "first",
           split false)
  phi3     ggml-vocab-phi-3: Phi-3-mini's: the llama2 structure, 32000 model tokens, and its added
           tokens with their flags (rstrip on "</s>" and the chat markers, "</s>" not special)
  gpt2     ggml-vocab-gpt-2: GPT-2's (GPT2Converter): ByteLevel pre-tokenizer, decoder and
           post-processor, <|endoftext|> special
  nemo     Mistral-Nemo's pre-tokenizer (Tekken: Split(Regex NEMO_PATTERN) + ByteLevel(use_regex
           false), ignore_merges) over GPT-2's vocabulary: Nemo's own vocabulary is not among
           llama.cpp's files, so this checks its pattern and structure, not its ids (GPT-2's
           vocabulary rather than Llama 3's keeps the test quick to load)
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "models", "llamacpp", "vocab")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
NEMO_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def read_gguf(path):
    """tokens, token types, scores (or None), merges (or None) of a GGUF vocabulary."""
    import gguf
    r = gguf.GGUFReader(path)

    def arr(key, conv):
        f = r.fields.get(key)
        return None if f is None else [conv(f.parts[i]) for i in f.data]
    tokens = arr("tokenizer.ggml.tokens", lambda p: bytes(p).decode("utf-8"))
    types = arr("tokenizer.ggml.token_type", lambda p: int(p[0]))
    scores = arr("tokenizer.ggml.scores", lambda p: float(p[0]))
    merges = arr("tokenizer.ggml.merges", lambda p: bytes(p).decode("utf-8"))
    return tokens, types, scores, merges


def added(i, content, special=True, normalized=False, lstrip=False, rstrip=False,
          single_word=False):
    return {"id": i, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def bpe(vocab, merges, **kw):
    m = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
         "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
         "ignore_merges": False}
    m.update(kw)
    m["vocab"] = vocab
    m["merges"] = merges
    return m


def byte_level(add_prefix_space, trim_offsets, use_regex):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
            "trim_offsets": trim_offsets, "use_regex": use_regex}


def split_regex(pattern):
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
            "invert": False}


def template(tok, tid, pair_type=1):
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": tok, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": tok, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": tok, "type_id": pair_type}},
                     {"Sequence": {"id": "B", "type_id": pair_type}}],
            "special_tokens": {tok: {"id": tok, "ids": [tid], "tokens": [tok]}}}


def tokenizer_json(added_tokens, normalizer, pre, post, decoder, model):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
            "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
            "decoder": decoder, "model": model}


def byte_level_family(gguf_name, pattern, ignore_merges, pair_merges):
    """A byte-level BPE family: model vocabulary = the GGUF's normal tokens, control tokens added
    as special; merges as "A B" strings (the Hub files' layout) or pairs."""
    tokens, types, _, merges = read_gguf(os.path.join(VOCAB, gguf_name))
    vocab = {t: i for i, t in enumerate(tokens) if types[i] == 1}
    specials = [added(i, t) for i, t in enumerate(tokens) if types[i] == 3]
    ms = [m.split(" ") for m in merges] if pair_merges else merges
    pre = {"type": "Sequence", "pretokenizers": [split_regex(pattern),
                                                 byte_level(False, True, False)]}
    return vocab, specials, ms, pre


def llama3(pattern=LLAMA3_PATTERN):
    vocab, specials, merges, pre = byte_level_family("ggml-vocab-llama-bpe.gguf", pattern, True,
                                                     False)
    bot = "<|begin_of_text|>"
    post = {"type": "Sequence", "processors": [byte_level(True, False, True),
                                               template(bot, 128000)]}
    return tokenizer_json(specials, None, pre, post, byte_level(True, True, True),
                          bpe(vocab, merges, ignore_merges=True))


def nemo():
    vocab, specials, merges, pre = byte_level_family("ggml-vocab-gpt-2.gguf", NEMO_PATTERN, True,
                                                     True)
    return tokenizer_json(specials, None, pre, byte_level(True, False, True),
                          byte_level(True, True, True), bpe(vocab, merges, ignore_merges=True))


def qwen2():
    vocab, specials, merges, pre = byte_level_family("ggml-vocab-qwen2.gguf", QWEN2_PATTERN, False,
                                                     False)
    return tokenizer_json(specials, {"type": "NFC"}, pre, byte_level(True, False, True),
                          byte_level(True, True, True),
                          bpe(vocab, merges, continuing_subword_prefix="", end_of_word_suffix=""))


def gpt2():
    tokens, types, _, merges = read_gguf(os.path.join(VOCAB, "ggml-vocab-gpt-2.gguf"))
    vocab = {t: i for i, t in enumerate(tokens)}
    specials = [added(i, t, normalized=True) for i, t in enumerate(tokens) if types[i] == 3]
    return tokenizer_json(specials, None, byte_level(False, True, True),
                          byte_level(True, False, True), byte_level(True, True, True),
                          bpe(vocab, [m.split(" ") for m in merges], continuing_subword_prefix="",
                              end_of_word_suffix=""))


def spm_model(gguf_name, n_model):
    """The first n_model pieces as LlamaConverter turns a SentencePiece BPE model into tokenizers'
    BPE: vocab by id, the first three pieces with score 0, merges from generate_merges."""
    from transformers.convert_slow_tokenizer import generate_merges
    tokens, _, scores, _ = read_gguf(os.path.join(VOCAB, gguf_name))
    tokens, scores = tokens[:n_model], scores[:n_model]
    vocab_scores = [(t, 0.0 if i < 3 else s) for i, (t, s) in enumerate(zip(tokens, scores))]
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = [list(m) for m in generate_merges(vocab, vocab_scores)]
    return tokens, bpe(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True)


SPM_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
SPM_NORMALIZER = {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}


def llama2(legacy=True):
    _, model = spm_model("ggml-vocab-llama-spm.gguf", 32000)
    specials = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")]
    if legacy:
        norm, pre = SPM_NORMALIZER, None
    else:
        norm = None
        pre = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    return tokenizer_json(specials, norm, pre, template("<s>", 1), SPM_DECODER, model)


def phi3():
    tokens, model = spm_model("ggml-vocab-phi-3.gguf", 32000)
    _, types, _, _ = read_gguf(os.path.join(VOCAB, "ggml-vocab-phi-3.gguf"))
    specials = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>", special=False, rstrip=True)]
    markers = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>",
               "<|placeholder3|>", "<|placeholder4|>", "<|system|>", "<|end|>",
               "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]
    for k, m in enumerate(markers):
        specials.append(added(32000 + k, m, rstrip=m != "<|endoftext|>"))
    return tokenizer_json(specials, SPM_NORMALIZER, None, template("<s>", 1), SPM_DECODER, model)


FAMILIES = {
    "llama3": ("ggml-vocab-llama-bpe.gguf", llama3),
    "qwen2": ("ggml-vocab-qwen2.gguf", qwen2),
    "llama2": ("ggml-vocab-llama-spm.gguf", llama2),
    "mistral": ("ggml-vocab-llama-spm.gguf", lambda: llama2(legacy=False)),
    "phi3": ("ggml-vocab-phi-3.gguf", phi3),
    "gpt2": ("ggml-vocab-gpt-2.gguf", gpt2),
    "nemo": ("ggml-vocab-gpt-2.gguf", nemo),
}


# DIR/.complete: the recipe's version and families; another one rebuilds every file.
STAMP = "2 " + " ".join(FAMILIES)


def structure(j):
    """A tokenizer.json without its vocabulary, merges and added tokens (for --compare)."""
    j = dict(j)
    j["model"] = {k: v for k, v in j["model"].items() if k not in ("vocab", "merges")}
    j["added_tokens"] = "%d added tokens" % len(j.get("added_tokens") or [])
    return j


def compare(name, j):
    """Print where transformers' GGUF converter builds something else than j."""
    import tempfile
    os.environ.setdefault("TQDM_DISABLE", "1")
    import transformers
    transformers.logging.set_verbosity_error()
    gg = FAMILIES[name][0]
    tmp = tempfile.mkdtemp()
    os.symlink(os.path.join(VOCAB, gg), os.path.join(tmp, gg))
    try:
        tok = transformers.AutoTokenizer.from_pretrained(tmp, gguf_file=gg)
    except Exception as e:  # noqa: BLE001 (report and go on)
        print(f"{name}: transformers cannot build it from {gg}: {e}")
        return
    theirs = structure(json.loads(tok.backend_tokenizer.to_str()))
    ours = structure(j)
    for k in ours:
        if ours[k] != theirs.get(k):
            print(f"{name}: {k}:\n  converter: {json.dumps(theirs.get(k))[:400]}\n"
                  f"  the family: {json.dumps(ours[k])[:400]}")


def main(argv):
    out = os.path.join(ROOT, "models", "tokenizers")
    do_compare = False
    i = 0
    while i < len(argv):
        if argv[i] == "--out" and i + 1 < len(argv):
            out = argv[i + 1]
            i += 2
        elif argv[i] == "--compare":
            do_compare = True
            i += 1
        else:
            sys.exit(__doc__)
    from tokenizers import Tokenizer
    stamp_path = os.path.join(out, ".complete")
    current = os.path.exists(stamp_path) and open(stamp_path).read().strip() == STAMP
    for name, (gg, build) in FAMILIES.items():
        path = os.path.join(out, name, "tokenizer.json")
        if not os.path.exists(os.path.join(VOCAB, gg)):
            print(f"tok_families: {gg} missing: no {name} tokenizer")
            continue
        if current and os.path.exists(path) and not do_compare:
            continue
        j = build()
        if do_compare:
            compare(name, j)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False, indent=1)
        Tokenizer.from_file(tmp)  # tokenizers must load it as it is
        os.replace(tmp, path)
        print(f"tok_families: {path}")
    if not do_compare:
        with open(stamp_path, "w") as f:
            f.write(STAMP + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
