"""Reference kernel of ``TfIdfVectorizer``: n-gram counts of each row of X (``[C]`` or ``[B, C]``, int32/int64 or
strings) over a fixed pool, as float32 ``[out]`` / ``[B, out]`` with ``out = max(ngram_indexes) + 1``.

The pool (``pool_int64s`` or ``pool_strings``) holds the 1-grams, then the 2-grams, ... starting at the offsets
``ngram_counts``; pool n-gram ``i`` is counted in ``Y[ngram_indexes[i]]``.  Only n-grams with
``min_gram_length <= n <= max_gram_length`` count.  An n-gram of X starting at ``j`` with skip ``s`` is
``X[j], X[j + s + 1], ...``, for every ``s <= max_skip_count``; 1-grams are counted once (not per skip).
Then ``mode``: ``TF`` = counts; ``IDF`` = the n-gram's weight (``weights[i]`` for pool n-gram ``i``, default
1) where the count is non-zero, else 0; ``TFIDF`` = weight * count (onnxruntime's reading; onnx's reference
indexes ``weights`` by output coordinate instead).  A later duplicate of an n-gram in the pool
wins (onnxruntime's trie does the same).
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .registry import KernelError, reference

MODES = ("TF", "IDF", "TFIDF")


def _pool(attrs: dict) -> tuple[dict[tuple, int], int, int, int]:
    """(n-gram -> output coordinate, output size, min length, max length) after checking the attributes."""
    ints, strs = attrs.get("pool_int64s"), attrs.get("pool_strings")
    if (ints is None) == (strs is None):
        raise KernelError("TfIdfVectorizer: exactly one of pool_int64s and pool_strings must be set")
    pool = list(ints if ints is not None else strs)
    starts = [int(c) for c in attrs.get("ngram_counts", ())]
    indexes = [int(i) for i in attrs.get("ngram_indexes", ())]
    lo, hi = int(attrs.get("min_gram_length", 0)), int(attrs.get("max_gram_length", 0))
    if attrs.get("mode") not in MODES or not indexes or min(indexes) < 0 or not 1 <= lo <= hi:
        raise KernelError(f"TfIdfVectorizer: bad mode {attrs.get('mode')!r}, ngram_indexes or gram lengths "
                          f"{lo}..{hi}")
    weights = attrs.get("weights")
    if weights is not None and len(weights) != len(indexes):
        raise KernelError("TfIdfVectorizer: weights and ngram_indexes differ in length")
    table: dict[tuple, int] = {}
    ngram = 0
    for n, start in enumerate(starts, start=1):
        end = starts[n] if n < len(starts) else len(pool)
        if start > end or end > len(pool) or (end - start) % n:
            raise KernelError(f"TfIdfVectorizer: ngram_counts {starts} do not split a pool of {len(pool)}")
        for j in range(start, end, n):
            if ngram >= len(indexes):
                raise KernelError("TfIdfVectorizer: fewer ngram_indexes than pool n-grams")
            if lo <= n <= hi:
                table[tuple(pool[j:j + n])] = indexes[ngram]
            ngram += 1
    return table, max(indexes) + 1, lo, hi


def _check_input(x_type: DType, shape, attrs: dict) -> None:
    strings = attrs.get("pool_strings") is not None
    if len(shape) not in (1, 2) or (x_type is DType.string) != strings or \
            (not strings and x_type not in (DType.int32, DType.int64)):
        raise KernelError(f"TfIdfVectorizer: input {x_type.name}{list(shape)} must be a [C] or [B, C] tensor of "
                          f"{'strings' if strings else 'int32/int64'}")


def _infer_tfidf(node):
    x = node.inputs[0].type
    _check_input(x.dtype, x.shape, node.attrs)
    _, size, _, _ = _pool(node.attrs)
    return [TensorType(DType.float32, tuple(x.shape[:-1]) + (size,))]


def _count_row(row: list, table: dict, lo: int, hi: int, max_skip: int, counts: np.ndarray) -> None:
    for skip in range(max_skip + 1):
        step = skip + 1
        for n in range(max(lo, 1 if skip == 0 else 2), hi + 1):
            for j in range(len(row) - (n - 1) * step):
                k = table.get(tuple(row[j:j + (n - 1) * step + 1:step]))
                if k is not None:
                    counts[k] += 1


@reference("TfIdfVectorizer", infer=_infer_tfidf)
def tfidf_vectorizer(attrs, x):
    _check_input(DType.from_np(x.dtype), x.shape, attrs)
    table, size, lo, hi = _pool(attrs)
    rows = x.reshape(-1, x.shape[-1]) if x.size else np.zeros((int(np.prod(x.shape[:-1])), 0), x.dtype)
    counts = np.zeros((rows.shape[0], size), np.float32)
    to_key = str if x.dtype == object else int
    for r, row in enumerate(rows):
        _count_row([to_key(v) for v in row], table, lo, hi, int(attrs.get("max_skip_count", 0)), counts[r])
    weights = np.ones(size, np.float32)
    if attrs.get("weights") is not None:
        weights[np.asarray(attrs["ngram_indexes"], np.int64)] = np.asarray(attrs["weights"], np.float32)
    if attrs["mode"] == "IDF":
        counts = np.where(counts > 0, weights, np.float32(0)).astype(np.float32)
    elif attrs["mode"] == "TFIDF":
        counts = counts * weights
    return counts.reshape(x.shape[:-1] + (size,))
