"""Depthwise float32 2-D Conv through the native depthwise driver (emit.py): rows of 16
output columns, masked loads for the padding, no padded copy; stride-1 "same" Convs with square kernels run as
flat planes, with the lanes' coordinates (for the tap masks) and the vectors that may use plain loads computed
here once, at load (``flat_tables``).  Small planes with 5x5 and wider kernels (3x3 when strided) run 16
channels per vector instead; the driver picks that form from the geometry itself (emit.py), with the same record.

``native_depthwise(ctx, geo, w, bias)`` -> a ``DepthwiseConv`` (``workspace``, ``bind``, ``epilogue``) or None
when it does not apply (not float32, not ``group == C == M``, column stride other than 1 or 2, a kernel wider
than ``MAX_KW``, an empty output, or a model whose native code lacks the driver); fast_conv.py's numpy
depthwise path is then used.  The weights are stored once, at load, as ``[C][kh*kw]``; the bias as ``[C]``
(zeros when there is none).  The epilogue hook (kernels/conv_epilogue.py) takes over a following Relu/Clip
and residual Add, as for the other native convolution drivers.
"""
from __future__ import annotations

import functools

import numpy as np

from ..conv_epilogue import EpilogueHook
from ..native_call import aligned, call_driver, data_address, record
from ..packing import shared
from .abi import EXTRA, FIELDS, MAX_KW, MAX_WIDTH, SYMBOL, VL, ZERO_MARGIN

MAX_FLAT_VECTORS = 4096     # flat planes of at most 65536 outputs (the coordinate table: 128 bytes per vector)


def flat(geo) -> bool:
    """The flat-plane form applies: stride 1, a square kernel of at most MAX_KW, output rows as wide as the
    input rows (so every tap is a constant offset in the flattened plane), a plane of at most
    MAX_FLAT_VECTORS vectors."""
    return (geo.sh == geo.sw == 1 and geo.kh == geo.kw <= MAX_KW and geo.ow == geo.w
            and -(-geo.oh * geo.ow // VL) <= MAX_FLAT_VECTORS)


def flat_tables(geo) -> tuple[np.ndarray, tuple[int, int]]:
    """(coords ``[nvec][2][VL]`` int32: the column and row of each output lane, row -2**30 for the lanes past
    the plane; (jlo, jhi): the vectors whose tap-row windows (two consecutive vectors from each row's first
    tap) lie inside the plane, which the driver reads with plain loads and lane shifts; none for column
    dilations other than 1).  Read-only, shared by the Convs (and the plans) of the same geometry."""
    return _flat_tables(geo.oh, geo.ow, geo.h, geo.w, geo.kh, geo.dh, geo.dw, geo.pads[0], geo.pads[1])


@functools.lru_cache(maxsize=32)     # (a table is at most 512 KB)
def _flat_tables(oh: int, ow: int, h: int, w: int, kh: int, dh: int, dw: int, pt: int, pl: int):
    nvec = -(-oh * ow // VL)
    p = np.arange(nvec * VL)
    coords = aligned((nvec, 2, VL), np.int32)
    coords[:, 0] = (p % ow).reshape(nvec, VL)
    coords[:, 1] = np.where(p < oh * ow, p // ow, -(1 << 30)).reshape(nvec, VL)
    coords.setflags(write=False)
    rows = [(ky * dh - pt) * w - pl for ky in range(kh)]
    jlo = jhi = 0
    if dw == 1:
        jlo = max(0, -(min(rows) // VL))               # ceil(-min(rows) / VL)
        jhi = max(jlo, min(nvec, (h * w - 2 * VL - max(rows)) // VL + 1))
    return coords, (jlo, jhi)


def applies(geo) -> bool:
    """float32, group == C == M, a non-empty output, and either the flat form (``flat``) or the row form:
    column stride 1 or 2, kw <= MAX_KW, rows of at most MAX_WIDTH columns whose taps stay within ZERO_MARGIN
    of the row (the driver's zero row)."""
    if not (geo.dtype == np.float32 and geo.group == geo.c == geo.m and geo.n * geo.c * geo.oh * geo.ow > 0):
        return False
    reach = max(geo.pads[1], (geo.ow - 1) * geo.sw + (geo.kw - 1) * geo.dw + 2 * VL - geo.pads[1] - geo.w)
    return flat(geo) or (geo.sw in (1, 2) and geo.kw <= MAX_KW and geo.w <= MAX_WIDTH and reach <= ZERO_MARGIN)


class DepthwiseConv(EpilogueHook):
    """A depthwise float32 Conv bound to the driver; ``geo`` is fast_conv's geometry (pads include any absorbed
    Pad)."""

    def __init__(self, geo, w: np.ndarray, bias, address: int, max_threads: int):
        self.g, self.address, self.max_threads = geo, address, max(1, max_threads)
        self.wt, self.bias = shared(w, ("depthwise", None if bias is None else id(bias)),
                                    lambda: _pack(w, bias, geo.c, geo.kh * geo.kw))
        self.coords, self.window = flat_tables(geo) if flat(geo) else (None, (0, 0))
        self.workspace = 0

    def bind(self, ins, outs, ws, nt=1):
        g, x, y = self.g, ins[0], outs[0]
        nt = max(1, min(nt, self.max_threads))
        vals = dict(n=g.n, c=g.c, h=g.h, w=g.w, oh=g.oh, ow=g.ow, kh=g.kh, kw=g.kw, sh=g.sh, sw=g.sw, dh=g.dh,
                    dw=g.dw, pt=g.pads[0], pl=g.pads[1], x=data_address(x), y=data_address(y),
                    wt=data_address(self.wt), bias=data_address(self.bias),
                    residual=data_address(ins[-1]) if self.residual else 0, **self.epilogue_words())
        if self.coords is not None:
            vals.update(coords=self.coords.ctypes.data, nvec=len(self.coords), jlo=self.window[0],
                        jhi=self.window[1])
        desc = record(FIELDS, EXTRA, vals)
        return call_driver(self.address, desc, nt, (ins, y, self.wt, self.bias, self.coords, desc))


def _pack(w: np.ndarray, bias, c: int, taps: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights ``[C][kh*kw]``, bias ``[C]``) as the driver reads them: made once per weight, shared by every
    plan of the model (kernels/packing.py)."""
    wt = aligned((c, taps))
    wt[...] = np.asarray(w, np.float32).reshape(c, taps)
    b = aligned((c,))
    b[...] = 0 if bias is None else np.asarray(bias, np.float32).reshape(c)
    return wt, b


def native_depthwise(ctx, geo, w: np.ndarray, bias) -> DepthwiseConv | None:
    """A DepthwiseConv for ``ctx``'s Conv, or None (see the module doc)."""
    if not applies(geo) or ctx.library is None:
        return None
    address = ctx.native(SYMBOL)
    return DepthwiseConv(geo, w, bias, address, ctx.num_threads) if address else None
