"""Transpose through the native driver (emit.py): the permuted view's dims merged and squeezed to at most
``RANK``, one record per bind.

``transpose_step(address, x, y, perm, nt)`` -> the bound step copying ``x.transpose(perm)`` into ``y``, or None
(not 4-byte elements, not C-contiguous, more than ``RANK`` dims once merged: the numpy copy runs).
"""
from __future__ import annotations

import numpy as np

from ..native_call import call_driver, data_address
from .abi import EXTRA, FIELDS, RANK


def merged_dims(shape: tuple, strides: tuple) -> tuple[list[int], list[int]]:
    """The output dims and their input strides (elements) with size-1 dims dropped and each dim merged into
    the one before it where the input holds them contiguously too (the same element order)."""
    dims: list[int] = []
    steps: list[int] = []
    for n, s in zip(shape, strides):
        if n == 1:
            continue
        if dims and steps[-1] == s * n:
            dims[-1] *= n
            steps[-1] = s
        else:
            dims.append(n)
            steps.append(s)
    return dims, steps


def transpose_step(address: int, x: np.ndarray, y: np.ndarray, perm: tuple, nt: int):
    """The bound step (see the module doc), or None."""
    if x.dtype.itemsize != 4 or y.dtype != x.dtype or not (x.flags.c_contiguous and y.flags.c_contiguous):
        return None
    view = x.transpose(perm)
    if view.shape != y.shape or y.size == 0:
        return None
    dims, steps = merged_dims(view.shape, tuple(s // 4 for s in view.strides))
    if len(dims) > RANK:
        return None
    pad = RANK - len(dims)
    dims, steps = [1] * pad + dims, [0] * pad + steps
    desc = np.zeros(len(FIELDS) + EXTRA, np.int64)
    desc[:2 * RANK] = dims + steps
    desc[2 * RANK:2 * RANK + 2] = data_address(x), data_address(y)
    return call_driver(address, desc, max(1, nt), (x, y, desc))
