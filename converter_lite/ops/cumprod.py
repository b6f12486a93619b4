"""Reference kernel of ``CumProd`` (opset 26): the running product along ``axis`` (input 1, a constant
one-element tensor), inclusive or ``exclusive`` (the first product is 1), optionally from the end (``reverse``).

Every partial product is rounded to the input type, as a sequential scan in that type does (float16 included);
integers wrap.  OPAQUE, like CumSum.
"""
from __future__ import annotations

import numpy as np

from .registry import KernelError, infer_same, normalize_axis, reference


def _axis(axis, rank: int) -> int:
    if axis is None or np.size(axis) != 1:
        raise KernelError(f"CumProd axis must be a one-element tensor, got {None if axis is None else np.shape(axis)}")
    if rank == 0:
        raise KernelError("CumProd input must have rank >= 1")
    return normalize_axis(int(np.ravel(axis)[0]), rank, "CumProd axis")


def _infer_cum_prod(node):
    _axis(node.inputs[1].const, node.inputs[0].type.rank)
    return infer_same(node)


@reference("CumProd", infer=_infer_cum_prod, static_inputs=(1,))
def cum_prod(attrs, x, axis):
    ax = _axis(axis, x.ndim)
    w = np.flip(x, ax) if attrs.get("reverse", 0) else x
    if attrs.get("exclusive", 0) and x.shape[ax]:
        first = np.ones_like(np.take(w, [0], axis=ax))
        w = np.concatenate([first, np.take(w, np.arange(x.shape[ax] - 1), axis=ax)], axis=ax)
    with np.errstate(all="ignore"):
        c = np.cumprod(w, axis=ax, dtype=x.dtype)
    return np.ascontiguousarray(np.flip(c, ax) if attrs.get("reverse", 0) else c)
