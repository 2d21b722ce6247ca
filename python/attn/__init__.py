"""attn for Python: the attn Transformer engine (libattn, C11) without a subprocess.

numpy arrays in, numpy arrays out, and the same numbers as the ``attn`` command line on the same
inputs (each call runs the library code the matching CLI command runs)::

    import attn
    with attn.load("models/all-MiniLM-L6-v2") as m:       # BERT / sentence-transformers
        e = m.embed(["Knowledge is power.", "知识就是力量"])  # (2, 384) float32

    with attn.load("models/SmolLM2-135M-Instruct") as m:   # GPT-2 / the Llama family / GGUF
        for piece in m.generate("Once upon a time", max_tokens=20, greedy=True, stream=True):
            print(piece, end="")
        reply = m.chat([{"role": "user", "content": "Hi!"}], greedy=True)

    with attn.load("models/demo-en-zh") as m:              # attn's own translator
        m.translate(["Knowledge is power."], beam=4)       # ['知识就是力量。']

Models free their C state on ``close()`` (``with`` blocks call it) or when garbage collected.
attn computes with the GIL released, so Python threads run models in parallel. Failures raise
:class:`attn.Error` (a subclass per kind, e.g. :class:`attn.FileError`, also an ``OSError``)
whose message is attn's one-line error, as the CLI prints it after ``attn: error:``.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _attn
from ._attn import (Error, FileError, FormatError, InvalidArgumentError,  # noqa: F401
                    NotFoundError, OutOfMemoryError, TooLargeError, UnsupportedError)

__version__ = "0.1.0"
ATTN_VERSION = _attn.ATTN_VERSION

__all__ = [
    "load", "tokenizer", "explain", "bleu", "train", "set_num_threads", "get_num_threads",
    "Model", "Encoder", "Decoder", "Translator", "Tokenizer", "Generation", "Attention",
    "Explanation", "BLEU", "Error", "InvalidArgumentError", "OutOfMemoryError", "TooLargeError",
    "FileError", "FormatError", "NotFoundError", "UnsupportedError", "viz",
]


def set_num_threads(n: int) -> None:
    """Threads attn's kernels use (as ``attn --threads N``); n <= 0 restores the default."""
    _attn.set_num_threads(int(n))


def get_num_threads() -> int:
    """Threads attn's kernels use now."""
    return _attn.get_num_threads()


# ---- input checks ----------------------------------------------------------------------------

def _ids(ids: Any, what: str = "ids") -> np.ndarray:
    """A 1-D C-contiguous int32 copy of token ids (any integer dtype, a list, a tuple)."""
    a = np.asarray(ids)
    if a.dtype == object or (a.size and a.dtype.kind not in "iu"):
        raise TypeError("attn: %s must be integers, got dtype %s" % (what, a.dtype))
    if a.ndim != 1:
        raise ValueError("attn: %s must be 1-D (one sequence), got shape %s" % (what, a.shape))
    if a.size and (a.min() < 0 or a.max() > np.iinfo(np.int32).max):
        raise InvalidArgumentError("%s: ids must lie in [0, 2^31)" % what)
    return np.ascontiguousarray(a, dtype=np.int32)


