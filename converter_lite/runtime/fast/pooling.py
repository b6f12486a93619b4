"""2-D MaxPool/AveragePool, GlobalAveragePool/GlobalMaxPool and constant Pad writing into the plan's buffers.

float32 pools run on the native pooling driver where the model's native code has it (kernels/pool2d/: the
pools of models with dynamic input dims, which run node by node); otherwise, and for the other dtypes, the numpy
passes below.  The results equal the reference kernels':

* MaxPool runs as whole-buffer passes (maxpool.py: rows, then columns; NaN inputs fall back to the
  reference per channel block), split over ``num_threads`` by channel blocks for inputs of at least
  ``PARALLEL_BYTES``.  Only when the Indices output is not requested.
* AveragePool copies the input into a zero border (which also covers ``ceil_mode``'s overhang), sums the
  ``kh*kw`` strided tap views of that buffer in the reference's order and divides by the per-position count
  (``count_include_pad``), split over ``num_threads`` by channel blocks.
* GlobalAveragePool is numpy's ``mean`` over the spatial axes (spelled out as a sum over each contiguous
  plane, then the division by the count); GlobalMaxPool has no numpy path here (the reference kernel); Pad is
  pad.py's (kept in this table).
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ...kernels.pool2d.bind import global_pool, window_pool
from ...ops.nn_pool import _axis_counts
from ...ops.nn_window import resolve_window
from ...ops.registry import KernelError
from ..program import Impl, NodeCtx
from .conv import Padder
from .maxpool import MaxPool2D
from .pad import constant_pad
from .parallel import parallel_calls, sequence, split_rows

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
PARALLEL_BYTES = 1 << 20     # MaxPool inputs (per image) at least this large are split over the threads


def _window(ctx: NodeCtx):
    x = ctx.value(0)
    if len(x.shape) != 4 or "kernel_shape" not in ctx.attrs or ctx.out().dtype != x.dtype:
        return None
    try:
        win = resolve_window(ctx.node.op, ctx.attrs, tuple(x.shape[2:]), tuple(int(k) for k in ctx.attrs["kernel_shape"]),
                             ceil_mode=bool(ctx.attrs.get("ceil_mode", 0)))
    except KernelError:
        return None
    if tuple(x.shape[:2]) + tuple(win.out) != ctx.out().shape:
        return None
    return win


def _padded(x_shape, win):
    """(pads top/left/bottom/right, padded H, W) covering every window, overhang included."""
    need = [max(o - 1, 0) * s + e for o, s, e in zip(win.out, win.strides, win.effective)]
    pb = win.pads_begin
    pe = [max(0, need[i] - pb[i] - x_shape[2 + i]) for i in range(2)]
    return (pb[0], pb[1], pe[0], pe[1]), x_shape[2] + pb[0] + pe[0], x_shape[3] + pb[1] + pe[1]


def _taps(xp, win):
    (oh, ow), (sh, sw), (dh, dw) = win.out, win.strides, win.dilations
    return [xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
            for i in range(win.kernel[0]) for j in range(win.kernel[1])]


def _native(bind) -> Impl | None:
    return None if bind is None else Impl(bind=bind)


def _pool(kind: str):
    def factory(ctx: NodeCtx):
        native = _native(window_pool(ctx))
        if native is not None:
            return native
        x = ctx.value(0)
        if (kind == "max" and len(ctx.outs) != 1) or x.dtype not in FLOATS and kind == "avg" \
                or x.dtype.kind not in "fiu":
            return None
        win = _window(ctx)
        if win is None or min(win.pads_begin + win.pads_end) < 0:
            return None
        n, c = x.shape[:2]
        if kind == "max":
            return _max_impl(x, win, ctx.attrs)
        pads, hp, wp = _padded(x.shape, win)
        count = _axis_counts(win, x.shape[2:], bool(ctx.attrs.get("count_include_pad", 0))).astype(x.dtype)
        xbytes = c * hp * wp * x.dtype.itemsize

        def bind(ins, outs, ws, nt=1):
            xp = ws[:xbytes].view(x.dtype).reshape(c, hp, wp)
            padder = Padder(xp, pads, x.shape[2], x.shape[3], 0)
            steps = []
            for b in range(n):
                parts = [_pool_part(padder.part(c0, c1, ins[0][b]), _taps(xp[c0:c1], win), outs[0][b, c0:c1], count)
                         for c0, c1 in split_rows(c, 2 * nt if nt > 1 else 1, 1)]
                steps.append(parallel_calls(parts, nt))
            return sequence(steps)
        return Impl(bind=bind, workspace=xbytes + 64)
    return factory


def _max_impl(x, win, attrs) -> Impl:
    """MaxPool by flat passes (maxpool.py), split by channel blocks over the threads for large inputs."""
    n, c = x.shape[:2]
    pool = MaxPool2D(tuple(x.shape[1:]), win, x.dtype, dict(attrs))
    big = c * x.shape[2] * x.shape[3] * x.dtype.itemsize >= PARALLEL_BYTES

    def bind(ins, outs, ws, nt=1):
        blocks = split_rows(c, 2 * nt if nt > 1 and big and c > 1 else 1, 1)
        steps = [parallel_calls([pool.part(c0, c1, ins[0][b], outs[0][b], ws) for c0, c1 in blocks], nt)
                 for b in range(n)]
        return sequence(steps)
    return Impl(bind=bind, workspace=pool.workspace)


def _pool_part(pad, taps, out, count):
    """AveragePool of one channel block: the taps summed in the reference's order, divided by the counts."""
    first, rest = taps[0], taps[1:]

    def run_avg():
        pad()
        np.copyto(out, first)
        for t in rest:
            np.add(out, t, out=out)
        np.divide(out, count, out=out)
    return run_avg


def _global_avg(ctx: NodeCtx):
    native = _native(global_pool(ctx))
    if native is not None:
        return native
    x = ctx.value(0)
    if x.dtype not in FLOATS or len(x.shape) < 3 or ctx.out().dtype != x.dtype:
        return None
    axes = tuple(range(2, len(x.shape)))
    rows, size = math.prod(x.shape[:2]), math.prod(x.shape[2:])

    def bind(ins, outs, ws, nt=1):
        src, out = ins[0], outs[0]
        if not (src.flags.c_contiguous and out.flags.c_contiguous) or size == 0:
            return partial(np.mean, src, axis=axes, keepdims=True, out=out)
        # what np.mean does on a contiguous array (one pairwise sum per row, then the division), minus its
        # argument handling
        flat, res, count = src.reshape(rows, size), out.reshape(rows), x.dtype.type(size)

        def run():
            np.add.reduce(flat, axis=1, out=res)
            np.divide(res, count, out=res)
        return run
    return Impl(bind=bind)


POOL_FAST = {"MaxPool": _pool("max"), "AveragePool": _pool("avg"), "GlobalAveragePool": _global_avg,
             "GlobalMaxPool": lambda ctx: _native(global_pool(ctx)), "Pad": constant_pad}
