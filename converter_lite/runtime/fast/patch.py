"""Patch-embedding convolutions (kernel = stride, no padding: the stems of ViT, Swin, ConvNeXt...) as one GEMM.

Such a Conv cuts each image into non-overlapping ``kh x kw`` patches:

    Y[n, m, i, j] = sum over (c, a, b) of W[m, c, a, b] * X[n, c, i*kh + a, j*kw + b]  (+ B[m])

which is ``Yt[n] = P[n] @ Wt`` with the patch matrix ``P[n] = X[n].reshape(C, Ho, kh, Wo, kw).transpose(1, 3, 0,
2, 4)`` seen as ``[Ho*Wo, C*kh*kw]`` and ``Wt = W.reshape(M, C*kh*kw).T``.  A run is three steps: one strided
copy of the input into ``P`` (the plan's scratch), one call of the native GEMM tile driver (gemm_tiles.py: rows
of ``P`` split across the thread pool, the bias prefilled into ``Yt`` by the driver) and one transposed copy of
``Yt [Ho*Wo, M]`` into the NCHW output.  ``Wt`` is made contiguous once, at load.  Rows and columns of the
input past the last whole patch are ignored, as the Conv ignores them.

Applies to float32/float64 2-D Convs with constant weights (and bias), ``group = 1``, ``dilations = 1``, zero
pads and ``strides = kernel_shape``, with patches of at least ``MIN_TAPS`` taps and rows of at least
``MIN_ROW_BYTES`` bytes (ViT's 16x16; smaller patches copy too slowly), when the model's native code carries
the GEMM driver; every other Conv goes to ``fallback`` (conv.py's factory).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ...kernels.depth_to_space.abi import SYMBOL as DEPTH_TO_SPACE
from ...kernels.depth_to_space.bind import rearrange_step, record
from ...kernels.gemm.abi import GEMM_TILES_SYMBOL
from ...kernels.gemm.bind import PackedB, gemm_driver, gemm_step
from ...kernels.node_facts import PATCH_MIN_ROW_BYTES, PATCH_MIN_TAPS
from ...ops.registry import KernelError
from ..program import Impl, NodeCtx

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
ALIGN = 64
# the size rule is the converter's too (it records the GEMM drivers for these Convs): kernels/node_facts.py
MIN_TAPS, MIN_ROW_BYTES = PATCH_MIN_TAPS, PATCH_MIN_ROW_BYTES


def patch_geometry(ctx: NodeCtx) -> tuple[int, int] | None:
    """``(kh, kw)`` when the node is a patch-embedding Conv this module runs (see the module doc), else None."""
    x, w, y = ctx.value(0), ctx.value(1), ctx.out()
    if x is None or w is None or len(x.shape) != 4 or len(w.shape) != 4 or ctx.const(1) is None:
        return None
    if x.dtype not in FLOATS or w.dtype != x.dtype or y.dtype != x.dtype or len(ctx.outs) != 1:
        return None
    b = ctx.value(2)
    if b is not None and (ctx.const(2) is None or b.dtype != x.dtype or tuple(b.shape) != (w.shape[0],)):
        return None
    a = ctx.attrs
    kh, kw = (int(k) for k in a.get("kernel_shape", w.shape[2:]))
    if (kh, kw) != tuple(w.shape[2:]) or kh * kw < MIN_TAPS or kw * x.dtype.itemsize < MIN_ROW_BYTES \
            or int(a.get("group", 1)) != 1 or w.shape[1] != x.shape[1]:
        return None
    if tuple(int(s) for s in a.get("strides", (1, 1))) != (kh, kw) \
            or any(int(d) != 1 for d in a.get("dilations", (1, 1))) \
            or any(int(p) != 0 for p in a.get("pads", (0, 0, 0, 0))) \
            or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID", b"NOTSET", b"VALID"):
        return None
    n, _, h, wd = x.shape
    if h < kh or wd < kw or tuple(y.shape) != (n, w.shape[0], h // kh, wd // kw):
        return None
    return kh, kw


def patch_conv(fallback):
    """A Conv factory: the patch GEMM when it applies, else ``fallback(ctx)``."""
    def factory(ctx: NodeCtx):
        # (the converter records the GEMM drivers only for patch convolutions: the others skip the geometry)
        geo = patch_geometry(ctx) if ctx.native(GEMM_TILES_SYMBOL) else None
        addr = gemm_driver(ctx) if geo is not None else None
        if not addr:
            return fallback(ctx)
        return _impl(ctx, addr, *geo)
    return factory


def _impl(ctx: NodeCtx, addr, kh: int, kw: int) -> Impl:
    n, c, h, wd = ctx.value(0).shape
    w = ctx.const(1)
    m = w.shape[0]
    ho, wo = h // kh, wd // kw
    k = c * kh * kw
    dt = w.dtype
    wt = np.ascontiguousarray(w.reshape(m, k).T)
    if addr.sgemm and dt == np.float32:
        wt = PackedB(wt)                               # panels for the native GEMM
    bias = ctx.const(2) if ctx.value(2) is not None else None
    p_bytes = -(-n * ho * wo * k * dt.itemsize // ALIGN) * ALIGN
    y_bytes = n * ho * wo * m * dt.itemsize

    def bind(ins, outs, ws, nt=1):
        x, y = ins[0], outs[0]
        p = ws[:p_bytes].view(dt)[:n * ho * wo * k].reshape(n, ho, wo, c, kh, kw)
        yt = ws[p_bytes:p_bytes + y_bytes].view(dt).reshape(n, ho * wo, m)
        src = x[:, :, :ho * kh, :wo * kw].reshape(n, c, ho, kh, wo, kw).transpose(0, 2, 4, 1, 3, 5)
        gemm = gemm_step(addr, p.reshape(n, ho * wo, k), wt, yt, nt, 1.0, 0.0 if bias is None else 1.0, bias)
        if gemm is None:
            raise KernelError("Conv: the patch GEMM does not take these operands")
        out = y.reshape(n, m, ho * wo)
        back = yt.transpose(0, 2, 1)

        def run():
            np.copyto(p, src)
            gemm()
            np.copyto(out, back)
        run.tiles = gemm.tiles                          # (what the step runs, for tests and tools)
        return run
    return Impl(bind=bind, workspace=p_bytes + y_bytes)


def conv_transpose_patches(ctx: NodeCtx) -> Impl | None:
    """ConvTranspose whose kernel equals its stride (2x2/stride-2 upsampling), the mirror of the patch Conv: every
    output pixel gets exactly one tap, so ``Z[n] = Wt @ X[n]`` (``Wt = W.reshape(C, M*kh*kw).T``, made
    contiguous at load; ``X[n]`` read in place as ``[C, H*W]``) holds every value, and ``Z[n, (m, a, b), i, j]``
    goes to ``Y[n, m, i*kh + a, j*kw + b]`` plus ``B[m]``: ``Z`` is a CRD depth tensor of blocks ``kh x kw``, so for
    float32 the native depth-to-space driver (kernels/depth_to_space/, recorded on these nodes by the converter)
    scatters it, bias added on the way, on the plan's threads, after the native GEMM (kernels/gemm/, also
    recorded on these nodes) computed ``Z`` on them (PP-OCRv4's detector, 2 threads: its two ConvTransposes
    0.92 -> 0.63 ms at 320x320 and 4.7 -> 2.4 ms at 480x640 with the scatter, the GEMM on numpy's one thread
    then most of it); otherwise
    (float64, a model converted before the driver) one numpy copy per tap, then the bias added.  The reference
    kernel scattered windows (2.2 ms for the detector's first one).  The converter expands these nodes when
    shapes are static (passes/expand/conv_transpose.py); this runs them in the plans of models with dynamic dims.
    None (the reference kernel) for any other ConvTranspose."""
    x, w, y = ctx.value(0), ctx.value(1), ctx.out()
    if x is None or w is None or len(x.shape) != 4 or len(w.shape) != 4 or ctx.const(1) is None:
        return None
    if x.dtype not in FLOATS or w.dtype != x.dtype or y.dtype != x.dtype or len(ctx.outs) != 1:
        return None
    bias = ctx.const(2) if ctx.value(2) is not None else None
    if ctx.value(2) is not None and (bias is None or bias.dtype != x.dtype or bias.shape != (w.shape[1],)):
        return None
    a = ctx.attrs
    n, c, h, wd = x.shape
    m, kh, kw = w.shape[1:]
    if w.shape[0] != c or int(a.get("group", 1)) != 1 or a.get("output_shape") \
            or any(int(p) for p in a.get("output_padding", ()) or ()) \
            or any(int(p) for p in a.get("pads", (0, 0, 0, 0)) or ()) \
            or any(int(d) != 1 for d in a.get("dilations", (1, 1)) or ()) \
            or tuple(int(s) for s in a.get("strides", (1, 1)) or (1, 1)) != (kh, kw) \
            or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID", b"NOTSET", b"VALID") \
            or tuple(y.shape) != (n, m, h * kh, wd * kw):
        return None
    wt = np.ascontiguousarray(ctx.const(1).reshape(c, m * kh * kw).T)
    z_bytes = -(-n * m * kh * kw * h * wd * x.dtype.itemsize // ALIGN) * ALIGN
    b4 = None if bias is None else bias.reshape(1, m, 1, 1)
    address = ctx.native(DEPTH_TO_SPACE) if x.dtype == np.float32 else None
    drivers = gemm_driver(ctx) if address else None

    def bind(ins, outs, ws, nt=1):
        xin, out = ins[0], outs[0]
        z = ws[:z_bytes].view(x.dtype)[:n * m * kh * kw * h * wd].reshape(n, m * kh * kw, h * wd)
        xs = xin.reshape(n, c, h * wd)
        if address:
            b1 = None if bias is None else np.ascontiguousarray(bias, np.float32).reshape(m)
            desc = record(n, m, h, wd, kh, kw, "CRD", z, out, True, b1)
            scatter = rearrange_step(address, desc, nt, (ins, outs, z, b1, desc))
            # Z = Wt @ X on the native GEMM, split across the plan's threads (numpy's held to one thread)
            gemm = None if drivers is None else gemm_step(drivers, wt, xs, z, nt)
            product = gemm if gemm is not None else partial(np.matmul, wt, xs, out=z)

            def run_native():
                product()
                scatter()                               # Y = blocks of Z (+ B[m]), once per element
            run_native.conv_desc = desc                 # (what the step runs, for tests and tools)
            run_native.tiles = getattr(gemm, "tiles", None)
            return run_native
        src = z.reshape(n, m, kh, kw, h, wd)
        dst = out.reshape(n, m, h, kh, wd, kw)
        # one copy per tap, each over whole rows (inner loop of wd elements, stride kw in y): a single 6-D copy
        # had kw (2) as its inner loop and took 1.5 ms for [1, 24, 160, 160]
        taps = [(dst[:, :, :, a, :, b], src[:, :, a, b]) for a in range(kh) for b in range(kw)]

        def run():
            np.matmul(wt, xs, out=z)
            for d, s_ in taps:
                np.copyto(d, s_)
            if b4 is not None:
                np.add(out, b4, out=out)
        return run
    return Impl(bind=bind, workspace=z_bytes)
