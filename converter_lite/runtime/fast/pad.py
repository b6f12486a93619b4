"""Constant Pad writing into the plan's output buffer with few numpy calls.

Let ``k`` be the innermost axis with any padding.  In the input, each index over the axes before ``k`` owns one
contiguous *run* (its slice along ``k`` and every inner axis); in the output that run is contiguous too, at a
fixed stride.  The interior is copied run by run (runs.py: one memcpy per run instead of one numpy
inner-loop call per row of the innermost axis).  When only the last two axes are padded, the padding is the gaps between interior rows
and between planes, copied from a prepared array of the pad value as two arrays of void items (a void fill
broadcasting one item is slower than that copy); otherwise it is the slabs outside the interior along each
padded axis, one ``fill`` each.  Every run rewrites the padding (the output's bytes may hold other values
between runs: the arena shares them).
All-zero pads are a view (no step); other Pad modes are precomputed gathers (gather.py).
"""
from __future__ import annotations

import math

import numpy as np

from ...ops.registry import KernelError
from ...ops.tensor_pad import pad_amounts
from ..program import Impl, NodeCtx, ViewOf
from .gather import PAD_GATHER
from .runs import as_runs, run_copy


def _plane_gaps(o: np.ndarray, amounts, x_shape, value):
    """When only the last two axes are padded: the padding of the C-contiguous ``o`` as (void view, source)
    pairs, each copied by one ``np.copyto``.  In memory the padding is the gaps between interior rows: the
    right pad of a row and the left pad of the next one (one ``pl + pr`` item per row boundary), and between
    planes the last plane's bottom rows with the next plane's top rows (one item per plane boundary); the
    head and tail of the buffer are plain slices.  None for other paddings or layouts."""
    nd = len(amounts)
    if nd < 2 or any(a != (0, 0) for a in amounts[:-2]) or not o.flags.c_contiguous:
        return None
    (pt, pb), (pl, pr) = amounts[-2:]
    h, w = x_shape[-2:]
    hp, wp = o.shape[-2:]
    planes = math.prod(o.shape[:-2])
    isz, flat = o.dtype.itemsize, o.reshape(-1)
    plane = hp * wp
    head, tail = pt * wp + pl, pr + pb * wp
    if planes == 0 or h == 0 or w == 0:
        return None
    pairs = []

    def items(start: int, count: tuple, strides: tuple, size: int):
        if size and all(count):
            dst = as_runs(np.lib.stride_tricks.as_strided(flat[start:], count + (size,), strides + (isz,)),
                          len(count))
            src = as_runs(np.full(count + (size,), value, o.dtype), len(count))
            pairs.append((dst, src))

    items(head + w, (planes, h - 1), (plane * isz, wp * isz), pl + pr)            # row boundaries
    items(plane - tail, (planes - 1,), (plane * isz,), tail + head)                # plane boundaries
    items(0, (1,), (0,), head)
    items(planes * plane - tail, (1,), (0,), tail)
    return pairs


def constant_pad(ctx: NodeCtx):
    x, y = ctx.value(0), ctx.out()
    if ctx.attrs.get("mode", "constant") != "constant":
        return PAD_GATHER(ctx)
    if ctx.const(1) is None or y.dtype != x.dtype:
        return None
    if (ctx.value(2) is not None and ctx.const(2) is None) or (ctx.value(3) is not None and ctx.const(3) is None):
        return None
    try:
        amounts = pad_amounts(len(x.shape), ctx.const(1), ctx.const(3))
    except KernelError:
        return None
    if min(min(a) for a in amounts) < 0:
        return None
    if all(a == (0, 0) for a in amounts):
        return ViewOf(((0, 0),))
    cv = ctx.const(2)
    value = 0 if cv is None or cv.size == 0 else cv.reshape(-1)[0].item()
    if y.dtype.kind in "OUSV" or tuple(d + b + e for d, (b, e) in zip(x.shape, amounts)) != y.shape:
        return None
    k = max(ax for ax, a in enumerate(amounts) if a != (0, 0))
    inner = tuple(slice(b, b + d) for (b, _), d in zip(amounts, x.shape))

    def bind(ins, outs, ws, nt=1):
        o = outs[0]
        copy = run_copy(o[inner], ins[0])
        gaps = _plane_gaps(o, amounts, x.shape, value)
        if gaps is not None:
            def run_gaps():
                for dst, src in gaps:
                    np.copyto(dst, src)
                copy()
            return run_gaps
        fills = []
        for ax, (b, e) in enumerate(amounts[:k + 1]):   # slabs outside the interior along each padded axis
            pre = inner[:ax]
            if b:
                fills.append(o[pre + (slice(0, b),)])
            if e:
                fills.append(o[pre + (slice(o.shape[ax] - e, None),)])

        def run():
            for s in fills:
                s.fill(value)
            copy()
        return run
    return Impl(bind=bind)

