"""Nearest Resize of the last two axes (the FPN upsampling of detectors and segmenters: YOLO, PP-OCR's DBNet)
through the native driver (emit.py).

``nearest_resize(ctx)`` -> ``bind(ins, outs, ws, nt)`` (the plan step), or None (then the gather or the
reference kernel runs).  It applies to a Resize of 4-byte elements in ``nearest`` mode with constant
scales/sizes whose resized axes are among the last two (``[..., h, w] -> [..., oh, ow]``, every other axis
kept), not ``tf_crop_and_resize`` (which extrapolates).  The source row and column of every output row and
column come from the reference kernel's own geometry (``ops/nn_resize.py``: ``resize_geometry``,
``axis_taps``), so each coordinate mode, nearest mode and the clamping at the borders is the reference's.
The tables are O(oh + ow), built when a plan is made: a model with dynamic image sizes builds them at the
first run at each size (the flat gather it replaces built an index per output element: 80 ms of the first
run of PP-OCR's detector at 480x640).
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_resize import axis_taps
from ..native_call import aligned
from ..resize_linear.bind import node_geometry, planes_binder
from .abi import EXTRA, FIELDS, SYMBOL


def _axis(attrs, n_in: int, n_out: int, scale, start, end) -> np.ndarray | None:
    """The source index of every output index of one axis, or None (not one tap)."""
    _, idx, w = axis_taps(attrs, n_in, n_out, scale, start, end)
    return idx[:, 0] if w is None and idx.shape == (n_out, 1) else None


def nearest_resize(ctx):
    address = ctx.native(SYMBOL)
    x, y = ctx.value(0), ctx.out()
    attrs = ctx.attrs
    if (not address or x.dtype != y.dtype or x.dtype.itemsize != 4 or len(x.shape) < 2
            or attrs.get("mode", "nearest") != "nearest"
            or attrs.get("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize"):
        return None
    geometry = node_geometry(ctx)
    if geometry is None:
        return None
    out, scale, start, end = geometry
    shape = tuple(x.shape)
    if max(shape[-1], out[-1]) >= 1 << 31:
        return None
    (h, w), (oh, ow) = shape[-2:], tuple(out[-2:])
    rows = _axis(attrs, h, oh, scale[-2], start[-2], end[-2]) if (oh, scale[-2]) != (h, 1) else np.arange(h)
    cols = _axis(attrs, w, ow, scale[-1], start[-1], end[-1]) if (ow, scale[-1]) != (w, 1) else np.arange(w)
    if rows is None or cols is None:
        return None
    tables = {"rows": aligned((oh,), np.int64), "cols": aligned((ow,), np.int32)}
    tables["rows"][...], tables["cols"][...] = rows, cols
    return planes_binder(address, FIELDS, EXTRA, shape, (oh, ow), tables)
