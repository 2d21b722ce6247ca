"""CTranslate2 against attn on attn's exported translator (issue 17): `attn export` wrote HF_DIR
(M2M100ForConditionalGeneration with attn's tokenizer.json); this converts it with
ct2-transformers-converter (float32, positions patched for attn's pad id: convert(); the
precision is CTranslate2's compute_type at load) and
translates the same source ids with CTranslate2 and with `attn translate --model HF_DIR --ids`,
each side at a few settings, and prints a table: target tokens/s per setting, each side's best,
the ratio attn / CTranslate2, and how many of the best settings' outputs are identical.

    .venv-bench/bin/python bench/ct2_export.py HF_DIR CT2_DIR SRC OUT_DIR --attn BUILD/attn
        [--precision f32|int8|bf16] [--beam K] [--threads N]
        [--ct2-splits 1x2,2x1] [--ct2-batches examples:16,examples:32,tokens:1024,...]
        [--attn-batches 16,32,64] [--passes P]

Both sides get the same input and give ids, so no tokenizer is timed on either side: the source
is the tokenizer's tokens, then </s> (what attn gives its own models; OUT_DIR/src.ids for attn's
--ids); the decoder starts from config.json's decoder_start_token_id. Target tokens are counted
the same way on both sides: the generated ids without the decoder start and without </s>
(CTranslate2's hypotheses; attn's --ids output lines). Both decode as transformers' generate
(length penalty 1, </s> allowed first, a forced </s> at max_length, bad words suppressed) with
early_stopping=True: CTranslate2's beam search with a length penalty ends a sentence once
beam_size hypotheses have finished (its decoding.cc: _max_candidates = beam_size · patience),
which is transformers' early_stopping=True, so attn runs with --early-stopping true for the
ratio (the export's generation_config.json leaves transformers' default, False, which searches
longer); --attn-early adds attn's runs with other values, each with its own ratio.

Timing, CTranslate2: one Translator per thread split (inter_threads x intra_threads =
--threads), a warm-up translate_batch of 64 sentences, then per batch setting the best of
--passes timed translate_batch calls over all sentences (CTranslate2 sorts them by length and
cuts batches of max_batch_size examples or tokens; inter_threads > 1 decodes batches in
parallel). attn: one `attn --threads N translate` process per --batch value, the best of
--passes runs, minus the time of the same command on empty input (loading the export and, for
int8, quantizing it: measured the same way, the least of 3 runs), so neither side counts
loading. Precisions: f32 = CTranslate2 float32 / attn f32; int8 = CTranslate2 int8 and
int8_float32 (both tried) / attn int8 (CTranslate2's scheme: one scale per weight row and per
activation row; --attn-q8 also tries attn's q8_0 with --int8-activations int8 and f32); bf16 =
CTranslate2 bfloat16 (if this CPU build has it) / attn bf16. Each timed line also says how many
cores other processes used meanwhile (/proc/stat): the machine's noise."""
import argparse
import json
import os
import subprocess
import sys
import time

import ctranslate2
from tokenizers import Tokenizer


def convert(hf_dir, ct2_dir):
    """ct2-transformers-converter's conversion, with M2M100's position table taken from where
    transformers reads it: positions start at padding_idx + 1 (transformers'
    create_position_ids_from_input_ids), while the converter's weights[offset:] (offset 2)
    assumes padding_idx 1, fairseq's. attn's pad id is 0, so unpatched every position would be
    off by one in CTranslate2 (measured: 454 of 939 outputs identical to transformers' instead
    of 938)."""
    from ctranslate2.converters import transformers as ct2t

    def positions(self, spec, module):
        spec.encodings = module.weights[module.padding_idx + 1:]

    ct2t.M2M100Loader.set_position_encodings = positions
    ct2t.TransformersConverter(hf_dir).convert(ct2_dir, force=True)


class Others:
    """CPU time used by other processes while a measurement ran (busy time in /proc/stat minus
    this process's and its children's), as cores on average: the noise of the machine."""

    @staticmethod
    def _busy():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def __init__(self):
        self.b, self.o, self.t = self._busy(), self._own(), time.perf_counter()

    def cores(self):
        dt = time.perf_counter() - self.t
        return max(0.0, (self._busy() - self.b) - (self._own() - self.o)) / dt


def parse_list(s, f=str):
    return [f(x) for x in s.split(",") if x]


