"""MaxPool / AveragePool (1-D and 2-D windows) and the global pools of float32 through the native driver
(emit.py): the pools of models with dynamic input dims, which run node by node (ResNet's stem MaxPool,
YOLO's SPPF, the squeeze-and-excitation GlobalAveragePools of PP-OCR's detector).

``window_pool(ctx)`` / ``global_pool(ctx)`` -> ``bind(ins, outs, ws, nt)`` (the plan step), or None (then the
numpy path or the reference kernel runs).  The window geometry (strides, dilations, pads or ``auto_pad``,
``ceil_mode``'s last window) is the reference's own (``ops/nn_window.resolve_window``), and AveragePool's
divisors are its counts per axis (``count_include_pad``: the explicit pads count, never ``ceil_mode``'s
overhang), tabulated here: O(oh + ow), built when a plan is made.  A rank-3 input (1-D windows) runs as
planes of one row.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ...ops.nn_window import resolve_window
from ...ops.registry import KernelError
from ..native_call import aligned, call_driver
from .abi import EXTRA, GLOBAL_FIELDS, GLOBAL_SYMBOL, MODE_AVG, MODE_MAX, POOL_FIELDS, POOL_SYMBOL
from .abi import LANES as VL

LIMIT = 1 << 30               # sizes the driver's 32-bit lane columns address


def _axis_tables(out: int, stride: int, dil: int, kernel: int, pb: int, pe: int, size: int, include_pad: bool):
    """Per output position of one axis: the reference's tap count (``ops/nn_pool._axis_counts``) and whether
    every tap lies inside ``[0, size)`` (rows: the accumulator's start, emit.py)."""
    pos = np.arange(out)[:, None] * stride + np.arange(kernel)[None, :] * dil - pb
    lo, hi = (-pb, size + pe) if include_pad else (0, size)
    count = ((pos >= lo) & (pos < hi)).sum(axis=1)
    inside = ((pos >= 0) & (pos < size)).all(axis=1)
    return count, inside


def _table(values, dtype=np.float32, pad_to: int = 1) -> np.ndarray:
    n = len(values)
    t = aligned((max(1, -(-n // pad_to) * pad_to),), dtype)
    t[:n] = values
    return t


def _column_masks(ow: int, w: int, sw: int, dw: int, kw: int, pl: int) -> np.ndarray:
    """The driver's column masks (emit.py): per chunk of VL outputs and kernel column ``j``, the bits of the
    lanes whose tap column lies inside ``[0, w)``; stride 2: of the 32 elements loaded from ``2 * ox0 + j*dw -
    pl`` on, low and high half."""
    chunks = -(-ow // VL)
    lanes = np.arange(chunks)[:, None, None] * VL + np.arange(VL)[None, None, :]           # [chunk, 1, lane]
    offs = (np.arange(kw) * dw - pl)[None, :, None]                                        # [1, j, 1]
    if sw == 2:
        first = 2 * (lanes - np.arange(VL)) + offs + np.arange(VL)                         # element positions
        halves = [first, first + VL]
    else:
        halves = [lanes * sw + offs, np.full_like(lanes * sw + offs, -1)]
    bits = 1 << np.arange(VL, dtype=np.int64)
    words = [(((c >= 0) & (c < w)) * bits).sum(axis=-1) for c in halves]                 # [chunk, j] each
    t = aligned((chunks, kw, 2), np.int32)
    t[..., 0], t[..., 1] = (wd.astype(np.uint32).view(np.int32) for wd in words)
    return t


@functools.lru_cache(maxsize=64)
def _tables(mode: int, spatial: tuple, geo: tuple, include: bool) -> dict[str, np.ndarray]:
    """The driver's tables of one window geometry (read-only): the pools of a plan often share one (YOLO's
    SPPF runs three alike: 40 us each to make at 320x320), and a plan for a shape seen before finds them made."""
    (h, w), ((oh, sh, dh, kh, pt, pb), (ow, sw, dw, kw, pl, pr)) = spatial, geo
    rowtaps = np.zeros((kh - 1) * dh + 1, np.int32)
    rowtaps[::dh] = 1
    tables = {"masks": _column_masks(ow, w, sw, dw, kw, pl), "rowtaps": _table(rowtaps, np.int32)}
    if mode == MODE_AVG:
        rc, rin = _axis_tables(oh, sh, dh, kh, pt, pb, h, include)
        cc, _ = _axis_tables(ow, sw, dw, kw, pl, pr, w, include)
        tables.update(rcount=_table(rc), ccount=_table(cc, pad_to=VL), rstart=_table(np.where(rin, -0.0, 0.0)))
    for t in tables.values():
        t.setflags(write=False)
    return tables


def window_pool(ctx):
    """The driver's step for a MaxPool (output Y alone) or AveragePool node, or None."""
    op = ctx.node.op
    address = ctx.native(POOL_SYMBOL)
    x, y = ctx.value(0), ctx.out()
    attrs = ctx.attrs
    if (not address or op not in ("MaxPool", "AveragePool") or x.dtype != np.float32 or y.dtype != np.float32
            or len(x.shape) not in (3, 4) or "kernel_shape" not in attrs or (op == "MaxPool" and len(ctx.outs) != 1)):
        return None
    spatial = tuple(x.shape[2:])
    try:
        win = resolve_window(op, attrs, spatial, tuple(int(k) for k in attrs["kernel_shape"]),
                             ceil_mode=bool(attrs.get("ceil_mode", 0)))
    except KernelError:
        return None
    if tuple(x.shape[:2]) + tuple(win.out) != tuple(y.shape) or min(win.pads_begin + win.pads_end) < 0:
        return None
    if len(spatial) == 1:                      # 1-D: planes of one row
        spatial, geo = (1,) + spatial, [(1, 1, 1, 1, 0, 0)]
    else:
        geo = []
    geo += [(win.out[i], win.strides[i], win.dilations[i], win.kernel[i], win.pads_begin[i], win.pads_end[i])
            for i in range(len(win.out))]
    (h, w), ((oh, sh, dh, kh, pt, pb), (ow, sw, dw, kw, pl, pr)) = spatial, geo
    planes = int(x.shape[0]) * int(x.shape[1])
    if planes == 0 or 0 in (h, w, oh, ow) or max(w, ow * sw, ow + VL, pl + (kw - 1) * dw) * 2 + 2 * VL >= LIMIT:
        return None
    mode = MODE_MAX if op == "MaxPool" else MODE_AVG
    include = mode == MODE_AVG and bool(attrs.get("count_include_pad", 0))
    tables = _tables(mode, (h, w), ((oh, sh, dh, kh, pt, pb), (ow, sw, dw, kw, pl, pr)), include)
    words = {"planes": planes, "h": h, "w": w, "oh": oh, "ow": ow, "kh": kh, "kw": kw, "sh": sh, "sw": sw,
             "dh": dh, "dw": dw, "pt": pt, "pl": pl, "mode": mode,
             **{k: t.ctypes.data for k, t in tables.items()}}

    def bind(ins, outs, ws, nt=1):
        desc = np.zeros(len(POOL_FIELDS) + EXTRA, np.int64)
        vals = dict(words, x=ins[0].ctypes.data, y=outs[0].ctypes.data)
        for i, name in enumerate(POOL_FIELDS):
            desc[i] = vals.get(name, 0)
        return call_driver(address, desc, max(1, nt), (ins, outs, tables, desc))
    return bind


def global_pool(ctx):
    """The driver's step for a GlobalAveragePool or GlobalMaxPool node, or None."""
    op = ctx.node.op
    address = ctx.native(GLOBAL_SYMBOL)
    x, y = ctx.value(0), ctx.out()
    if (not address or op not in ("GlobalAveragePool", "GlobalMaxPool") or x.dtype != np.float32
            or y.dtype != np.float32 or len(x.shape) < 3):
        return None
    planes, size = int(x.shape[0]) * int(x.shape[1]), math.prod(x.shape[2:])
    if tuple(y.shape) != tuple(x.shape[:2]) + (1,) * (len(x.shape) - 2) or size == 0 or size >= 1 << 40:
        return None
    mode = MODE_AVG if op == "GlobalAveragePool" else MODE_MAX

    def bind(ins, outs, ws, nt=1):
        desc = np.zeros(len(GLOBAL_FIELDS) + EXTRA, np.int64)
        vals = {"planes": planes, "size": size, "mode": mode, "x": ins[0].ctypes.data, "y": outs[0].ctypes.data}
        for i, name in enumerate(GLOBAL_FIELDS):
            desc[i] = vals[name]
        return call_driver(address, desc, max(1, nt), (ins, outs, desc))
    return bind
