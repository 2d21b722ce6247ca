"""Shared fixtures: where the CLI, the models and the references are (tests/run.sh exports
ATTN_BUILD and ATTN_REF_DIR; run by hand, the defaults are the repository's build/)."""
import json
import os
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("ATTN_BUILD", os.path.join(ROOT, "build"))
REF = os.environ.get("ATTN_REF_DIR", os.path.join(BUILD, "ref"))
CLI = os.path.join(BUILD, "attn")
MODELS = os.path.join(ROOT, "models")

MINILM = os.path.join(MODELS, "all-MiniLM-L6-v2")
SMOLLM = os.path.join(MODELS, "SmolLM2-135M-Instruct")
SMOLLM_GGUF = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
DEMO = os.path.join(REF, "tiny-en-zh")  # attn's translator: tools/ref_tiny_translator.py
TINY_BERT = os.path.join(REF, "bert", "tiny")
TINY_GPT = os.path.join(REF, "generate", "hf")


def need(path, why="fetched by tools/install_deps.sh"):
    """Skip (as a missing-software skip) when path is absent."""
    if not os.path.exists(path):
        pytest.skip("%s missing (%s)" % (path, why))
    return path


def cli(*args, stdin=None, check=True):
    """Run build/attn; returns stdout (bytes)."""
    need(CLI, "make")
    p = subprocess.run([CLI] + [str(a) for a in args], input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise AssertionError("attn %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode,
                                                          p.stderr.decode(errors="replace")))
    return p


def cli_json_lines(*args, **kw):
    return [json.loads(l) for l in cli(*args, **kw).stdout.decode().splitlines() if l.strip()]


def same(a, b):
    """Bit-identical float arrays (shape, dtype and every bit)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.tobytes() == b.tobytes(), "max abs diff %g" % float(np.max(np.abs(a - b)))
