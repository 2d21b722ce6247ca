"""PyTorch twin of the encoder–decoder Transformer (src/models/encdec.c, include/attn_models.h).

For each case (one per model variant) this script makes deterministic float32 weights named as the
C parameter table names them, a padded batch, then runs the twin in float64 with autograd and
writes OUTDIR/encdec.safetensors for tests/test_encdec.c:
  caseN.w.<name>   weights (float32; the C test loads them into its parameter buffer by name)
  caseN.src, caseN.src_len, caseN.tgt_in, caseN.tgt_len, caseN.targets   the batch (int32)
  caseN.logits (B, Tt, Vt), caseN.loss (1), caseN.g.<name>   expected outputs and gradients
  caseN.sgd_losses (10)   losses of 10 plain SGD steps (lr 0.1) on the same batch, from the
                          same weights (only for cases with "sgd": true)
and per-case metadata caseN = {"config": <model config JSON, as attn_encdec_config_load reads>,
"B", "Ts", "Tt", "label_smoothing", "sgd"}.

The twin mirrors the C model exactly: embeddings · sqrt(d_model) + positions (sinusoidal table
rounded to float32 as C stores it, or learned), post-LN or pre-LN (then final LNs), masks by
lengths (source keys in the encoder and cross-attention, causal + target keys in the decoder),
FFN with ReLU or exact-erf GELU, output projection tied or not, mean cross-entropy ignoring
pad_id with label smoothing. Dropout is 0 (the C test checks dropout separately)."""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stfile  # noqa: E402

BASE = dict(d_model=64, n_head=4, d_ff=128, n_enc_layers=2, n_dec_layers=2, max_len=16,
            dropout=0.0, pad_id=0, layer_norm_eps=1e-5)
CASES = [
    # post-LN, ReLU, separate untied embeddings, sinusoidal positions (the paper's base shape)
    dict(src_vocab=50, tgt_vocab=60, share_embeddings=False, tie_output=False, pre_ln=False,
         activation="relu", positions="sinusoidal", ls=0.1, sgd=True),
    # pre-LN, GELU, shared + tied, learned positions
    dict(src_vocab=60, tgt_vocab=60, share_embeddings=True, tie_output=True, pre_ln=True,
         activation="gelu", positions="learned", ls=0.1, sgd=True),
    # post-LN, GELU, separate embeddings with tied output, learned positions
    dict(src_vocab=50, tgt_vocab=60, share_embeddings=False, tie_output=True, pre_ln=False,
         activation="gelu", positions="learned", ls=0.0, sgd=False),
    # pre-LN, ReLU, shared but untied, sinusoidal
    dict(src_vocab=60, tgt_vocab=60, share_embeddings=True, tie_output=False, pre_ln=True,
         activation="relu", positions="sinusoidal", ls=0.0, sgd=False),
]
B, TS, TT = 3, 9, 7
SRC_LEN, TGT_LEN = [9, 6, 3], [7, 5, 2]
SGD_STEPS, LR = 10, 0.1
MHA = ["w_q", "w_k", "w_v", "b_q", "b_k", "b_v", "w_o", "b_o"]


def param_specs(c):
    """(name, shape) in the C buffer order (attn_models.h lists the names)."""
    C, Fd, L = c["d_model"], c["d_ff"], c["max_len"]
    out = []
    if c["share_embeddings"]:
        out.append(("emb", (c["tgt_vocab"], C)))
    else:
        out += [("src_emb", (c["src_vocab"], C)), ("tgt_emb", (c["tgt_vocab"], C))]
    if c["positions"] == "learned":
        out += [("enc_pos", (L, C)), ("dec_pos", (L, C))]

    def mha(p):
        return [(f"{p}.{n}", (C, C) if n[0] == "w" else (C,)) for n in MHA]

    def ln(p):
        return [(f"{p}.w", (C,)), (f"{p}.b", (C,))]

    def ffn(p):
        return [(f"{p}.ff1.w", (Fd, C)), (f"{p}.ff1.b", (Fd,)), (f"{p}.ff2.w", (C, Fd)),
                (f"{p}.ff2.b", (C,))]

    for l in range(c["n_enc_layers"]):
        p = f"enc.{l}"
        out += mha(p + ".self_attn") + ln(p + ".ln1") + ffn(p) + ln(p + ".ln2")
    for l in range(c["n_dec_layers"]):
        p = f"dec.{l}"
        out += (mha(p + ".self_attn") + ln(p + ".ln1") + mha(p + ".cross_attn") + ln(p + ".ln2")
                + ffn(p) + ln(p + ".ln3"))
    if c["pre_ln"]:
        out += ln("enc.ln_f") + ln("dec.ln_f")
    if not c["tie_output"]:
        out.append(("out.w", (c["tgt_vocab"], C)))
    out.append(("out.b", (c["tgt_vocab"],)))
    return out