def ct2_types(precision):
    have = ctranslate2.get_supported_compute_types("cpu")
    want = {"f32": ["float32"], "int8": ["int8", "int8_float32"], "bf16": ["bfloat16"]}[precision]
    ok = [t for t in want if t in have]
    return ok, [t for t in want if t not in have]


def ct2_run(a, gen, tok, batch, splits, batches, types):
    """[(label, tokens/s, seconds, outputs as id lists)] for every CTranslate2 setting."""
    eos_bad = [[tok.id_to_token(w[0])] for w in gen.get("bad_words_ids", [])]
    kw = dict(beam_size=a.beam, min_decoding_length=0,
              max_decoding_length=gen["max_length"] - 2, suppress_sequences=eos_bad,
              length_penalty=1.0)
    res = []
    for ct in types:
        for inter, intra in splits:
            tr = ctranslate2.Translator(a.ct2_dir, device="cpu", inter_threads=inter,
                                        intra_threads=intra, compute_type=ct)
            tr.translate_batch(batch[:64], max_batch_size=32, **kw)  # warm-up
            for btype, bsize in batches:
                best, outs = None, None
                for _ in range(a.passes):
                    oth = Others()
                    t0 = time.perf_counter()
                    r = tr.translate_batch(batch, max_batch_size=bsize, batch_type=btype, **kw)
                    dt = time.perf_counter() - t0
                    others = oth.cores()
                    if best is None or dt < best:
                        best = dt
                        outs = [[tok.token_to_id(t) for t in x.hypotheses[0]] for x in r]
                n = sum(len(o) for o in outs)
                label = f"{ct} {inter}x{intra} {btype}:{bsize}"
                res.append((label, n / best, best, outs))
                print(f"  ctranslate2 {label:34s} {n / best:9.1f} tok/s "
                      f"({len(batch) / best:7.1f} sent/s, {best:.3f} s; others {others:.2f} "
                      f"cores)", flush=True)
            del tr
    return res


def print_ct2_backends(ct2_dir, types):
    """CTranslate2's own account of its kernels (CT2_VERBOSE=1, in a child process so that the
    timed translators stay quiet): the ISA and the GEMM backends, e.g. on an AVX2 CPU its int8 is
    oneDNN's u8s8 GEMM (VPMADDUBSW on unsigned activations: int16 pairs that can saturate without
    VNNI), which is why its outputs there differ from attn's exact int8 more often."""
    code = ("import sys, ctranslate2; ctranslate2.Translator(sys.argv[1], device='cpu', "
            "compute_type=sys.argv[2], inter_threads=1, intra_threads=1)")
    for t in types[:1]:
        p = subprocess.run([sys.executable, "-c", code, ct2_dir, t], capture_output=True, text=True,
                           env=dict(os.environ, CT2_VERBOSE="1"))
        for line in p.stderr.splitlines():
            if "ISA" in line or "backend" in line:
                print("  ctranslate2 says: " + line.rsplit("]", 1)[-1].strip().lstrip("- "), flush=True)


def attn_cmd(a, bsize, act, early):
    """act: None (the precision as it is) or an --int8-activations value for --precision q8_0"""
    cmd = [a.attn, "--threads", str(a.threads), "translate", "--model", a.hf_dir, "--ids",
           "--beam", str(a.beam), "--batch", str(bsize), "--early-stopping", early]
    if act:
        cmd += ["--precision", "q8_0", "--int8-activations", act]
    else:
        cmd += ["--precision", a.precision]
    return cmd


def timed(cmd, stdin_path):
    with open(stdin_path, "rb") as f:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        dt = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"ct2_export: {' '.join(cmd)} failed: {p.stderr.decode().strip()}")
    return dt, p.stdout.decode()


