"""Strided copies as copies of contiguous runs: one numpy ``void`` item per run, one memcpy per item.

numpy copies an array view with one inner-loop call per innermost row (~20 ns each).  When the trailing axes of
both the source and the destination view are C-contiguous (a row of a padded image, the kept trailing axes of a
Transpose, a slice along an outer axis), ``run_copy(dst, src)`` views those axes as one void item and copies
the leading axes' items instead: a (C, H, W) interior of a padded buffer is C*H items of W elements, moved by
one loop.  Bytes are copied unchanged, so the result equals ``np.copyto(dst, src)`` for same-dtype arrays.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

MIN_RUN_BYTES = 16          # shorter runs: numpy's own strided loop is as fast


def _contiguous_tail(a: np.ndarray) -> int:
    """The smallest axis ``k`` such that axes ``k..`` of ``a`` are C-contiguous (``a.ndim`` if none are)."""
    expect = a.dtype.itemsize
    k = a.ndim
    while k > 0 and (a.shape[k - 1] == 1 or a.strides[k - 1] == expect):
        expect *= a.shape[k - 1]
        k -= 1
    return k


class _Memory:
    """Exposes ``iface`` (an ``__array_interface__``) while keeping ``owner``'s memory alive."""

    def __init__(self, owner: np.ndarray, iface: dict):
        self.owner, self.__array_interface__ = owner, iface


def as_runs(a: np.ndarray, k: int) -> np.ndarray:
    """``a`` over its first ``k`` axes, each item one void run of its (C-contiguous) axes ``k..``."""
    run = a.dtype.itemsize * math.prod(a.shape[k:])
    iface = {"version": 3, "shape": a.shape[:k], "strides": a.strides[:k], "typestr": f"|V{run}",
             "data": (a.__array_interface__["data"][0], not a.flags.writeable)}
    return np.asarray(_Memory(a, iface))


def run_copy(dst: np.ndarray, src: np.ndarray):
    """A zero-argument callable doing ``np.copyto(dst, src)`` (same dtype, same shape), by void runs when both
    share a C-contiguous tail of at least ``MIN_RUN_BYTES`` bytes."""
    if dst.dtype != src.dtype or dst.shape != src.shape or dst.dtype.hasobject:
        return partial(np.copyto, dst, src)
    k = max(_contiguous_tail(dst), _contiguous_tail(src))
    run = dst.dtype.itemsize * math.prod(dst.shape[k:])
    if k == dst.ndim or run < MIN_RUN_BYTES or 0 in dst.shape:
        return partial(np.copyto, dst, src)
    return partial(np.copyto, as_runs(dst, k), as_runs(src, k))
