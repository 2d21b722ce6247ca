"""transformers references for tests/test_seq2seq.c: Marian (MarianMTModel) and NLLB / M2M100
(M2M100ForConditionalGeneration) directories as attn_encdec_load_dir reads them, and
transformers' generate on them as attn_hf_generate decodes.

    .venv/bin/python tools/ref_seq2seq.py OUTDIR
      ->  OUTDIR/seq2seq/<model>/{config.json, model.safetensors, generation_config.json}
          OUTDIR/seq2seq.safetensors   (inputs and expected values)

Tiny random models of several shapes, made by transformers and saved with save_pretrained
(float32 safetensors): Marian post-LN with swish / gelu / relu, scaled and unscaled embeddings,
shared and separate encoder/decoder embeddings, a non-zero final_logits_bias; M2M100 pre-LN with
final norms, fairseq's sinusoidal positions from padding_idx + 1, relu / gelu, scaled and
unscaled embeddings. Weights are drawn larger than transformers' initializer (so logits are far
from ties and every path carries signal). Stored per model M (B sentences, right-padded sources):
  M.src (B, Ts) int32, M.src_len (B) int32: sources ending with </s>, padded with pad;
  M.tgt (B, Tt) int32: decoder inputs (decoder_start + random ids, no padding);
  M.enc (B, Ts, C) encoder last_hidden_state (float32 model; padded rows are not compared);
  M.logits (B, Tt, V) the decoder's logits;
  M.gen.K.opts int32 [num_beams, max_length, max_new_tokens, no_repeat_ngram_size,
      early_stopping (0 False, 1 True, 2 "never"), forced_bos_token_id, use_defaults]
      (0 / -1: not passed to generate; use_defaults 1: generate(**inputs) alone, with the
      directory's generation_config.json), M.gen.K.lp () float32 length_penalty (NaN: not
      passed), M.gen.K.seq (B, L) int32 generate's sequences, M.gen.K.scores (B) float32
      sequences_scores (beam search only);
  M.attn.src (Ts) int32, M.attn.tgt (Tt + 1) int32: one sentence and its whole decoder sequence
      (start .. label); M.attn.{enc,dec,cross}.L (H, Tq, Tk) float32: transformers'
      output_attentions (encoder_attentions, decoder_attentions, cross_attentions) of the forward
      with decoder_input_ids = tgt[:-1].
Metadata "models": the names, comma-separated; "gens": the generate cases per model."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402
from transformers import (GenerationConfig, M2M100Config,  # noqa: E402
                          M2M100ForConditionalGeneration, MarianConfig, MarianMTModel)
from transformers.generation import utils as gen_utils  # noqa: E402
from transformers.models.m2m_100 import modeling_m2m_100  # noqa: E402

# Debian's torch 1.13 cannot import torch.distributed.fsdp under Python 3.11, which transformers'
# is_fsdp_managed_module does (M2M100's encoder and generate ask it); nothing here is FSDP.
for _mod in (gen_utils, modeling_m2m_100):
    if hasattr(_mod, "is_fsdp_managed_module"):
        _mod.is_fsdp_managed_module = lambda module: False


# transformers 4.49's GenerationMixin.prepare_inputs_for_generation drops the encoder's
# attention_mask for encoder-decoder models (it keeps only decoder_attention_mask), so generate's
# cross-attention attends to the source padding of a padded batch: the sequences of padded
# sentences then differ from the model's own forward. Newer transformers (5.24 checked on this
# file's models) pass the mask; so does this wrapper, so that the references are generate's
# intended result on any version.
def _keep_encoder_mask(cls):
    orig = cls.prepare_inputs_for_generation

    def prepare(self, *args, attention_mask=None, **kwargs):
        inputs = orig(self, *args, attention_mask=attention_mask, **kwargs)
        if attention_mask is not None and "attention_mask" not in inputs:
            inputs["attention_mask"] = attention_mask
        return inputs
    cls.prepare_inputs_for_generation = prepare


for _cls in (MarianMTModel, M2M100ForConditionalGeneration):
    _keep_encoder_mask(_cls)

MODELS = [
    # name, class, config class, kwargs
    ("marian_swish_shared", MarianMTModel, MarianConfig,
     dict(vocab_size=61, decoder_vocab_size=61, d_model=32, encoder_attention_heads=4,
          decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_layers=2,
          decoder_layers=2, activation_function="swish", scale_embedding=True,
          pad_token_id=60, eos_token_id=0, decoder_start_token_id=60, forced_eos_token_id=0,
          max_position_embeddings=64)),
    ("marian_gelu_separate", MarianMTModel, MarianConfig,
     dict(vocab_size=53, decoder_vocab_size=53, d_model=24, encoder_attention_heads=3,
          decoder_attention_heads=3, encoder_ffn_dim=40, decoder_ffn_dim=40, encoder_layers=1,
          decoder_layers=3, activation_function="gelu", scale_embedding=False,
          share_encoder_decoder_embeddings=False, pad_token_id=52, eos_token_id=0,
          decoder_start_token_id=52, forced_eos_token_id=0, max_position_embeddings=48)),
    ("marian_relu_deep", MarianMTModel, MarianConfig,
     dict(vocab_size=47, decoder_vocab_size=47, d_model=16, encoder_attention_heads=2,
          decoder_attention_heads=2, encoder_ffn_dim=24, decoder_ffn_dim=24, encoder_layers=3,
          decoder_layers=1, activation_function="relu", scale_embedding=True,
          pad_token_id=46, eos_token_id=0, decoder_start_token_id=46, forced_eos_token_id=0,
          max_position_embeddings=40)),
    ("m2m100_relu", M2M100ForConditionalGeneration, M2M100Config,
     dict(vocab_size=67, d_model=32, encoder_attention_heads=4, decoder_attention_heads=4,
          encoder_ffn_dim=48, decoder_ffn_dim=48, encoder_layers=2, decoder_layers=2,
          activation_function="relu", scale_embedding=True, pad_token_id=1, bos_token_id=0,
          eos_token_id=2, decoder_start_token_id=2, max_position_embeddings=64)),
    ("m2m100_gelu_unscaled", M2M100ForConditionalGeneration, M2M100Config,
     dict(vocab_size=59, d_model=24, encoder_attention_heads=2, decoder_attention_heads=2,
          encoder_ffn_dim=32, decoder_ffn_dim=32, encoder_layers=1, decoder_layers=3,
          activation_function="gelu", scale_embedding=False, pad_token_id=1, bos_token_id=0,
          eos_token_id=2, decoder_start_token_id=2, max_position_embeddings=48)),
]
COMMON = dict(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0,
              decoder_layerdrop=0.0)
B, TS, TT = 4, 9, 7
SRC_LEN = [9, 4, 7, 1]
# A second batch ("big."), generated with the same cases: 20 sentences, enough for attn's search
# to run its first beam step with one row per sentence (FIRST_ROWS_MIN, src/infer) and to drop
# sentences as they finish while others go on.
BIG_SRC_LEN = [9, 3, 8, 1, 6, 9, 2, 5, 7, 4, 9, 1, 3, 8, 6, 2, 9, 5, 4, 7]
# generate cases: (num_beams, max_length, max_new_tokens, no_repeat_ngram_size, early_stopping,
# length_penalty, use_defaults); forced_bos_token_id is the language code for M2M100 (5).
GENS = [
    (1, 20, 0, 0, 0, None, 0),
    (4, 20, 0, 0, 0, None, 0),
    (0, 0, 0, 0, 0, None, 1),          # the directory's generation_config.json alone
    (4, 0, 11, 2, 1, 0.6, 0),          # early_stopping True, no_repeat_ngram_size 2
    (4, 24, 0, 0, 2, 2.0, 0),          # early_stopping "never", length_penalty 2
    (3, 16, 0, 3, 0, -0.5, 0),         # negative length penalty, 3-gram ban
    (1, 0, 13, 2, 0, None, 0),         # greedy with an n-gram ban and max_new_tokens
    (4, 0, 12, 0, 1, 0.6, 0),          # early_stopping True (`attn translate --early-stopping`)
]
EARLY = {0: False, 1: True, 2: "never"}
LANG = 5
EOS_BOOST = {MarianMTModel: 12.0, M2M100ForConditionalGeneration: 2.5}


def init_weights(model, cfg):
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "embed_positions" in pname:  # Marian's sinusoids are a (frozen) parameter
                continue
            if "layer_norm" in pname and pname.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif "embed_tokens" in pname or "shared" in pname:
                p.copy_(torch.randn_like(p) * (1.0 if cfg.scale_embedding else 2.0))
            elif pname.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "lm_head" in pname:
                p.copy_(0.3 * torch.randn_like(p))
            else:
                p.copy_(0.25 * torch.randn_like(p))
        if hasattr(model, "final_logits_bias"):
            b = 0.5 * torch.randn_like(model.final_logits_bias)
            b[0, cfg.eos_token_id] = EOS_BOOST[type(model)]  # sentences end at various lengths
            model.final_logits_bias.copy_(b)
        else:  # no logits bias: a larger </s> row of the tied embeddings
            model.model.shared.weight[cfg.eos_token_id] *= EOS_BOOST[type(model)]


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(os.path.join(outdir, "seq2seq"), exist_ok=True)
    torch.manual_seed(20261210)
    tensors = {}
    for mname, cls, cfg_cls, kw in MODELS:
        cfg = cfg_cls(**dict(COMMON, **kw))
        model = cls(cfg).float().eval()
        init_weights(model, cfg)
        marian = cls is MarianMTModel
        if marian:
            gc = GenerationConfig(bad_words_ids=[[cfg.pad_token_id]], bos_token_id=0,
                                  decoder_start_token_id=cfg.pad_token_id,
                                  eos_token_id=cfg.eos_token_id,
                                  forced_eos_token_id=cfg.eos_token_id, max_length=18,
                                  num_beams=3, pad_token_id=cfg.pad_token_id, renormalize_logits=False)
        else:
            gc = GenerationConfig(bos_token_id=0, decoder_start_token_id=2, eos_token_id=2,
                                  max_length=15, pad_token_id=1, num_beams=2,
                                  forced_bos_token_id=LANG, no_repeat_ngram_size=3,
                                  length_penalty=0.8)
        model.generation_config = gc
        d = os.path.join(outdir, "seq2seq", mname)
        model.save_pretrained(d, safe_serialization=True)

        g = torch.Generator().manual_seed(7)
        V, Vt = cfg.vocab_size, (cfg.decoder_vocab_size if marian else cfg.vocab_size)
        lo = 1 if marian else 3  # ids that are not special (Marian: eos 0, pad last)
        hi = V - 1 if marian else V
        src = torch.randint(lo, hi, (B, TS), generator=g)
        mask = torch.zeros(B, TS, dtype=torch.long)
        for b, n in enumerate(SRC_LEN):
            src[b, n - 1] = cfg.eos_token_id
            src[b, n:] = cfg.pad_token_id
            mask[b, :n] = 1
        tgt = torch.randint(lo, min(hi, Vt - 1) if marian else hi, (B, TT), generator=g)
        tgt[:, 0] = cfg.decoder_start_token_id
        with torch.no_grad():
            out = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt)
        p = mname + "."
        tensors[p + "src"] = src.to(torch.int32).numpy()
        tensors[p + "src_len"] = np.array(SRC_LEN, dtype=np.int32)
        tensors[p + "tgt"] = tgt.to(torch.int32).numpy()
        tensors[p + "enc"] = out.encoder_last_hidden_state.numpy()
        tensors[p + "logits"] = out.logits.numpy()
        gen_cases(model, cfg, marian, src, mask, p, tensors)
        bsrc = torch.randint(lo, hi, (len(BIG_SRC_LEN), TS), generator=g)
        bmask = torch.zeros(len(BIG_SRC_LEN), TS, dtype=torch.long)
        for b, n in enumerate(BIG_SRC_LEN):
            bsrc[b, n - 1] = cfg.eos_token_id
            bsrc[b, n:] = cfg.pad_token_id
            bmask[b, :n] = 1
        tensors[p + "big.src"] = bsrc.to(torch.int32).numpy()
        tensors[p + "big.src_len"] = np.array(BIG_SRC_LEN, dtype=np.int32)
        gen_cases(model, cfg, marian, bsrc, bmask, p + "big.", tensors)
        # attention capture (tests/test_seq2seq.c against attn_viz_capture_encdec_mt): sentence 0
        # alone, the decoder fed tgt[0] (its labels: tgt[0][1:] + one more id)
        a_src = src[:1, :SRC_LEN[0]]
        a_tgt = torch.cat([tgt[:1], tgt[:1, 1:2]], dim=1)
        with torch.no_grad(), torch.random.fork_rng():  # the next models' weights unchanged
            att = model(input_ids=a_src, decoder_input_ids=a_tgt[:, :-1], output_attentions=True)
        tensors[p + "attn.src"] = a_src[0].to(torch.int32).numpy()
        tensors[p + "attn.tgt"] = a_tgt[0].to(torch.int32).numpy()
        for what, maps in (("enc", att.encoder_attentions), ("dec", att.decoder_attentions),
                           ("cross", att.cross_attentions)):
            for layer, a in enumerate(maps):
                tensors[f"{p}attn.{what}.{layer}"] = a[0].float().numpy()
    stfile.save(os.path.join(outdir, "seq2seq.safetensors"), tensors,
                {"models": ",".join(m[0] for m in MODELS), "gens": str(len(GENS))})


def gen_cases(model, cfg, marian, src, mask, p, tensors):
    """transformers' generate on the batch src (mask) for every case of GENS: the options, the
    sequences and the beam scores, named p + "gen.<k>." + what."""
    lens = []
    for k, (nb, ml, mnt, nr, es, lp, dflt) in enumerate(GENS):
        kw2 = {}
        if not dflt:
            kw2 = dict(num_beams=nb, early_stopping=EARLY[es], do_sample=False)
            if ml:
                kw2["max_length"] = ml
            if mnt:
                kw2["max_new_tokens"] = mnt
            kw2["no_repeat_ngram_size"] = nr
            if lp is not None:
                kw2["length_penalty"] = lp
            if not marian:
                kw2["forced_bos_token_id"] = LANG
        with torch.no_grad():
            res = model.generate(input_ids=src, attention_mask=mask, return_dict_in_generate=True,
                                 output_scores=True, **kw2)
        seq = res.sequences
        q = f"{p}gen.{k}."
        tensors[q + "opts"] = np.array([nb, ml, mnt, nr, es, LANG if not marian else -1, dflt],
                                       dtype=np.int32)
        tensors[q + "lp"] = np.array(np.nan if lp is None else lp, dtype=np.float32)
        tensors[q + "seq"] = seq.to(torch.int32).numpy()
        sc = getattr(res, "sequences_scores", None)
        if sc is not None:
            tensors[q + "scores"] = sc.float().numpy()
        ends = [int((row == cfg.eos_token_id).nonzero()[0]) if (row == cfg.eos_token_id).any()
                else -1 for row in seq[:, 1:]]
        lens.append(ends)
    print(f"ref seq2seq: {p}{type(model).__name__}, eos positions per case {lens}")


if __name__ == "__main__":
    main()
