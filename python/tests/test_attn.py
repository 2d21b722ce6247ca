"""The attn package against the attn CLI: every call gives the CLI's numbers on the same inputs
(bit for bit where the CLI is deterministic), shapes and dtypes as documented, exceptions for
bad input, no leak over 1,000 load/free cycles, threads as sequential."""
import gc
import json
import os
import threading

import numpy as np
import pytest

import attn
from conftest import (DEMO, MINILM, REF, SMOLLM, SMOLLM_GGUF, TINY_BERT, TINY_GPT, cli,
                      cli_json_lines, need, same)

SENTENCES = ["Knowledge is power.", "知识就是力量", "", "   padded   ", "The quick brown fox "
             "jumps over the lazy dog, again and again, until the dog gets up.", "Ünïcödé ✓",
             "a", "Attention is all you need."]


@pytest.fixture(scope="module")
def minilm():
    with attn.load(need(MINILM)) as m:
        yield m


@pytest.fixture(scope="module")
def smollm():
    with attn.load(need(SMOLLM)) as m:
        yield m


@pytest.fixture(scope="module")
def demo():
    with attn.load(need(DEMO, "tools/ref_tiny_translator.py, run by tests/run.sh")) as m:
        yield m


# ---- embeddings -------------------------------------------------------------------------------

def test_embed_same_as_cli(minilm, tmp_path):
    out = tmp_path / "e.npy"
    cli("embed", "--model", MINILM, "--out", out, "--", *SENTENCES)
    ref = np.load(out)
    got = minilm.embed(SENTENCES)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    same(got, ref)
    # one text, another batch size, bytes input: the same rows
    same(minilm.embed(SENTENCES, batch_size=3), ref)
    same(minilm.embed(SENTENCES[0]), ref[:1])
    same(minilm.embed([s.encode() for s in SENTENCES[:2]]), ref[:2])
    assert minilm.embed([]).shape == (0, 384)


def test_embed_bad_input(minilm):
    with pytest.raises(attn.InvalidArgumentError, match="UTF-8"):
        minilm.embed([b"ok", b"bad \xff byte"])
    with pytest.raises(TypeError):
        minilm.embed([1, 2])
    with pytest.raises(attn.InvalidArgumentError, match="precision"):
        minilm.embed(["x"], precision="f13")
    with pytest.raises(attn.InvalidArgumentError):
        minilm.embed(["x"], batch_size=0)
    with pytest.raises(UnicodeEncodeError):
        minilm.embed(["lone surrogate \udc80"])


# ---- forward ----------------------------------------------------------------------------------

def test_bert_forward_same_as_cli(minilm, tmp_path):
    ids = minilm.tokenizer.encode("Knowledge is power.")
    assert ids.dtype == np.int32 and ids[0] == 101
    o, h = tmp_path / "o.npy", tmp_path / "h.npy"
    cli("forward", "--model", MINILM, "--ids", ",".join(map(str, ids)), "--out", o,
        "--hidden-out", h)
    last, hs = minilm.forward(ids, hidden_states=True)
    assert last.shape == (len(ids), 384) and hs.shape == (7, len(ids), 384)
    same(last, np.load(o))
    same(hs, np.load(h))
    same(minilm.forward(list(map(int, ids))), last)  # a list, any integer dtype
    same(minilm.forward(ids.astype(np.int64)), last)


def test_gpt_forward_same_as_cli(tmp_path):
    ids = [1, 5, 17, 3, 9, 30]
    o, h = tmp_path / "o.npy", tmp_path / "h.npy"
    cli("forward", "--model", need(TINY_GPT, "tools/ref_generate.py"), "--ids",
        ",".join(map(str, ids)), "--out", o, "--hidden-out", h)
    with attn.load(TINY_GPT) as m:
        c = m.config
        logits, hs = m.forward(np.array(ids, dtype=np.int16), hidden_states=True)
    assert logits.shape == (6, c["vocab_size"]) and logits.dtype == np.float32
    assert hs.shape == (c["n_layer"] + 1, 6, c["n_embd"])
    same(logits, np.load(o))
    same(hs, np.load(h))


def test_gguf_forward_same_as_cli(tmp_path):
    need(SMOLLM_GGUF)
    ids = [1, 504, 3458]
    o = tmp_path / "o.npy"
    cli("forward", "--model", SMOLLM_GGUF, "--ids", ",".join(map(str, ids)), "--out", o)
    with attn.load(SMOLLM_GGUF) as m:
        assert isinstance(m, attn.Decoder) and m.config["model_type"] == "llama"
        same(m.forward(ids), np.load(o))


