"""Load a translation directory attn exported (attn_encdec_save_hf_dir: MarianMTModel or
M2M100ForConditionalGeneration) with transformers, strictly, and write what transformers computes
on it, so tests/test_seq2seq.c can check that it is attn's model:

    .venv/bin/python tools/check_seq2seq_hf.py DIR OUT.safetensors

OUT holds, for a right-padded batch of B random sources drawn here (seeded; ids that are not
<pad>, <s> or </s>, each source ending with </s>):
  src (B, Ts) int32, src_len (B) int32, tgt (B, Tt) int32 (decoder start + random ids),
  logits (B, Tt, V) float32: the model's forward with the source attention mask;
  gen.K.seq (B, L) int32, gen.K.scores (B) float32 (beam search only), gen.K.opts int32
  [num_beams, max_length (0: the directory's)]: generate with the directory's
  generation_config.json (K = 0) and with overrides (K >= 1).
Loading is strict: a weight transformers had to initialize itself (other than the sinusoids it
never stores) or a tensor it did not take is an error."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_seq2seq  # noqa: E402,F401  (transformers 4.49 patches: FSDP probe, encoder mask)
import stfile  # noqa: E402
from transformers import AutoModelForSeq2SeqLM  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

B, TS, TT = 4, 9, 6
SRC_LEN = [9, 3, 6, 1]
GENS = [(0, 0), (1, 16), (3, 14)]


def main():
    d, out = sys.argv[1], sys.argv[2]
    hf_logging.set_verbosity_error()
    model, info = AutoModelForSeq2SeqLM.from_pretrained(d, output_loading_info=True)
    missing = [k for k in info["missing_keys"] if "embed_positions" not in k]
    if missing or info["unexpected_keys"] or info["mismatched_keys"]:
        sys.exit(f"{d}: transformers load problems: {info}")
    model = model.float().eval()
    cfg = model.config
    with open(os.path.join(d, "generation_config.json")) as f:
        gen = json.load(f)
    special = {cfg.pad_token_id, cfg.eos_token_id, cfg.decoder_start_token_id,
               gen.get("bos_token_id", -1)}
    V = cfg.vocab_size
    ok = torch.tensor([i for i in range(V) if i not in special])
    g = torch.Generator().manual_seed(11)
    src = ok[torch.randint(0, len(ok), (B, TS), generator=g)]
    mask = torch.zeros(B, TS, dtype=torch.long)
    for b, n in enumerate(SRC_LEN):
        src[b, n - 1] = cfg.eos_token_id
        src[b, n:] = cfg.pad_token_id
        mask[b, :n] = 1
    tgt = ok[torch.randint(0, len(ok), (B, TT), generator=g)]
    tgt[:, 0] = cfg.decoder_start_token_id
    t = {"src": src.to(torch.int32).numpy(), "src_len": np.array(SRC_LEN, dtype=np.int32),
         "tgt": tgt.to(torch.int32).numpy()}
    with torch.no_grad():
        t["logits"] = model(input_ids=src, attention_mask=mask,
                            decoder_input_ids=tgt).logits.float().numpy()
        for k, (nb, ml) in enumerate(GENS):
            kw = {}
            if nb:
                kw = dict(num_beams=nb, max_length=ml, do_sample=False)
            res = model.generate(input_ids=src, attention_mask=mask, return_dict_in_generate=True,
                                 output_scores=True, **kw)
            t[f"gen.{k}.seq"] = res.sequences.to(torch.int32).numpy()
            t[f"gen.{k}.opts"] = np.array([nb, ml], dtype=np.int32)
            sc = getattr(res, "sequences_scores", None)
            if sc is not None:
                t[f"gen.{k}.scores"] = sc.float().numpy()
    stfile.save(out, t, {"gens": str(len(GENS)), "class": type(model).__name__})
    print(f"  transformers: {type(model).__name__} loaded {d}; generate lengths "
          f"{[t[f'gen.{k}.seq'].shape[1] for k in range(len(GENS))]}")


if __name__ == "__main__":
    main()
