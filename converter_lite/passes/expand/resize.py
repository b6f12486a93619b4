"""Resize that only repeats elements -> Reshape, Expand, Reshape (index maps a fused kernel computes in place).

A nearest-neighbour Resize whose every resized axis grows by a whole factor ``s`` and maps output index ``o``
to input index ``o // s`` is a broadcast: ``x`` of shape ``[..., d, ...]`` reshaped to ``[..., d, 1, ...]``,
expanded to ``[..., d, s, ...]`` and reshaped to ``[..., d * s, ...]``.  That is the legacy ``Upsample``
(asymmetric coordinates, floor) and the usual 2x nearest upsampling of FPN/U-Net decoders.  Clustered, the
repeat becomes index arithmetic in the kernel that consumes it (the Add of a skip connection, an activation)
instead of a separate pass over the data.

Which index each output element reads is decided by the reference kernel's own geometry
(``ops/nn_resize.py``: ``resize_geometry``, ``axis_taps``), so every attribute
combination is covered by one check: the expansion applies when those indices are exactly ``o // s`` on every
axis, and is declined otherwise (linear/cubic modes, fractional or shrinking scales, roi crops, modes whose
rounding picks ``o // s + 1`` somewhere, antialias).
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node
from ...ops.builder import GraphBuilder
from ...ops.nn_resize import axis_taps, resize_geometry
from ...ops.registry import KernelError
from .emit import const_input, input_value
from .registry import Declined, expander


def repeat_factors(node: Node, shape: tuple[int, ...]) -> list[int]:
    """Per axis, the whole factor by which this Resize repeats each element; raises Declined otherwise."""
    attrs = node.attrs
    if attrs.get("mode", "nearest") != "nearest":
        raise Declined("not nearest-neighbour")
    consts = [const_input(node, i) for i in (1, 2, 3)]
    for i, c in zip((1, 2, 3), consts):
        if i < len(node.inputs) and node.inputs[i] is not None and c is None:
            raise Declined("roi, scales or sizes is not a constant")
    try:
        out, scale, start, end = resize_geometry(attrs, shape, *consts)
    except KernelError as e:
        raise Declined(str(e)) from None
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    factors = []
    for axis, (n_in, n_out) in enumerate(zip(shape, out)):
        if n_out == n_in and ctm != "tf_crop_and_resize":
            factors.append(1)
            continue
        if n_in == 0 or n_out % n_in:
            raise Declined(f"axis {axis}: {n_in} -> {n_out} is not a whole repeat")
        s = n_out // n_in
        _, idx, w = axis_taps(attrs, n_in, n_out, scale[axis], start[axis], end[axis])
        if w is not None or not np.array_equal(idx[:, 0], np.arange(n_out) // s):
            raise Declined(f"axis {axis}: the nearest indices are not o // {s}")
        factors.append(s)
    return factors


@expander("Resize")
def expand_resize(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    shape = tuple(x.shape)
    factors = repeat_factors(node, shape)
    if all(s == 1 for s in factors):
        return [x]
    split = [d for n, s in zip(shape, factors) for d in ((n, 1) if s > 1 else (n,))]
    wide = [d for n, s in zip(shape, factors) for d in ((n, s) if s > 1 else (n,))]
    out = [n * s for n, s in zip(shape, factors)]
    y = b.op("Reshape", x, b.const(np.asarray(split, np.int64)))
    y = b.op("Expand", y, b.const(np.asarray(wide, np.int64)))
    return [b.op("Reshape", y, b.const(np.asarray(out, np.int64)))]
