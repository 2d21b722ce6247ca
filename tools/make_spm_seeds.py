"""Seeds for fuzz/corpus/spm (the Marian tokenizer target) and the Unigram + Precompiled seeds of
fuzz/corpus/tokenizer: tiny SentencePiece models trained by SentencePiece's own trainer on a few
hundred Tatoeba lines, with a small hand-written normalization rule table so that the
precompiled charsmap stays a few hundred bytes. Usage: .venv/bin/python tools/make_spm_seeds.py
(rewrites the seeds; needs the pinned sentencepiece, transformers and protobuf)."""
import io
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "tatoeba-eng-cmn", "cmn.txt")
SEP = b"\n@@ATTN-PART@@\n"
RULES = "FF21\t41\nFF22\t42\n3000\t20\nFB01\t66 69\n2460\t31\n"


def main():
    import sentencepiece as spm
    lines = []
    with open(DATA, encoding="utf-8-sig") as f:
        for i, line in enumerate(f):
            if i % 97 == 0 and i < 12000:
                p = line.rstrip("\n").split("\t")
                lines += p[:1]
    tmp = tempfile.mkdtemp()
    tsv = os.path.join(tmp, "rules.tsv")
    with open(tsv, "w") as f:
        f.write(RULES)
    models = {}
    for kind in ("unigram", "bpe"):
        m = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=m, vocab_size=(200 if kind == "unigram" else 360), hard_vocab_limit=False,
                                       model_type=kind, num_threads=1, character_coverage=0.9995,
                                       normalization_rule_tsv=tsv, minloglevel=2,
                                       byte_fallback=(kind == "bpe"))
        models[kind] = m.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=models["unigram"])
    vocab = {"</s>": 0, "<unk>": 1}
    for k in range(sp.get_piece_size() - 1, 2, -1):
        vocab.setdefault(sp.id_to_piece(k), len(vocab))
    vocab[">>fra<<"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    vj = json.dumps(vocab, ensure_ascii=False).encode()
    out = os.path.join(ROOT, "fuzz", "corpus", "spm")
    os.makedirs(out, exist_ok=True)
    seeds = {
        "shared": [models["unigram"], models["bpe"], vj],
        "separate": [models["unigram"], models["bpe"], vj, vj, b'{"separate_vocabs": true}'],
        "same-model": [models["unigram"], models["unigram"], vj, b"", b'{"clean_up_tokenization_spaces": true}'],
    }
    for name, parts in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(SEP.join(parts))
    # tokenizer.json seeds: T5's converter on the tiny models (Unigram and BPE, Precompiled)
    from transformers import T5TokenizerFast
    for kind in ("unigram", "bpe"):
        p = os.path.join(tmp, kind + ".model")
        with open(p, "wb") as f:
            f.write(models[kind])
        d = os.path.join(tmp, kind)
        T5TokenizerFast(vocab_file=p, extra_ids=3).save_pretrained(d)
        with open(os.path.join(d, "tokenizer.json"), "rb") as f:
            data = f.read()
        with open(os.path.join(ROOT, "fuzz", "corpus", "tokenizer", "t5-" + kind), "wb") as f:
            f.write(data)
    print("seeds written")


if __name__ == "__main__":
    main()
