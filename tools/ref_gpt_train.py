"""PyTorch twin of `attn train --arch gpt` for tests/test_gpt_train.c (and bench/torch_gpt.py, which
imports the twin from here). Usage: ref_gpt_train.py OUTDIR  (writes OUTDIR/gpt_train/).

The twin is a minimal nanoGPT-style GPT-2 in PyTorch (GPTTwin below: pre-LN blocks, learned
positions, tied embeddings, GELU tanh form, Hugging Face's Conv1D weight layout (in, out), the
Hugging Face tensor names) plus a re-implementation of the trainer's data sampler:
Philox4x32-10 (attn_rng, include/attn_train.h), attn_rng_below (Lemire), splitmix64, and the
window draw of attn_data_lm_batch (src/data/lm.c) — so the twin trains on the very batches attn
trains on.

What this script does:
  1. writes a small text (the first 20,000 characters of tinyshakespeare) and a tiny config
     (2 layers, 2 heads, width 32, context 16, no dropout) into OUTDIR/gpt_train/;
  2. runs `$ATTN_BUILD/attn train --arch gpt ... --max-steps 0` (ATTN_BUILD defaults to build/),
     which writes the initial checkpoint OUTDIR/gpt_train/init (model.safetensors, config.json,
     tokenizer.json, ...) and the validation loss at step 0 (metrics0.jsonl);
  3. loads attn's initial weights and tokenizer.json (with the `tokenizers` library: the ids must
     equal nanoGPT's sorted-characters mapping) and computes
       - one step's loss and gradients (2 micro-batches of B=4 accumulated, grad_scale 1/2) in
         float64: grads.safetensors (float32 copies of the float64 values) + the batches;
       - the 10-step loss trajectory (AdamW with weight decay on the 2-D tensors, warmup + cosine
         schedule, clipping at 1.0, gradient accumulation 2) in float32 and in float64;
       - the step-0 validation loss (the same eval batches as attn's);
     into ref.json.
tests/test_gpt_train.c then loads the same checkpoint in C, compares gradients, resumes the
checkpoint for 10 steps with the CLI and compares the losses, and checks exact resume."""
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import stfile  # noqa: E402

CORPUS = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")

# ---- Philox4x32-10 and the trainer's sampler (bit-exact with attn) --------------------------------
M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def philox_block(seed, block):
    c = [block & M32, (block >> 32) & M32, 0, 0]
    k0, k1 = seed & M32, (seed >> 32) & M32
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k1) & M32, p0 & M32]
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return c


class Rng:
    """attn_rng: word i of stream seed is word i % 4 of philox(seed, i // 4)."""

    def __init__(self, seed, counter=0):
        self.seed, self.counter, self._blk, self._cache = seed, counter, None, None

    def u32(self):
        b = self.counter >> 2
        if b != self._blk:
            self._blk, self._cache = b, philox_block(self.seed, b)
        w = self._cache[self.counter & 3]
        self.counter += 1
        return w

    def below(self, n):
        """attn_rng_below for n < 2^32 (Lemire's method with rejection)."""
        m = self.u32() * n
        if (m & M32) < n:
            thresh = ((-n) & M32) % n
            while (m & M32) < thresh:
                m = self.u32() * n
        return m >> 32


def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


STREAM_TRAIN = 0x747261696E
STREAM_VALID = 0x76616C6964


def sample_batch(ids, B, T, key, index):
    """B windows of ids (a 1-D int array): x = ids[o:o+T], y = ids[o+1:o+T+1]."""
    r = Rng(key, index << 32)
    offs = [r.below(len(ids) - T) for _ in range(B)]
    x = np.stack([ids[o:o + T] for o in offs]).astype(np.int64)
    y = np.stack([ids[o + 1:o + T + 1] for o in offs]).astype(np.int64)
    return x, y


def train_batch(ids_train, B, T, seed, step, accum, micro):
    return sample_batch(ids_train, B, T, mix64(seed ^ STREAM_TRAIN), step * accum + micro)


