"""Dense 2-D Conv through the native tile driver (codegen/conv_driver.py): im2col tiles in per-thread scratch +
numpy's own CBLAS GEMM per tile, spread over the native thread pool, bias (and a following Relu / residual
Add) fused in the epilogue.

``native_dense(ctx, geo, w, bias)`` -> a plan (``workspace``, ``bind``, ``epilogue``) or None when the model's
native code has no driver for the dtype (no native code, native code off, a model converted before the driver
existed) or numpy's BLAS exposes no CBLAS GEMM (runtime/blas.py); fast_conv.py then runs its numpy path.

Tiling (``tiles``): a tile has at most ``P_MAX`` pixels and its columns ``[K, P]`` (``K = C/G * kh * kw``) fit
in ``COLS_BYTES`` so that the copy and the GEMM reading it stay in L2; with several threads the pixels, then
the output channels, are split further until there are ``CHUNKS_PER_THREAD`` tiles per thread (never below
``MIN_TILE_WORK`` multiply-adds per tile, where waking a worker costs more than it saves), a whole number of
pixel tiles per thread.  When output channels must be split and an image's columns fit in ``SHARED_BYTES``,
the driver's shared mode builds them once for all channel tiles.  A bound step is one ctypes call on a record
(``FIELDS``, the layout codegen/conv_driver.py documents) that holds every address and size.

Epilogue fusion (``NativeConv.epilogue``, the lowering's ``Impl.epilogue`` hook): a fused kernel right after
the Conv, sole reader of its output, that is ``Relu``/``Max(x, 0)``, ``Add(x, r)`` with ``r`` computed before
(same shape and dtype) or that Add then the Relu, runs in the driver's epilogue instead; ``r`` becomes an extra
input of the step (the last one).
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from .blas import gemm_entry
from .runlist import tag

LAYOUT = 2                        # the record layout version in the driver's symbols (codegen/conv_driver.py)
SYMBOLS = {np.dtype(np.float32): f"cl_conv2d_tiles_v{LAYOUT}_f32",
           np.dtype(np.float64): f"cl_conv2d_tiles_v{LAYOUT}_f64"}
FIELDS = ("n", "c", "h", "w", "m", "group", "kh", "kw", "sh", "sw", "dh", "dw", "pt", "pl", "oh", "ow",
          "x", "wt", "bias", "y", "residual", "scratch", "slot_bytes", "tile_p", "tile_m", "n_ptiles", "n_mtiles",
          "gemm", "int64", "direct", "clamp", "lo", "hi", "shared", "cur", "n_cparts", "nslots")
_F = {name: i for i, name in enumerate(FIELDS)}
P_MAX = 384                       # pixels per tile at most (OpenBLAS slows down on wider row-major products)
COLS_BYTES = 512 << 10            # im2col columns of one tile (per thread; L2 is 1 MB per core here)
CHUNKS_PER_THREAD = 2
MIN_TILE_WORK = 1 << 19           # multiply-adds (~10 us on one core)
P_ALIGN = 16
MIN_TILE_M = 16
SHARED_BYTES = 1 << 20            # largest column matrix of a whole image built once and shared by the threads
ROW_SLACK = 32                    # elements a row of columns may be longer than its pixels (vector stores)
_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


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


class EpilogueHook:
    """The lowering's ``Impl.epilogue`` hook of the native convolution drivers (this one and conv_direct.py):
    ``clamp`` ((lo, hi) or None) and ``residual`` (an extra last input) are applied in the driver's epilogue."""
    clamp, residual = None, False

    def epilogue(self, node, ins, own, prog):
        """Takes over a fused kernel after the Conv that is an optional ``Add`` of a value computed earlier then
        clamps (Relu, Max/Min with a constant, Clip); returns the extra inputs (the Add's other operand) or
        None."""
        if self.clamp is not None or self.residual:
            return None
        found = _epilogue_of(node.attrs.get("graph"), ins, own, prog)
        if found is None:
            return None
        self.clamp, res = found
        self.residual = res is not None
        return () if res is None else (res,)


