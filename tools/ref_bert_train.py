"""The PyTorch twin of `attn train --arch bert` (src/cli/cmd_train_bert.c) for
tests/test_bert_train.c: one masked-LM training step of a Hugging Face BertForMaskedLM from the
same initial weights on the same masked batch.

Writes into OUTDIR:
  bert_train_init/        a random BertForMaskedLM (width 32, 2 layers, 4 heads, intermediate 64,
                          vocab 30522 = all-MiniLM-L6-v2's tokenizer, dropout 0) saved by
                          transformers: the --init directory of the C run
  bert_train_data.txt     16 lines of text (one empty, one longer than --max-len)
  bert_train_case.json    the run's settings, each example's ids / masked ids / labels, the loss
                          (float64) and the gradient norm
  bert_train_grads.safetensors  every parameter's gradient of that loss, float64 (model.double():
                          the reference is exact to ~1e-15, so the comparison measures attn's
                          float32 error only)
  bert_train_step1.safetensors  the parameters after one step in float32 as the trainer does it:
                          clip_grad_norm_(CLIP), torch.optim.AdamW(lr LR, betas (0.9, 0.999),
                          eps 1e-8, weight decay WD except on biases and LayerNorm weights — the
                          1-D tensors), warmup 0 so the linear schedule's first factor is 1

The data pipeline the twin reproduces (attn_data_load_sentences and attn_data_mlm_* of
src/data/mlm.c, documented in include/attn_data.h): lines split on "\\n" (a trailing "\\r"
dropped); each line tokenized with the special tokens and truncated to max_len tokens ([CLS] ...
[SEP], as tokenizer(line, truncation=True, max_length=max_len)); lines with no token besides the
specials skipped; example i = the i-th kept line. Masking: attn's
counter-based scheme (include/attn_embed.h, attn_embed_mlm_mask) re-implemented here with
Philox4x32-10 in Python, epoch 0. One batch holds all the examples, so its order (the trainer
shuffles) does not matter: the loss is the mean over all labelled tokens."""
import json
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINILM = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
SEED, LR, WD, CLIP, MAX_LEN = 7, 1e-3, 0.01, 1.0, 24

LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "Knowledge is power.",
    "I can't believe it's already December!",
    "",
    "Tom bought a new car yesterday, and Mary doesn't like it.",
    "Paris is the capital of France; Berlin is the capital of Germany.",
    "Where did you put my keys?",
    "She plays the piano beautifully every evening after dinner.",
    "The year 1999 and the number 3.14159 appear in this sentence.",
    "Let's meet at the café near the station at 5 p.m.",
    "He said: \"I'll be back\" and left the room quietly.",
    "This line is deliberately much longer than the maximum length of twenty-four tokens "
    "so that the trainer has to truncate it before the special separator token.",
    "Music makes people happy.",
    "We've been waiting for hours, haven't we?",
    "Neural networks learn from data.",
    "知识就是力量。",
]

MASK32 = 0xFFFFFFFF


def philox_block(seed, block):
    """Philox4x32-10 (attn_rng_block): key = seed (low word first), counter = (block lo, hi, 0, 0)."""
    c0, c1, c2, c3 = block & MASK32, (block >> 32) & MASK32, 0, 0
    k0, k1 = seed & MASK32, (seed >> 32) & MASK32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK32, p1 & MASK32, \
            ((p0 >> 32) ^ c3 ^ k1) & MASK32, p0 & MASK32
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return [c0, c1, c2, c3]


assert philox_block(0, 0)[0] == 0x6627E8D5  # Random123's known answer


