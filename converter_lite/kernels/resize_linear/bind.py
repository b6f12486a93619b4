"""Linear Resize of the last two axes (bilinear upsampling in segmentation and depth decoders: DPT, GLPN, FPNs)
through the native driver (emit.py).

``linear_resize(ctx)`` -> ``bind(ins, outs, ws, nt)`` (the plan step), or None (then the nearest-mode gather or the reference kernel runs).  It
applies to a float32 Resize in ``linear`` mode with constant scales/sizes whose resized axes are the last two
(``[..., h, w] -> [..., oh, ow]``, every other axis kept), without antialias (2 taps per axis) and not
``tf_crop_and_resize`` (which extrapolates); rows of at most MAX_WIDTH columns.  The taps and weights of every
output row and column come from the reference kernel's own geometry (``ops/nn_resize.py``:
``resize_geometry``, ``axis_taps``), so each coordinate mode and the clamping at the
borders is the reference's; the driver then blends two input rows and gathers two taps per output column.
The reference kernel resampled one axis at a time over the whole tensor in float64: DPT's 192 -> 384 head
upsampling of 128 channels took 78 ms.
"""
from __future__ import annotations

import math

import numpy as np

from ...ops.nn_resize import axis_taps, resize_geometry
from ...ops.registry import KernelError
from ..native_call import aligned, call_driver
from .abi import EXTRA, FIELDS, MAX_WIDTH, SYMBOL


def _axis(attrs, n_in: int, n_out: int, scale, start, end) -> tuple[np.ndarray, np.ndarray] | None:
    """(taps [n_out, 2] int64, weights [n_out, 2] float32) of one resized axis, or None (not 2 taps)."""
    _, idx, w = axis_taps(attrs, n_in, n_out, scale, start, end)
    if w is None or idx.shape != (n_out, 2) or w.shape != (n_out, 2):
        return None
    return idx.astype(np.int64), w.astype(np.float32)


def node_geometry(ctx) -> tuple | None:
    """``resize_geometry`` of ``ctx``'s Resize node (its roi/scales/sizes constants) when it resizes only the
    last two axes of a non-empty tensor into its output's shape (what the Resize drivers take); None otherwise,
    or when one of the constants is computed at run time or the reference rejects them."""
    consts = [ctx.const(i) if i < len(ctx.ins) else None for i in (1, 2, 3)]
    if any(i < len(ctx.ins) and ctx.value(i) is not None and c is None for i, c in zip((1, 2, 3), consts)):
        return None
    shape = tuple(ctx.value(0).shape)
    try:
        geometry = resize_geometry(ctx.attrs, shape, *consts)
    except KernelError:
        return None
    out = tuple(geometry[0])
    if out != tuple(ctx.out().shape) or out[:-2] != shape[:-2] or 0 in shape or 0 in out:
        return None
    return geometry


def linear_resize(ctx):
    address = ctx.native(SYMBOL)
    x, y = ctx.value(0), ctx.out()
    attrs = ctx.attrs
    if (not address or x.dtype != np.float32 or y.dtype != np.float32 or len(x.shape) < 2
            or attrs.get("mode", "nearest") != "linear" or attrs.get("antialias", 0)
            or attrs.get("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize"):
        return None
    geometry = node_geometry(ctx)
    if geometry is None:
        return None
    out, scale, start, end = geometry
    shape = tuple(x.shape)
    if shape[-1] > MAX_WIDTH:
        return None
    (h, w), (oh, ow) = shape[-2:], tuple(out[-2:])
    rows = _axis(attrs, h, oh, scale[-2], start[-2], end[-2])
    cols = _axis(attrs, w, ow, scale[-1], start[-1], end[-1])
    if rows is None or cols is None:
        return None
    tables = {"rows": aligned((oh, 2), np.int64), "wrows": aligned((oh, 2), np.float32),
              "cols": aligned((2, ow), np.int32), "wcols": aligned((2, ow), np.float32)}
    tables["rows"][...], tables["wrows"][...] = rows
    tables["cols"][...], tables["wcols"][...] = cols[0].T, cols[1].T
    return planes_binder(address, FIELDS, EXTRA, shape, (oh, ow), tables)


def planes_binder(address: int, fields: tuple, extra: int, shape: tuple, out: tuple, tables: dict):
    """The plan step's ``bind`` of a Resize driver over ``[planes, h, w] -> [planes, oh, ow]`` (this one and
    kernels/resize_nearest/): the record's ``fields`` from the shapes, the arrays' addresses and ``tables``'."""
    planes = math.prod(shape[:-2])
    (h, w), (oh, ow) = shape[-2:], out

    def bind(ins, outs, ws, nt=1):
        desc = np.zeros(len(fields) + extra, np.int64)
        vals = {"planes": planes, "h": h, "w": w, "oh": oh, "ow": ow, "x": ins[0].ctypes.data,
                "y": outs[0].ctypes.data, **{k: t.ctypes.data for k, t in tables.items()}}
        for i, name in enumerate(fields):
            desc[i] = vals[name]
        return call_driver(address, desc, max(1, nt), (ins, outs, tables, desc))
    return bind
