"""Reference kernel of ``Unique``: the distinct values (or, with ``axis``, the distinct slices along it) of X,
in ascending order (``sorted=1``, default) or in order of first occurrence (``sorted=0``), with three int64
outputs: ``indices`` (first occurrence of each in X), ``inverse_indices`` (for each element/slice of X, its
position in Y) and ``counts``.  Without ``axis`` X is flattened.  NaNs compare equal (one NaN entry).

The output length depends on the data, so unless X is a constant the inference raises DynamicShapeError and
the node runs with run-time shapes (its dtypes come from ``_DTYPE_RULES`` in registry.py).
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from .registry import DynamicShapeError, KernelError, normalize_axis, reference


def _infer_unique(node):
    x = node.inputs[0]
    if x.const is None:
        raise DynamicShapeError(f"Unique node {node.name!r}: the number of distinct values is known only at run "
                                "time")
    return [TensorType.of(o) for o in unique(node.attrs, x.const)][:len(node.outputs)]


@reference("Unique", infer=_infer_unique)
def unique(attrs, x):
    axis = attrs.get("axis")
    if axis is None:
        flat = x.reshape(-1)
    else:
        if x.ndim == 0:
            raise KernelError("Unique: axis given for a scalar input")
        axis = normalize_axis(int(axis), x.ndim, "Unique axis")
        flat = x
    if x.dtype == object:
        if axis is not None:
            raise KernelError("Unique: string tensors only without axis")
        flat = flat.astype(str)
    y, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True, return_counts=True,
                                          axis=None if axis is None else axis)
    inverse = inverse.reshape(-1)
    if not attrs.get("sorted", 1):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y, first, counts, inverse = np.take(y, order, axis=axis or 0), first[order], counts[order], rank[inverse]
    if x.dtype == object:
        y = y.astype(object)
    i64 = np.int64
    return y, first.astype(i64), inverse.astype(i64), counts.astype(i64)
