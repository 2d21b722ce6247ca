"""References for tests/test_bert.c (the BERT model, include/attn_bert.h), made with transformers.

Writes under OUTDIR/bert/:
  <case>/            a model directory written by transformers' save_pretrained (config.json +
                     model.safetensors), random weights from a fixed seed:
      tiny   BertForMaskedLM (no pooler), V 120, C 64, 2 layers, 4 heads, F 128, gelu
      odd    BertForPreTraining (pooler + MLM head + NSP head), V 101, C 48, 3 heads, F 100,
             3 layers, 3 token types, gelu_new, eps 1e-5
      relu   BertModel(add_pooling_layer=False), V 50, C 32, 2 heads, F 40, 1 layer, 1 type, relu
      pool   BertModel with pooler, V 80, C 64, 8 heads, F 96, 2 layers, gelu
    and variants of tiny's file: tiny_f16 / tiny_bf16 (weights saved as F16 / BF16), tiny_old
    (LayerNorm.gamma/.beta names, an embeddings.position_ids buffer, the tied
    cls.predictions.decoder.weight/.bias present, as older checkpoints have them).
  <case>.safetensors the batch and the float64 references (model.double(), dropout off):
      ids, types (B, T) int32 (padding: id 0 / type 0), lengths (B) int32, labels (B, T) int32
      (-100 = not predicted; always -100 on padding)
      hidden (B, T, C) last_hidden_state; hs.<i> (B, T, C) hidden_states[i], i = 0 .. L;
      padded rows set to 0 (their values mean nothing); att.<l> (B, H, T, T) attention
      probabilities of layer l (padded query rows and masked keys 0)
      pooled (B, C) pooler_output (pooler cases); logits (B, T, V) MLM logits (MLM cases)
      loss (1) MLM loss and grad.<name> d loss / d every parameter (MLM cases), <name> in
      BertModel naming (no "bert." prefix; the tied decoder weight's gradient is inside
      embeddings.word_embeddings.weight, as in PyTorch)
  minilm.safetensors (when models/all-MiniLM-L6-v2 exists): ids/types/lengths of a few sentences
      tokenized by its tokenizer (padded batch), hidden (B, T, 384) float64 reference (as float32)
      and st_emb (B, 384): sentence-transformers 2.7.0's encode() of the same sentences.
Weights are randomized beyond HF's init (matrices std 0.2, LayerNorm and biases perturbed) so
that every part of the computation moves the outputs."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

import transformers  # noqa: E402
from transformers import (BertConfig, BertForMaskedLM, BertForPreTraining,  # noqa: E402
                          BertModel)

transformers.logging.set_verbosity_error()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = {
    "tiny": dict(kind="mlm", cfg=dict(vocab_size=120, hidden_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=128,
                                      max_position_embeddings=32, hidden_act="gelu")),
    "odd": dict(kind="pretraining", cfg=dict(vocab_size=101, hidden_size=48, num_hidden_layers=3,
                                             num_attention_heads=3, intermediate_size=100,
                                             max_position_embeddings=24, type_vocab_size=3,
                                             hidden_act="gelu_new", layer_norm_eps=1e-5)),
    "relu": dict(kind="model_nopool", cfg=dict(vocab_size=50, hidden_size=32, num_hidden_layers=1,
                                               num_attention_heads=2, intermediate_size=40,
                                               max_position_embeddings=16, type_vocab_size=1,
                                               hidden_act="relu")),
    "pool": dict(kind="model", cfg=dict(vocab_size=80, hidden_size=64, num_hidden_layers=2,
                                        num_attention_heads=8, intermediate_size=96,
                                        max_position_embeddings=20, hidden_act="gelu")),
}
B, T = 3, 9
LENGTHS = [9, 5, 2]


def make_model(kind, cfg, seed):
    torch.manual_seed(seed)
    c = BertConfig(initializer_range=0.2, **cfg)
    if kind == "mlm":
        m = BertForMaskedLM(c)
    elif kind == "pretraining":
        m = BertForPreTraining(c)
    elif kind == "model_nopool":
        m = BertModel(c, add_pooling_layer=False)
    else:
        m = BertModel(c)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    m.eval()
    return m


def batch(cfg, seed):
    g = np.random.default_rng(seed)
    V, Tv = cfg["vocab_size"], cfg.get("type_vocab_size", 2)
    ids = np.zeros((B, T), np.int32)
    types = np.zeros((B, T), np.int32)
    labels = np.full((B, T), -100, np.int32)
    for b, n in enumerate(LENGTHS):
        ids[b, :n] = g.integers(1, V, n)
        if Tv > 1:
            k = int(g.integers(1, n + 1))
            types[b, k:n] = g.integers(0, Tv)
        for t in range(n):
            if g.random() < 0.35 or t == 0:
                labels[b, t] = g.integers(0, V)
    return ids, types, np.array(LENGTHS, np.int32), labels


def zero_pad(x, lengths):
    x = x.copy()
    for b, n in enumerate(lengths):
        x[b, n:] = 0
    return x


def encoder_of(m):
    return m if isinstance(m, BertModel) else m.bert


def run_case(outdir, name, spec, seed):
    m = make_model(spec["kind"], spec["cfg"], seed)
    d = os.path.join(outdir, name)
    m.save_pretrained(d, safe_serialization=True)
    ids, types, lengths, labels = batch(spec["cfg"], seed + 1)
    mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.int64)
    md = make_model(spec["kind"], spec["cfg"], seed).double()
    enc = encoder_of(md)
    t_ids = torch.tensor(ids, dtype=torch.long)
    t_types = torch.tensor(types, dtype=torch.long)
    t_mask = torch.tensor(mask)
    out = {"ids": ids, "types": types, "lengths": lengths, "labels": labels}
    eo = enc(input_ids=t_ids, token_type_ids=t_types, attention_mask=t_mask,
             output_hidden_states=True, output_attentions=True)
    f32 = lambda t: t.detach().float().numpy()  # noqa: E731
    out["hidden"] = zero_pad(f32(eo.last_hidden_state), lengths)
    for i, h in enumerate(eo.hidden_states):
        out["hs.%d" % i] = zero_pad(f32(h), lengths)
    for i, a in enumerate(eo.attentions):
        a = f32(a)
        for b, n in enumerate(lengths):
            a[b, :, n:, :] = 0
            a[b, :, :, n:] = 0
        out["att.%d" % i] = a
    if eo.pooler_output is not None:
        out["pooled"] = f32(eo.pooler_output)
    if spec["kind"] in ("mlm", "pretraining"):
        logits = md.cls.predictions(eo.last_hidden_state)
        out["logits"] = zero_pad(f32(logits), lengths)
        V = spec["cfg"]["vocab_size"]
        tl = torch.tensor(labels, dtype=torch.long).reshape(-1)
        loss = F.cross_entropy(logits.reshape(-1, V), tl, ignore_index=-100)
        md.zero_grad()
        loss.backward()
        out["loss"] = np.array([loss.item()], np.float32)
        for pn, p in md.named_parameters():
            if pn.startswith("cls.seq_relationship") or "pooler" in pn:
                continue
            key = pn[5:] if pn.startswith("bert.") else pn
            out["grad." + key] = f32(p.grad)
    stfile.save(os.path.join(outdir, name + ".safetensors"), out)
    return m, ids, types, lengths, mask


def variants(outdir, m, ids, types, lengths, mask):
    """tiny_f16, tiny_bf16 (rounded weights: their own reference) and tiny_old (renamed)."""
    from safetensors.numpy import load_file
    for tag, dt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
        mr = make_model("mlm", CASES["tiny"]["cfg"], 100)
        mr.to(dt).save_pretrained(os.path.join(outdir, "tiny_" + tag), safe_serialization=True)
        md = mr.double()
        h = md.bert(input_ids=torch.tensor(ids, dtype=torch.long),
                    token_type_ids=torch.tensor(types, dtype=torch.long),
                    attention_mask=torch.tensor(mask)).last_hidden_state
        stfile.save(os.path.join(outdir, "tiny_%s.safetensors" % tag),
                    {"ids": ids, "types": types, "lengths": lengths,
                     "hidden": zero_pad(h.detach().float().numpy(), lengths)})
    src = load_file(os.path.join(outdir, "tiny", "model.safetensors"))
    old = {}
    for k, v in src.items():
        k2 = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                      "LayerNorm.beta")
        old[k2] = v
    old["bert.embeddings.position_ids"] = np.arange(32, dtype=np.int64)[None, :]
    old["cls.predictions.decoder.weight"] = src["bert.embeddings.word_embeddings.weight"]
    old["cls.predictions.decoder.bias"] = src["cls.predictions.bias"]
    d = os.path.join(outdir, "tiny_old")
    os.makedirs(d, exist_ok=True)
    stfile.save(os.path.join(d, "model.safetensors"), old, {"format": "pt"})
    with open(os.path.join(outdir, "tiny", "config.json")) as f:
        cfg = f.read()
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(cfg)


SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A sentence.",
    "Attention is all you need, they said; and they were mostly right!",
    "知识就是力量。",
    "Café au lait costs €3.50 — über cheap?",
]


def minilm(outdir):
    d = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        print("ref_bert: %s absent (sh tools/get_minilm.sh): MiniLM references skipped" % d)
        return
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(d)
    enc = tok(SENTENCES, padding=True, truncation=True, max_length=256, return_tensors="pt")
    m = BertModel.from_pretrained(d, add_pooling_layer=False).double().eval()
    with torch.no_grad():
        h = m(**enc).last_hidden_state.float().numpy()
    lengths = enc["attention_mask"].sum(1).numpy().astype(np.int32)
    out = {"ids": enc["input_ids"].numpy().astype(np.int32),
           "types": enc["token_type_ids"].numpy().astype(np.int32),
           "lengths": lengths, "hidden": zero_pad(h, lengths)}
    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(d, device="cpu")
    out["st_emb"] = st.encode(SENTENCES, convert_to_numpy=True, batch_size=8).astype(np.float32)
    stfile.save(os.path.join(outdir, "minilm.safetensors"), out)


def main():
    outdir = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "build/ref", "bert")
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    keep = None
    for i, (name, spec) in enumerate(CASES.items()):
        r = run_case(outdir, name, spec, 100 + 17 * i)
        if name == "tiny":
            keep = r
    variants(outdir, *keep)
    minilm(outdir)
    print("ref_bert: wrote %s" % outdir)


if __name__ == "__main__":
    main()