def test_forward_bad_input(smollm):
    with pytest.raises(TypeError, match="integers"):
        smollm.forward(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="1-D"):
        smollm.forward(np.zeros((2, 3), dtype=np.int32))
    with pytest.raises(attn.InvalidArgumentError, match="outside the vocabulary"):
        smollm.forward([1, 49152])
    with pytest.raises(attn.InvalidArgumentError):
        smollm.forward([-1])
    with pytest.raises(attn.InvalidArgumentError):
        smollm.forward([])


# ---- generation and chat ------------------------------------------------------------------------

def _gen_cli(model, prompt, *opts):
    return cli("generate", "--model", model, "--prompt", prompt, "--no-echo", "--quiet",
               *opts).stdout.decode()


def test_generate_same_as_cli(smollm):
    p = "The capital of France is"
    ref = _gen_cli(SMOLLM, p, "--max-tokens", 16, "--greedy")
    assert smollm.generate(p, max_tokens=16, greedy=True) == ref
    # sampling: the same seed, the same text; streamed pieces join to the same text
    ref = _gen_cli(SMOLLM, p, "--max-tokens", 16, "--seed", 11, "--temperature", 0.9,
                   "--top-p", 0.95)
    g = smollm.generate(p, max_tokens=16, seed=11, temperature=0.9, top_p=0.95, stream=True)
    pieces = list(g)
    assert "".join(pieces) == ref and len(pieces) > 1
    assert g.stats["seed"] == 11 and g.stats["n_generated"] >= 1
    ref = _gen_cli(SMOLLM, p, "--max-tokens", 30, "--greedy", "--stop", ".")
    assert smollm.generate(p, max_tokens=30, greedy=True, stop=".") == ref


def test_generate_early_close(smollm):
    g = smollm.generate("Once upon a time", max_tokens=200, greedy=True, stream=True)
    first = next(g)
    assert isinstance(first, str)
    g.close()  # stops the worker; the model serves the next call at once
    assert smollm.generate("Hi", max_tokens=2, greedy=True) == _gen_cli(
        SMOLLM, "Hi", "--max-tokens", 2, "--greedy")


def test_chat_same_as_cli(smollm):
    convs = [[{"role": "user", "content": "What is 2+2?"}],
             [{"role": "system", "content": "Answer in French."},
              {"role": "user", "content": "Hello!"}]]
    stdin = "".join(json.dumps(c) + "\n" for c in convs).encode()
    ref = cli_json_lines("chat", "--model", SMOLLM, "--jsonl", "--quiet", "--greedy",
                         "--max-tokens", 24, stdin=stdin)
    smollm.reset_chat()
    got = [smollm.chat(c, max_tokens=24, greedy=True) for c in convs]
    assert got == [r["content"] for r in ref]
    # a message list given to generate is a chat
    assert smollm.generate(convs[0], max_tokens=24, greedy=True) == ref[0]["content"]


def test_chat_bad_input(smollm):
    with pytest.raises(attn.Error):
        smollm.chat([{"role": "wizard", "content": "hi"}])
    with pytest.raises(TypeError):
        smollm.chat("hi")
    with pytest.raises(attn.InvalidArgumentError):
        smollm.generate("x", max_tokens=0)
    with pytest.raises(attn.InvalidArgumentError):
        smollm.generate("x", top_p=2.0)


# ---- translation --------------------------------------------------------------------------------

def test_translate_same_as_cli(demo):
    texts = ["Knowledge is power.", "I like tea.", "", "Where is the station?"]
    for beam in (1, 4):
        ref = cli("translate", "--model", DEMO, "--beam", beam, "--scores", "--",
                  *texts).stdout.decode().splitlines()
        got, sc = demo.translate(texts, beam=beam, scores=True)
        assert got == [r.split("\t", 1)[1] for r in ref]
        assert ["%.4f" % s for s in sc] == [r.split("\t", 1)[0] for r in ref]
    assert demo.translate("Knowledge is power.") == [ref[0].split("\t", 1)[1]]
    with pytest.raises(attn.InvalidArgumentError, match="UTF-8"):
        demo.translate([b"\xc3("])


# ---- attention maps, pictures ---------------------------------------------------------------------

def _att_same(got, path):
    ref = attn.Attention.load(path)
    assert sorted(got) == sorted(ref)
    assert got.tokens == ref.tokens and got.target == ref.target
    for k in ref:
        same(got[k], ref[k])


