"""Dense float32 2-D Conv through the direct native drivers: register-tiled microkernels, no im2col, no BLAS.

* 1x1, stride 1, unpadded (``PointwiseConv``, codegen/conv_pointwise.py): vectorised over pixels, weights
  packed ``[G, nmb, C/G, 6]``;
* any other geometry with column stride 1, 2 or 4 (``DirectConv``, codegen/conv_direct.py): vectorised over
  output channels, reading the input in place (or a zero-bordered copy when the Conv pads).

``native_direct(ctx, geo, w, bias)`` -> a plan (``workspace``, ``bind``, ``epilogue``) or None when neither
applies (not float32, column stride other than 1, 2 or 4, empty, or a model whose native code lacks the driver);
conv_native.py's im2col + BLAS driver and then fast_conv.py's numpy paths are the fallbacks.

At load the weights ``[M, C/G, kh, kw]`` are packed once into blocks of 16 output channels
``[G, nblk, K, 16]`` (``K = C/G*kh*kw`` taps, zero-padded channels), the bias into ``[G, nblk, 16]``, and the
input offset of every tap into ``koff[K]``.  A bound step is one foreign call on a record (``FIELDS``).  The
epilogue hook (conv_native.EpilogueHook) takes over a following Relu/Clip and residual Add.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..model import pages
from .conv_native import EpilogueHook, _bits
from .native import wide_vectors
from .runlist import tag

SYMBOL = "cl_conv2d_direct_v2_f32"
POINTWISE_SYMBOL = "cl_conv1x1_v1_f32"
FIELDS = ("n", "c", "h", "w", "m", "group", "oh", "ow", "sh", "sw", "pt", "pl", "hp", "wp", "pad", "x", "xp",
          "y", "wpk", "bpk", "koff", "k", "nblk", "residual", "clamp", "lo", "hi", "wide")
_F = {name: i for i, name in enumerate(FIELDS)}
EXTRA = 2                          # i64 words after FIELDS the driver writes (tiles per chunk, row mode)
VL = 16
STRIDES = (1, 2, 4)                # codegen/conv_direct.py's microkernel tables
_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


def _aligned(shape, dtype=np.float32) -> np.ndarray:
    """A zeroed, 64-byte aligned C-contiguous array."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(n + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + n].view(dtype).reshape(shape)


