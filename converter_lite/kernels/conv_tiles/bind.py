"""Dense 2-D Conv through the native tile driver (emit.py): im2col tiles in per-thread scratch +
numpy's own CBLAS GEMM per tile, spread over the native thread pool, bias (and a following Relu / residual
Add) fused in the epilogue.

``native_dense(ctx, geo, w, bias)`` -> a plan (``workspace``, ``bind``, ``epilogue``) or None when the model's
native code has no driver for the dtype (no native code, native code off, a model converted before the driver
existed) or numpy's BLAS exposes no CBLAS GEMM (kernels/blas.py); fast_conv.py then runs its numpy path.

Tiling (``tiles``): a tile has at most ``P_MAX`` pixels and its columns ``[K, P]`` (``K = C/G * kh * kw``) fit
in ``COLS_BYTES`` so that the copy and the GEMM reading it stay in L2; with several threads the pixels, then
the output channels, are split further until there are ``CHUNKS_PER_THREAD`` tiles per thread (never below
``MIN_TILE_WORK`` multiply-adds per tile, where waking a worker costs more than it saves), a whole number of
pixel tiles per thread.  When output channels must be split and an image's columns fit in ``SHARED_BYTES``,
the driver's shared mode builds them once for all channel tiles.  A bound step is one ctypes call on a record
(``FIELDS``, abi.py) that holds every address and size.

Epilogue fusion: kernels/conv_epilogue.py.
"""
from __future__ import annotations

import numpy as np

from ..blas import gemm_entry
from ..conv_epilogue import EpilogueHook
from ..native_call import ENTRY
from ..runlist.bind import tag
from .abi import CONV_SYMBOLS, FIELDS

