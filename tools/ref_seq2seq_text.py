"""transformers references for tests/test_seq2seq.c's text end-to-end test: `attn translate` on
a Marian and an NLLB-style M2M100 directory with their tokenizers, text in and text out.

    .venv/bin/python tools/ref_seq2seq_text.py OUTDIR
      ->  OUTDIR/seq2seq_text/{marian,nllb}/   a tiny random model (made as tools/ref_seq2seq.py
              makes its models) with a tokenizer made from SentencePiece models trained here by
              SentencePiece's own trainer (tools/ref_tokenizer_spm.py's helpers): Marian's
              source.spm / target.spm / vocab.json, NLLB's tokenizer.json (NllbTokenizerFast)
          OUTDIR/seq2seq_text.json  {"texts": [...], "cases": [{"dir", "args", "out": [...]}]}:
              what transformers' tokenizer + generate + decode(skip_special_tokens=True) give for
              the texts as one padded batch, with the CLI arguments that ask for the same thing;
              also as plain files OUTDIR/seq2seq_text/{in.txt, caseK.dir, caseK.args, caseK.out};
          OUTDIR/seq2seq_text/attn.safetensors  transformers' output_attentions of the first text
              translated alone (NLLB eng_Latn -> zho_Hans, Marian >>cmn_Hans<<, the directories'
              generation settings): N.src, N.seq (int32), N.{enc,dec,cross}.L (H, Tq, Tk).
Without the Tatoeba file nothing is written (the C test skips)."""
import json
import os
import shutil
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_seq2seq  # noqa: E402  (patches and the weight initialization)
import ref_tokenizer_spm as rts  # noqa: E402
from transformers import (GenerationConfig, M2M100Config, M2M100ForConditionalGeneration,  # noqa: E402
                          MarianConfig, MarianMTModel, MarianTokenizer, NllbTokenizerFast)