def pack_weights(w: np.ndarray, group: int) -> tuple[np.ndarray, int]:
    """``[M, C/G, kh, kw]`` -> (``[G, nblk, K, 16]`` float32, nblk)."""
    m = w.shape[0]
    mg = m // group
    k = int(np.prod(w.shape[1:]))
    nblk = -(-mg // VL)
    out = _aligned((group, nblk, k, VL))
    wg = np.asarray(w, np.float32).reshape(group, mg, k)
    padded = np.zeros((group, nblk * VL, k), np.float32)
    padded[:, :mg] = wg
    out[...] = padded.reshape(group, nblk, VL, k).transpose(0, 1, 3, 2)
    return out, nblk


def pack_bias(bias, m: int, group: int, nblk: int) -> np.ndarray:
    out = _aligned((group, nblk * VL))
    if bias is not None:
        out[:, :m // group] = np.asarray(bias, np.float32).reshape(group, m // group)
    return out.reshape(group, nblk, VL)


def _call(address: int, desc: np.ndarray, nt: int, keep: tuple):
    fn, ptr = _ENTRY(address), desc.ctypes.data

    def run():
        fn(ptr, nt)
    run.conv_desc, run.keep = desc, keep
    return tag(run, address, 2, ptr, nt)


class PointwiseConv(EpilogueHook):
    """A 1x1, stride 1, unpadded float32 Conv bound to the pointwise driver."""
    FIELDS = ("n", "c", "m", "group", "p", "x", "y", "wpk", "bpk", "nmb", "residual", "clamp", "lo", "hi",
              "wide")
    MR = 6
    EXTRA = 2                          # i64 words after FIELDS the driver writes (pixel, channel blocks per chunk)

    def __init__(self, geo, w: np.ndarray, bias, address: int, max_threads: int, wide: bool):
        g = self.g = geo
        self.address, self.max_threads, self.wide = address, max(1, max_threads), wide
        mg, cg = g.m // g.group, g.c // g.group
        self.nmb = -(-mg // self.MR)
        padded = np.zeros((g.group, self.nmb * self.MR, cg), np.float32)
        padded[:, :mg] = np.asarray(w, np.float32).reshape(g.group, mg, cg)
        self.wpk = _aligned((g.group, self.nmb, cg, self.MR))
        self.wpk[...] = padded.reshape(g.group, self.nmb, self.MR, cg).transpose(0, 1, 3, 2)
        pages.release(w)                 # the driver reads the packed copy (model/pages.py)
        self.bpk = _aligned((g.group, self.nmb * self.MR))
        if bias is not None:
            self.bpk[:, :mg] = np.asarray(bias, np.float32).reshape(g.group, mg)
        self.workspace = 0

    def bind(self, ins, outs, ws, nt=1):
        g, x, y = self.g, ins[0], outs[0]
        lo, hi = self.clamp or (0.0, 0.0)
        at = {name: i for i, name in enumerate(self.FIELDS)}
        desc = np.zeros(len(self.FIELDS) + self.EXTRA, np.int64)
        vals = dict(n=g.n, c=g.c, m=g.m, group=g.group, p=g.h * g.w, x=x.ctypes.data, y=y.ctypes.data,
                    wpk=self.wpk.ctypes.data, bpk=self.bpk.ctypes.data, nmb=self.nmb,
                    residual=ins[-1].ctypes.data if self.residual else 0, clamp=int(self.clamp is not None),
                    lo=_bits(lo), hi=_bits(hi), wide=int(self.wide))
        for name, v in vals.items():
            desc[at[name]] = v
        return _call(self.address, desc, max(1, min(nt, self.max_threads)), (ins, y, self.wpk, self.bpk, desc))


class DirectConv(EpilogueHook):
    """A dense float32 Conv bound to the direct driver; ``geo`` is fast_conv's geometry (pads include any
    absorbed Pad)."""

    def __init__(self, geo, w: np.ndarray, bias, address: int, max_threads: int, wide: bool):
        g = self.g = geo
        self.address, self.max_threads, self.wide = address, max(1, max_threads), wide
        self.wpk, self.nblk = pack_weights(w, g.group)
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
        lo, hi = self.clamp or (0.0, 0.0)
        desc = np.zeros(len(FIELDS) + EXTRA, np.int64)
        vals = dict(n=g.n, c=g.c, h=g.h, w=g.w, m=g.m, group=g.group, oh=g.oh, ow=g.ow, sh=g.sh, sw=g.sw,
                    pt=g.pads[0], pl=g.pads[1], hp=self.hp, wp=self.wp, pad=int(self.pad), x=x.ctypes.data, xp=xp,
                    y=y.ctypes.data, wpk=self.wpk.ctypes.data, bpk=self.bpk.ctypes.data, koff=self.koff.ctypes.data,
                    k=self.k, nblk=self.nblk, residual=ins[-1].ctypes.data if self.residual else 0,
                    clamp=int(self.clamp is not None), lo=_bits(lo), hi=_bits(hi), wide=int(self.wide))
        for name, v in vals.items():
            desc[_F[name]] = v
        return _call(self.address, desc, nt, (ins, y, ws, self.wpk, self.bpk, self.koff, desc))


def applies(geo) -> bool:
    """Whether the direct driver computes this geometry (float32, dense or grouped, column stride in STRIDES)."""
    return geo.dtype == np.float32 and geo.sw in STRIDES and geo.n * geo.oh * geo.ow > 0 and geo.m > 0


def native_direct(ctx, geo, w: np.ndarray, bias):
    """A PointwiseConv or DirectConv for ``ctx``'s Conv, or None (see the module doc)."""
    if not applies(geo) or ctx.library is None:
        return None
    wide = wide_vectors(ctx.library)
    if geo.pointwise and pointwise_pays(geo, wide):
        address = ctx.native(POINTWISE_SYMBOL)
        if address:
            return PointwiseConv(geo, w, bias, address, ctx.num_threads, wide)
    address = ctx.native(SYMBOL)
    if not address:
        return None
    return DirectConv(geo, w, bias, address, ctx.num_threads, wide)


def pointwise_pays(geo, wide: bool) -> bool:
    """Whether the pointwise driver beats the direct one on this 1x1 convolution: its pixel blocks (64 or 16
    pixels) waste lanes on small images, the direct driver's tiles (12 or 6 pixels) pay a transpose per tile,
    which weighs most when there are few input channels (measured: P=1600, C=8: pointwise 2.1x faster; P=25,
    C=160: direct 2.7x faster)."""
    p, cg = geo.h * geo.w, geo.c // geo.group
    block, tile = (64, 12) if wide else (16, 6)
    return -(-p // block) * block <= -(-p // tile) * tile * (1.0 + 16.0 / max(cg, 1))
