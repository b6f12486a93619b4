"""2-D MaxPool as whole-buffer (flat) numpy passes: the fast path's max pooling (any kernel, stride, pads,
dilation, ``ceil_mode``; float or integer input; the Indices output is not computed).

numpy spends ~20 ns per inner-loop call: an operation over a (C, rows, cols) view with strided rows costs that
per row, and a strided innermost axis runs its slow scalar loop.  So every heavy pass here is one call over a
contiguous 1-D buffer, computing every position and ignoring the ones it does not need:

1. rows: ``R[t] = max_r x[t + r*dh]`` for every window top ``t`` at once (``kh - 1`` flat ``maximum`` calls over
   the channel block, offsets ``r*dh*W``; positions whose window crosses into the next channel are garbage and
   never read);
2. ``G[:, i] = R[:, i*sh - pb]`` for the output rows whose window lies inside the input (one copy of whole
   rows, runs.py); the few border rows take the max of their in-range input rows directly;
3. columns: the same flat pass over ``G`` with offsets ``c*dw``;
4. ``out[:, :, k]`` picks column ``k*sw - pl`` of that (one copy); border columns take the max of their
   in-range columns of ``G``.

With stride 2 along the columns and an output half as wide as the input, steps 3-4 instead split ``G`` into
its even and odd columns (two narrowing integer casts) and run the flat pass over those halves straight into
the output (``_paired_columns``).  Every pass is bound once, as a list of ``functools.partial`` calls.

Taps in the padding are ``-inf`` (the integer minimum), which never change a max, so they are skipped.  The
passes use ``maximum``, which propagates NaN, where the reference keeps the first tap and replaces it by a
strictly greater one (a NaN first tap stays, later NaNs are skipped): when a float output holds a NaN (a NaN
reached some window), that channel block is recomputed by the reference kernel, so results equal the
reference's (up to the sign of a zero maximum when +0.0 and -0.0 tie).
"""
from __future__ import annotations

import sys
from functools import partial

import numpy as np

from ...ops.nn_pool import max_pool
from .runs import run_copy

# element size -> (unsigned type of a pair, unsigned type of one element): the columns pass's even/odd split
PAIRS = {4: (np.uint64, np.uint32), 2: (np.uint32, np.uint16)}
PAIRED_MIN = 256            # output positions per channel below which the split's extra calls cost more


def window_max(src: np.ndarray, dst: np.ndarray, offsets) -> list:
    """Calls computing ``dst[j] = max_k src[j + offsets[k]]`` for ``j < len(src) - offsets[-1]`` (1-D arrays,
    offsets ascending from 0, at least two; ``dst`` is not ``src``)."""
    m = src.shape[0] - offsets[-1]
    if m <= 0:
        return []
    out = dst[:m]
    return [partial(np.maximum, src[:m], src[offsets[1]:offsets[1] + m], out=out)] + \
        [partial(np.maximum, out, src[o:o + m], out=out) for o in offsets[2:]]


def _lines(length: int, out_n: int, stride: int, dil: int, kernel: int, pad: int):
    """(first, end) of the outputs whose whole window lies inside ``length``, and for every other output the
    in-range input positions of its taps."""
    first = next((i for i in range(out_n) if i * stride - pad >= 0), out_n)
    end = first
    while end < out_n and end * stride - pad + (kernel - 1) * dil <= length - 1:
        end += 1
    borders = {i: [t for t in (i * stride - pad + r * dil for r in range(kernel)) if 0 <= t < length]
               for i in range(out_n) if not first <= i < end}
    return first, end, borders


def _combine(out: np.ndarray, taps: list, fill) -> list:
    """Calls writing the max of ``taps`` (``fill`` when there is none) into ``out``."""
    if not taps:
        return [partial(out.fill, fill)]
    if len(taps) == 1:
        return [partial(np.copyto, out, taps[0])]
    return [partial(np.maximum, taps[0], taps[1], out=out)] + [partial(np.maximum, out, t, out=out)
                                                               for t in taps[2:]]


