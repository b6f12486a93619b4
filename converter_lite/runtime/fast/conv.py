"""2-D Conv for the plan: padded copy + im2col + one BLAS GEMM, with bias fused, writing into the output
buffer; weights re-viewed (never copied) at load; temporaries in the plan's scratch area.

Layout (N = 1 per pass; batches loop).  ``xp`` is the input copied into a zero border of the padding (one extra
row at the end so shifted reads stay inside the buffer).  Then, by geometry:

* **pointwise** (1x1, stride 1, no padding): ``Y[M, HW] = W[M, C] @ X[C, HW]`` directly on the input; the
  bias comes from a row of ones the plan reserves right after the input's buffer (``W`` packed with the bias
  as an extra column), or else is added in place;
* **stride 1, "wide rows"**: output row ``oh`` is computed ``Wp`` (padded width) wide, so for kernel tap
  ``(i, j)`` the inputs of all outputs are ONE contiguous run of ``xp``'s flat plane starting at
  ``i*d*Wp + j*d``: im2col is ``K`` contiguous copies of length ``OH*Wp`` per channel (memcpy speed), the GEMM
  gives ``Y_wide[M, OH, Wp]`` and one pass crops the ``Wp - OW`` junk columns while adding the bias;
* **strided**: classic im2col through a strided view ``[C, kh, kw, OH, OW]`` of ``xp``, plus a row of ones so
  the GEMM adds the bias (``W`` packed with the bias as an extra column at load);
* **depthwise** (group = C = M): the same column layouts per channel and a batched ``[1, kh*kw] @ [kh*kw, L]``
  product per channel (no cross-channel GEMM to share); when the model's native code carries the depthwise
  driver (conv_depthwise.py: 16-column rows, masked border loads, no padded copy) float32 depthwise Convs run
  there instead (at opt_level >= 1 the expander usually turns them into fused tap kernels first; the driver
  takes those it leaves as Conv: auto_pad, kernels over 7x7, the expansion disabled; mobilenet_v2_half with
  ``disable_expand_ops=Conv``, 1 thread: 2.06 ms on this path, 0.85 ms on the driver).

Dense convolutions (not depthwise) run through the native tile driver instead when the model's native code
carries it (conv_native.py: im2col tiles in per-thread scratch + one BLAS GEMM per tile on the native thread
pool); the numpy paths below are the fallback.  Groups 1 < g < C run the dense path per group.  Bound for several threads, the work is split by channel
blocks (padding, im2col, depthwise) and by output-channel blocks (GEMM, crop); the im2col workspace is bounded by processing the
output rows in blocks (``COLS_LIMIT``).  A zero ``Pad`` in front of a Conv is folded into its pads by the
converter (passes/rewrite/pad_conv.py), not here.  Only float32/float64, 2-D, constant weights; else the reference kernel runs.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...kernels.conv_depthwise.bind import native_depthwise
from ...kernels.conv_direct.bind import native_direct
from ...kernels.conv_tiles.bind import native_dense
from ...ops.nn_window import resolve_window
from ...ops.registry import KernelError
from ..program import Impl, NodeCtx
from .parallel import parallel_calls, sequence, split_rows

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
COLS_LIMIT = 8 << 20                 # bytes of im2col workspace before output rows are processed in blocks



class Padder:
    """Copies ``x[n]`` (C, H, W) into the interior of a ``fill``-bordered buffer ``xp`` (C, Hp + extra, Wp)."""

    def __init__(self, xp: np.ndarray, pads, h: int, w: int, fill):
        self.xp, self.inner = xp, xp[:, pads[0]:pads[0] + h, pads[1]:pads[1] + w]
        self.borders = [b for b in (xp[:, :pads[0]], xp[:, pads[0] + h:], xp[:, pads[0]:pads[0] + h, :pads[1]],
                                    xp[:, pads[0]:pads[0] + h, pads[1] + w:]) if b.size]
        self.fill = fill

    def part(self, c0: int, c1: int, src: np.ndarray):
        """Fills borders and copies ``src`` channels [c0, c1)."""
        inner, borders, fill = self.inner[c0:c1], [b[c0:c1] for b in self.borders], self.fill

        def run():
            for b in borders:
                b.fill(fill)
            np.copyto(inner, src[c0:c1])
        return run


def _geometry(ctx: NodeCtx, x_shape):
    try:
        return resolve_window("Conv", ctx.attrs, tuple(x_shape[2:]), tuple(ctx.const(1).shape[2:]))
    except KernelError:
        return None


def _conv(ctx: NodeCtx):
    x, w, y = ctx.value(0), ctx.value(1), ctx.out()
    wc = ctx.const(1)
    if (x.dtype not in FLOATS or w.dtype != x.dtype or y.dtype != x.dtype or wc is None or len(x.shape) != 4
            or len(wc.shape) != 4 or (ctx.value(2) is not None and ctx.dtype(2) != x.dtype)):
        return None
    group = int(ctx.attrs.get("group", 1))
    n, c, h, wd = x.shape
    m, cg, kh, kw = wc.shape
    if group < 1 or c != cg * group or m % group or tuple(ctx.attrs.get("kernel_shape", (kh, kw))) != (kh, kw):
        return None
    src = ctx.ins[0]
    win = _geometry(ctx, x.shape)
    if win is None or (n, m) + tuple(win.out) != y.shape:
        return None
    pads = (win.pads_begin[0], win.pads_begin[1], win.pads_end[0], win.pads_end[1])
    if min(pads) < 0:
        return None
    bias = ctx.const(2)
    if ctx.value(2) is not None and bias is None:
        return None
    geo = _Geo(n, c, h, wd, m, group, kh, kw, win.strides, win.dilations, pads, tuple(win.out), x.dtype)
    if cg == 1 and m == c:
        plan = native_depthwise(ctx, geo, wc, bias) or _Depthwise(geo, wc, bias)
    elif (plan := native_direct(ctx, geo, wc, bias)) is not None or \
            (plan := native_dense(ctx, geo, wc, bias)) is not None:
        pass
    else:
        # the wide rows compute wp/ow times the GEMM: on small images the strided im2col copy costs less
        geo.wide = geo.wide and 4 * geo.wp <= 5 * geo.ow
        ones = (geo.pointwise and n == 1 and group == 1 and bias is not None
                and ctx.request_tail(src, h * wd * x.dtype.itemsize))
        plan = _Dense(geo, wc, bias, ones_tail=ones)
    return Impl(bind=plan.bind, workspace=plan.workspace, epilogue=getattr(plan, "epilogue", None))


class _Geo:
    def __init__(self, n, c, h, w, m, group, kh, kw, strides, dilations, pads, out, dtype):
        self.n, self.c, self.h, self.w, self.m, self.group, self.kh, self.kw = n, c, h, w, m, group, kh, kw
        self.sh, self.sw = strides
        self.dh, self.dw = dilations
        self.pads, (self.oh, self.ow), self.dtype = pads, out, dtype
        self.hp, self.wp = h + pads[0] + pads[2], w + pads[1] + pads[3]
        self.item = dtype.itemsize
        self.wide = strides == (1, 1)
        self.pointwise = (kh, kw) == (1, 1) and self.wide and pads == (0, 0, 0, 0)
        self.taps = kh * kw

    def xp_shape(self, channels):
        return (channels, self.hp + 1, self.wp)          # one spare row for the wide reads

    def row_len(self):
        return self.wp if self.wide else self.ow


def _carve(ws, at, shape, dtype):
    n = math.prod(shape) * dtype.itemsize
    return ws[at:at + n].view(dtype).reshape(shape), at + (n + 63) // 64 * 64


def _cols_view(g: _Geo, xp: np.ndarray, r0: int, r1: int) -> np.ndarray:
    """Strided view [C, kh, kw, L] (wide) or [C, kh, kw, R, OW] (strided) of the im2col columns of output rows
    [r0, r1) over ``xp`` (C, Hp + 1, Wp), C-contiguous."""
    cs, rs, es = xp.strides
    base = xp[:, r0 * g.sh:]
    if g.wide:
        return as_strided(base, (xp.shape[0], g.kh, g.kw, (r1 - r0) * g.wp), (cs, g.dh * rs, g.dw * es, es))
    return as_strided(base, (xp.shape[0], g.kh, g.kw, r1 - r0, g.ow),
                      (cs, g.dh * rs, g.dw * es, g.sh * rs, g.sw * es))


def _row_blocks(g: _Geo, k_rows: int) -> list[tuple[int, int]]:
    per_row = k_rows * g.row_len() * g.item
    rows = max(1, min(g.oh, COLS_LIMIT // max(per_row, 1)))
    return [(r, min(r + rows, g.oh)) for r in range(0, g.oh, rows)]


class _Dense:
    """Grouped or plain convolution through im2col + GEMM per group (see the module doc)."""

    def __init__(self, g: _Geo, w: np.ndarray, bias, ones_tail: bool = False):
        self.g, self.ones_tail = g, ones_tail
        gr = g.group
        self.cg, self.mg = g.c // gr, g.m // gr
        self.k = self.cg * g.taps
        self.w2 = w.reshape(gr, self.mg, self.k)
        self.bias = None if bias is None else np.asarray(bias).reshape(gr, self.mg)
        self.blocks = _row_blocks(g, self.k + 1)
        rmax = max(r1 - r0 for r0, r1 in self.blocks)
        if (ones_tail or not g.wide) and self.bias is not None:            # ones row: the GEMM adds the bias
            self.w2 = np.concatenate([self.w2, self.bias[:, :, None]], axis=2)
        self.kk = self.w2.shape[2]
        self.cols_shape = (self.kk, rmax * g.row_len())
        need = 0
        if not g.pointwise:
            need += _nbytes(g.xp_shape(g.c), g.dtype) + _nbytes(self.cols_shape, g.dtype)
            if g.wide:
                need += _nbytes((self.mg, rmax * g.wp), g.dtype)
        self.workspace = need + 3 * 64

    def bind(self, ins, outs, ws, nt=1):
        g, x, y, bias = self.g, ins[0], outs[0], self.bias
        if g.pointwise:
            return self._pointwise(x, y, bias, nt)
        xp, at = _carve(ws, 0, g.xp_shape(g.c), g.dtype)
        cols, at = _carve(ws, at, (math.prod(self.cols_shape),), g.dtype)
        yw = _carve(ws, at, (self.mg * self.cols_shape[1],), g.dtype)[0] if g.wide else None
        padder = Padder(xp, g.pads, g.h, g.w, 0)
        steps = []
        for n in range(g.n):
            steps.append(parallel_calls([padder.part(c0, c1, x[n]) for c0, c1 in split_rows(g.c, nt, 1)], nt))
            for gi in range(g.group):
                xg = xp[gi * self.cg:(gi + 1) * self.cg]
                yg = y[n, gi * self.mg:(gi + 1) * self.mg]
                for r0, r1 in self.blocks:
                    steps.append(self._block(xg, yg, gi, r0, r1, cols, yw, bias, nt))
        return sequence(steps)

    def _block(self, xg, yg, gi, r0, r1, cols, yw, bias, nt):
        g = self.g
        view = _cols_view(g, xg, r0, r1)
        k, length = self.k, math.prod(view.shape[3:])
        cols_b = cols[:self.kk * length].reshape(self.kk, length)
        dst = cols_b[:k].reshape(view.shape)
        copies = [partial(np.copyto, dst[c0:c1], view[c0:c1]) for c0, c1 in split_rows(self.cg, nt, 1)]
        if self.kk > k:
            # the row of ones that makes the GEMM add the bias, written on every run: the scratch area is
            # shared by every step of the plan, so one written at bind time does not survive the other steps
            copies.append(partial(cols_b[k:].fill, 1))          # rows apart from the copies' ``dst``
        w2 = self.w2[gi]
        if g.wide:
            ywb = yw[:self.mg * length].reshape(self.mg, length)
            crop = ywb.reshape(self.mg, r1 - r0, g.wp)[:, :, :g.ow]
            out = yg[:, r0:r1]
            b = None if bias is None else bias[gi].reshape(-1, 1, 1)
            parts = [_gemm_crop(w2[m0:m1], cols_b, ywb[m0:m1], crop[m0:m1], out[m0:m1],
                                None if b is None else b[m0:m1]) for m0, m1 in split_rows(self.mg, nt, 8)]
        else:
            out = yg.reshape(self.mg, g.oh * g.ow)[:, r0 * g.ow:r1 * g.ow]
            parts = [partial(np.matmul, w2[m0:m1], cols_b, out=out[m0:m1]) for m0, m1 in split_rows(self.mg, nt, 8)]
        return sequence([parallel_calls(copies, nt), parallel_calls(parts, nt)])

    def _pointwise(self, x, y, bias, nt):
        g, parts = self.g, []
        if self.ones_tail:                   # X and the row of ones reserved after it: [C + 1, HW]
            hw = g.h * g.w
            xa = as_strided(x, (g.c + 1, hw), (hw * g.item, g.item))
            ones = xa[g.c]
            yv = y.reshape(g.m, hw)
            parts = [partial(np.matmul, self.w2[0, m0:m1], xa, out=yv[m0:m1]) for m0, m1 in split_rows(g.m, nt, 8)]
            gemm = parallel_calls(parts, nt)

            def run():
                ones.fill(1)
                gemm()
            return run
        for n in range(g.n):
            for gi in range(g.group):
                xg = x[n, gi * self.cg:(gi + 1) * self.cg].reshape(self.cg, g.h * g.w)
                yg = y[n, gi * self.mg:(gi + 1) * self.mg].reshape(self.mg, g.h * g.w)
                for m0, m1 in split_rows(self.mg, nt, 8):
                    b = None if bias is None else bias[gi, m0:m1, None]
                    parts.append(_gemm_bias(self.w2[gi, m0:m1], xg, yg[m0:m1], b))
        return parallel_calls(parts, nt)


def _gemm_crop(w, cols, yw, crop, out, b):
    def run():
        np.matmul(w, cols, out=yw)
        if b is None:
            np.copyto(out, crop)
        else:
            np.add(crop, b, out=out)
    return run


def _gemm_bias(w, x, out, b):
    def run():
        np.matmul(w, x, out=out)
        if b is not None:
            np.add(out, b, out=out)
    return run


class _Depthwise:
    """group = C = M: per channel, columns [kh*kw, L] and a [1, kh*kw] @ [kh*kw, L] product."""

    def __init__(self, g: _Geo, w: np.ndarray, bias):
        self.g = g
        self.w3 = w.reshape(g.c, 1, g.taps)
        self.bias = None if bias is None else np.asarray(bias).reshape(g.c, 1, 1)
        self.L = g.oh * g.row_len()
        self.cb = max(1, min(g.c, COLS_LIMIT // max(1, g.taps * self.L * g.item)))
        self.workspace = (_nbytes(g.xp_shape(g.c), g.dtype) + _nbytes((self.cb, g.taps, self.L), g.dtype)
                          + _nbytes((self.cb, 1, self.L), g.dtype) + 3 * 64)

    def bind(self, ins, outs, ws, nt=1):
        g, x, y, bias = self.g, ins[0], outs[0], self.bias
        xp, at = _carve(ws, 0, g.xp_shape(g.c), g.dtype)
        cols, at = _carve(ws, at, (self.cb, g.taps, self.L), g.dtype)
        yw, _ = _carve(ws, at, (self.cb, 1, self.L), g.dtype)
        padder = Padder(xp, g.pads, g.h, g.w, 0)
        steps = []
        for n in range(g.n):
            for c0 in range(0, g.c, self.cb):
                c1 = min(c0 + self.cb, g.c)
                parts = [self._part(n, a, b, c0, x, y, xp, cols, yw, padder, bias)
                         for a, b in split_rows(c1 - c0, 2 * nt if nt > 1 else 1, 1)]
                steps.append(parallel_calls(parts, nt))
        return sequence(steps)

    def _part(self, n, a, b, c0, x, y, xp, cols, yw, padder, bias):
        g = self.g
        lo, hi = c0 + a, c0 + b
        pad = padder.part(lo, hi, x[n])
        view = _cols_view(g, xp[lo:hi], 0, g.oh)
        dst = cols[a:b].reshape(view.shape)
        w3, cb = self.w3[lo:hi], cols[a:b]
        bb = None if bias is None else bias[lo:hi]
        if g.wide:
            ywp = yw[a:b]
            crop = ywp.reshape(b - a, g.oh, g.wp)[:, :, :g.ow]
            out = y[n, lo:hi]
            bc = None if bb is None else bb.reshape(-1, 1, 1)

            def run():
                pad()
                np.copyto(dst, view)
                np.matmul(w3, cb, out=ywp)
                if bc is None:
                    np.copyto(out, crop)
                else:
                    np.add(crop, bc, out=out)
            return run
        out = y[n, lo:hi].reshape(b - a, 1, g.oh * g.ow)

        def run_strided():
            pad()
            np.copyto(dst, view)
            np.matmul(w3, cb, out=out)
            if bb is not None:
                np.add(out, bb, out=out)
        return run_strided


def _nbytes(shape, dtype) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


CONV_FAST = {"Conv": _conv}
