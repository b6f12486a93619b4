"""Softmax and LayerNormalization writing into the plan's buffers, with the reference kernels' exact sequence
of numpy operations (``ops/reduce.py`` ``_softmax``, ``ops/nn_norm.py`` ``layer_normalization``), so results are
bit-identical; temporaries live in the plan's scratch area.
"""
from __future__ import annotations

import math

import numpy as np

from ...ops.registry import normalize_axis
from ..program import Impl, NodeCtx

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _carve(ws: np.ndarray, at: int, shape, dtype) -> tuple[np.ndarray, int]:
    n = math.prod(shape) * dtype.itemsize
    return ws[at:at + n].view(dtype).reshape(shape), at + (n + 63) // 64 * 64


def _softmax(ctx: NodeCtx):
    """exp(x - max(x)) / sum(...) along one axis (opset 13)."""
    x = ctx.value(0)
    if x.dtype not in FLOATS or ctx.out().dtype != x.dtype or not x.shape or 0 in x.shape \
            or ctx.out().shape != x.shape:
        return None
    axis = normalize_axis(ctx.attrs.get("axis", -1), len(x.shape))
    red = tuple(1 if i == axis else d for i, d in enumerate(x.shape))

    def bind(ins, outs, ws, nt=1):
        xi, o = ins[0], outs[0]
        m, _ = _carve(ws, 0, red, x.dtype)

        def run():
            np.max(xi, axis=axis, keepdims=True, out=m)
            np.subtract(xi, m, out=o)
            np.exp(o, out=o)
            np.sum(o, axis=axis, keepdims=True, out=m)
            np.divide(o, m, out=o)
        return run
    return Impl(bind=bind, inplace=(0,), workspace=math.prod(red) * x.dtype.itemsize + 64)


def _layer_norm(ctx: NodeCtx):
    """(x - mean) * (1 / sqrt(var + eps)) * scale + b over the trailing axes from ``axis``; one output only."""
    x = ctx.value(0)
    if (len(ctx.outs) != 1 or x.dtype not in FLOATS or ctx.out().dtype != x.dtype or not x.shape
            or ctx.dtype(1) != x.dtype or (ctx.value(2) is not None and ctx.dtype(2) != x.dtype)
            or ctx.out().shape != x.shape):
        return None
    axis = normalize_axis(int(ctx.attrs.get("axis", -1)), len(x.shape))
    axes = tuple(range(axis, len(x.shape)))
    red = tuple(x.shape[:axis]) + (1,) * (len(x.shape) - axis)
    eps = np.asarray(float(ctx.attrs.get("epsilon", 1e-5)), x.dtype)
    has_bias = ctx.value(2) is not None

    def bind(ins, outs, ws, nt=1):
        xi, scale, bias, o = ins[0], ins[1], ins[2] if has_bias else None, outs[0]
        mean, at = _carve(ws, 0, red, x.dtype)
        var, at = _carve(ws, at, red, x.dtype)
        sq, _ = _carve(ws, at, x.shape, x.dtype)

        def run():
            np.mean(xi, axis=axes, keepdims=True, out=mean)
            np.subtract(xi, mean, out=o)
            np.multiply(o, o, out=sq)
            np.mean(sq, axis=axes, keepdims=True, out=var)
            np.add(var, eps, out=var)
            np.sqrt(var, out=var)
            np.divide(1.0, var, out=var)
            np.multiply(o, var, out=o)
            np.multiply(o, scale, out=o)
            if bias is not None:
                np.add(o, bias, out=o)
        return run
    n_red = math.prod(red) * x.dtype.itemsize
    return Impl(bind=bind, inplace=(0,), workspace=2 * (n_red + 64) + x.nbytes + 64)


NORM_FAST = {"Softmax": _softmax, "LayerNormalization": _layer_norm}
