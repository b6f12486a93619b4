"""Dense float32 2-D Conv through the direct native drivers: register-tiled microkernels, no im2col, no BLAS.

* 1x1, stride 1, unpadded (``PointwiseConv``, kernels/conv_pointwise/, when ``pointwise_pays``): vectorised
  over pixels, weights packed ``[G, nmb, C/G, 6]``;
* any other geometry with column stride 1, 2 or 4 (``DirectConv``, emit.py): vectorised over
  output channels, reading the input in place (or a zero-bordered copy when the Conv pads).

``native_direct(ctx, geo, w, bias)`` -> a plan (``workspace``, ``bind``, ``epilogue``) or None when neither
applies (not float32, column stride other than 1, 2 or 4, empty, or a model whose native code lacks the driver);
kernels/conv_tiles' im2col + BLAS driver and then fast_conv.py's numpy paths are the fallbacks.

At load the weights ``[M, C/G, kh, kw]`` are packed once into blocks of 16 output channels
``[G, nblk, K, 16]`` (``K = C/G*kh*kw`` taps, zero-padded channels), the bias into ``[G, nblk, 16]``, and the
input offset of every tap into ``koff[K]``.  A bound step is one foreign call on a record (``FIELDS``).  The
epilogue hook (kernels/conv_epilogue.py) takes over a following Relu/Clip and residual Add.
"""
from __future__ import annotations

import numpy as np

from ...model import pages
from ..conv_epilogue import EpilogueHook
from ..conv_pointwise.abi import SYMBOL as POINTWISE_SYMBOL
from ..conv_pointwise.bind import PointwiseConv, pointwise_pays
from ..native_call import aligned, call_driver
from ..packing import shared
from .abi import EXTRA, FIELDS, STRIDES, SYMBOL, VL

_F = {name: i for i, name in enumerate(FIELDS)}



def pack_weights(w: np.ndarray, group: int) -> tuple[np.ndarray, int]:
    """``[M, C/G, kh, kw]`` -> (``[G, nblk, K, 16]`` float32, nblk)."""
    m = w.shape[0]
    mg = m // group
    k = int(np.prod(w.shape[1:]))
    nblk = -(-mg // VL)
    out = aligned((group, nblk, k, VL))
    wg = np.asarray(w, np.float32).reshape(group, mg, k)
    padded = np.zeros((group, nblk * VL, k), np.float32)
    padded[:, :mg] = wg
    out[...] = padded.reshape(group, nblk, VL, k).transpose(0, 1, 3, 2)
    return out, nblk


def pack_bias(bias, m: int, group: int, nblk: int) -> np.ndarray:
    out = aligned((group, nblk * VL))
    if bias is not None:
        out[:, :m // group] = np.asarray(bias, np.float32).reshape(group, m // group)
    return out.reshape(group, nblk, VL)



class DirectConv(EpilogueHook):
    """A dense float32 Conv bound to the direct driver; ``geo`` is fast_conv's geometry (pads include any
    absorbed Pad)."""

    def __init__(self, geo, w: np.ndarray, bias, address: int, max_threads: int, wide: bool):
        g = self.g = geo
        self.address, self.max_threads, self.wide = address, max(1, max_threads), wide
        self.wpk, self.nblk = shared(w, ("direct", g.group), lambda: pack_weights(w, g.group))
        pages.release(w)
        self.bpk = pack_bias(bias, g.m, g.group, self.nblk)
        self.pad = any(g.pads)
        if self.pad:
            self.hp = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1
            self.wp = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1
        else:
            self.hp, self.wp = g.h, g.w
        cg = g.c // g.group
        c, ky, kx = np.meshgrid(np.arange(cg), np.arange(g.kh), np.arange(g.kw), indexing="ij")
        self.koff = np.ascontiguousarray((c * self.hp * self.wp + ky * g.dh * self.wp + kx * g.dw).reshape(-1),
                                         dtype=np.int64)
        self.k = self.koff.size
        self.workspace = g.n * g.c * self.hp * self.wp * 4 + 64 if self.pad else 0

    def bind(self, ins, outs, ws, nt=1):
        g, x, y = self.g, ins[0], outs[0]
        nt = max(1, min(nt, self.max_threads))
        xp = 0
        if self.pad:
            xp = ws.ctypes.data
            xp += (-xp) % 64
        desc = np.zeros(len(FIELDS) + EXTRA, np.int64)
        vals = dict(n=g.n, c=g.c, h=g.h, w=g.w, m=g.m, group=g.group, oh=g.oh, ow=g.ow, sh=g.sh, sw=g.sw,
                    pt=g.pads[0], pl=g.pads[1], hp=self.hp, wp=self.wp, pad=int(self.pad), x=x.ctypes.data, xp=xp,
                    y=y.ctypes.data, wpk=self.wpk.ctypes.data, bpk=self.bpk.ctypes.data, koff=self.koff.ctypes.data,
                    k=self.k, nblk=self.nblk, residual=ins[-1].ctypes.data if self.residual else 0,
                    **self.epilogue_words(), wide=int(self.wide))
        for name, v in vals.items():
            desc[_F[name]] = v
        return call_driver(self.address, desc, nt, (ins, y, ws, self.wpk, self.bpk, self.koff, desc))


def applies(geo) -> bool:
    """Whether the direct driver computes this geometry (float32, dense or grouped, column stride in STRIDES)."""
    return geo.dtype == np.float32 and geo.sw in STRIDES and geo.n * geo.oh * geo.ow > 0 and geo.m > 0


def native_direct(ctx, geo, w: np.ndarray, bias):
    """A PointwiseConv or DirectConv for ``ctx``'s Conv, or None (see the module doc)."""
    if not applies(geo) or ctx.library is None:
        return None
    wide = ctx.wide_vectors()
    if geo.pointwise and pointwise_pays(geo, wide):
        address = ctx.native(POINTWISE_SYMBOL)
        if address:
            return PointwiseConv(geo, w, bias, address, ctx.num_threads, wide)
    address = ctx.native(SYMBOL)
    if not address:
        return None
    return DirectConv(geo, w, bias, address, ctx.num_threads, wide)


