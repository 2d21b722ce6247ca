"""PyTorch peer of bench/bench_translate.c (issue 3's translation targets), at ATTN_BENCH_THREADS
threads, printing the same JSON lines (higher is better).

The model is tools/ref_encdec.py's EncDecTwin (the C model's exact twin, verified to 1e-6 by
tests/test_encdec.c), run in float32 with two additions made here by subclassing, not by writing a
second model: dropout at the C model's places (each residual branch before the add, and the
embedding + position sum; F.dropout, so torch's own random masks, not attn's), and encode() /
decode() that split the twin's forward so decoding can keep the encoder output. The attention
core stays the twin's matmul + masked softmax: at these shapes (T <= 64, 4 heads of 64) it was
faster than F.scaled_dot_product_attention with a boolean mask, for training (6,700 vs 5,900
tokens/s) and greedy decoding (261 vs 246 sentences/s), so it is the stronger baseline;
ATTN_TORCH_ATTN=sdpa switches to SDPA.

Everything else comes from $ATTN_BENCH_DIR, written by bench_translate just before:
  train.safetensors  the initial weights "w.<name>", the batches (flat int32 + dims) and the
                     settings; config.json the model configuration
  decode.safetensors the encoded test sources, attn's greedy outputs, special ids, decode model
Training throughput: the same warm-up + timed steps on the same batches from the same weights,
torch.optim.AdamW(betas (0.9, 0.98), eps 1e-9, weight_decay 0), lr = peak · min(s/warmup,
sqrt(warmup/s)) with s = max(step, 1) (attn_lr_inv_sqrt), cross-entropy with label smoothing 0.1
ignoring <pad>, clip_grad_norm_(1.0); dropout = the dumped config's (the same p as the C side).
tokens/s counts non-pad source + target tokens of the timed steps.
Check that both sides start from the same point: the loss of batch 0 at the initial weights
without dropout, printed beside attn's.
Decoding: greedy, as PyTorch users write it without a KV cache (nn.Transformer-style: each step
re-runs the decoder over the whole prefix and projects the last position), torch.no_grad(),
batches of 32 sentences sorted by length, a batch stops when every sentence has emitted </s> or
reached min(2·src_len + 10, max_len − 1) tokens (then </s> is forced, as attn does); <pad> and
<s> are never generated (as attn). Sentences/s, best of ATTN_BENCH_ROUNDS (2) passes. Also
printed under "translate attn-beam4/torch-greedy sent/s", the case under which the C side prints
its beam-4 rate, so compare.py shows the issue's beam-4-vs-greedy ratio (target >= 2)."""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import stfile  # noqa: E402
from ref_encdec import EncDecTwin  # noqa: E402

THREADS = int(os.environ.get("ATTN_BENCH_THREADS", "2"))
torch.set_num_threads(THREADS)


class Twin(EncDecTwin):
    """EncDecTwin in float32, with dropout and an encode/decode split (see the module note)."""

    def __init__(self, c, weights, dropout, attn=None):
        super().__init__(c, weights)
        self.float()
        self.pe = self.pe.float()  # a plain attribute, not converted by .float()
        self.drop = dropout
        self.sdpa = (attn or os.environ.get("ATTN_TORCH_ATTN", "explicit")) == "sdpa"

    def _d(self, x):
        return F.dropout(x, self.drop, self.training) if self.drop > 0 and self.training else x

    def sub(self, x, f, ln):
        if self.c["pre_ln"]:
            return x + self._d(f(self.ln(x, ln)))
        return self.ln(x + self._d(f(x)), ln)

    def embed(self, ids, side):
        return self._d(super().embed(ids, side))

    def mha(self, x, kv, p, causal, kv_len):
        if not self.sdpa:
            return super().mha(x, kv, p, causal, kv_len)
        Bq, Tq, C = x.shape
        Tk = kv.shape[1]
        H = self.c["n_head"]
        D = C // H
        lin = lambda a, n: F.linear(a, self.P(f"{p}.w_{n}"), self.P(f"{p}.b_{n}"))  # noqa: E731
        q = lin(x, "q").view(Bq, Tq, H, D).transpose(1, 2)
        k = lin(kv, "k").view(Bq, Tk, H, D).transpose(1, 2)
        v = lin(kv, "v").view(Bq, Tk, H, D).transpose(1, 2)
        vis = (torch.arange(Tk)[None, :] < kv_len[:, None])[:, None, None, :]
        if causal:
            vis = vis & torch.ones(Tq, Tk, dtype=torch.bool).tril()
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=vis)
        return lin(ctx.transpose(1, 2).reshape(Bq, Tq, C), "o")

    def encode(self, src, src_len):
        c = self.c
        x = self.embed(src, "src")
        for l in range(c["n_enc_layers"]):
            p = f"enc.{l}"
            x = self.sub(x, lambda a: self.mha(a, a, p + ".self_attn", False, src_len), p + ".ln1")
            x = self.sub(x, lambda a: self.ffn(a, p), p + ".ln2")
        return self.ln(x, "enc.ln_f") if c["pre_ln"] else x

    def decode(self, mem, src_len, tgt, tgt_len):
        """Decoder hidden states (B, Tt, C), before the output projection."""
        c = self.c
        y = self.embed(tgt, "tgt")
        for l in range(c["n_dec_layers"]):
            p = f"dec.{l}"
            y = self.sub(y, lambda a: self.mha(a, a, p + ".self_attn", True, tgt_len), p + ".ln1")
            y = self.sub(y, lambda a: self.mha(a, mem, p + ".cross_attn", False, src_len),
                         p + ".ln2")
            y = self.sub(y, lambda a: self.ffn(a, p), p + ".ln3")
        return self.ln(y, "dec.ln_f") if c["pre_ln"] else y

    def project(self, y):
        w_out = self.emb("tgt") if self.c["tie_output"] else self.P("out.w")
        return F.linear(y, w_out, self.P("out.b"))

    def forward(self, src, src_len, tgt, tgt_len):
        return self.project(self.decode(self.encode(src, src_len), src_len, tgt, tgt_len))


