"""Reference kernels of the string ops.  String tensors are numpy object arrays of Python ``str``
(``DType.string``).  All OPAQUE.

* ``StringConcat(X, Y)``: elementwise ``x + y`` with numpy broadcasting.
* ``RegexFullMatch(X)``: bool, whether each element matches ``pattern`` entirely (Python ``re`` syntax, which
  covers the RE2 patterns ONNX asks for; a pattern ``re`` rejects is a KernelError).
* ``StringSplit(X)``: ``Y[..., k]`` is the k-th piece of ``x.split(delimiter, maxsplit)`` padded with "" to the
  longest split, ``Z`` (int64, X's shape) the number of pieces; an empty string has no pieces (as in
  onnxruntime).  No (or an empty) ``delimiter`` splits on runs of whitespace and drops leading/trailing
  whitespace, also from the unsplit remainder left by ``maxsplit`` (onnxruntime splits on spaces only; any
  Unicode whitespace counts here, as the spec says).  Y's last dim depends on the data: the inference raises
  DynamicShapeError unless X is constant.
* ``StringNormalizer(X)`` on ``[C]`` or ``[1, C]``: drops the elements equal to one of ``stopwords`` (compared
  case-insensitively unless ``is_case_sensitive``), then applies ``case_change_action`` (``LOWER``/``UPPER``
  character by character with Unicode's simple case mapping, like ``towlower`` in a UTF-8 locale: "ß" stays;
  ``NONE``; ``locale`` is ignored).  If every element is dropped the
  result is ``[""]`` (``[[""]]`` for ``[1, C]``), as onnxruntime does.  With stopwords the length depends on
  the data (DynamicShapeError unless X is constant).
"""
from __future__ import annotations

import re
import unicodedata

import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .registry import DynamicShapeError, KernelError, broadcast_shapes, reference


def _strings(op: str, *types) -> None:
    for t in types:
        if t.dtype is not DType.string:
            raise KernelError(f"{op}: inputs must be string tensors, got {t.dtype.name}")


def _as_str(x: np.ndarray) -> np.ndarray:
    if x.dtype != object and x.dtype.kind not in "US":
        raise KernelError(f"expected a string tensor, got {x.dtype}")
    return x


def _vectorize(fn, x: np.ndarray, otype) -> np.ndarray:
    out = np.empty(x.shape, otype)
    flat_in, flat_out = x.reshape(-1), out.reshape(-1)
    for i, s in enumerate(flat_in):
        flat_out[i] = fn(str(s))
    return out


# -- StringConcat ------------------------------------------------------------------------------------------------
def _infer_concat(node):
    a, b = node.inputs[0].type, node.inputs[1].type
    _strings("StringConcat", a, b)
    return [TensorType(DType.string, broadcast_shapes(a.shape, b.shape))]


@reference("StringConcat", infer=_infer_concat)
def string_concat(attrs, x, y):
    x, y = np.broadcast_arrays(_as_str(x), _as_str(y))
    out = np.empty(x.shape, object)
    for idx in np.ndindex(x.shape):
        out[idx] = str(x[idx]) + str(y[idx])
    return out


# -- RegexFullMatch ----------------------------------------------------------------------------------------------
def _regex(attrs: dict) -> re.Pattern:
    if "pattern" not in attrs:
        raise KernelError("RegexFullMatch: attribute pattern is required")
    try:
        return re.compile(attrs["pattern"])
    except re.error as e:
        raise KernelError(f"RegexFullMatch: invalid pattern {attrs['pattern']!r}: {e}") from None


def _infer_regex(node):
    _strings("RegexFullMatch", node.inputs[0].type)
    _regex(node.attrs)
    return [TensorType(DType.bool, node.inputs[0].type.shape)]


@reference("RegexFullMatch", infer=_infer_regex)
def regex_full_match(attrs, x):
    pattern = _regex(attrs)
    return _vectorize(lambda s: pattern.fullmatch(s) is not None, _as_str(x), np.bool_)


# -- StringSplit -------------------------------------------------------------------------------------------------
def _infer_split(node):
    x = node.inputs[0]
    _strings("StringSplit", x.type)
    if x.const is None:
        raise DynamicShapeError(f"StringSplit node {node.name!r}: the number of pieces is known only at run time")
    return [TensorType.of(o) for o in string_split(node.attrs, x.const)][:len(node.outputs)]


def _split(s: str, sep: str | None, maxsplit: int) -> list[str]:
    if not s:
        return []
    pieces = s.split(sep, maxsplit)
    if sep is None and pieces:
        pieces[-1] = pieces[-1].rstrip()        # the unsplit remainder loses its trailing whitespace too
    return pieces


@reference("StringSplit", infer=_infer_split)
def string_split(attrs, x):
    sep = attrs.get("delimiter") or None
    maxsplit = attrs.get("maxsplit")
    maxsplit = -1 if maxsplit is None else int(maxsplit)
    pieces = [_split(str(s), sep, maxsplit) for s in _as_str(x).reshape(-1)]
    width = max((len(p) for p in pieces), default=0)
    y = np.empty((len(pieces), width), object)
    y[...] = ""
    for i, p in enumerate(pieces):
        y[i, :len(p)] = p
    z = np.array([len(p) for p in pieces], np.int64).reshape(x.shape)
    return y.reshape(x.shape + (width,)), z


# -- StringNormalizer --------------------------------------------------------------------------------------------
def _per_char(fn):
    """A length-preserving case mapping: a character whose full mapping is one character plus combining marks
    ("İ" -> "i" + dot) maps to that character, one that maps to several letters ("ß" -> "SS") is kept."""
    def one(ch: str) -> str:
        m = fn(ch)
        if len(m) == 1:
            return m
        return m[0] if all(unicodedata.combining(c) for c in m[1:]) else ch

    def mapped(s: str) -> str:
        return "".join(one(ch) for ch in s)
    return mapped


_CASE = {"NONE": lambda s: s, "LOWER": _per_char(str.lower), "UPPER": _per_char(str.upper)}


def _check_normalizer(attrs: dict, shape) -> None:
    if len(shape) not in (1, 2) or (len(shape) == 2 and shape[0] != 1):
        raise KernelError(f"StringNormalizer: input must be [C] or [1, C], got {list(shape)}")
    if attrs.get("case_change_action", "NONE") not in _CASE:
        raise KernelError(f"StringNormalizer: case_change_action {attrs['case_change_action']!r} is not one of "
                          f"{list(_CASE)}")


def _infer_normalizer(node):
    x = node.inputs[0]
    _strings("StringNormalizer", x.type)
    _check_normalizer(node.attrs, x.type.shape)
    if not node.attrs.get("stopwords"):
        return [x.type]
    if x.const is None:
        raise DynamicShapeError(f"StringNormalizer node {node.name!r}: removing stopwords gives a length known "
                                "only at run time")
    return [TensorType.of(string_normalizer(node.attrs, x.const))]


@reference("StringNormalizer", infer=_infer_normalizer)
def string_normalizer(attrs, x):
    _check_normalizer(attrs, x.shape)
    words = [str(s) for s in _as_str(x).reshape(-1)]
    stops = attrs.get("stopwords") or ()
    if attrs.get("is_case_sensitive", 0):
        words = [w for w in words if w not in set(stops)]
    else:
        lower = _CASE["LOWER"]
        folded = {lower(s) for s in stops}
        words = [w for w in words if lower(w) not in folded]
    change = _CASE[attrs.get("case_change_action", "NONE")]
    out = np.array([change(w) for w in words] or [""], dtype=object)
    return out.reshape((1, -1)) if x.ndim == 2 else out
