"""Hugging Face translation directories (Marian, M2M100 / NLLB) through the package: translate()
and attention() give the CLI's results bit for bit (`attn translate --model DIR`, `attn attention
--model DIR --out`), on the tiny random models tools/ref_seq2seq_text.py (with tokenizers) and
tools/ref_seq2seq.py (ids only) make."""
import os

import numpy as np
import pytest

import attn
from conftest import REF, cli, need, same

TEXT = os.path.join(REF, "seq2seq_text")
NLLB = os.path.join(TEXT, "nllb")
MARIAN = os.path.join(TEXT, "marian")
M2M_IDS = os.path.join(REF, "seq2seq", "m2m100_relu")
TEXTS = ["Knowledge is power.", "I like green tea very much.", "", "Where is the station?"]
WHY = "tools/ref_seq2seq_text.py, run by tests/run.sh"


@pytest.fixture(scope="module")
def nllb():
    with attn.load(need(NLLB, WHY)) as m:
        yield m


@pytest.fixture(scope="module")
def marian():
    with attn.load(need(MARIAN, WHY)) as m:
        yield m


def _cli_translate(d, args):
    out = cli("translate", "--model", d, "--scores", *args, "--", *TEXTS).stdout.decode()
    rows = [r.split("\t", 1) for r in out.splitlines()]
    return [r[1] for r in rows], [r[0] for r in rows]


@pytest.mark.parametrize("which,kw,args", [
    ("nllb", dict(src_lang="eng_Latn", tgt_lang="zho_Hans"),
     ["--src-lang", "eng_Latn", "--tgt-lang", "zho_Hans"]),
    ("nllb", dict(src_lang="fra_Latn", tgt_lang="deu_Latn", beam=1),
     ["--src-lang", "fra_Latn", "--tgt-lang", "deu_Latn", "--beam", "1"]),
    ("marian", {}, []),
    ("marian", dict(tgt_lang="cmn_Hans", beam=2, max_len=5, batch_size=3),
     ["--tgt-lang", "cmn_Hans", "--beam", "2", "--max-tokens", "5", "--batch", "3"]),
    ("nllb", dict(src_lang="eng_Latn", tgt_lang="zho_Hans", beam=3, early_stopping=True,
                  length_penalty=0.5),
     ["--src-lang", "eng_Latn", "--tgt-lang", "zho_Hans", "--beam", "3", "--early-stopping",
      "true", "--length-penalty", "0.5"]),
    ("marian", dict(early_stopping="never"), ["--early-stopping", "never"]),
])
def test_hf_translate_same_as_cli(which, kw, args, request):
    m = request.getfixturevalue(which)
    assert m.hf and m.config["model_type"] == {"nllb": "m2m_100", "marian": "marian"}[which]
    ref, ref_sc = _cli_translate({"nllb": NLLB, "marian": MARIAN}[which], args)
    got, sc = m.translate(TEXTS, scores=True, **kw)
    assert got == ref
    assert ["%.4f" % s for s in sc] == ref_sc
    assert m.translate(TEXTS[0], **kw) == ref[:1]


def _att_same(got, path):
    ref = attn.Attention.load(path)
    assert sorted(got) == sorted(ref)
    assert got.tokens == ref.tokens and got.target == ref.target
    assert got.target_out == ref.target_out
    for k in ref:
        same(got[k], ref[k])


@pytest.mark.parametrize("which,kw,args", [
    ("nllb", dict(src_lang="eng_Latn", tgt_lang="zho_Hans"),
     ["--src-lang", "eng_Latn", "--tgt-lang", "zho_Hans"]),
    ("nllb", dict(src_lang="eng_Latn", tgt_lang="zho_Hans", target="Knowledge"),
     ["--src-lang", "eng_Latn", "--tgt-lang", "zho_Hans", "--target", "Knowledge"]),
    ("marian", dict(tgt_lang="cmn_Hans", beam=1), ["--tgt-lang", "cmn_Hans", "--beam", "1"]),
    ("marian", dict(target="power"), ["--target", "power"]),
])
def test_hf_attention_same_as_cli(which, kw, args, request, tmp_path):
    m = request.getfixturevalue(which)
    out = tmp_path / "a.safetensors"
    p = cli("attention", "--model", {"nllb": NLLB, "marian": MARIAN}[which], "Knowledge is power.",
            *args, "--out", out)
    got = m.attention("Knowledge is power.", **kw)
    _att_same(got, out)
    assert {"encoder.self.0", "decoder.self.1", "decoder.cross.1"} <= set(got)
    H, Tq, Tk = got["decoder.cross.0"].shape
    assert got["decoder.cross.0"].dtype == np.float32
    assert (Tq, Tk) == (len(got.target), len(got.tokens))
    np.testing.assert_allclose(got["decoder.cross.0"].sum(-1), 1, atol=1e-5)
    if "target" in kw:
        assert got.translation is None and got.score is None
    else:  # the CLI's line: "translation (beam K, score S): TEXT"
        line = p.stdout.decode().splitlines()[0]
        assert line.endswith("): " + got.translation)
        assert "score %.4f)" % got.score in line
    if which == "nllb":
        assert got.tokens[0] == "eng_Latn" and got.tokens[-1] == "</s>"
        assert got.target[1] == "zho_Hans"


def test_hf_attention_ids(tmp_path):
    need(M2M_IDS, "tools/ref_seq2seq.py, run by tests/run.sh")
    out = tmp_path / "a.safetensors"
    cli("attention", "--model", M2M_IDS, "--ids", "5 6 7 2", "--target-ids", "2 5 9", "--out", out)
    with attn.load(M2M_IDS) as m:
        got = m.attention(ids=[5, 6, 7, 2], target_ids=[2, 5, 9])
        _att_same(got, out)
        assert got.tokens == ["#5", "#6", "#7", "#2"]
        # no tokenizer: text is refused with the CLI's message
        with pytest.raises(attn.FileError, match="no tokenizer"):
            m.attention("hello")
        with pytest.raises(attn.FileError, match="no tokenizer"):
            m.translate(["hello"])


def test_hf_bad_input(nllb, marian):
    with pytest.raises(attn.InvalidArgumentError, match="xx_Nope"):
        nllb.translate(["a"], src_lang="xx_Nope")
    with pytest.raises(attn.InvalidArgumentError, match="xx_Nope"):
        nllb.attention("a", tgt_lang="xx_Nope")
    with pytest.raises(attn.InvalidArgumentError, match="src-lang"):
        marian.translate(["a"], src_lang="eng_Latn")
    with pytest.raises(attn.InvalidArgumentError, match="heuristic_stop"):
        marian.translate(["a"], heuristic_stop=True)
    with pytest.raises(attn.InvalidArgumentError, match="early_stopping"):
        marian.translate(["a"], early_stopping="sometimes")
    with pytest.raises(attn.InvalidArgumentError, match="UTF-8"):
        marian.translate([b"\xc3("])
    with pytest.raises(attn.InvalidArgumentError, match="one of them"):
        marian.attention()