def _f32(x: Any, ndim: int, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise TypeError("attn: %s must be a floating-point array, got dtype %s" % (what, a.dtype))
    if a.ndim != ndim:
        raise ValueError("attn: %s must be %d-D, got shape %s" % (what, ndim, a.shape))
    return np.ascontiguousarray(a, dtype=np.float32)


def _texts(texts: Union[str, bytes, Iterable[Union[str, bytes]]]) -> List[Union[str, bytes]]:
    if isinstance(texts, (str, bytes)):
        return [texts]
    out = list(texts)
    for t in out:
        if not isinstance(t, (str, bytes)):
            raise TypeError("attn: texts must be str (or UTF-8 bytes), got %s" % type(t).__name__)
    return out


def _path(path: Union[str, os.PathLike]) -> str:
    p = os.fspath(path)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    return p


# ---- objects with C state ----------------------------------------------------------------------

class _Owned:
    """Something holding a libattn handle: freed by close(), by ``with``, or when collected."""

    _h: Any = None

    def close(self) -> None:
        """Free the C state now (later calls raise ValueError). Idempotent."""
        if self._h is not None:
            _attn.close(self._h)

    @property
    def closed(self) -> bool:
        return self._h is None or not _attn.is_open(self._h)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Tokenizer(_Owned):
    """A tokenizer (tokenizer.json, a directory holding one, GPT-2's vocab.json + merges.txt, or
    a GGUF file) with the ids of Hugging Face's ``tokenizers`` (``attn tokenizer``)."""

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = _path(path)
        self._h = _attn.tok_open(self.path)
        self._info = _attn.tok_info(self._h)

    def encode(self, text: Union[str, bytes], add_special_tokens: bool = True) -> np.ndarray:
        """Token ids (int32, 1-D) of text, as ``attn tokenizer encode`` (the post-processor's
        special tokens included unless add_special_tokens is False). bytes must be UTF-8."""
        if not isinstance(text, (str, bytes)):
            raise TypeError("attn: encode takes one str (or UTF-8 bytes)")
        return np.frombuffer(_attn.tok_encode(self._h, text, add_special_tokens), dtype=np.int32)

    def decode(self, ids: Any, keep_special: bool = False) -> str:
        """Text of ids, as ``attn tokenizer decode`` (special tokens dropped unless
        keep_special)."""
        return _attn.tok_decode(self._h, _ids(ids), keep_special)

    @property
    def vocab_size(self) -> int:
        return self._info["vocab_size"]

    @property
    def special_ids(self) -> Dict[str, int]:
        """pad/unk/bos/eos/mask/cls/sep ids (-1 when the tokenizer has none)."""
        return {k[:-3]: v for k, v in self._info.items() if k.endswith("_id")}

    def id_to_token(self, id: int) -> Optional[str]:
        return _attn.tok_id_to_token(self._h, int(id))

    def token_to_id(self, token: str) -> int:
        """The id of a token string, or -1."""
        return _attn.tok_token_to_id(self._h, token)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return "attn.Tokenizer(%r, vocab_size=%d)" % (self.path, self.vocab_size)


def tokenizer(path: Union[str, os.PathLike]) -> Tokenizer:
    """Load a tokenizer (see :class:`Tokenizer`)."""
    return Tokenizer(path)


class Attention(dict):
    """Attention maps of one input: ``{"self.0": array (heads, Tq, Tk), ...}`` (names as
    ``attn attention --out`` writes them: "self.L" for GPT/BERT; "encoder.self.L",
    "decoder.self.L", "decoder.cross.L" for a translator), with the token labels in
    ``.tokens`` (the input / source), ``.target`` and ``.target_out`` (a translator's decoder
    inputs and the token each predicts; None otherwise). A Hugging Face translator's capture of
    its own translation also has ``.translation`` (the text) and ``.score``; else both None."""

    tokens: List[str]
    target: Optional[List[str]]
    target_out: Optional[List[str]]
    title: Optional[str]
    translation: Optional[str] = None
    score: Optional[float] = None

    def __init__(self, maps: Dict[str, np.ndarray], tokens: List[str],
                 target: Optional[List[str]] = None, target_out: Optional[List[str]] = None,
                 title: Optional[str] = None):
        super().__init__(maps)
        self.tokens, self.target, self.target_out, self.title = tokens, target, target_out, title

    @classmethod
    def _from_c(cls, t, title=None) -> "Attention":
        tokens, target, target_out, maps = t
        d = {}
        for kind, layer, H, Tq, Tk, data in maps:
            d["%s.%d" % (kind, layer)] = np.frombuffer(data, dtype=np.float32).reshape(H, Tq, Tk)
        return cls(d, tokens, target, target_out, title)

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "Attention":
        """Read a FILE.safetensors written by ``attn attention --out`` or :meth:`save`."""
        return cls._from_c(_attn.viz_load(_path(path)))

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write FILE.safetensors + FILE.json as ``attn attention --out`` does."""
        from . import viz
        viz._write("save", self, path)

    def __repr__(self) -> str:
        return "attn.Attention(%d maps over %d tokens%s)" % (
            len(self), len(self.tokens), "" if self.target is None else
            " and %d target positions" % len(self.target))


class Model(_Owned):
    """A loaded model (see :func:`load`). ``.config`` is a dict of its configuration (the
    fields attn reads; "model_type" says the family), ``.tokenizer`` its tokenizer."""

    kind: str = "?"

    def __init__(self, path: str):
        self.path = path
        self._tok: Optional[Tokenizer] = None
        self.config: Dict[str, Any] = {}

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer (loaded from the same path on first use)."""
        if self._tok is None:
            self._tok = Tokenizer(self.path)
        return self._tok

    def close(self) -> None:
        if self._tok is not None:
            self._tok.close()
        super().close()

    def _encode(self, text: Union[str, bytes]) -> np.ndarray:
        return self.tokenizer.encode(text)

    def __repr__(self) -> str:
        return "attn.%s(%r%s)" % (type(self).__name__, self.path, ", closed" if self.closed else "")


class Encoder(Model):
    """A BERT encoder: a sentence-transformers directory (all-MiniLM-L6-v2), a Hugging Face
    BERT directory, or a GGUF file (forward and attention only)."""

    kind = "bert"

    def __init__(self, path: str):
        super().__init__(path)
        self._h = _attn.bert_open(path)
        self.config = _attn.bert_info(self._h)

    def embed(self, texts: Union[str, bytes, Iterable[Union[str, bytes]]], batch_size: int = 32,
              precision: str = "f32") -> np.ndarray:
        """Sentence embeddings (n, dim) float32, row i for texts[i], exactly as ``attn embed``
        (pooling and normalization as the directory says). precision "bf16" needs a CPU with
        AVX512-BF16. Results do not depend on batch_size."""
        t = _texts(texts)
        info = _attn.bert_embed_info(self._h, int(batch_size), precision)
        out = np.empty((len(t), info["dim"]), dtype=np.float32)
        _attn.bert_embed(self._h, t, int(batch_size), precision, out)
        return out

    def embed_info(self) -> Dict[str, Any]:
        """What the directory says about embeddings: dim, max_seq_length, pooling, ..."""
        return _attn.bert_embed_info(self._h, 32, "f32")

    def forward(self, ids: Any, hidden_states: bool = False):
        """The last hidden states (T, hidden_size) float32 of one sequence of ids, as
        ``attn forward --out``; with hidden_states, also every layer's (L + 1, T, C) as
        ``--hidden-out`` (returned as a pair)."""
        a = _ids(ids)
        C, L = self.config["hidden_size"], self.config["num_hidden_layers"]
        out = np.empty((a.size, C), dtype=np.float32)
        hs = np.empty((L + 1, a.size, C), dtype=np.float32) if hidden_states else None
        _attn.bert_forward(self._h, a, out, hs)
        return (out, hs) if hidden_states else out

    def attention(self, text: Union[str, bytes, None] = None, ids: Any = None) -> Attention:
        """Every layer's attention (heads, T, T) for text (tokenized with [CLS] ... [SEP]) or
        ids, as ``attn attention``."""
        a = _ids(ids) if ids is not None else self._encode(_one(text))
        return Attention._from_c(_attn.bert_attention(self._h, a))


def _one(text):
    if text is None:
        raise TypeError("attn: give text or ids")
    if not isinstance(text, (str, bytes)):
        raise TypeError("attn: text must be str (or UTF-8 bytes)")
    return text


class Generation(_Owned):
    """The text of a generation, piece by piece, as it is produced (an iterator of str). Each
    piece is whole UTF-8 characters; joined they are the text ``attn generate --no-echo`` or
    ``attn chat`` prints. Closing it (or ``break`` + garbage collection) stops generation.
    ``.stats`` (after the end): tokens, timings, why it stopped, the seed used."""

    def __init__(self, h, model: "Decoder"):
        self._h = h
        self._model = model  # keeps the model alive while generating
        self.stats: Optional[Dict[str, Any]] = None
        self._done = False

    def __iter__(self) -> "Generation":
        return self

    def __next__(self) -> str:
        if self._done:
            raise StopIteration
        if self.closed:
            raise ValueError("attn: the generation is closed")
        piece = _attn.gen_next(self._h)
        if piece is None:
            self._done = True
            self.stats = _attn.gen_stats(self._h)
            raise StopIteration
        return piece

    def text(self) -> str:
        """Everything (the rest of the generation, joined)."""
        return "".join(self)


_GEN_KEYS = ("max_tokens", "temperature", "top_k", "top_p", "min_p", "repetition_penalty",
             "seed", "greedy", "stop", "ignore_eos")


class Decoder(Model):
    """A decoder: GPT-2 or the Llama family (Llama 2/3, TinyLlama, SmolLM2, Mistral, Qwen2,
    Qwen3), a Hugging Face directory or a GGUF file."""

    kind = "decoder"

    def __init__(self, path: str):
        super().__init__(path)
        self._h = _attn.gpt_open(path)
        self.config = _attn.gpt_info(self._h)

    def forward(self, ids: Any, hidden_states: bool = False):
        """Logits (T, vocab_size) float32 of one sequence of ids, as ``attn forward --out``;
        with hidden_states also (n_layer + 1, T, n_embd) as ``--hidden-out`` (a pair)."""
        a = _ids(ids)
        c = self.config
        out = np.empty((a.size, c["vocab_size"]), dtype=np.float32)
        hs = (np.empty((c["n_layer"] + 1, a.size, c["n_embd"]), dtype=np.float32)
              if hidden_states else None)
        _attn.gpt_forward(self._h, a, out, hs)
        return (out, hs) if hidden_states else out

    def generate(self, prompt: Union[str, Sequence[Dict[str, Any]]], max_tokens: Optional[int] = None,
                 temperature: Optional[float] = None, *, stream: bool = False,
                 top_k: Optional[int] = None, top_p: Optional[float] = None,
                 min_p: Optional[float] = None, repetition_penalty: Optional[float] = None,
                 seed: Optional[int] = None, greedy: Optional[bool] = None,
                 stop: Optional[Sequence[str]] = None, ignore_eos: bool = False,
                 **chat_options) -> Union[str, Generation]:
        """Continue prompt (a str), as ``attn generate --no-echo``; a list of chat messages
        goes to :meth:`chat`. Options are the CLI's (None: generation_config.json's, then
        attn's defaults; a sampling option asks for sampling; seed None: from the clock).
        Returns the text, or with stream=True a :class:`Generation` yielding pieces."""
        if not isinstance(prompt, (str, bytes)):
            return self.chat(prompt, max_tokens, temperature, stream=stream, top_k=top_k,
                             top_p=top_p, min_p=min_p, repetition_penalty=repetition_penalty,
                             seed=seed, greedy=greedy, stop=stop, ignore_eos=ignore_eos,
                             **chat_options)
        if chat_options:
            raise TypeError("attn: unexpected options %s" % sorted(chat_options))
        opts = dict(max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                    min_p=min_p, repetition_penalty=repetition_penalty, seed=seed, greedy=greedy,
                    stop=_stops(stop), ignore_eos=ignore_eos)
        g = Generation(_attn.gpt_generate(self._h, prompt, False, opts), self)
        return g if stream else _finish(g)

    def chat(self, messages: Sequence[Dict[str, Any]], max_tokens: Optional[int] = None,
             temperature: Optional[float] = None, *, stream: bool = False,
             template: Optional[str] = None, vars: Optional[Dict[str, Any]] = None,
             context: Optional[int] = None, **options) -> Union[str, Generation]:
        """The assistant's reply to messages ([{"role": "user", "content": "Hi"}, ...]) with the
        model's own chat template, as one line of ``attn chat --jsonl`` (the key/value cache is
        kept across calls, as there: a conversation that grows reruns only its new tokens).
        template: which named template; vars: more template variables (e.g.
        {"enable_thinking": False}); context: positions the conversation may use (default the
        model's, at most 4096). Other options as :meth:`generate`."""
        if isinstance(messages, (str, bytes)):
            raise TypeError("attn: chat takes a list of messages ({'role': ..., 'content': ...})")
        bad = set(options) - set(_GEN_KEYS)
        if bad:
            raise TypeError("attn: unexpected options %s" % sorted(bad))
        opts = dict(options, max_tokens=max_tokens, temperature=temperature, template=template,
                    vars=None if vars is None else json.dumps(vars, ensure_ascii=False),
                    context=context)
        opts["stop"] = _stops(opts.get("stop"))
        msgs = json.dumps(list(messages), ensure_ascii=False)
        g = Generation(_attn.gpt_generate(self._h, msgs, True, opts), self)
        return g if stream else _finish(g)

    def reset_chat(self) -> None:
        """Forget the chat's key/value cache (results do not change; the next turn reruns)."""
        _attn.gpt_chat_reset(self._h)

    def attention(self, text: Union[str, bytes, None] = None, ids: Any = None) -> Attention:
        """Every layer's causal attention (heads, T, T) for text or ids, as ``attn
        attention``."""
        a = _ids(ids) if ids is not None else self._encode(_one(text))
        return Attention._from_c(_attn.gpt_attention(self._h, a))


def _stops(stop):
    if stop is None:
        return None
    if isinstance(stop, (str, bytes)):
        return [stop]
    return list(stop)


def _finish(g: Generation) -> str:
    try:
        return g.text()
    finally:
        g.close()


class Translator(Model):
    """An encoder-decoder translator: attn's own (``attn train``; e.g. models/demo-en-zh), or a
    Hugging Face MarianMTModel / M2M100 (NLLB) directory (``config["model_type"]`` "marian" /
    "m2m_100": translated as ``attn translate --model DIR`` does, with the directory's
    tokenizer and generation_config.json)."""

    kind = "translator"

    def __init__(self, path: str):
        super().__init__(path)
        self._h = _attn.encdec_open(path)
        self.config = _attn.encdec_info(self._h)
        self.hf = self.config["model_type"] != "attn"

    def translate(self, texts: Union[str, bytes, Iterable[Union[str, bytes]]],
                  beam: Optional[int] = None, length_penalty: Optional[float] = None,
                  max_len: int = 0, max_len_ratio: float = 2.0, batch_size: int = 32,
                  heuristic_stop: bool = False, scores: bool = False,
                  src_lang: Optional[str] = None, tgt_lang: Optional[str] = None,
                  early_stopping: Union[bool, str, None] = None):
        """Translations of texts (a list of str; one str gives a list of one), as ``attn
        translate`` with the same options (beam 1 = greedy). With scores=True returns
        (translations, scores).

        attn's own translators: beam (default 4), length_penalty (0.6), max_len, max_len_ratio,
        heuristic_stop as the CLI's. Hugging Face directories (Marian, M2M100 / NLLB):
        transformers' generate with generation_config.json's settings, beam and length_penalty
        overriding them when given, max_len as ``--max-tokens``; src_lang / tgt_lang as
        ``--src-lang`` / ``--tgt-lang`` (NLLB codes such as "eng_Latn"; Marian's target
        ">>xx<<" token); early_stopping True, False or "never" as ``--early-stopping`` (True:
        CTranslate2's stopping rule)."""
        t = _texts(texts)
        early = {None: -1, False: 0, True: 1, "never": 2}.get(early_stopping, -2) \
            if isinstance(early_stopping, (bool, str, type(None))) else -2
        if early == -2:
            raise InvalidArgumentError("translate: early_stopping must be True, False, \"never\" "
                                       "or None")
        if not self.hf and early != -1:
            raise InvalidArgumentError("translate: early_stopping is for Hugging Face "
                                       "translation directories (heuristic_stop for attn's own)")
        if self.hf:
            if heuristic_stop or max_len_ratio != 2.0:
                raise InvalidArgumentError("translate: heuristic_stop and max_len_ratio are for "
                                           "attn's own translators")
            out, sc = _attn.hf_translate(self._h, t, 0 if beam is None else int(beam),
                                         _nan_if_none(length_penalty), early, int(max_len),
                                         int(batch_size), src_lang, tgt_lang)
            return (out, sc) if scores else out
        if src_lang is not None or tgt_lang is not None:
            raise InvalidArgumentError("translate: src_lang and tgt_lang are for Hugging Face "
                                       "translation directories (Marian, M2M100 / NLLB)")
        out, sc, _ = _attn.encdec_translate(self._h, t, 4 if beam is None else int(beam),
                                            0.6 if length_penalty is None else float(length_penalty),
                                            int(max_len), float(max_len_ratio), int(batch_size),
                                            bool(heuristic_stop))
        return (out, sc) if scores else out

    def attention(self, text: Union[str, bytes, None] = None, target: Union[str, bytes, None] = None,
                  ids: Any = None, target_ids: Any = None, beam: Optional[int] = None,
                  length_penalty: Optional[float] = None, src_lang: Optional[str] = None,
                  tgt_lang: Optional[str] = None) -> Attention:
        """Encoder self-, decoder self- and cross-attention of one sentence, as ``attn
        attention``: the source is text (its ids + </s>) or ids; the target text (<s> ids
        </s>) or target_ids, or, without either, the model's own translation (beam search:
        beam default 4, length_penalty 0.6).

        Hugging Face directories (Marian, M2M100 / NLLB): text through the directory's tokenizer
        (with src_lang / tgt_lang's language tokens, as ``attn translate``), target as the
        decoder start + the tokenizer's target ids, target_ids the whole decoder sequence (start
        included); without a target the source is translated with generation_config.json's
        settings (beam / length_penalty override them). Token labels are the SentencePiece
        pieces. The translation and its score are in ``.translation`` / ``.score`` (None when
        a target was given)."""
        if self.hf:
            if (text is None) == (ids is None):
                raise InvalidArgumentError("attention: give text or ids (one of them)")
            r, tr, sc = _attn.hf_attention(
                self._h, None if text is None else _one(text),
                None if ids is None else _ids(ids), None if target is None else _one(target),
                None if target_ids is None else _ids(target_ids, "target_ids"),
                0 if beam is None else int(beam), _nan_if_none(length_penalty), src_lang,
                tgt_lang)
            a = Attention._from_c(r)
            a.translation, a.score = tr, sc
            return a
        if src_lang is not None or tgt_lang is not None:
            raise InvalidArgumentError("attention: src_lang and tgt_lang are for Hugging Face "
                                       "translation directories (Marian, M2M100 / NLLB)")
        tok = self.tokenizer
        sp = tok.special_ids
        if ids is not None:
            src = _ids(ids)
        else:
            src = np.append(tok.encode(_one(text)), np.int32(sp["eos"])).astype(np.int32)
        tgt = None
        if target_ids is not None:
            tgt = _ids(target_ids, "target_ids")
        elif target is not None:
            tgt = np.concatenate([[sp["bos"]], tok.encode(_one(target)), [sp["eos"]]]).astype(np.int32)
        return Attention._from_c(_attn.encdec_attention(self._h, src, tgt,
                                                        4 if beam is None else int(beam),
                                                        0.6 if length_penalty is None
                                                        else float(length_penalty)))


def _nan_if_none(x: Optional[float]) -> float:
    return float("nan") if x is None else float(x)


def _model_kind(path: str) -> str:
    """Which family a path holds, as the CLI decides (attn attention's detect_family, plus the
    Hugging Face translators attn translate reads)."""
    if os.path.isfile(path):
        return "bert" if _attn.gguf_arch(path) == "bert" else "decoder"
    cfg = os.path.join(path, "config.json")
    try:
        with open(cfg, "rb") as f:
            root = json.loads(f.read())
    except FileNotFoundError:
        raise FileError("%s: cannot read the model's configuration (no such file)" % cfg) from None
    except OSError as e:
        raise FileError("%s: cannot read the model's configuration (%s)" % (cfg, e)) from None
    except ValueError as e:
        raise FormatError("%s: invalid JSON: %s" % (cfg, e)) from None
    if not isinstance(root, dict):
        raise FormatError("%s: not a JSON object" % cfg)
    mt = root.get("model_type")
    if "src_vocab" in root or mt in ("marian", "m2m_100"):
        return "translator"
    if mt in ("gpt2", "llama", "mistral", "qwen2", "qwen3"):
        return "decoder"
    if mt == "bert":
        return "bert"
    raise UnsupportedError(
        '%s: not a model attn reads (expected attn\'s encoder-decoder configuration with '
        '"src_vocab", or "model_type" "gpt2", "llama", "mistral", "qwen2", "qwen3", "bert", '
        '"marian" or "m2m_100"; got model_type %s)' % (cfg, mt if mt else "(none)"))


def load(path: Union[str, os.PathLike]) -> Union[Encoder, Decoder, Translator]:
    """Load any model attn reads: a directory (config.json decides: BERT / sentence-transformers
    -> :class:`Encoder`; GPT-2, Llama, Mistral, Qwen2, Qwen3 -> :class:`Decoder`; attn's own
    translator, Marian, M2M100/NLLB -> :class:`Translator`) or a GGUF file (its
    general.architecture: bert -> Encoder, else Decoder)."""
    p = _path(path)
    kind = _model_kind(p)
    return {"bert": Encoder, "decoder": Decoder, "translator": Translator}[kind](p)


# ---- the article's walk-through --------------------------------------------------------------

class Explanation(dict):
    """``attn explain`` as arrays: ``r["encoder"]`` (bidirectional) and ``r["decoder"]``
    (causal), each a dict of q, k, v (T, d_k); scores, scaled (−inf where masked), weights
    (T, T); output (T, d_k), all float32."""

    tokens: Optional[List[str]]


def explain(x: Any, w_q: Any, w_k: Any, w_v: Any, tokens: Optional[Sequence[str]] = None,
            png: Union[str, os.PathLike, None] = None, font: Optional[str] = None) -> Explanation:
    """Single-head self-attention step by step (include/attn_explain.h): x (T, d_model) and
    w_q, w_k, w_v (d_model, d_k) float arrays (the article's q = x·W_Q). png: also draw the
    four heatmaps as ``attn explain --png`` (tokens label them)."""
    xa = _f32(x, 2, "x")
    ws = [_f32(w, 2, n) for w, n in ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v"))]
    T, dm = xa.shape
    dk = ws[0].shape[1]
    for w, n in zip(ws, ("w_q", "w_k", "w_v")):
        if w.shape != (dm, dk):
            raise ValueError("attn: %s must be (d_model, d_k) = (%d, %d), got %s"
                             % (n, dm, dk, w.shape))
    if tokens is not None:
        tokens = list(tokens)
    r = _attn.explain(T, dm, dk, xa, ws[0], ws[1], ws[2],
                      None if png is None else _path(png), tokens, font)
    out = Explanation()
    for side in ("encoder", "decoder"):
        d = {}
        for k, b in r[side].items():
            cols = dk if k in ("q", "k", "v", "output") else T
            d[k] = np.frombuffer(b, dtype=np.float32).reshape(T, cols)
        out[side] = d
    out.tokens = tokens
    return out


# ---- BLEU ------------------------------------------------------------------------------------

class BLEU(dict):
    """Corpus BLEU as sacreBLEU 2.x computes it (``attn bleu --json``'s fields: score,
    precisions, bp, ratio, hyp_len, ref_len, counts, totals, ...); str() is its text line."""

    @property
    def score(self) -> float:
        return self["score"]

    def __str__(self) -> str:
        p = self["precisions"]
        return ("BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %d "
                "ref_len = %d)" % (self["score"], p[0], p[1], p[2], p[3], self["bp"],
                                   self["ratio"], self["hyp_len"], self["ref_len"]))


def bleu(hyps: Sequence[str], refs: Union[Sequence[str], Sequence[Sequence[str]]],
         tokenize: str = "zh", lowercase: bool = False) -> BLEU:
    """Corpus BLEU of hyps against refs: a list of reference sentences (one per hypothesis),
    or a list of such lists (several references per sentence), as ``attn bleu HYPS REFS...``
    (tokenize "zh" (default), "13a" or "none")."""
    hyps = _texts(hyps)
    refs = list(refs)
    if refs and isinstance(refs[0], (str, bytes)):
        refs = [refs]
    return BLEU(_attn.bleu(hyps, [_texts(r) for r in refs], tokenize, bool(lowercase)))


# ---- training --------------------------------------------------------------------------------

def train(data: Union[str, os.PathLike, None] = None, out: Union[str, os.PathLike, None] = None,
          arch: Optional[str] = None, progress: Optional[Callable[[Dict[str, float]], Any]] = None,
          **options) -> None:
    """``attn train`` with the same options, given as keywords: ``--time-budget 60`` is
    ``time_budget=60``, a flag such as ``--resume`` is ``resume=True``; arch "gpt" / "bert" /
    None (the translator). progress(info) is called at each progress line with its numbers
    (step, loss, lr, tokens_per_s, elapsed, eta); returning False stops the run as Ctrl-C does
    (the checkpoint is saved). The CLI's own lines go to the process's stdout. Raises
    attn.Error with the CLI's message on failure."""
    argv: List[str] = []
    if arch is not None:
        argv += ["--arch", str(arch)]
    if data is not None:
        argv += ["--data", _path(data)]
    if out is not None:
        argv += ["--out", _path(out)]
    for k, v in options.items():
        flag = "--" + k.replace("_", "-")
        if v is None or v is False:
            continue
        if v is True:
            argv.append(flag)
        elif isinstance(v, (list, tuple)):
            for item in v:
                argv += [flag, str(item)]
        else:
            argv += [flag, _path(v) if isinstance(v, os.PathLike) else str(v)]
    _attn.train(argv, progress)


from . import viz  # noqa: E402  (attn.viz.html / attn.viz.png)
