"""transformers twin of `attn train --arch llama` for tests/test_gpt_train.c's Llama group.
Usage: ref_llama_train.py OUTDIR  (writes OUTDIR/llama_train/).

As tools/ref_gpt_train.py (whose sampler, schedule and training loop it reuses), with
transformers' own LlamaForCausalLM as the model: attn's initial checkpoint of a tiny Llama (2
layers, 4 query and 2 key/value heads, width 32, SwiGLU width 64, context 16, untied head) made
with --max-steps 0 is loaded into LlamaForCausalLM (eager attention) and
  - one step's loss and gradients (2 accumulated micro-batches) in float64: grads.safetensors;
  - the step-0 validation loss on attn's validation batches;
  - the 10-step loss trajectory (AdamW, decay on 2-D tensors, warmup + cosine, clipping,
    accumulation 2) in float32 and float64
go into ref.json, in the layout test_gpt_train.c reads."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import ref_gpt_train as g  # noqa: E402
import stfile  # noqa: E402


class LlamaTwin:
    """transformers' LlamaForCausalLM behind the small interface ref_gpt_train's loop uses."""

    def __init__(self, init_dir, dtype):
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig.from_pretrained(init_dir)
        cfg._attn_implementation = "eager"
        self.model = LlamaForCausalLM(cfg).to(dtype)
        self.model.train()

    def parameters(self):
        return self.model.parameters()

    def named_hf(self):
        return list(self.model.named_parameters())

    def load_hf(self, tensors):
        with torch.no_grad():
            for n, p in self.named_hf():
                p.copy_(torch.from_numpy(np.array(tensors[n])).to(p.dtype))

    def loss(self, idx, targets):
        logits = self.model(input_ids=idx).logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               ignore_index=-1)

    def optimizer(self, lr, weight_decay, betas, eps=1e-8):
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        nodecay = [p for p in self.model.parameters() if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": nodecay, "weight_decay": 0.0}], lr=lr, betas=betas,
                                 eps=eps)


def main():
    from tokenizers import Tokenizer

    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "build/ref", "llama_train")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    with open(g.CORPUS, encoding="utf-8") as f:
        text = f.read()[:20000]
    data = os.path.join(out, "data.txt")
    with open(data, "w", encoding="utf-8") as f:
        f.write(text)
    cfg_in = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "hidden_size": 32, "intermediate_size": 64,
              "max_position_embeddings": 16, "rms_norm_eps": 1e-5, "initializer_range": 0.1}
    with open(os.path.join(out, "tiny.json"), "w") as f:
        json.dump(cfg_in, f)
    s = {"B": 4, "T": 16, "grad_accum": 2, "seed": 5, "lr": 1e-2, "min_lr": 1e-3, "warmup": 3,
         "decay": 10, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.99, "clip": 1.0,
         "eval_iters": 3, "steps": 10}
    build = os.environ.get("ATTN_BUILD") or os.path.join(ROOT, "build")
    init = os.path.join(out, "init")
    cmd = [os.path.join(build, "attn"), "--threads", "2", "train", "--arch", "llama",
           "--config", os.path.join(out, "tiny.json"), "--data", data, "--tokenizer", "char",
           "--batch", str(s["B"]), "--grad-accum", str(s["grad_accum"]), "--max-steps", "0",
           "--lr", str(s["lr"]), "--min-lr", str(s["min_lr"]), "--warmup-steps", str(s["warmup"]),
           "--lr-decay-steps", str(s["decay"]), "--weight-decay", str(s["weight_decay"]),
           "--beta1", str(s["beta1"]), "--beta2", str(s["beta2"]), "--grad-clip", str(s["clip"]),
           "--seed", str(s["seed"]), "--eval-iters", str(s["eval_iters"]),
           "--metrics", os.path.join(out, "metrics0.jsonl"), "--out", init]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ref_llama_train.py: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")

    weights, _ = stfile.load(os.path.join(init, "model.safetensors"))
    tok = Tokenizer.from_file(os.path.join(init, "tokenizer.json"))
    ids = np.array(tok.encode(text).ids, dtype=np.int64)
    n = len(ids)
    ids_train, ids_val = ids[:int(n * 0.9)], ids[int(n * 0.9):]

    torch.manual_seed(0)
    m64 = LlamaTwin(init, torch.float64)
    m64.load_hf(weights)
    A = s["grad_accum"]
    batches, loss0 = {}, 0.0
    for micro in range(A):
        x, y = g.train_batch(ids_train, s["B"], s["T"], s["seed"], 0, A, micro)
        batches[f"x{micro}"], batches[f"y{micro}"] = x.astype(np.int32), y.astype(np.int32)
        loss = m64.loss(torch.from_numpy(x), torch.from_numpy(y))
        (loss / A).backward()
        loss0 += loss.item() / A
    grads = {n_: p.grad.detach().numpy().astype(np.float32) for n_, p in m64.named_hf()}
    stfile.save(os.path.join(out, "grads.safetensors"), grads)
    stfile.save(os.path.join(out, "batches.safetensors"), batches)

    with torch.no_grad():
        vl = [m64.loss(*map(torch.from_numpy, g.valid_batch(ids_val, s["B"], s["T"], s["seed"], k)))
              .item() for k in range(s["eval_iters"])]
    val0 = sum(vl) / len(vl)

    traj = {}
    for name, dt in (("float32", torch.float32), ("float64", torch.float64)):
        m = LlamaTwin(init, dt)
        m.load_hf(weights)
        traj[name] = g.train_trajectory(m, ids_train, s, s["steps"])
    ref = {"settings": s, "loss0": loss0, "val_loss0": val0, "losses32": traj["float32"][0],
           "losses64": traj["float64"][0], "lrs": traj["float64"][1], "norms64": traj["float64"][2],
           "norms32": traj["float32"][2], "torch": torch.__version__}
    with open(os.path.join(out, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    gap = max(abs(a - b) / abs(b) for a, b in zip(traj["float32"][0], traj["float64"][0]))
    print(f"ref_llama_train.py: {out}: loss0 {loss0:.6f}, val0 {val0:.6f}, 10-step loss "
          f"{traj['float32'][0][-1]:.6f} (float32 vs float64 trajectory: max rel {gap:.2e})")


if __name__ == "__main__":
    main()