TEXTS = ["Knowledge is power.", "I like green tea very much.", "Where is the station?"]
SMALL = dict(d_model=16, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
             decoder_ffn_dim=32, encoder_layers=1, decoder_layers=2, max_position_embeddings=64)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    if not os.path.exists(rts.DATA):
        print(f"{rts.DATA} missing: no seq2seq text references")
        return
    warnings.filterwarnings("ignore")
    import sentencepiece as spm
    import transformers
    transformers.logging.set_verbosity_error()
    d = os.path.join(out, "seq2seq_text")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    data = rts.lines()
    rts.train(spm, data, os.path.join(d, "uni"), "unigram")
    rts.train(spm, data, os.path.join(d, "bpe"), "bpe", byte_fallback=True)
    uni, bpe = os.path.join(d, "uni.model"), os.path.join(d, "bpe.model")
    torch.manual_seed(20261212)
    cases = []

    # Marian: source uni, target bpe, one vocabulary over both.
    md = os.path.join(d, "marian")
    os.makedirs(md)
    shutil.copy(uni, os.path.join(md, "source.spm"))
    shutil.copy(bpe, os.path.join(md, "target.spm"))
    p_uni = spm.SentencePieceProcessor(model_file=uni)
    p_bpe = spm.SentencePieceProcessor(model_file=bpe)
    pu = [p_uni.id_to_piece(k) for k in range(p_uni.get_piece_size())]
    pb = [p_bpe.id_to_piece(k) for k in range(p_bpe.get_piece_size())]
    vocab = rts.marian_vocab(pu + [x for x in pb if x not in set(pu)])
    with open(os.path.join(md, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(md, "tokenizer_config.json"), "w") as f:
        json.dump({"source_lang": "en", "target_lang": "zh", "separate_vocabs": False,
                   "model_max_length": 512, "tokenizer_class": "MarianTokenizer"}, f)
    tok = MarianTokenizer.from_pretrained(md)
    pad = vocab["<pad>"]
    cfg = MarianConfig(**dict(ref_seq2seq.COMMON, **SMALL), vocab_size=len(vocab),
                       decoder_vocab_size=len(vocab), activation_function="swish",
                       pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad,
                       forced_eos_token_id=0)
    model = MarianMTModel(cfg).float().eval()
    ref_seq2seq.init_weights(model, cfg)
    model.generation_config = GenerationConfig(bad_words_ids=[[pad]], decoder_start_token_id=pad,
                                               eos_token_id=0, forced_eos_token_id=0,
                                               max_length=14, num_beams=3, pad_token_id=pad)
    model.save_pretrained(md, safe_serialization=True)
    for args, prefix, kw in (("", "", {}), ("--beam 1 --tgt-lang cmn_Hans", ">>cmn_Hans<< ",
                                                                         dict(num_beams=1))):
        enc = tok([prefix + t for t in TEXTS], return_tensors="pt", padding=True)
        with torch.no_grad():
            seq = model.generate(**enc, **kw)
        cases.append({"dir": "marian", "args": args,
                      "out": tok.batch_decode(seq, skip_special_tokens=True)})

    # NLLB: NllbTokenizerFast over the BPE model, an M2M100 model of its size.
    nd = os.path.join(d, "nllb")
    NllbTokenizerFast(vocab_file=bpe).save_pretrained(nd)
    tok = NllbTokenizerFast.from_pretrained(nd)
    cfg = M2M100Config(**dict(ref_seq2seq.COMMON, **SMALL), vocab_size=len(tok),
                       activation_function="relu", scale_embedding=True,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id)
    model = M2M100ForConditionalGeneration(cfg).float().eval()
    ref_seq2seq.init_weights(model, cfg)
    model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id,
                                               decoder_start_token_id=tok.eos_token_id,
                                               eos_token_id=tok.eos_token_id, max_length=14,
                                               pad_token_id=tok.pad_token_id, num_beams=2)
    model.save_pretrained(nd, safe_serialization=True)
    for sl, tl, beams in (("eng_Latn", "zho_Hans", 0), ("fra_Latn", "deu_Latn", 1)):
        tok.src_lang = sl
        enc = tok(TEXTS, return_tensors="pt", padding=True)
        kw = dict(forced_bos_token_id=tok.convert_tokens_to_ids(tl))
        if beams:
            kw["num_beams"] = beams
        with torch.no_grad():
            seq = model.generate(**enc, **kw)
        args = f"--src-lang {sl} --tgt-lang {tl}" + (f" --beam {beams}" if beams else "")
        cases.append({"dir": "nllb", "args": args,
                      "out": tok.batch_decode(seq, skip_special_tokens=True)})
    # attention capture through the tokenizer and generate (tests/test_seq2seq.c against `attn
    # attention --model DIR TEXT --src-lang .. --tgt-lang .. --out`): the first text translated
    # alone with the directory's generation settings, the maps of the output sequence
    attn_ref = {}
    for name, mdl, tk, kw, langs in (
            ("nllb", model, tok, dict(forced_bos_token_id=tok.convert_tokens_to_ids("zho_Hans")),
             ("eng_Latn", "zho_Hans")),
            ("marian", MarianMTModel.from_pretrained(md).eval(), MarianTokenizer.from_pretrained(md),
             {}, (None, "cmn_Hans"))):
        if langs[0]:
            tk.src_lang = langs[0]
        text = TEXTS[0] if langs[0] else f">>{langs[1]}<< {TEXTS[0]}"
        enc = tk([text], return_tensors="pt")
        with torch.no_grad():
            seq = mdl.generate(**enc, **kw)
            att = mdl(**enc, decoder_input_ids=seq[:, :-1], output_attentions=True)
        attn_ref[name + ".src"] = enc.input_ids[0].to(torch.int32).numpy()
        attn_ref[name + ".seq"] = seq[0].to(torch.int32).numpy()
        for what, maps in (("enc", att.encoder_attentions), ("dec", att.decoder_attentions),
                           ("cross", att.cross_attentions)):
            for layer, a in enumerate(maps):
                attn_ref[f"{name}.{what}.{layer}"] = a[0].float().numpy()
        print(f"ref seq2seq_text: attention {name} {langs}: source {enc.input_ids[0].tolist()}, "
              f"sequence {seq[0].tolist()}")
    ref_seq2seq.stfile.save(os.path.join(d, "attn.safetensors"), attn_ref,
                            {"text": TEXTS[0], "nllb": "--src-lang eng_Latn --tgt-lang zho_Hans",
                             "marian": "--tgt-lang cmn_Hans"})
    with open(os.path.join(out, "seq2seq_text.json"), "w", encoding="utf-8") as f:
        json.dump({"texts": TEXTS, "cases": cases}, f, ensure_ascii=False, indent=1)
    # the same as plain files for the C test: in.txt, and per case K: caseK.dir, caseK.args and
    # caseK.out (one line per text)
    with open(os.path.join(d, "in.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in TEXTS))
    for k, c in enumerate(cases):
        for ext, text in (("dir", c["dir"]), ("args", c["args"]),
                          ("out", "".join(x + "\n" for x in c["out"]))):
            with open(os.path.join(d, f"case{k}.{ext}"), "w", encoding="utf-8") as f:
                f.write(text)
    for c in cases:
        print(f"ref seq2seq_text: {c['dir']} {c['args']!r}: {c['out']}")


if __name__ == "__main__":
    main()