def bench_dir():
    d = os.environ.get("ATTN_BENCH_DIR")
    if not d or not os.path.exists(os.path.join(d, "train.safetensors")):
        sys.exit("torch_translate: run bench_translate with ATTN_BENCH_DIR set first "
                 "(sh bench/run.sh build translate does)")
    return d


def load_train(d):
    """(config, initial weights by name, list of batches as torch tensors, metadata)."""
    t, meta = stfile.load(os.path.join(d, "train.safetensors"))
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    w = {k[2:]: np.array(v) for k, v in t.items() if k.startswith("w.")}
    batches, os_, ot, orow = [], 0, 0, 0
    for B, Ts, Tt in t["dims"].tolist():
        src = torch.from_numpy(t["src"][os_:os_ + B * Ts].reshape(B, Ts).astype(np.int64))
        tin = torch.from_numpy(t["tgt_in"][ot:ot + B * Tt].reshape(B, Tt).astype(np.int64))
        tout = torch.from_numpy(t["tgt_out"][ot:ot + B * Tt].reshape(B, Tt).astype(np.int64))
        sl = torch.from_numpy(t["src_len"][orow:orow + B].astype(np.int64))
        tl = torch.from_numpy(t["tgt_len"][orow:orow + B].astype(np.int64))
        batches.append((src, sl, tin, tl, tout, int(sl.sum() + tl.sum())))
        os_, ot, orow = os_ + B * Ts, ot + B * Tt, orow + B
    return c, w, batches, meta


def lr_inv_sqrt(step, peak, warmup):
    s = max(step, 1)
    return peak * min(s / warmup, math.sqrt(warmup / s))


def loss_of(model, batch, c, ls):
    src, sl, tin, tl, tout, _ = batch
    logits = model(src, sl, tin, tl)
    V = c["tgt_vocab"]
    return F.cross_entropy(logits.reshape(-1, V), tout.reshape(-1), ignore_index=c["pad_id"],
                           label_smoothing=ls)


def make_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9,
                             weight_decay=0.0)


def train_step(model, opt, batch, c, step, meta):
    for g in opt.param_groups:
        g["lr"] = lr_inv_sqrt(step, float(meta["peak_lr"]), int(meta["lr_warmup"]))
    loss = loss_of(model, batch, c, float(meta["label_smoothing"]))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), float(meta["clip"]))
    opt.step()
    return loss.item()


def first_loss(model, batches, c, meta):
    model.eval()
    with torch.no_grad():
        l0 = loss_of(model, batches[0], c, float(meta["label_smoothing"])).item()
    model.train()
    return l0


def load_decode(d):
    t, meta = stfile.load(os.path.join(d, "decode.safetensors"))
    off = t["src_off"].tolist()
    srcs = [t["src"][off[i]:off[i + 1]].tolist() for i in range(len(off) - 1)]
    greedy = None
    if "greedy" in t:
        go = t["greedy_off"].tolist()
        greedy = [t["greedy"][go[i]:go[i + 1]].tolist() for i in range(len(go) - 1)]
    return srcs, greedy, meta