def attn_run(a, ids_path, batches, acts, early):
    res = []
    empty = os.path.join(a.out_dir, "empty.ids")
    open(empty, "w").close()
    for act in acts:
        load = min(timed(attn_cmd(a, batches[0], act, early), empty)[0] for _ in range(3))
        for bsize in batches:
            best, outs = None, None
            for _ in range(a.passes):
                oth = Others()
                dt, text = timed(attn_cmd(a, bsize, act, early), ids_path)
                others = oth.cores()
                if best is None or dt < best:
                    best = dt
                    outs = [[int(x) for x in ln.split()] for ln in text.splitlines()]
            n = sum(len(o) for o in outs)
            t = best - load
            label = (f"{'q8_0 act ' + act if act else a.precision} --batch {bsize} "
                     f"--early-stopping {early}")
            res.append((label, n / t, t, outs, attn_cmd(a, bsize, act, early)))
            print(f"  attn        {label:34s} {n / t:9.1f} tok/s ({len(outs) / t:7.1f} sent/s, "
                  f"{t:.3f} s = {best:.3f} s - {load:.3f} s load; others {others:.2f} cores)",
                  flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("ct2_dir")
    ap.add_argument("src")
    ap.add_argument("out_dir")
    ap.add_argument("--attn", required=True, help="the attn binary")
    ap.add_argument("--precision", default="f32", choices=["f32", "int8", "bf16"])
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ct2-splits", default=None,
                    help="inter x intra thread splits, e.g. 1x2,2x1 (default: all that "
                         "multiply to --threads)")
    ap.add_argument("--ct2-batches",
                    default="examples:16,examples:32,examples:64,tokens:512,tokens:1024,"
                            "tokens:2048")
    ap.add_argument("--attn-batches", default="16,32,64,128")
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every setting of both sides this many times in turn (CTranslate2's, "
                         "then attn's, then again) and keep each setting's best: a machine whose "
                         "speed drifts over minutes then slows both sides alike")
    ap.add_argument("--attn-early", default="true,false",
                    help="attn's --early-stopping values: the first is the ratio's (true: "
                         "CTranslate2's own stopping rule for a beam search with a length "
                         "penalty, so both sides run the same search); the others are reported "
                         "with their own ratio")
    ap.add_argument("--attn-q8", default="",
                    help="with --precision int8, also attn's --precision q8_0 with these "
                         "--int8-activations values (e.g. int8,f32; default none)")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    if not os.path.exists(os.path.join(a.ct2_dir, "model.bin")):
        convert(a.hf_dir, a.ct2_dir)
    tok = Tokenizer.from_file(os.path.join(a.hf_dir, "tokenizer.json"))
    with open(os.path.join(a.hf_dir, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(a.hf_dir, "generation_config.json")) as f:
        gen = json.load(f)
    eos = tok.id_to_token(cfg["eos_token_id"])
    with open(a.src, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f]
    batch = [tok.encode(ln).tokens + [eos] for ln in lines]
    ids_path = os.path.join(a.out_dir, "src.ids")
    with open(ids_path, "w") as f:
        for b in batch:
            f.write(" ".join(str(tok.token_to_id(t)) for t in b) + "\n")

    if a.ct2_splits:
        splits = [tuple(int(v) for v in s.split("x")) for s in parse_list(a.ct2_splits)]
    else:
        splits = [(i, a.threads // i) for i in range(1, a.threads + 1) if a.threads % i == 0]
        splits.sort(key=lambda s: s[0])
    batches = [(b.split(":")[0], int(b.split(":")[1])) for b in parse_list(a.ct2_batches)]
    types, missing = ct2_types(a.precision)
    print(f"ctranslate2 {ctranslate2.__version__} (CPU compute types "
          f"{sorted(ctranslate2.get_supported_compute_types('cpu'))}); {len(lines)} sentences, "
          f"beam {a.beam}, {a.threads} threads, precision {a.precision}", flush=True)
    for m in missing:
        print(f"  ctranslate2 has no compute_type {m} on this CPU: not measured", flush=True)
    print_ct2_backends(a.ct2_dir, types)
    acts = [None] + (parse_list(a.attn_q8) if a.precision == "int8" else [])
    earlies = parse_list(a.attn_early)

    def merge(into, res):  # per setting label, the fastest run
        for r in res:
            if r[0] not in into or r[1] > into[r[0]][1]:
                into[r[0]] = r

    ct_best, runs_best = {}, {e: {} for e in earlies}
    for rnd in range(a.rounds):
        if a.rounds > 1:
            print(f"round {rnd + 1} of {a.rounds}", flush=True)
        merge(ct_best, ct2_run(a, gen, tok, batch, splits, batches, types) if types else [])
        for e in earlies:
            merge(runs_best[e], attn_run(a, ids_path, parse_list(a.attn_batches, int), acts, e))
    ct = list(ct_best.values())
    runs = {e: list(runs_best[e].values()) for e in earlies}
    at = runs[earlies[0]]

    def save(res, name):
        with open(os.path.join(a.out_dir, name + ".ids"), "w") as f:
            for o in res[3]:
                f.write(" ".join(map(str, o)) + "\n")
        with open(os.path.join(a.out_dir, name + ".txt"), "w", encoding="utf-8") as f:
            for o in res[3]:
                f.write(tok.decode(o, skip_special_tokens=True) + "\n")

    ba = max(at, key=lambda r: r[1])
    save(ba, "attn")
    summary = {"precision": a.precision, "beam": a.beam, "sentences": len(lines),
               "attn": {"setting": ba[0], "tokens_per_s": ba[1]}}
    print(f"best attn:        {ba[0]}: {ba[1]:.1f} target tokens/s "
          f"({len(ba[3]) / ba[2]:.1f} sentences/s)")
    if ct:
        bc = max(ct, key=lambda r: r[1])
        save(bc, "ct2")
        same = sum(x == y for x, y in zip(ba[3], bc[3]))
        print(f"best ctranslate2: {bc[0]}: {bc[1]:.1f} target tokens/s "
              f"({len(bc[3]) / bc[2]:.1f} sentences/s)")
        print(f"ratio attn / ctranslate2 ({a.precision}, beam {a.beam}): {ba[1] / bc[1]:.2f}x; "
              f"{same} of {len(lines)} outputs identical")
        summary["ctranslate2"] = {"setting": bc[0], "tokens_per_s": bc[1], "identical": same}
        for e in earlies[1:]:
            bo = max(runs[e], key=lambda r: r[1])
            same_o = sum(x == y for x, y in zip(bo[3], bc[3]))
            print(f"attn with --early-stopping {e} (another search than CTranslate2's): "
                  f"{bo[0]}: {bo[1]:.1f} target tokens/s, {bo[1] / bc[1]:.2f}x; {same_o} of "
                  f"{len(lines)} outputs identical to CTranslate2's")
            summary["attn_early_" + e] = {"setting": bo[0], "tokens_per_s": bo[1],
                                          "identical_to_ct2": same_o}
        if a.precision == "f32":
            summary["bound"] = arithmetic_bound(a, ids_path, ba, bc)
    with open(os.path.join(a.out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


def arithmetic_bound(a, ids_path, ba, bc):
    """How far 1.3x is from the arithmetic: the best attn setting once more with --stats (the
    multiply-adds of its matrix products) against this CPU's measured FMA peak (bench_gemm
    --peak, next to the attn binary), and CTranslate2's best time."""
    with open(ids_path, "rb") as f:
        p = subprocess.run(ba[4] + ["--stats"], stdin=f, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    stats = [ln for ln in p.stderr.splitlines() if ln.startswith("attn: stats: ")]
    bench = os.path.join(os.path.dirname(os.path.abspath(a.attn)), "bench", "bench_gemm")
    q = subprocess.run([bench, "--peak"], capture_output=True, text=True,
                       env=dict(os.environ, ATTN_BENCH_THREADS=str(a.threads)))
    peak = [ln for ln in q.stdout.splitlines() if "measured FMA loop" in ln]
    if p.returncode or not stats or q.returncode or not peak:
        print("arithmetic bound: not measured (attn --stats or bench_gemm --peak failed)")
        return None
    macs = float(stats[0].split()[2]) * 1e9
    gflops = float(peak[0].rsplit(":", 1)[1].split()[0])
    floor = macs / (gflops * 0.5e9)
    need = bc[2] / 1.3
    print(f"arithmetic bound: attn's matrix products are {macs * 1e-9:.1f} G multiply-adds "
          f"(attn translate --stats); at this CPU's measured FMA peak on {a.threads} threads "
          f"({gflops:.1f} GFLOP/s, bench_gemm --peak) they alone take >= {floor:.3f} s. "
          f"CTranslate2's best took {bc[2]:.3f} s, so 1.3x needs <= {need:.3f} s for all of "
          f"attn's work: {need - floor:.3f} s beside the products at the FMA peak "
          f"(attn's run: {ba[2]:.3f} s)")
    return {"multiply_adds": macs, "fma_peak_gflops": gflops, "products_floor_s": floor,
            "ct2_s": bc[2], "needed_for_1_3x_s": need, "attn_s": ba[2]}


if __name__ == "__main__":
    main()