SYMBOLS = {np.dtype(dt): sym for dt, sym in CONV_SYMBOLS.items()}
_F = {name: i for i, name in enumerate(FIELDS)}
P_MAX = 384                       # pixels per tile at most (OpenBLAS slows down on wider row-major products)
COLS_BYTES = 512 << 10            # im2col columns of one tile (per thread; L2 is 1 MB per core here)
CHUNKS_PER_THREAD = 2
MIN_TILE_WORK = 1 << 19           # multiply-adds (~10 us on one core)
P_ALIGN = 16
MIN_TILE_M = 16
SHARED_BYTES = 1 << 20            # largest column matrix of a whole image built once and shared by the threads
ROW_SLACK = 32                    # elements a row of columns may be longer than its pixels (vector stores)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tiles(n: int, group: int, mg: int, cg: int, taps: int, length: int, item: int, nt: int, direct: bool) -> dict:
    """The tiling fields of the record for ``n * group`` products ``[mg, K] @ [K, length]`` (``K = cg*taps``):
    tile_p, tile_m, n_ptiles, n_mtiles, shared, n_cparts (see the module doc)."""
    k = cg * taps
    p_max = min(P_MAX, length if direct else max(P_ALIGN, COLS_BYTES // (k * item) // P_ALIGN * P_ALIGN))
    n_p, n_m = _cdiv(length, p_max), 1
    want = 1
    if nt > 1:
        want = max(1, min(CHUNKS_PER_THREAD * nt, n * group * mg * k * length // max(1, MIN_TILE_WORK)))
        units = n * group * n_p
        if units < want:                          # more pixel tiles, down to 4 * P_ALIGN pixels each
            n_p = max(n_p, min(_cdiv(want, n * group), max(1, length // (4 * P_ALIGN))))
            units = n * group * n_p
        if units < want:                          # then output-channel tiles of at least MIN_TILE_M
            n_m = max(1, min(_cdiv(want, units), mg // MIN_TILE_M))
        elif units % nt and n_p < length:         # a whole number of tiles per thread
            n_p = min(length, n_p + nt - units % nt if n * group == 1 else n_p)
    if n_m > 1 and not direct and k * length * item <= SHARED_BYTES:
        # small images: one column matrix per image built by all threads, then output-channel tiles
        n_m = max(1, min(want, mg // MIN_TILE_M))
        tile_m = _round_m(mg, n_m)
        return {"tile_p": length, "tile_m": tile_m, "n_ptiles": 1, "n_mtiles": _cdiv(mg, tile_m), "shared": 1,
                    "n_cparts": min(cg, CHUNKS_PER_THREAD * nt)}
    tile_p = _cdiv(length, n_p)
    aligned = tile_p + (-tile_p) % P_ALIGN
    if aligned <= p_max and _cdiv(length, aligned) == n_p:
        tile_p = aligned
    tile_m = _round_m(mg, n_m)
    return {"tile_p": tile_p, "tile_m": tile_m, "n_ptiles": _cdiv(length, tile_p), "n_mtiles": _cdiv(mg, tile_m),
            "shared": 0, "n_cparts": 1}


def _round_m(mg: int, parts: int) -> int:
    tile_m = _cdiv(mg, parts)
    if tile_m % 8 and tile_m < mg:
        tile_m = min(mg, tile_m + 8 - tile_m % 8)
    return tile_m



class NativeConv(EpilogueHook):
    """A dense (not depthwise) Conv bound to the driver; ``geo`` is fast_conv's geometry (pads include any
    absorbed Pad)."""
    GATE = False                    # its epilogue clamps only (emit.py)

    def __init__(self, geo, w: np.ndarray, bias, address: int, gemm, max_threads: int):
        self.g, self.address, self.gemm = geo, address, gemm
        self.w = np.ascontiguousarray(w, dtype=geo.dtype)
        self.bias = None if bias is None else np.ascontiguousarray(np.asarray(bias).reshape(-1), dtype=geo.dtype)
        self.direct = geo.pointwise
        self.k = geo.c // geo.group * geo.taps
        self.mg = geo.m // geo.group
        self.max_threads = max(1, max_threads)
        plans = [self.plan(nt) for nt in range(1, self.max_threads + 1)]     # bind may get any nt up to it
        p_max = max(p["tile_p"] for p in plans)
        self.slot_bytes = 0 if self.direct else _cdiv(self.k * (p_max + ROW_SLACK) * geo.item, 64) * 64
        need = max(self.slot_bytes * (1 if p["shared"] else self.max_threads) for p in plans)
        self.workspace = need + (64 if need else 0)

    def plan(self, nt: int) -> dict:
        g = self.g
        return tiles(g.n, g.group, self.mg, g.c // g.group, g.taps, g.oh * g.ow, g.item, nt, self.direct)

    def bind(self, ins, outs, ws, nt=1):
        g, x, y = self.g, ins[0], outs[0]
        nt = max(1, min(nt, self.max_threads))
        tiling = self.plan(nt)
        desc = np.zeros(len(FIELDS) + nt, np.int64)
        scratch = ws.ctypes.data if self.slot_bytes else 0
        if scratch % 64:
            scratch += 64 - scratch % 64
        vals = dict(n=g.n, c=g.c, h=g.h, w=g.w, m=g.m, group=g.group, kh=g.kh, kw=g.kw, sh=g.sh, sw=g.sw,
                    dh=g.dh, dw=g.dw, pt=g.pads[0], pl=g.pads[1], oh=g.oh, ow=g.ow, x=x.ctypes.data,
                    wt=self.w.ctypes.data, bias=0 if self.bias is None else self.bias.ctypes.data, y=y.ctypes.data,
                    residual=ins[-1].ctypes.data if self.residual else 0, scratch=scratch,
                    slot_bytes=self.slot_bytes, gemm=self.gemm.address, int64=int(self.gemm.int64),
                    direct=int(self.direct), **self.epilogue_words(), cur=0,
                    nslots=nt, **tiling)
        for name, v in vals.items():
            desc[_F[name]] = v
        fn, ptr, keep = ENTRY(self.address), desc.ctypes.data, (ins, y, ws, self.w, self.bias, desc)

        def run():
            fn(ptr, nt)
        run.conv_desc, run.keep = desc, keep
        return tag(run, self.address, 2, ptr, nt)


def native_dense(ctx, geo, w: np.ndarray, bias):
    """A NativeConv for ``ctx``'s Conv, or None (see the module doc)."""
    symbol = SYMBOLS.get(geo.dtype)
    address = None if symbol is None else ctx.native(symbol)
    gemm = gemm_entry(geo.dtype) if address else None
    if not address or gemm is None:
        return None
    return NativeConv(geo, w, bias, address, gemm, ctx.num_threads)





