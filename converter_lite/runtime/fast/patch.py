"""Convolutions whose windows are few and wide as one GEMM: patch embeddings (kernel = stride, no padding: the
stems of ViT, Swin, ConvNeXt...) and framing Convs (an STFT as a Conv: overlapping windows along one row).

Such a Conv reads, for each output pixel ``(i, j)``, one window of the input:

    Y[n, m, i, j] = sum over (c, a, b) of W[m, c, a, b] * X[n, c, i*sh + a, j*sw + b]  (+ B[m])

which is ``Yt[n] = P[n] @ Wt`` with the window matrix ``P[n]`` seen as ``[Ho*Wo, C*kh*kw]`` (row ``(i, j)`` is the
window of that pixel; a strided view of ``X``, side by side for patches, overlapping for frames) and
``Wt = W.reshape(M, C*kh*kw).T``.  A run is three steps: one strided copy of the input into ``P`` (the plan's
scratch), one call of the native GEMM tile driver (gemm_tiles.py: split across the thread pool, the bias
prefilled into ``Yt`` by the driver) and one transposed copy of ``Yt [Ho*Wo, M]`` into the NCHW output.  ``Wt``
is packed once, at load, so a call streams the weights once: for an STFT's 8 frames the tile driver's BLAS
repacked all of ``W`` on each call (openWakeWord's mel front end: two [257, 1, 512] Convs).  Input past the
last whole window is ignored, as the Conv ignores it.

Applies to float32/float64 2-D Convs with constant weights (and bias), ``group = 1``, ``dilations = 1`` and zero
pads whose geometry passes kernels/node_facts.py ``patch_rule`` (the converter records the GEMM drivers by the
same rule), when the model's native code carries the GEMM driver; every other Conv goes to ``fallback``
(conv.py's factory).
"""
from __future__ import annotations

from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...kernels.depth_to_space.abi import SYMBOL as DEPTH_TO_SPACE
from ...kernels.depth_to_space.bind import rearrange_step, record
from ...kernels.gemm.abi import GEMM_TILES_SYMBOL
from ...kernels.gemm.bind import PackedB, gemm_driver, gemm_step
from ...kernels.node_facts import patch_rule
from ...ops.registry import KernelError
from ..program import Impl, NodeCtx

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
ALIGN = 64


def patch_geometry(ctx: NodeCtx) -> tuple[int, int, int, int] | None:
    """``(kh, kw, sh, sw)`` when the node is a Conv this module runs (patches or frames, see the module doc and
    kernels/node_facts.py ``patch_rule``), else None."""
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
    sh, sw = (int(s) for s in a.get("strides", (1, 1)))
    n, c, h, wd = x.shape
    if (kh, kw) != tuple(w.shape[2:]) or w.shape[1] != c \
            or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID", b"NOTSET", b"VALID") \
            or not patch_rule(int(a.get("group", 1)), c, h, wd, kh, kw, sh, sw, a.get("pads", (0, 0, 0, 0)),
                              x.dtype.itemsize, lambda: a.get("dilations", (1, 1))):
        return None
    if tuple(y.shape) != (n, w.shape[0], (h - kh) // sh + 1, (wd - kw) // sw + 1):
        return None
    return kh, kw, sh, sw


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


def _impl(ctx: NodeCtx, addr, kh: int, kw: int, sh: int, sw: int) -> Impl:
    n, c, h, wd = ctx.value(0).shape
    w = ctx.const(1)
    m = w.shape[0]
    ho, wo = (h - kh) // sh + 1, (wd - kw) // sw + 1
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
        sn, sc, sr, se = x.strides
        # every output's window, in place: patches side by side, or frames overlapping along the row
        src = as_strided(x, (n, ho, wo, c, kh, kw), (sn, sh * sr, sw * se, sc, sr, se), writeable=False)
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