def _paired_columns(g: np.ndarray, scratch: np.ndarray, out: np.ndarray, half: int, taps: list[int]) -> list:
    """The columns pass for stride 2 when the output is exactly half as wide as ``g``'s rows: ``g``'s even and
    odd elements are split into two contiguous halves by two narrowing casts (a pair of elements read as one
    wider integer keeps its first element; read from one element further, its second), so that every column
    tap is a contiguous slice of one half and the max over the taps is written straight into ``out`` by flat
    passes.  ``taps``: each tap's column relative to ``2 * k`` (``j * dw - pad_left``); outputs whose taps leave
    the row are garbage here and recomputed by the caller.  Returns the calls doing it."""
    isz = g.dtype.itemsize
    wide, narrow = PAIRS[isz]
    raw = g.view(np.uint8)
    pairs = np.ndarray((half,), wide, buffer=raw, offset=0)
    shifted = np.ndarray((half - 1,), wide, buffer=raw, offset=isz)
    halves = scratch[:2 * half]
    even, odd = halves[:half].view(narrow), halves[half:].view(narrow)
    last_odd, g_last = odd[half - 1:], g.view(narrow)[2 * half - 1:]
    phases = [(halves[half:] if t % 2 else halves[:half], t // 2) for t in taps]
    lo = max(0, -min(q for _, q in phases))
    hi = half - max(0, max(q for _, q in phases))
    dst = out.reshape(-1)[lo:hi]
    (a, qa), (b, qb) = phases[:2]
    first = (a[lo + qa:hi + qa], b[lo + qb:hi + qb])
    rest = [p[lo + q:hi + q] for p, q in phases[2:]]

    calls = [partial(np.copyto, even, pairs, casting="unsafe"),
             partial(np.copyto, odd[:half - 1], shifted, casting="unsafe"), partial(np.copyto, last_odd, g_last)]
    if hi > lo:
        calls.append(partial(np.maximum, *first, out=dst))
        calls += [partial(np.maximum, dst, t, out=dst) for t in rest]
    return calls


class MaxPool2D:
    """The pooling of one (C, H, W) -> (C, oh, ow) image by a ``Window``; ``part`` binds a channel block."""

    def __init__(self, shape, win, dtype: np.dtype, attrs: dict):
        self.c, self.h, self.w = shape
        self.win, self.dtype, self.attrs = win, np.dtype(dtype), attrs
        self.is_float = self.dtype.kind == "f"
        self.fill = -np.inf if self.is_float else np.iinfo(self.dtype).min
        (oh, ow), (sh, sw), (dh, dw), (kh, kw) = win.out, win.strides, win.dilations, win.kernel
        self.rows = _lines(self.h, oh, sh, dh, kh, win.pads_begin[0])
        self.cols = _lines(self.w, ow, sw, dw, kw, win.pads_begin[1])
        self.r_elems = max(self.h, oh) * self.w        # per channel: R (rows pass), reused by the columns pass
        self.paired = (sw == 2 and kw > 1 and 2 * ow == self.w and self.dtype.itemsize in PAIRS
                       and sys.byteorder == "little" and oh * ow >= PAIRED_MIN)
        self.g_elems = oh * self.w

    @property
    def workspace(self) -> int:
        """Scratch bytes for all ``c`` channels."""
        return (self.c * (self.r_elems + self.g_elems) * self.dtype.itemsize + 63) // 64 * 64 + 64

    def part(self, c0: int, c1: int, x: np.ndarray, out: np.ndarray, ws: np.ndarray):
        """A callable pooling channels [c0, c1) of ``x`` (C, H, W) into ``out`` (C, oh, ow); ``ws``: scratch of
        ``workspace`` bytes shared by all parts (each uses its channels' share)."""
        win, h, w, n = self.win, self.h, self.w, c1 - c0
        oh, (sh, sw), (dh, dw), (kh, kw) = win.out[0], win.strides, win.dilations, win.kernel
        isz = self.dtype.itemsize
        r_all = ws[:self.c * self.r_elems * isz].view(self.dtype)
        g_at = (self.c * self.r_elems * isz + 63) // 64 * 64
        g_all = ws[g_at:g_at + self.c * self.g_elems * isz].view(self.dtype)
        rbuf = r_all[c0 * self.r_elems:c1 * self.r_elems]
        g = g_all[c0 * self.g_elems:c1 * self.g_elems]
        xs, o = x[c0:c1], out[c0:c1]
        xf = xs.reshape(-1)
        r = xf if kh == 1 else rbuf[:n * h * w]
        rv = r.reshape(n, h, w)
        gv = g.reshape(n, oh, w)
        cbuf = g if kw == 1 else rbuf[:n * oh * w]
        cv = cbuf.reshape(n, oh, w)
        (ra, rb, row_borders), (ca, cb, col_borders) = self.rows, self.cols
        row_offs = [i * dh * w for i in range(kh)]
        col_offs = [j * dw for j in range(kw)]
        t0, l0 = ra * sh - win.pads_begin[0], ca * sw - win.pads_begin[1]
        g_inner = run_copy(gv[:, ra:rb], rv[:, t0:t0 + (rb - ra - 1) * sh + 1:sh]) if rb > ra else None
        calls = []
        if kh > 1:
            calls += window_max(xf, r, row_offs)
        if g_inner is not None:
            calls.append(g_inner)
        for i, ts in row_borders.items():
            calls += _combine(gv[:, i], [xs[:, t] for t in ts], self.fill)
        if self.paired:
            calls += _paired_columns(g, rbuf, o, n * oh * (w // 2), [j * dw - win.pads_begin[1] for j in range(kw)])
        else:
            if kw > 1:
                calls += window_max(g, cbuf, col_offs)
            if cb > ca and oh:
                calls.append(run_copy(o[:, :, ca:cb], cv[:, :, l0:l0 + (cb - ca - 1) * sw + 1:sw]))
        for k, ts in col_borders.items():
            calls += _combine(o[:, :, k], [gv[:, :, t] for t in ts], self.fill)
        check, attrs = self.is_float and o.size > 0, self.attrs

        def run():
            for c in calls:
                c()
            if check and np.isnan(o.max()):
                np.copyto(o, max_pool(attrs, xs[None])[0][0])
        return run