def mlm_mask(ids, seed, epoch, example, special, mask_id, V, p=0.15, pm=0.8, pr=0.1):
    t_sel = int(np.floor(p * 2.0 ** 32))
    t_mask = int(np.floor(pm * 2.0 ** 32))
    t_rand = int(np.floor((float(np.float32(pm)) + float(np.float32(pr))) * 2.0 ** 32))
    masked, labels = [], []
    for t, i in enumerate(ids):
        u = philox_block(seed, (epoch << 40) | (example << 12) | t)
        chosen = u[0] < t_sel and i not in special
        labels.append(i if chosen else -100)
        if not chosen:
            masked.append(i)
        elif u[1] < t_mask:
            masked.append(mask_id)
        elif u[1] < t_rand:
            masked.append((u[2] * V) >> 32)
        else:
            masked.append(i)
    return masked, labels


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(int(os.environ.get("ATTN_REF_THREADS", "2")))  # tests/run.sh: 1 per lane
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM
    from transformers.utils import logging
    logging.set_verbosity_error()

    tok = AutoTokenizer.from_pretrained(MINILM)
    init = os.path.join(out, "bert_train_init")
    shutil.rmtree(init, ignore_errors=True)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, pad_token_id=0)
    torch.manual_seed(3)
    model = BertForMaskedLM(cfg)
    model.save_pretrained(init, safe_serialization=True)
    data = os.path.join(out, "bert_train_data.txt")
    with open(data, "w", encoding="utf-8") as f:
        f.write("\n".join(LINES) + "\n")

    # p in float32, as the C parameters hold them (0.15f, 0.8f, 0.1f).
    p32 = [float(np.float32(x)) for x in (0.15, 0.8, 0.1)]
    special = set(tok.all_special_ids)
    examples = []
    for line in LINES:
        ids = tok(line, truncation=True, max_length=MAX_LEN)["input_ids"]
        if len(ids) <= 2:
            continue
        k = len(examples)
        masked, labels = mlm_mask(ids, SEED, 0, k, special, tok.mask_token_id, 30522, *p32)
        examples.append({"ids": ids, "masked": masked, "labels": labels})
    B, T = len(examples), max(len(e["ids"]) for e in examples)
    inp = torch.zeros(B, T, dtype=torch.long)
    att = torch.zeros(B, T, dtype=torch.long)
    lab = torch.full((B, T), -100, dtype=torch.long)
    for b, e in enumerate(examples):
        n = len(e["ids"])
        inp[b, :n] = torch.tensor(e["masked"])
        att[b, :n] = 1
        lab[b, :n] = torch.tensor(e["labels"])
    kinds = {"mask": 0, "random": 0, "kept": 0}
    for e in examples:
        for i, m, l in zip(e["ids"], e["masked"], e["labels"]):
            if l != -100:
                kinds["mask" if m == tok.mask_token_id else "kept" if m == i else "random"] += 1

    # Gradients in float64.
    m64 = BertForMaskedLM.from_pretrained(init).double().train()
    loss = m64(input_ids=inp, attention_mask=att, labels=lab).loss
    loss.backward()
    grads = {n: p.grad.detach().numpy().copy() for n, p in m64.named_parameters()}
    stfile.save(os.path.join(out, "bert_train_grads.safetensors"), grads)
    gnorm = float(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads.values())))

    # One optimizer step in float32.
    m32 = BertForMaskedLM.from_pretrained(init).float().train()
    decay = [p for n, p in m32.named_parameters() if p.dim() > 1]
    nodecay = [p for n, p in m32.named_parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.999), eps=1e-8)
    l32 = m32(input_ids=inp, attention_mask=att, labels=lab).loss
    l32.backward()
    torch.nn.utils.clip_grad_norm_(m32.parameters(), CLIP)
    opt.step()
    stfile.save(os.path.join(out, "bert_train_step1.safetensors"),
                {n: p.detach().numpy().copy() for n, p in m32.named_parameters()})
    case = {"seed": SEED, "lr": LR, "weight_decay": WD, "clip": CLIP, "max_len": MAX_LEN,
            "batch_size": B, "T": T, "data": data, "init": init, "tokenizer": MINILM,
            "loss": float(loss), "loss_f32": float(l32), "grad_norm": gnorm,
            "examples": examples, "kinds": kinds}
    with open(os.path.join(out, "bert_train_case.json"), "w") as f:
        json.dump(case, f, indent=1)
    print(f"ref_bert_train: {B} examples (T {T}), {kinds}, loss {float(loss):.6f}, "
          f"grad norm {gnorm:.4g}")


if __name__ == "__main__":
    main()