class NativeConv(EpilogueHook):
    """A dense (not depthwise) Conv bound to the driver; ``geo`` is fast_conv's geometry (pads include any
    absorbed Pad)."""

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
        lo, hi = self.clamp or (0.0, 0.0)
        vals = dict(n=g.n, c=g.c, h=g.h, w=g.w, m=g.m, group=g.group, kh=g.kh, kw=g.kw, sh=g.sh, sw=g.sw,
                    dh=g.dh, dw=g.dw, pt=g.pads[0], pl=g.pads[1], oh=g.oh, ow=g.ow, x=x.ctypes.data,
                    wt=self.w.ctypes.data, bias=0 if self.bias is None else self.bias.ctypes.data, y=y.ctypes.data,
                    residual=ins[-1].ctypes.data if self.residual else 0, scratch=scratch,
                    slot_bytes=self.slot_bytes, gemm=self.gemm.address, int64=int(self.gemm.int64),
                    direct=int(self.direct), clamp=int(self.clamp is not None), lo=_bits(lo), hi=_bits(hi), cur=0,
                    nslots=nt, **tiling)
        for name, v in vals.items():
            desc[_F[name]] = v
        fn, ptr, keep = _ENTRY(self.address), desc.ctypes.data, (ins, y, ws, self.w, self.bias, desc)

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


def _bits(v: float) -> int:
    return int(np.array(v, np.float64).view(np.int64))


def _scalar(v):
    """The float value of a one-element constant, else None."""
    if v is None or v.const is None or np.size(v.const) != 1:
        return None
    return float(np.asarray(v.const).reshape(-1)[0])


def _bound(node, cur, lo: float, hi: float):
    """(lo, hi) after applying ``node`` (Relu, Max/Min with a constant, Clip with constant bounds) to the value
    ``cur`` clamped to [lo, hi]; None for any other node.  ``min(max(., lo), hi)`` composes with max/min."""
    ins = list(node.inputs)
    if node.op == "Relu" and len(ins) == 1 and ins[0] is cur:
        return max(lo, 0.0), max(hi, 0.0)
    if node.op in ("Max", "Min") and len(ins) == 2 and (ins[0] is cur) != (ins[1] is cur):
        c = _scalar(ins[1] if ins[0] is cur else ins[0])
        if c is None or math.isnan(c):
            return None
        return (max(lo, c), max(hi, c)) if node.op == "Max" else (lo, min(hi, c))
    if node.op == "Clip" and ins and ins[0] is cur and not (set(node.attrs) & {"min", "max"}):
        cl = [_scalar(v) if v is not None else None for v in (ins + [None, None])[1:3]]
        if any(v is not None and v.const is None for v in ins[1:]) or any(x is not None and math.isnan(x) for x in cl):
            return None
        lo, hi = (lo, hi) if cl[0] is None else (max(lo, cl[0]), max(hi, cl[0]))
        return (lo, hi) if cl[1] is None else (lo, min(hi, cl[1]))
    return None


def _epilogue_of(graph, ins, own, prog):
    """((lo, hi) or None, residual value id or None) when fused sub-graph ``graph`` (inputs bound to value ids
    ``ins``) is an optional ``Add(own, r)`` (``r`` a computed value of ``own``'s shape and dtype) followed by
    clamps (Relu, Max/Min with a constant, Clip with constant bounds), at least one node; else None."""
    if graph is None or len(graph.outputs) != 1 or len(graph.inputs) != len(ins) or not graph.nodes:
        return None
    vid = {id(v): i for v, i in zip(graph.inputs, ins)}
    src = [v for v in graph.inputs if vid[id(v)] == own]
    if len(src) != 1:
        return None
    cur, residual, bounds = src[0], None, None
    for k, n in enumerate(graph.nodes):
        if len(n.outputs) != 1:
            return None
        others = [v for v in n.inputs if v is not cur]
        if n.op == "Add" and k == 0 and len(n.inputs) == 2 and len(others) == 1 and id(others[0]) in vid:
            r = vid[id(others[0])]
            rv, ov = prog.values[r], prog.values[own]
            if r == own or rv.const is not None or rv.dynamic or rv.shape != ov.shape or rv.dtype != ov.dtype:
                return None
            residual = r
        else:
            bounds = _bound(n, cur, *(bounds or (-np.inf, np.inf)))
            if bounds is None:
                return None
        cur = n.outputs[0]
    return (bounds, residual) if cur is graph.outputs[0] else None
