"""TfIdfVectorizer (ops/tfidf.py) against onnxruntime: int and string pools, 1-D and batched input, skips,
gram-length windows, the three modes with and without weights."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects

POOL_INTS = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 2, 3, 5]    # 1-grams [2 3 5 4], 2-grams (5 6)(7 8)(6 7)(2 2), 3-gram (3 5 2)
POOL_INTS = POOL_INTS[:12] + [3, 5, 2]
COUNTS = [0, 4, 12]
INDEXES = list(range(8)) + [9]
X = np.array([[1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8], [4, 5, 0, 6, 7, 2, 2, 3, 5, 2, 5, 6]], np.int64)


def attrs(mode="TF", lo=1, hi=3, skip=0, weights=None, strings=False):
    a = {"mode": mode, "min_gram_length": lo, "max_gram_length": hi, "max_skip_count": skip,
         "ngram_counts": COUNTS, "ngram_indexes": INDEXES}
    a["pool_strings" if strings else "pool_int64s"] = [f"w{v}" for v in POOL_INTS] if strings else POOL_INTS
    if weights is not None:
        a["weights"] = weights
    return a


@pytest.mark.parametrize("lo,hi", [(1, 1), (1, 2), (2, 2), (2, 3), (1, 3), (3, 3)])
@pytest.mark.parametrize("skip", [0, 1, 3, 9])
@pytest.mark.parametrize("x", [X, X[1], X.astype(np.int32)])
def test_tfidf_counts(lo, hi, skip, x):
    check("TfIdfVectorizer", {"x": x}, opset=9, **attrs(lo=lo, hi=hi, skip=skip))


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("weights", [None, [0.5, 1, 2, 3, 4, 5, 6, 7, 8.5]])
def test_tfidf_modes(mode, weights):
    check("TfIdfVectorizer", {"x": X}, opset=9, **attrs(mode=mode, skip=2, weights=weights))


def test_tfidf_strings():
    xs = np.vectorize(lambda v: f"w{v}", otypes=[object])(X)
    check("TfIdfVectorizer", {"x": xs}, opset=9, **attrs(strings=True, skip=1))
    check("TfIdfVectorizer", {"x": xs[0]}, opset=9, **attrs(strings=True, mode="TFIDF", weights=[2.0] * 9))


def test_tfidf_empty_and_short_rows():
    check("TfIdfVectorizer", {"x": np.zeros((0,), np.int64)}, opset=9, **attrs())
    check("TfIdfVectorizer", {"x": np.array([[2], [5]], np.int64)}, opset=9, **attrs(lo=1, hi=3, skip=4))


def test_tfidf_rejects():
    check_rejects("TfIdfVectorizer", {"x": X.astype(np.float32)}, **attrs())
    check_rejects("TfIdfVectorizer", {"x": X}, **attrs(strings=True))
    check_rejects("TfIdfVectorizer", {"x": X}, **attrs(mode="BM25"))
    check_rejects("TfIdfVectorizer", {"x": X}, **(attrs() | {"ngram_counts": [0, 5, 12]}))
    check_rejects("TfIdfVectorizer", {"x": X.reshape(2, 3, 4)}, **attrs())