def valid_batch(ids_val, B, T, seed, k):
    return sample_batch(ids_val, B, T, mix64(seed ^ STREAM_VALID), k)


def get_lr(it, lr, min_lr, warmup, decay):
    """nanoGPT train.py get_lr (= attn_lr_cosine)."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    ratio = (it - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


# ---- the twin model ------------------------------------------------------------------------------
class GPTTwin(nn.Module):
    """GPT-2 (Hugging Face GPT2LMHeadModel's computation, nanoGPT's code shape) with parameters
    named and shaped as Hugging Face stores them (Conv1D weights (in, out)). Tied embeddings only.
    Dropout (embd/resid) with torch's own masks when training and p > 0."""

    def __init__(self, cfg, dtype=torch.float32, sdpa=None):
        super().__init__()
        self.cfg = cfg
        V, P, C, L = cfg["vocab_size"], cfg["n_positions"], cfg["n_embd"], cfg["n_layer"]
        F_ = cfg.get("n_inner") or 4 * C
        assert cfg.get("tie_word_embeddings", True), "the twin ties the embeddings"
        self.H = cfg["n_head"]
        self.eps = cfg.get("layer_norm_epsilon", 1e-5)
        self.act = cfg.get("activation_function", "gelu_new")
        self.pdrop = (cfg.get("embd_pdrop", 0.0), cfg.get("resid_pdrop", 0.0))
        self.sdpa = hasattr(F, "scaled_dot_product_attention") if sdpa is None else sdpa
        z = lambda *s: nn.Parameter(torch.zeros(*s, dtype=dtype))  # noqa: E731
        self.names = ["transformer.wte.weight", "transformer.wpe.weight"]
        self.wte, self.wpe = z(V, C), z(P, C)
        plist = [self.wte, self.wpe]
        self.blocks = []
        for l in range(L):
            blk = {"ln_1.weight": z(C), "ln_1.bias": z(C), "attn.c_attn.weight": z(C, 3 * C),
                   "attn.c_attn.bias": z(3 * C), "attn.c_proj.weight": z(C, C),
                   "attn.c_proj.bias": z(C), "ln_2.weight": z(C), "ln_2.bias": z(C),
                   "mlp.c_fc.weight": z(C, F_), "mlp.c_fc.bias": z(F_),
                   "mlp.c_proj.weight": z(F_, C), "mlp.c_proj.bias": z(C)}
            self.blocks.append(blk)
            for k, p in blk.items():
                self.names.append(f"transformer.h.{l}.{k}")
                plist.append(p)
        self.ln_f_w, self.ln_f_b = z(C), z(C)
        self.names += ["transformer.ln_f.weight", "transformer.ln_f.bias"]
        plist += [self.ln_f_w, self.ln_f_b]
        self.plist = nn.ParameterList(plist)

    def named_hf(self):
        return list(zip(self.names, self.plist))

    def load_hf(self, tensors):
        with torch.no_grad():
            for n, p in self.named_hf():
                p.copy_(torch.from_numpy(np.array(tensors[n])).to(p.dtype))

    def _act(self, x):
        if self.act in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
            return F.gelu(x, approximate="tanh")
        if self.act == "gelu":
            return F.gelu(x)
        return F.relu(x)

    def _drop(self, x, p):
        return F.dropout(x, p, True) if self.training and p > 0 else x

    def forward(self, idx):
        B, T = idx.shape
        C = self.wte.shape[1]
        H = self.H
        D = C // H
        x = self._drop(self.wte[idx] + self.wpe[:T], self.pdrop[0])
        for blk in self.blocks:
            h = F.layer_norm(x, (C,), blk["ln_1.weight"], blk["ln_1.bias"], self.eps)
            qkv = torch.addmm(blk["attn.c_attn.bias"], h.view(B * T, C), blk["attn.c_attn.weight"])
            q, k, v = qkv.view(B, T, 3 * C).split(C, dim=2)
            q = q.view(B, T, H, D).transpose(1, 2)
            k = k.view(B, T, H, D).transpose(1, 2)
            v = v.view(B, T, H, D).transpose(1, 2)
            if self.sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
                mask = torch.ones(T, T, dtype=torch.bool).tril()
                att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
                y = att @ v
            y = y.transpose(1, 2).reshape(B * T, C)
            y = torch.addmm(blk["attn.c_proj.bias"], y, blk["attn.c_proj.weight"])
            x = x + self._drop(y.view(B, T, C), self.pdrop[1])
            h = F.layer_norm(x, (C,), blk["ln_2.weight"], blk["ln_2.bias"], self.eps)
            h = self._act(torch.addmm(blk["mlp.c_fc.bias"], h.view(B * T, C), blk["mlp.c_fc.weight"]))
            h = torch.addmm(blk["mlp.c_proj.bias"], h, blk["mlp.c_proj.weight"])
            x = x + self._drop(h.view(B, T, C), self.pdrop[1])
        x = F.layer_norm(x, (C,), self.ln_f_w, self.ln_f_b, self.eps)
        return x @ self.wte.t()

    def loss(self, idx, targets):
        logits = self(idx)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               ignore_index=-1)

    def optimizer(self, lr, weight_decay, betas, eps=1e-8):
        """nanoGPT's configure_optimizers: decay on the 2-D tensors only."""
        decay = [p for p in self.plist if p.dim() >= 2]
        nodecay = [p for p in self.plist if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": nodecay, "weight_decay": 0.0}], lr=lr, betas=betas,
                                 eps=eps)


