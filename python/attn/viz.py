"""Pictures of attention maps: ``attn.viz.html`` (the self-contained viewer of ``attn attention
--html``) and ``attn.viz.png`` (the heatmaps of ``--png``), from an :class:`attn.Attention`
(or any mapping "KIND.LAYER" -> (heads, Tq, Tk) array with ``.tokens``, or with tokens given)."""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from . import _attn


def _maps(att: Mapping[str, Any]):
    out = []
    for name, a in att.items():
        kind, _, layer = name.rpartition(".")
        if not kind or not layer.isdigit():
            raise ValueError("attn.viz: map names are KIND.LAYER (e.g. 'self.0', "
                             "'decoder.cross.2'), got %r" % name)
        arr = np.asarray(a)
        if arr.dtype.kind != "f" or arr.ndim != 3:
            raise ValueError("attn.viz: map %r must be a float (heads, Tq, Tk) array, got %s %s"
                             % (name, arr.dtype, arr.shape))
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        out.append((kind, int(layer), arr.shape[0], arr.shape[1], arr.shape[2], arr))
    return out


def _write(what: str, att: Mapping[str, Any], path: Union[str, os.PathLike],
           tokens: Optional[Sequence[str]] = None, target: Optional[Sequence[str]] = None,
           target_out: Optional[Sequence[str]] = None, title: Optional[str] = None,
           kind: str = "", mode: str = "mean", layer: int = -1, head: int = 0, query: int = 0,
           cell: int = 0, values: bool = False, font: Optional[str] = None) -> None:
    tokens = tokens if tokens is not None else getattr(att, "tokens", None)
    if tokens is None:
        raise ValueError("attn.viz: no token labels (give tokens=...)")
    target = target if target is not None else getattr(att, "target", None)
    target_out = target_out if target_out is not None else getattr(att, "target_out", None)
    title = title if title is not None else getattr(att, "title", None)
    _attn.viz_write(what, os.fspath(path), title, list(tokens),
                    None if target is None else list(target),
                    None if target_out is None else list(target_out), _maps(att), kind, mode,
                    int(layer), int(head), int(query), int(cell), bool(values), font)


def html(att: Mapping[str, Any], path: Union[str, os.PathLike], **labels) -> None:
    """Write the self-contained HTML viewer (head view, model view, cross-attention) as
    ``attn attention --html PATH``. labels: tokens, target, target_out, title overrides."""
    _write("html", att, path, **labels)


def png(att: Mapping[str, Any], path: Union[str, os.PathLike], kind: str = "",
        mode: str = "mean", layer: int = -1, head: int = 0, query: int = 0, cell: int = 0,
        values: bool = False, font: Optional[str] = None, **labels) -> None:
    """Draw heatmaps as ``attn attention --png PATH``: kind ("self", "encoder.self",
    "decoder.self", "decoder.cross"; default: cross-attention when there is one, else the first
    map's), mode "head" | "mean" | "grid" | "query", layer (< 0: the last, or every layer for
    grid/query), head, query (the query position), cell pixels (0: automatic), values (print
    each value), font (a TrueType/OpenType file; default Noto CJK)."""
    _write("png", att, path, kind=kind, mode=mode, layer=layer, head=head, query=query,
           cell=cell, values=values, font=font, **labels)
