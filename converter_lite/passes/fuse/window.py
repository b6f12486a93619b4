"""Window Pads: a constant Pad read only by Slices (the depthwise convolution expansion: one shifted Slice per
tap) joins the kernel of its Slices, and the code generator reads the unpadded input, with bounds checks only
on the border of the output (codegen/interior.py splits the loops into border and interior).

``window_pad(node)``: constant mode, constant non-negative amounts over every axis (no ``axes`` input) that
pad the innermost axis (a window over channels-last data, ConvNeXt's NHWC taps, was 10% slower fused: its
border positions run the whole channel loop with a blend per tap), a constant (or absent) fill value, every
user a Slice with constant bounds, and an *interior* - the part of
the Slices' output where every tap reads inside the input, the product over the padded axes of its share of
each axis - of at least ``MIN_INTERIOR``.  Below that the border code (a clamp and a blend per tap) outweighs
the Pad's copy: ConvNeXt's 7x7 windows over 10x10 and 5x5 images (16% and 0% interior) were slower fused,
MobileNet's 3x3 windows over 5x5 images (36%) faster.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node

MIN_INTERIOR = 0.3


def _ints(v) -> list[int] | None:
    return None if v is None or v.const is None else [int(x) for x in np.asarray(v.const).reshape(-1)]


def _interior_share(pads: list[int], dims, padded, node_users) -> float:
    """Share of the Slices' output where every Slice reads inside the unpadded input."""
    rank = len(dims)
    share = 1.0
    for ax in range(rank):
        before, after = pads[ax], pads[ax + rank]
        if not before and not after:
            continue
        lo, hi, length = 0, None, None
        for sl in node_users:
            starts = _ints(sl.inputs[1])
            ins = list(sl.inputs) + [None] * 5
            axes = _ints(ins[3]) or list(range(len(starts)))
            steps = _ints(ins[4]) or [1] * len(starts)
            out_len = sl.outputs[0].type.shape[ax]
            start, step = 0, 1
            for s, a, st in zip(starts, axes, steps):
                if a % rank == ax:
                    s = s + padded[ax] if s < 0 else s
                    start, step = min(max(s, 0), padded[ax]), st
            if step <= 0 or (length is not None and out_len != length):
                return 0.0
            length = out_len
            # before <= start + i * step <= before + dims[ax] - 1
            first = max(0, -((start - before) // step))
            last = (before + dims[ax] - 1 - start) // step
            lo, hi = max(lo, first), last if hi is None else min(hi, last)
        if not length:
            return 0.0
        share *= max(0, min(hi, length - 1) - lo + 1) / length
    return share


def window_pad(node: Node) -> bool:
    """See the module docstring."""
    if node.op != "Pad" or node.attrs.get("mode", "constant") != "constant" or len(node.inputs) < 2:
        return False
    pads = _ints(node.inputs[1])
    x, y = node.inputs[0], node.outputs[0]
    if pads is None or min(pads, default=0) < 0 or x.type is None or x.type.shape is None \
            or len(pads) != 2 * len(x.shape) \
            or not (pads[len(x.shape) - 1] or pads[-1]):
        return False
    ins = list(node.inputs) + [None] * 2
    if (ins[2] is not None and ins[2].const is None) or ins[3] is not None:
        return False
    users = [u for u, _ in y.uses]
    if not users or any(u.op != "Slice" or any(i is not None and i.const is None for i in u.inputs[1:])
                        for u in users):
        return False
    return _interior_share(pads, x.shape, y.shape, users) >= MIN_INTERIOR
