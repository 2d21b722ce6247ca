"""References for tests/test_fill_mask.c (attn_embed_fill_mask, `attn fill-mask`): random-weight
BertForMaskedLM directories made with transformers 4.49, and what transformers' fill-mask pipeline
answers on them.

Models (OUTDIR/fill_<name>/: config.json, model.safetensors, tokenizer files):
  minilm   all-MiniLM-L6-v2's WordPiece tokenizer (vocab 30522, copied from models/), width 32,
           2 layers, 4 heads, intermediate 37, tied decoder, gelu
  small    a 300-odd-token WordPiece vocabulary built here with `tokenizers` (BertNormalizer,
           BertPreTokenizer, TemplateProcessing, WordPiece decoder), width 48, 3 heads,
           intermediate 100, gelu_new, an untied decoder, and tokenizer_config.json's
           clean_up_tokenization_spaces true (transformers' extra clean-up in decode)
  nohead   a BertModel (no masked-LM head) with the minilm tokenizer: fill-mask must refuse it
The weights are drawn wider than BERT's initialization (std 0.3, LayerNorm gains in [0.5, 1.5],
biases N(0, 0.2), a prediction bias N(0, 0.5)) so that the predicted distributions are peaked
(top probabilities of 1e-3 .. 0.5, not the ~1/V of a fresh model): the 1e-5 tolerance on
probabilities then means something and the ranking has clear gaps.

OUTDIR/fill_cases.json: [{"model", "text", "top_k", "results": [[{score, token, token_str,
sequence}, ...] per mask]}]  (pipeline(..., top_k=K)(text); a single-mask answer is wrapped in a
list) and "min_gap": the smallest probability gap between consecutive candidates (ties would make
the ranking ambiguous; the test reports it)."""
import json
import os
import shutil
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINILM = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")

SMALL_WORDS = """the a an is are was were be of to and in on at for with by from as it its this
that these those he she they we you i me my your his her their our not no yes what who where when
why how which capital france paris germany berlin city country river mountain sea big small good
bad best worst new old red blue green black white cat dog bird fish horse eat eats ate run runs
see sees saw love loves like likes king queen man woman boy girl day night sun moon star world
hello goodbye one two three four five first last time year music book books read write can can't
will won't do does did don't it's i'm we've they're very much many more most some any all each
every house home school work play plays played game games water fire earth air""".split()


def copy_minilm_tokenizer(dst):
    for f in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]:
        shutil.copy(os.path.join(MINILM, f), os.path.join(dst, f))


def small_tokenizer(dst):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {t: i for i, t in enumerate(specials)}
    for w in SMALL_WORDS:
        for piece in [w]:
            if piece not in vocab:
                vocab[piece] = len(vocab)
    for ch in "abcdefghijklmnopqrstuvwxyz0123456789.,!?;:'\"()-":
        for piece in (ch, "##" + ch):
            if piece not in vocab:
                vocab[piece] = len(vocab)
    for suf in ["s", "ed", "ing", "ly", "er", "est"]:
        if "##" + suf not in vocab:
            vocab["##" + suf] = len(vocab)
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok.add_special_tokens(specials)
    fast = BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", sep_token="[SEP]",
                             pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]",
                             clean_up_tokenization_spaces=True)
    fast.save_pretrained(dst)
    return len(vocab)


def widen(model, g):
    """Peaked predictions: wider weights than BERT's init (see the module note)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif name.endswith("predictions.bias") or name.endswith("decoder.bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))


def make_model(dst, vocab, hidden, layers, heads, inter, act, tie, mlm, seed):
    from transformers import BertConfig, BertForMaskedLM, BertModel

    cfg = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=inter, hidden_act=act,
                     max_position_embeddings=128, type_vocab_size=2, pad_token_id=0,
                     tie_word_embeddings=tie, hidden_dropout_prob=0.1,
                     attention_probs_dropout_prob=0.1)
    torch.manual_seed(seed)
    m = (BertForMaskedLM if mlm else BertModel)(cfg).eval()
    widen(m, torch.Generator().manual_seed(seed + 1))
    if mlm and tie:
        m.tie_weights()
    m.save_pretrained(dst, safe_serialization=True)


CASES = [
    ("minilm", "The capital of France is [MASK].", 5),
    ("minilm", "[MASK] is the best thing in the world.", 5),
    ("minilm", "Hello [MASK], how are [MASK] today?", 3),
    ("minilm", "知识就是[MASK]量。", 5),
    ("minilm", "I can't believe it's [MASK]!", 10),
    ("minilm", "The [MASK]", 1),
    ("minilm", "café naïve [MASK] résumé", 5),
    ("minilm", "[MASK][MASK][MASK]", 2),
    ("minilm", " ".join(["word"] * 60) + " [MASK] end.", 5),
    ("small", "the capital of france is [MASK].", 5),
    ("small", "i like [MASK] and dogs, don't you?", 5),
    ("small", "[MASK] cat eats the fish.", 8),
    ("small", "the king and the [MASK] play games.", 5),
    ("small", "he said it's [MASK] , we've read the books .", 5),
    ("small", "[MASK] [MASK] red , blue !", 4),
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(int(os.environ.get("ATTN_REF_THREADS", "2")))  # tests/run.sh: 1 per lane
    from transformers import pipeline
    from transformers.utils import logging
    logging.set_verbosity_error()

    dirs = {}
    for name in ["minilm", "small", "nohead"]:
        d = os.path.join(out, "fill_" + name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        dirs[name] = d
    copy_minilm_tokenizer(dirs["minilm"])
    copy_minilm_tokenizer(dirs["nohead"])
    v_small = small_tokenizer(dirs["small"])
    make_model(dirs["minilm"], 30522, 32, 2, 4, 37, "gelu", True, True, 11)
    make_model(dirs["small"], v_small, 48, 2, 3, 100, "gelu_new", False, True, 12)
    make_model(dirs["nohead"], 30522, 32, 1, 4, 37, "gelu", True, False, 13)

    pipes = {n: pipeline("fill-mask", model=dirs[n], tokenizer=dirs[n], device=-1)
             for n in ["minilm", "small"]}
    cases, min_gap = [], 1.0
    for name, text, k in CASES:
        r = pipes[name](text, top_k=k)
        if r and isinstance(r[0], dict):
            r = [r]
        for row in r:
            for a, b in zip(row, row[1:]):
                min_gap = min(min_gap, a["score"] - b["score"])
        cases.append({"model": name, "dir": dirs[name], "text": text, "top_k": k,
                      "results": r})
    with open(os.path.join(out, "fill_cases.json"), "w") as f:
        json.dump({"cases": cases, "min_gap": min_gap, "nohead": dirs["nohead"]}, f,
                  ensure_ascii=False, indent=1)
    top = [c["results"][0][0]["score"] for c in cases]
    print(f"ref_fill_mask: {len(cases)} cases, top-1 probabilities {min(top):.3g} .. "
          f"{max(top):.3g}, smallest gap between ranks {min_gap:.3g}")


if __name__ == "__main__":
    main()