def train_trajectory(model, ids_train, s, steps):
    """nanoGPT's loop: lr, micro-batches (loss / accum), clip, step. Returns (losses, lrs, norms)."""
    opt = model.optimizer(s["lr"], s["weight_decay"], (s["beta1"], s["beta2"]))
    losses, lrs, norms = [], [], []
    A = s["grad_accum"]
    for step in range(steps):
        lr = get_lr(step, s["lr"], s["min_lr"], s["warmup"], s["decay"])
        for g in opt.param_groups:
            g["lr"] = lr
        total = 0.0
        for micro in range(A):
            x, y = train_batch(ids_train, s["B"], s["T"], s["seed"], step, A, micro)
            loss = model.loss(torch.from_numpy(x), torch.from_numpy(y))
            (loss / A).backward()
            total += loss.item()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), s["clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total / A)
        lrs.append(lr)
        norms.append(float(norm))
    return losses, lrs, norms


# ---- the reference generator --------------------------------------------------------------------
SETTINGS = {"B": 4, "T": 16, "grad_accum": 2, "seed": 5, "lr": 1e-2, "min_lr": 1e-3, "warmup": 3,
            "decay": 10, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.99, "clip": 1.0,
            "eval_iters": 3, "steps": 10}


def make_reference(outdir, name, arch, cfg_in, make_twin, check=None):
    """OUTDIR/NAME/: attn's initial checkpoint of cfg_in (`attn train --arch ARCH --max-steps 0`
    on the first 20,000 characters of tinyshakespeare), then the twin's step-0 gradients, step-0
    validation loss and 10-step trajectories from those weights (ref.json). make_twin(init_dir,
    config, dtype) builds a twin with load_hf, named_hf, loss, optimizer and parameters; check(text,
    ids, config, tokenizer), when given, checks the tokenization."""
    from tokenizers import Tokenizer

    out = os.path.join(outdir, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read()[:20000]
    data = os.path.join(out, "data.txt")
    with open(data, "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(out, "tiny.json"), "w") as f:
        json.dump(cfg_in, f)
    s = dict(SETTINGS)
    build = os.environ.get("ATTN_BUILD") or os.path.join(ROOT, "build")
    init = os.path.join(out, "init")
    cmd = [os.path.join(build, "attn"), "--threads", "2", "train", "--arch", arch,
           "--config", os.path.join(out, "tiny.json"), "--data", data, "--tokenizer", "char",
           "--batch", str(s["B"]), "--grad-accum", str(s["grad_accum"]), "--max-steps", "0",
           "--lr", str(s["lr"]), "--min-lr", str(s["min_lr"]), "--warmup-steps", str(s["warmup"]),
           "--lr-decay-steps", str(s["decay"]), "--weight-decay", str(s["weight_decay"]),
           "--beta1", str(s["beta1"]), "--beta2", str(s["beta2"]), "--grad-clip", str(s["clip"]),
           "--seed", str(s["seed"]), "--eval-iters", str(s["eval_iters"]),
           "--metrics", os.path.join(out, "metrics0.jsonl"), "--out", init]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{name}: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")

    weights, _ = stfile.load(os.path.join(init, "model.safetensors"))
    with open(os.path.join(init, "config.json")) as f:
        cfg = json.load(f)
    tok = Tokenizer.from_file(os.path.join(init, "tokenizer.json"))
    ids = np.array(tok.encode(text).ids, dtype=np.int64)
    if check:
        check(text, ids, cfg, tok)
    n = len(ids)
    ids_train, ids_val = ids[:int(n * 0.9)], ids[int(n * 0.9):]

    # one step's gradients, float64
    torch.manual_seed(0)
    m64 = make_twin(init, cfg, torch.float64)
    m64.load_hf(weights)
    A = s["grad_accum"]
    batches, loss0 = {}, 0.0
    for micro in range(A):
        x, y = train_batch(ids_train, s["B"], s["T"], s["seed"], 0, A, micro)
        batches[f"x{micro}"], batches[f"y{micro}"] = x.astype(np.int32), y.astype(np.int32)
        l = m64.loss(torch.from_numpy(x), torch.from_numpy(y))
        (l / A).backward()
        loss0 += l.item() / A
    grads = {n_: p.grad.detach().numpy().astype(np.float32) for n_, p in m64.named_hf()}
    stfile.save(os.path.join(out, "grads.safetensors"), grads)
    stfile.save(os.path.join(out, "batches.safetensors"), batches)

    # validation loss at the initial weights (attn's eval batches)
    with torch.no_grad():
        vl = [m64.loss(*map(torch.from_numpy, valid_batch(ids_val, s["B"], s["T"], s["seed"], k))).item()
              for k in range(s["eval_iters"])]
    val0 = sum(vl) / len(vl)

    traj = {}
    for dname, dt in (("float32", torch.float32), ("float64", torch.float64)):
        m = make_twin(init, cfg, dt)
        m.load_hf(weights)
        traj[dname] = train_trajectory(m, ids_train, s, s["steps"])
    ref = {"settings": s, "loss0": loss0, "val_loss0": val0, "losses32": traj["float32"][0],
           "losses64": traj["float64"][0], "lrs": traj["float64"][1], "norms64": traj["float64"][2],
           "norms32": traj["float32"][2], "torch": torch.__version__}
    with open(os.path.join(out, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    gap = max(abs(a - b) / abs(b) for a, b in zip(traj["float32"][0], traj["float64"][0]))
    print(f"{name}: {out}: loss0 {loss0:.6f}, val0 {val0:.6f}, 10-step loss "
          f"{traj['float32'][0][-1]:.6f} (float32 vs float64 trajectory: max rel {gap:.2e})")


def check_chars(text, ids, cfg, tok):
    """The character tokenizer gives nanoGPT's sorted-characters ids and decodes back."""
    chars = sorted(set(text))
    nano = np.array([chars.index(c) for c in text], dtype=np.int64)
    assert len(chars) == cfg["vocab_size"] == tok.get_vocab_size(), (len(chars), cfg["vocab_size"])
    assert np.array_equal(ids, nano), "tokenizer.json does not give nanoGPT's character ids"
    assert tok.decode(ids[:500].tolist()) == text[:500], "tokenizer.json does not decode back"


def main():
    cfg_in = {"n_layer": 2, "n_head": 2, "n_embd": 32, "n_positions": 16, "resid_pdrop": 0.0,
              "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    make_reference(sys.argv[1] if len(sys.argv) > 1 else "build/ref", "gpt_train", "gpt", cfg_in,
                   lambda init, cfg, dt: GPTTwin(cfg, dt, sdpa=False), check_chars)


if __name__ == "__main__":
    main()