@pytest.mark.parametrize("which", ["bert", "gpt", "translator"])
def test_attention_same_as_cli(which, tmp_path, request):
    model = {"bert": MINILM, "gpt": SMOLLM, "translator": DEMO}[which]
    m = request.getfixturevalue({"bert": "minilm", "gpt": "smollm", "translator": "demo"}[which])
    text = "Knowledge is power."
    out = tmp_path / "a.safetensors"
    cli("attention", "--model", model, text, "--out", out)
    got = m.attention(text)
    _att_same(got, out)
    k = next(iter(got))
    H, Tq, Tk = got[k].shape
    assert got[k].dtype == np.float32 and Tq == Tk == len(got.tokens)
    np.testing.assert_allclose(got[k].sum(-1), 1, atol=1e-5)
    if which == "translator":
        assert {"encoder.self.0", "decoder.self.0", "decoder.cross.0"} <= set(got)
        assert got["decoder.cross.0"].shape[1:] == (len(got.target), len(got.tokens))
    html, png = tmp_path / "a.html", tmp_path / "a.png"
    attn.viz.html(got, html)
    attn.viz.png(got, png, mode="grid", cell=6)
    assert html.read_bytes().startswith(b"<!doctype html") and png.read_bytes()[:4] == b"\x89PNG"
    got.save(tmp_path / "b.safetensors")
    _att_same(got, tmp_path / "b.safetensors")


# ---- explain, tokenizer, BLEU ---------------------------------------------------------------------