def greedy_decode(model, srcs, meta, max_len, batch=32):
    """Greedy translations (token lists without <s>/</s>) in the order of srcs; no KV cache."""
    bos, eos, pad = int(meta["bos_id"]), int(meta["eos_id"]), int(meta["pad_id"])
    a, b = float(meta["max_len_a"]), int(meta["max_len_b"])
    order = sorted(range(len(srcs)), key=lambda i: (len(srcs[i]), i))
    out = [None] * len(srcs)
    model.eval()
    with torch.no_grad():
        for b0 in range(0, len(order), batch):
            idx = order[b0:b0 + batch]
            B, Ts = len(idx), max(len(srcs[i]) for i in idx)
            src = torch.full((B, Ts), pad, dtype=torch.long)
            for r, i in enumerate(idx):
                src[r, :len(srcs[i])] = torch.tensor(srcs[i])
            sl = torch.tensor([len(srcs[i]) for i in idx])
            limit = torch.clamp(torch.floor(a * sl.double() + b).long(), max=max_len - 1)
            mem = model.encode(src, sl)
            ys = torch.full((B, 1), bos, dtype=torch.long)
            done = torch.zeros(B, dtype=torch.bool)
            for t in range(int(limit.max()) + 1):
                y = model.decode(mem, sl, ys, torch.full((B,), t + 1))
                logits = model.project(y[:, -1])
                logits[:, pad] = -math.inf
                logits[:, bos] = -math.inf
                nxt = logits.argmax(-1)
                nxt = torch.where(t >= limit, torch.full_like(nxt, eos), nxt)
                nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
                ys = torch.cat([ys, nxt[:, None]], 1)
                done |= nxt == eos
                if bool(done.all()):
                    break
            for r, i in enumerate(idx):
                toks = ys[r, 1:].tolist()
                out[i] = toks[:toks.index(eos)] if eos in toks else toks
    return out


def decode_weights(meta, init_w):
    if meta.get("model", "init") == "init":
        return init_w
    w, _ = stfile.load(os.path.join(ROOT, meta["model"]))
    return {k: np.array(v, dtype=np.float32) for k, v in w.items()}


def main():
    d = bench_dir()
    print(f"torch {torch.__version__} threads={torch.get_num_threads()} "
          f"cpu={torch.backends.cpu.get_cpu_capability()}")
    c, w, batches, meta = load_train(d)
    nw, ns = int(meta["n_warmup"]), int(meta["n_steps"])
    model = Twin(c, w, float(meta["dropout"]))
    print(f"twin float32, attention via {'SDPA' if model.sdpa else 'matmul+softmax'}, "
          f"dropout {float(meta['dropout']):.2f}; {nw} warm-up + {ns} timed steps")
    l0 = first_loss(model, batches, c, meta)
    print(f"first-step loss (batch 0, initial weights, no dropout): torch {l0:.6f} "
          f"attn {float(meta['first_loss']):.6f} (diff {abs(l0 - float(meta['first_loss'])):.2e})")
    opt = make_optimizer(model)
    model.train()
    tok, t1, loss = 0, 0.0, 0.0
    for i in range(nw + ns):
        if i == nw:
            t1 = time.perf_counter()
        loss = train_step(model, opt, batches[i], c, i, meta)
        if i >= nw:
            tok += batches[i][5]
    dt = time.perf_counter() - t1
    print(f"torch: {ns} steps in {dt:.2f} s, last loss {loss:.4f}")
    print(json.dumps({"bench": "translate", "case": "train tokens/s demo-en-zh",
                      "metric": "tokens/s", "value": round(tok / dt, 1)}), flush=True)

    srcs, attn_greedy, dmeta = load_decode(d)
    dm = Twin(c, decode_weights(dmeta, w), 0.0)
    rounds = int(os.environ.get("ATTN_BENCH_ROUNDS", "2"))
    best, hyps = 0.0, None
    for _ in range(rounds):
        t0 = time.perf_counter()
        hyps = greedy_decode(dm, srcs, dmeta, c["max_len"], int(dmeta["batch"]))
        best = max(best, len(srcs) / (time.perf_counter() - t0))
    same = sum(h == g for h, g in zip(hyps, attn_greedy)) if attn_greedy else 0
    print(f"torch greedy (no KV cache) of {len(srcs)} sentences, model {dmeta['model']}: "
          f"{same}/{len(srcs)} outputs identical to attn's greedy")
    for case in ("translate greedy sentences/s", "translate attn-beam4/torch-greedy sent/s"):
        print(json.dumps({"bench": "translate", "case": case, "metric": "sent/s",
                          "value": round(best, 2)}), flush=True)


if __name__ == "__main__":
    main()
