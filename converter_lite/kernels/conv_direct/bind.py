"""Dense float32 2-D Conv through the direct native drivers: register-tiled microkernels, no im2col, no BLAS.

* 1x1, stride 1, unpadded (``PointwiseConv``, kernels/conv_pointwise/, when ``pointwise_pays``): vectorised
  over pixels, weights packed ``[G, nmb, C/G, 6]``;
* any other geometry with column stride 1, 2 or 4 (``DirectConv``, emit.py): vectorised over
  output channels, reading the input in place (or a zero-bordered copy when the Conv pads: two, one per
  neighbouring row part, when it may run on several threads).

``native_direct(ctx, geo, w, bias)`` -> a plan (``workspace``, ``bind``, ``epilogue``) or None when neither
applies (not float32, column stride other than 1, 2 or 4, empty, or a model whose native code lacks the driver);
kernels/conv_tiles' im2col + BLAS driver and then fast_conv.py's numpy paths are the fallbacks.

At load the weights ``[M, C/G, kh, kw]`` are packed once into blocks of 16 output channels
``[G, nblk, K, 16]`` (``K = C/G*kh*kw`` taps, zero-padded channels), the bias into ``[G, nblk, 16]``, and the
input offset of every tap into ``koff[K]``.  A bound step is one foreign call on a record (``FIELDS``).  The
epilogue hook (kernels/conv_epilogue.py) takes over a following Relu/Clip and residual Add.
"""
from __future__ import annotations

import functools

import numpy as np

from ...model import pages
from ..conv_epilogue import EpilogueHook
from ..conv_pointwise.abi import SYMBOL as POINTWISE_SYMBOL
from ..conv_pointwise.bind import PointwiseConv, pointwise_pays
from ..native_call import aligned, call_driver, data_address, record
from ..packing import shared
from .abi import EXTRA, FIELDS, STRIDES, SYMBOL, VL, xp_floats




def pack_weights(w: np.ndarray, group: int, release: bool = False) -> tuple[np.ndarray, int]:
    """``[M, C/G, kh, kw]`` -> (``[G, nblk, K, 16]`` float32, nblk); with ``release``, gives back the source's
    file pages afterwards (the driver reads only the packed copy: model/pages.py)."""
    m = w.shape[0]
    mg = m // group
    k = int(np.prod(w.shape[1:]))
    nblk = -(-mg // VL)
    out = aligned((group, nblk, k, VL))
    wg = np.asarray(w, np.float32).reshape(group, mg, k)
    padded = np.zeros((group, nblk * VL, k), np.float32)
    padded[:, :mg] = wg
    out[...] = padded.reshape(group, nblk, VL, k).transpose(0, 1, 3, 2)
    if release:
        pages.release(w)
    return out, nblk


@functools.lru_cache(maxsize=256)
def tap_offsets(cg: int, kh: int, kw: int, plane: int, row: int, col: int) -> np.ndarray:
    """``koff[K]``: the input offset of every tap ``(c, ky, kx)`` (``c*plane + ky*row + kx*col``), read-only
    and shared by the plans of every shape that gives the same offsets."""
    c, ky, kx = np.meshgrid(np.arange(cg), np.arange(kh), np.arange(kw), indexing="ij")
    koff = np.ascontiguousarray((c * plane + ky * row + kx * col).reshape(-1), dtype=np.int64)
    koff.setflags(write=False)
    return koff


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
        self.wpk, self.nblk = shared(w, ("direct", g.group), lambda: pack_weights(w, g.group, release=True))
        self.bpk = shared(w, ("direct-bias", g.group, None if bias is None else id(bias)),
                          lambda: pack_bias(bias, g.m, g.group, self.nblk))
        self.pad = any(g.pads)
        if self.pad:
            self.hp = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1
            self.wp = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1
        else:
            self.hp, self.wp = g.h, g.w
        self.koff = tap_offsets(g.c // g.group, g.kh, g.kw, self.hp * self.wp, g.dh * self.wp, g.dw)
        self.k = self.koff.size
        # two zero-bordered copies when several threads may pad (emit.py: odd row parts use the second)
        copies = 1 if self.max_threads == 1 else 2
        self.workspace = copies * xp_floats(g.n, g.c, self.hp, self.wp) * 4 + 64 if self.pad else 0

    def bind(self, ins, outs, ws, nt=1):
        g, x, y = self.g, ins[0], outs[0]
        nt = max(1, min(nt, self.max_threads))
        xp = 0
        if self.pad:
            xp = data_address(ws)
            xp += (-xp) % 64
        desc = record(FIELDS, EXTRA, dict(
            n=g.n, c=g.c, h=g.h, w=g.w, m=g.m, group=g.group, oh=g.oh, ow=g.ow, sh=g.sh, sw=g.sw, pt=g.pads[0],
            pl=g.pads[1], hp=self.hp, wp=self.wp, pad=int(self.pad), x=data_address(x), xp=xp, y=data_address(y),
            wpk=data_address(self.wpk), bpk=data_address(self.bpk), koff=self.koff.ctypes.data, k=self.k,
            nblk=self.nblk, residual=data_address(ins[-1]) if self.residual else 0, **self.epilogue_words(),
            wide=int(self.wide)))
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