def test_explain_same_as_cli(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    w = [rng.standard_normal((6, 3)).astype(np.float32) for _ in range(3)]
    f = tmp_path / "in.safetensors"
    _save_st(f, {"x": x, "w_q": w[0], "w_k": w[1], "w_v": w[2]})
    j = json.loads(cli("explain", f, "--json").stdout)
    r = attn.explain(x, *w, png=tmp_path / "e.png")
    assert (tmp_path / "e.png").read_bytes()[:4] == b"\x89PNG"
    for side in ("encoder", "decoder"):
        for k in ("q", "k", "v", "scores", "weights", "output"):
            a = r[side][k]
            assert a.dtype == np.float32
            assert a.shape == ((5, 5) if k in ("scores", "weights") else (5, 3))
            # the JSON prints %.9g: float32 round-trips exactly
            same(a, np.array(j[side][k], dtype=np.float32))
    assert np.isneginf(r["decoder"]["scaled"][0, 1]) and r["decoder"]["weights"][0, 1] == 0
    with pytest.raises(ValueError):
        attn.explain(x, w[0][:5], w[1], w[2])
    with pytest.raises(TypeError):
        attn.explain(x.astype(np.int32), *w)


def _save_st(path, tensors):
    """A minimal F32 safetensors writer (the test's input)."""
    header, off, blobs = {}, 0, []
    for k, v in tensors.items():
        b = np.ascontiguousarray(v, dtype="<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as fp:
        fp.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def test_tokenizer_same_as_cli(smollm):
    texts = ["Hello world", "你好，世界", "  spaces  and\ttabs"]
    ref = cli("tokenizer", "encode", "--tokenizer", SMOLLM, "--", *texts).stdout.decode()
    tok = attn.tokenizer(SMOLLM)
    got = [tok.encode(t) for t in texts]
    assert [" ".join(map(str, g)) for g in got] == ref.splitlines()
    assert all(g.dtype == np.int32 and g.ndim == 1 for g in got)
    dec = cli("tokenizer", "decode", "--tokenizer", SMOLLM, " ".join(map(str, got[1])))
    assert tok.decode(got[1]) == dec.stdout.decode().rstrip("\n") == texts[1]
    assert tok.vocab_size == smollm.tokenizer.vocab_size == 49152
    with pytest.raises(attn.InvalidArgumentError):
        tok.decode([10 ** 6])
    with pytest.raises(attn.InvalidArgumentError):
        tok.encode(b"\xff")
    tok.close()
    with pytest.raises(ValueError, match="closed"):
        tok.encode("x")


def test_bleu_same_as_cli(tmp_path):
    hyps = ["知识就是力量。", "我喜欢茶。", "车站在哪里？"]
    refs = [["知识就是力量。", "我喜欢喝茶。", "火车站在哪儿？"],
            ["知识即力量。", "我爱茶。", "车站在哪里？"]]
    files = []
    for name, lines in [("h", hyps)] + [("r%d" % i, r) for i, r in enumerate(refs)]:
        p = tmp_path / name
        p.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
        files.append(p)
    ref = json.loads(cli("bleu", *files, "--json").stdout)
    got = attn.bleu(hyps, refs)
    for k in ("score", "precisions", "bp", "ratio", "hyp_len", "ref_len", "counts", "totals"):
        assert got[k] == ref[k], k
    line = cli("bleu", *files).stdout.decode()
    assert str(got) in line
    assert attn.bleu(hyps, refs[0]).score == attn.bleu(hyps, [refs[0]]).score
    with pytest.raises(attn.InvalidArgumentError):
        attn.bleu(hyps, [refs[0][:2]])
    with pytest.raises(attn.InvalidArgumentError):
        attn.bleu(hyps, refs, tokenize="klingon")


# ---- loading, errors, freeing -------------------------------------------------------------------

def test_load_kinds_and_errors(tmp_path):
    with pytest.raises(attn.FileError) as e:
        attn.load(tmp_path / "nothing")
    assert isinstance(e.value, OSError) and "config.json" in str(e.value)
    (tmp_path / "config.json").write_text('{"model_type": "t5"}')
    with pytest.raises(attn.UnsupportedError, match="t5"):
        attn.load(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "gpt2", "n_embd": 16, "n_head": 2, '
                                          '"n_layer": 1, "vocab_size": 10, "n_positions": 8}')
    with pytest.raises(attn.Error, match="model.safetensors"):
        attn.load(tmp_path)
    with pytest.raises(attn.FileError):
        attn.tokenizer(tmp_path / "none.json")
    need(TINY_BERT, "tools/ref_bert.py")
    with attn.load(TINY_BERT) as m:
        assert isinstance(m, attn.Encoder) and m.config["hidden_size"] == 64
        out = m.forward([1, 2, 3])
        assert out.shape == (3, 64)
    assert m.closed
    with pytest.raises(ValueError, match="closed"):
        m.forward([1, 2, 3])


def _rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_no_leak_over_1000_loads():
    need(TINY_GPT, "tools/ref_generate.py")
    attn.set_num_threads(1)  # tiny forwards: no thread team to wake 1,000 times
    try:
        _load_cycles()
    finally:
        attn.set_num_threads(0)


def _load_cycles():
    for i in range(1100):
        if i == 100:
            gc.collect()
            base = _rss_kb()
        if i % 2:
            with attn.load(TINY_GPT) as m:
                m.forward([1, 2])
        else:  # freed by the garbage collector
            m = attn.load(TINY_GPT)
            m.tokenizer.encode("ab")
            del m
    gc.collect()
    grown = _rss_kb() - base
    assert grown < 8 * 1024, "RSS grew by %d KB over 1,000 load/free cycles" % grown


def test_two_threads_two_models(minilm, smollm):
    texts = SENTENCES * 8
    emb_seq = minilm.embed(texts)
    gen_seq = smollm.generate("Once upon a time", max_tokens=24, greedy=True)
    with attn.load(MINILM) as m2:
        out = {}

        def run_embed():
            out["emb"] = [m2.embed(texts) for _ in range(3)]

        def run_gen():
            out["gen"] = [smollm.generate("Once upon a time", max_tokens=24, greedy=True)
                          for _ in range(2)]

        ts = [threading.Thread(target=run_embed), threading.Thread(target=run_gen)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    for e in out["emb"]:
        same(e, emb_seq)
    assert out["gen"] == [gen_seq, gen_seq]


# ---- training -------------------------------------------------------------------------------------

def test_train_same_as_cli(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("To be, or not to be, that is the question.\n" * 60, encoding="utf-8")
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"n_layer": 1, "n_head": 2, "n_embd": 16, "n_positions": 16}')
    opts = ["--arch", "gpt", "--data", data, "--config", cfg, "--max-steps", 6, "--batch", 4,
            "--log-every", 2, "--eval-every", 6, "--seed", 5]
    cli("train", *opts, "--out", tmp_path / "cli")
    seen = []
    attn.train(arch="gpt", data=data, out=tmp_path / "py", config=cfg, max_steps=6, batch=4,
               log_every=2, eval_every=6, seed=5, progress=seen.append)
    assert [s["step"] for s in seen] == [2, 4, 6] and all(np.isfinite(s["loss"]) for s in seen)
    a = (tmp_path / "cli" / "model.safetensors").read_bytes()
    b = (tmp_path / "py" / "model.safetensors").read_bytes()
    assert a == b
    # a callback returning False stops the run (saved, as Ctrl-C)
    n = []
    attn.train(arch="gpt", data=data, out=tmp_path / "stop", config=cfg, max_steps=50, batch=4,
               log_every=1, seed=5, progress=lambda i: n.append(i["step"]) or i["step"] < 3)
    assert n[-1] == 3 and (tmp_path / "stop" / "model.safetensors").exists()
    with pytest.raises(attn.InvalidArgumentError, match="--max-steps"):
        attn.train(arch="gpt", data=data, out=tmp_path / "bad", max_steps="many")
    with pytest.raises(attn.Error, match="nothing.txt"):
        attn.train(arch="gpt", data=tmp_path / "nothing.txt", out=tmp_path / "bad2")
