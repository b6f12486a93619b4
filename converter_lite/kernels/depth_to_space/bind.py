"""DepthToSpace / SpaceToDepth through the native driver (emit.py), and the scatter step of a ConvTranspose
whose kernel equals its stride (runtime/fast/patch.py).

``depth_to_space(ctx)`` -> ``bind(ins, outs, ws, nt)`` (the plan step), or None (then the flat gather or the
reference kernel runs).  It applies to 4-D NCHW tensors of 4-byte elements, DCR or CRD mode, any blocksize; the
channel map is the reference kernel's (``ops/nn_space.py``):

    DepthToSpace  y[n, k, h*b + i, w*b + j] = x[n, depth(k, i, j), h, w]
    SpaceToDepth  y[n, depth(k, i, j), h, w] = x[n, k, h*b + i, w*b + j]
    depth(k, i, j) = (i*b + j)*C + k  (DCR)  or  k*b*b + i*b + j  (CRD)

No table: the record is a dozen words, built per shape in microseconds (the flat gather it replaces built an
index per element by running the reference kernel on an iota).
"""
from __future__ import annotations

import numpy as np

from ..native_call import call_driver
from .abi import EXTRA, FIELDS, SYMBOL

MODES = ("DCR", "CRD")


def strides(mode: str, c: int, bh: int, bw: int) -> tuple[int, int, int]:
    """``(sc, si, sj)``: the depth channel of space channel ``k``, block row ``i``, column ``j`` is
    ``k*sc + i*si + j*sj`` (``c`` space channels)."""
    return (1, bw * c, c) if mode == "DCR" else (bh * bw, bw, 1)


def record(n, c, hd, wd, bh, bw, mode, depth: np.ndarray, space: np.ndarray, to_space: bool,
           bias: np.ndarray | None = None) -> np.ndarray:
    """The driver's record (``FIELDS`` + ``EXTRA`` words) for ``depth [n, c*bh*bw, hd, wd]`` and ``space
    [n, c, hd*bh, wd*bw]`` (C-contiguous, 4-byte elements; ``bias`` float32 ``[c]``, added to float32 data
    moving to space)."""
    sc, si, sj = strides(mode, c, bh, bw)
    vals = {"n": n, "c": c, "hd": hd, "wd": wd, "bh": bh, "bw": bw, "sc": sc, "si": si, "sj": sj,
            "depth": depth.ctypes.data, "space": space.ctypes.data,
            "bias": 0 if bias is None else bias.ctypes.data, "to_space": int(to_space)}
    desc = np.zeros(len(FIELDS) + EXTRA, np.int64)
    for i, name in enumerate(FIELDS):
        desc[i] = vals[name]
    return desc


def rearrange_step(address: int, desc: np.ndarray, nt: int, keep: tuple):
    """The bound driver call of ``desc`` (``record``) on ``nt`` threads, keeping ``keep`` alive."""
    return call_driver(address, desc, max(1, nt), keep)


def depth_to_space(ctx):
    """The bound DepthToSpace / SpaceToDepth step of ``ctx``'s node on the driver, or None."""
    address = ctx.native(SYMBOL)
    x, y = ctx.value(0), ctx.out()
    op, attrs = ctx.node.op, ctx.attrs
    if (not address or op not in ("DepthToSpace", "SpaceToDepth") or len(ctx.outs) != 1
            or x.dtype != y.dtype or x.dtype.itemsize != 4 or len(x.shape) != 4 or len(y.shape) != 4
            or attrs.get("mode", "DCR") not in MODES or int(attrs.get("blocksize", 0)) < 1):
        return None
    bs, mode = int(attrs["blocksize"]), attrs.get("mode", "DCR")
    to_space = op == "DepthToSpace"
    depth, space = (x.shape, y.shape) if to_space else (y.shape, x.shape)
    n, cd, hd, wd = (int(v) for v in depth)
    c = cd // (bs * bs)
    if cd % (bs * bs) or tuple(space) != (n, c, hd * bs, wd * bs) or 0 in space:
        return None

    def bind(ins, outs, ws, nt=1):
        d, s = (ins[0], outs[0]) if to_space else (outs[0], ins[0])
        desc = record(n, c, hd, wd, bs, bs, mode, d, s, to_space)
        return rearrange_step(address, desc, nt, (ins, outs, desc))
    return bind
