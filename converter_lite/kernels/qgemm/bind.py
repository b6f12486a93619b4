"""Int8 products as tile records for the native int8 GEMM (emit.py), built at bind time; weights packed at load.

``qgemm_step(address, a, packed, c, nt, azp=None, ascale=None, bscale=None, bias=None)`` -> a zero-argument
callable computing, for uint8 ``a [M, K]`` (rows in place, any row stride) and the ``PackedQ`` weights:

* ``c`` int32 ``[M, N]`` (``MatMulInteger``): ``(a - azp) @ B``;
* ``c`` float32 ``[M, N]`` (``MatMulIntegerToFloat``): ``float((a - azp) @ B) * (ascale * bscale[n]) + bias[n]``;

or None when the operands do not fit (the caller keeps its numpy path).  ``azp`` (uint8, one element) and
``ascale`` (float32, one element) are arrays whose *address* goes into the records: they may be values the plan
computes each run (DynamicQuantizeLinear's outputs).  ``bscale``/``bias``: constants, one per column or one.

Splitting (``gemm.bind.tile_grid``, with a quad of k counted as one multiply-add: the VNNI GEMM does four per
lane): rows or whole panels, about ``TILES_PER_THREAD`` tiles per thread; small products run on one thread.
"""
from __future__ import annotations

import numpy as np

from ..gemm.bind import tile_grid, tiles_step
from ..native_call import aligned, data_address
from .abi import FIELDS, FLAG_INT32, PANEL, QUAD

RECORD = np.dtype([(name, "<i8") for name in FIELDS])
U8, I32, F32 = np.dtype(np.uint8), np.dtype(np.int32), np.dtype(np.float32)


class PackedQ:
    """Constant int8 weights ``w [K, N]`` (K a multiple of 4) in the driver's panels (abi.py) with their int32
    column sums, both padded to whole panels and 64-byte aligned."""

    def __init__(self, w: np.ndarray):
        k, n = w.shape
        self.shape, self.kq, self.npan = (k, n), k // QUAD, -(-n // PANEL)
        padded = np.zeros((k, self.npan * PANEL), np.int8)
        padded[:, :n] = w
        self.data = aligned((self.npan, self.kq, PANEL, QUAD), np.int8)
        self.data[...] = padded.reshape(self.kq, QUAD, self.npan, PANEL).transpose(2, 0, 3, 1)
        self.colsum = aligned((self.npan * PANEL,), np.int32)
        self.colsum[...] = padded.sum(axis=0, dtype=np.int64).astype(np.int32)

    def columns(self, values, dtype=F32) -> np.ndarray:
        """``values`` (one per column, or one) as a padded aligned array for the records."""
        out = aligned((self.npan * PANEL,), dtype)
        out[:self.shape[1]] = np.asarray(values, dtype).reshape(-1)
        return out


def qgemm_step(address: int, a: np.ndarray, packed: PackedQ, c: np.ndarray, nt: int, azp=None, ascale=None,
               bscale=None, bias=None):
    """The bound step (see the module doc), or None."""
    k, n = packed.shape
    if a.dtype != U8 or a.ndim != 2 or c.ndim != 2 or a.shape[1] != k or c.shape != (a.shape[0], n):
        return None
    as_int = c.dtype == I32
    if not as_int and (c.dtype != F32 or ascale is None or bscale is None):
        return None
    m = a.shape[0]
    if m == 0:
        return lambda: None
    if a.strides[1] != 1 or a.strides[0] < k or c.strides[1] != c.itemsize or c.strides[0] % c.itemsize:
        return None
    for s in (azp, ascale):
        if s is not None and (s.size != 1 or not s.flags.c_contiguous):
            return None
    keep = [a, packed, c, azp, ascale]
    words = {"KQ": packed.kq, "lda": a.strides[0], "ldc": c.strides[0] // c.itemsize,
             "azp": 0 if azp is None else data_address(azp), "flags": FLAG_INT32 if as_int else 0}
    bs = bb = None
    if not as_int:
        bs = packed.columns(np.broadcast_to(np.asarray(bscale, F32).reshape(-1), (n,)))
        bb = None if bias is None else packed.columns(np.broadcast_to(np.asarray(bias, F32).reshape(-1), (n,)))
        words["ascale"] = data_address(ascale)
        keep += [bs, bb]
    axis, ranges, parallel = tile_grid(1, m, n, k // QUAD, nt, PANEL)
    pa, pc = data_address(a), data_address(c)
    rec = np.zeros(len(ranges), RECORD)
    for t, (lo, hi) in enumerate(ranges):
        r0, r1, c0, c1 = (lo, hi, 0, n) if axis == "M" else (0, m, lo, hi)
        row = dict(words, M=r1 - r0, N=c1 - c0, A=pa + r0 * a.strides[0],
                   B=data_address(packed.data) + (c0 // PANEL) * packed.kq * PANEL * QUAD,
                   C=pc + r0 * c.strides[0] + c0 * c.itemsize,
                   colsum=data_address(packed.colsum) + c0 * 4,
                   bscale=0 if bs is None else data_address(bs) + c0 * 4,
                   bias=0 if bb is None else data_address(bb) + c0 * 4)
        rec[t] = tuple(row.get(f, 0) for f in FIELDS)
    return tiles_step(address, rec, nt if parallel else 1, keep=tuple(keep))
