"""Pure index maps as one precomputed gather: Resize (nearest), DepthToSpace, SpaceToDepth, Tile and Pad in
edge/reflect/wrap mode.

Each of these ops only moves elements, and where each output element comes from depends on shapes and
constant inputs, never on the data.  So at load time the reference kernel is run once on ``0, 1, 2, ...`` (the
flat index of every input element, in float64, exact below 2**53) and its output *is* the source index of
every output element; a run is then ``np.take(x.flat, index, out=y.flat)``: the reference's result, bit for bit,
for any mode/attribute combination the reference supports.  Not used when the op can insert values of its own
(Resize's ``tf_crop_and_resize`` extrapolation, non-nearest modes) or the index table would be large
(``MAX_ELEMENTS``).
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ...ops.registry import KernelError, evaluate_node
from ..program import Impl, NodeCtx

MAX_ELEMENTS = 1 << 22            # output elements (an int64 table of 32 MB)


def _index_map(check=None):
    def factory(ctx: NodeCtx):
        x, y = ctx.value(0), ctx.out()
        if (len(ctx.outs) != 1 or x.dtype != y.dtype or not x.nbytes or math.prod(y.shape) > MAX_ELEMENTS
                or math.prod(x.shape) >= 1 << 53 or (check is not None and not check(ctx))):
            return None
        rest = [ctx.const(i) for i in range(1, len(ctx.ins))]
        if any(ctx.value(i) is not None and c is None for i, c in zip(range(1, len(ctx.ins)), rest)):
            return None
        iota = np.arange(math.prod(x.shape), dtype=np.float64).reshape(x.shape)
        try:
            with np.errstate(all="ignore"):
                src = np.asarray(evaluate_node(ctx.node, [iota, *rest])[0])
        except (KernelError, ValueError, TypeError, IndexError):
            return None
        if src.shape != y.shape:
            return None
        index = src.astype(np.intp).reshape(-1)
        if not np.array_equal(index, src.reshape(-1)) or (index.size and (index.min() < 0 or index.max() >= iota.size)):
            return None
        return Impl(bind=lambda ins, outs, ws, nt=1: partial(ins[0].reshape(-1).take, index,
                                                             out=outs[0].reshape(-1), mode="clip"))
    return factory


def _resize_ok(ctx: NodeCtx) -> bool:
    return (ctx.attrs.get("mode", "nearest") == "nearest"
            and ctx.attrs.get("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize")


def _pad_ok(ctx: NodeCtx) -> bool:
    return ctx.attrs.get("mode", "constant") in ("edge", "reflect", "wrap")


GATHER_FAST = {"Resize": _index_map(_resize_ok), "DepthToSpace": _index_map(), "SpaceToDepth": _index_map(),
               "Tile": _index_map()}
PAD_GATHER = _index_map(_pad_ok)