def make_weights(c, rng):
    """float32 weights: Xavier-uniform matrices, embeddings with std 1/sqrt(C), and biases and LN
    parameters perturbed away from 0/1 so that their gradients are exercised."""
    C = c["d_model"]
    w = {}
    for name, shape in param_specs(c):
        if len(shape) == 1:
            base = 1.0 if ".ln" in name and name.endswith(".w") else 0.0
            a = base + rng.uniform(-0.1, 0.1, shape)
        elif name.endswith("emb") or name.endswith("_pos"):
            a = rng.uniform(-1, 1, shape) * math.sqrt(3.0 / C)
        else:
            a = rng.uniform(-1, 1, shape) * math.sqrt(6.0 / (shape[0] + shape[1]))
        w[name] = a.astype(np.float32)
    return w


def sinusoid(L, C):
    t = np.arange(L, dtype=np.float64)[:, None]
    i = np.arange(C)
    ang = t / np.power(10000.0, (i - i % 2) / C)[None, :]
    pe = np.where(i % 2 == 1, np.cos(ang), np.sin(ang))
    return torch.from_numpy(pe.astype(np.float32).astype(np.float64))


class EncDecTwin(torch.nn.Module):
    """The C model in float64. Parameters keyed by the C names ('.' -> '__' for ParameterDict)."""

    def __init__(self, c, weights):
        super().__init__()
        self.c = c
        self.p = torch.nn.ParameterDict({
            k.replace(".", "__"): torch.nn.Parameter(torch.from_numpy(v.astype(np.float64)))
            for k, v in weights.items()})
        self.pe = sinusoid(c["max_len"], c["d_model"])

    def P(self, name):
        return self.p[name.replace(".", "__")]

    def emb(self, side):
        if self.c["share_embeddings"]:
            return self.P("emb")
        return self.P(side + "_emb")

    def ln(self, x, p):
        C = self.c["d_model"]
        return F.layer_norm(x, (C,), self.P(p + ".w"), self.P(p + ".b"), self.c["layer_norm_eps"])

    def mha(self, x, kv, p, causal, kv_len):
        Bq, Tq, C = x.shape
        Tk = kv.shape[1]
        H = self.c["n_head"]
        D = C // H
        lin = lambda a, n: a @ self.P(f"{p}.w_{n}").T + self.P(f"{p}.b_{n}")  # noqa: E731
        q = lin(x, "q").view(Bq, Tq, H, D).transpose(1, 2)
        k = lin(kv, "k").view(Bq, Tk, H, D).transpose(1, 2)
        v = lin(kv, "v").view(Bq, Tk, H, D).transpose(1, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(D)
        vis = (torch.arange(Tk)[None, :] < kv_len[:, None])[:, None, None, :]
        if causal:
            vis = vis & torch.ones(Tq, Tk, dtype=torch.bool).tril()
        att = torch.softmax(s.masked_fill(~vis, float("-inf")), dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(Bq, Tq, C)
        return lin(ctx, "o")

    def ffn(self, x, p):
        h = x @ self.P(p + ".ff1.w").T + self.P(p + ".ff1.b")
        h = F.relu(h) if self.c["activation"] == "relu" else F.gelu(h)
        return h @ self.P(p + ".ff2.w").T + self.P(p + ".ff2.b")

    def sub(self, x, f, ln):
        if self.c["pre_ln"]:
            return x + f(self.ln(x, ln))
        return self.ln(x + f(x), ln)

    def embed(self, ids, side):
        C = self.c["d_model"]
        T = ids.shape[1]
        if self.c["positions"] == "learned":
            pos = self.P(("enc" if side == "src" else "dec") + "_pos")[:T]
        else:
            pos = self.pe[:T]
        return self.emb(side)[ids] * math.sqrt(C) + pos

    def forward(self, src, src_len, tgt, tgt_len):
        c = self.c
        x = self.embed(src, "src")
        for l in range(c["n_enc_layers"]):
            p = f"enc.{l}"
            x = self.sub(x, lambda a: self.mha(a, a, p + ".self_attn", False, src_len), p + ".ln1")
            x = self.sub(x, lambda a: self.ffn(a, p), p + ".ln2")
        mem = self.ln(x, "enc.ln_f") if c["pre_ln"] else x
        y = self.embed(tgt, "tgt")
        for l in range(c["n_dec_layers"]):
            p = f"dec.{l}"
            y = self.sub(y, lambda a: self.mha(a, a, p + ".self_attn", True, tgt_len), p + ".ln1")
            y = self.sub(y, lambda a: self.mha(a, mem, p + ".cross_attn", False, src_len),
                         p + ".ln2")
            y = self.sub(y, lambda a: self.ffn(a, p), p + ".ln3")
        if c["pre_ln"]:
            y = self.ln(y, "dec.ln_f")
        w_out = self.emb("tgt") if c["tie_output"] else self.P("out.w")
        return y @ w_out.T + self.P("out.b")


def make_batch(c, rng):
    pad = c["pad_id"]
    src = np.full((B, TS), pad, np.int32)
    tgt = np.full((B, TT), pad, np.int32)
    targets = np.full((B, TT), pad, np.int32)
    for b in range(B):
        src[b, :SRC_LEN[b]] = rng.integers(1, c["src_vocab"], SRC_LEN[b])
        tgt[b, :TGT_LEN[b]] = rng.integers(1, c["tgt_vocab"], TGT_LEN[b])
        targets[b, :TGT_LEN[b]] = rng.integers(1, c["tgt_vocab"], TGT_LEN[b])
    return src, tgt, targets


def loss_of(model, batch, c, ls):
    src, src_len, tgt, tgt_len, targets = batch
    logits = model(src, src_len, tgt, tgt_len)
    V = c["tgt_vocab"]
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=c["pad_id"],
                           label_smoothing=ls)
    return logits, loss


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(int(os.environ.get("ATTN_REF_THREADS", "2")))  # tests/run.sh: 1 per lane
    tensors, meta = {}, {"cases": str(len(CASES))}
    for i, case in enumerate(CASES):
        rng = np.random.default_rng(1000 + i)
        c = dict(BASE)
        c.update({k: v for k, v in case.items() if k not in ("ls", "sgd")})
        ls = case["ls"]
        w = make_weights(c, rng)
        src, tgt, targets = make_batch(c, rng)
        batch = (torch.from_numpy(src).long(), torch.tensor(SRC_LEN), torch.from_numpy(tgt).long(),
                 torch.tensor(TGT_LEN), torch.from_numpy(targets).long())
        model = EncDecTwin(c, w)
        logits, loss = loss_of(model, batch, c, ls)
        loss.backward()
        pre = f"case{i}."
        for k, v in w.items():
            tensors[pre + "w." + k] = v
            g = model.P(k).grad
            tensors[pre + "g." + k] = g.detach().numpy().astype(np.float32)
        tensors[pre + "src"] = src
        tensors[pre + "tgt_in"] = tgt
        tensors[pre + "targets"] = targets
        tensors[pre + "src_len"] = np.array(SRC_LEN, np.int32)
        tensors[pre + "tgt_len"] = np.array(TGT_LEN, np.int32)
        tensors[pre + "logits"] = logits.detach().numpy().astype(np.float32)
        tensors[pre + "loss"] = np.array([loss.item()], np.float32)
        if case["sgd"]:
            model = EncDecTwin(c, w)
            losses = []
            for _ in range(SGD_STEPS):
                model.zero_grad()
                _, l = loss_of(model, batch, c, ls)
                l.backward()
                losses.append(l.item())
                with torch.no_grad():
                    for p in model.parameters():
                        p -= LR * p.grad
            tensors[pre + "sgd_losses"] = np.array(losses, np.float32)
        meta[f"case{i}"] = json.dumps(dict(config=c, B=B, Ts=TS, Tt=TT, label_smoothing=ls,
                                           sgd=case["sgd"], lr=LR, steps=SGD_STEPS))
    stfile.save(os.path.join(outdir, "encdec.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
