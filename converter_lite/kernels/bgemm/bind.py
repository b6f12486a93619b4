"""bf16 products as tile records for the native bf16 GEMM (emit.py), built at bind time; weights packed at load.

``bgemm_step(address, a, packed, c, nt, bias=None)`` -> a zero-argument callable computing, for float32
``a [M, K]`` (rows in place, any row stride) and the ``PackedBf16`` weights, ``c [M, N] = bf16(a) @ B + bias``
(float32), or None when the operands do not fit (the caller keeps its numpy path).  ``bias``: a constant, one
per column or one.

Splitting (``gemm.bind.tile_grid``, a pair of k counted as one multiply-add: ``vdpbf16ps`` does two per lane):
rows or whole panels, about ``TILES_PER_THREAD`` tiles per thread; small products run on one thread.
"""
from __future__ import annotations

import numpy as np

from ..gemm.bind import tile_grid, tiles_step
from ..native_call import aligned, data_address
from .abi import FIELDS, PAIR, PANEL

RECORD = np.dtype([(name, "<i8") for name in FIELDS])
F32, U16 = np.dtype(np.float32), np.dtype(np.uint16)


class PackedBf16:
    """Constant bfloat16 weights ``w [K, N]`` (uint16 bit patterns) in the driver's panels (abi.py), padded to
    whole panels and pairs (zeros), 64-byte aligned."""

    def __init__(self, w: np.ndarray):
        k, n = w.shape
        self.shape, self.kp, self.npan = (k, n), -(-k // PAIR), -(-n // PANEL)
        padded = np.zeros((self.kp * PAIR, self.npan * PANEL), np.uint16)
        padded[:k, :n] = w
        self.data = aligned((self.npan, self.kp, PANEL, PAIR), np.uint16)
        self.data[...] = padded.reshape(self.kp, PAIR, self.npan, PANEL).transpose(2, 0, 3, 1)

    def columns(self, values) -> np.ndarray:
        """``values`` (one per column, or one) as a padded aligned float32 array for the records."""
        out = aligned((self.npan * PANEL,), F32)
        out[:self.shape[1]] = np.broadcast_to(np.asarray(values, F32).reshape(-1), (self.shape[1],))
        return out


def bgemm_step(address: int, a: np.ndarray, packed: PackedBf16, c: np.ndarray, nt: int, bias=None):
    """The bound step (see the module doc), or None."""
    k, n = packed.shape
    if a.dtype != F32 or c.dtype != F32 or a.ndim != 2 or c.ndim != 2 or a.shape[1] != k \
            or c.shape != (a.shape[0], n):
        return None
    m = a.shape[0]
    if m == 0:
        return lambda: None
    if a.strides[1] != 4 or a.strides[0] < 4 * k or c.strides[1] != 4 or c.strides[0] % 4 or c.strides[0] < 4 * n:
        return None
    bb = None if bias is None else packed.columns(bias)
    keep = (a, packed, c, bb)
    axis, ranges, parallel = tile_grid(1, m, n, packed.kp, nt, PANEL)
    pa, pc, pb = data_address(a), data_address(c), data_address(packed.data)
    pstride = packed.kp * PANEL * PAIR * 2
    rec = np.zeros(len(ranges), RECORD)
    for t, (lo, hi) in enumerate(ranges):
        r0, r1, c0, c1 = (lo, hi, 0, n) if axis == "M" else (0, m, lo, hi)
        row = {"M": r1 - r0, "N": c1 - c0, "K": k, "A": pa + r0 * a.strides[0], "lda": a.strides[0],
               "B": pb + (c0 // PANEL) * pstride, "C": pc + r0 * c.strides[0] + c0 * 4, "ldc": c.strides[0] // 4,
               "bias": 0 if bb is None else data_address(bb) + c0 * 4}
        rec[t] = tuple(row.get(f, 0) for f in FIELDS)
    return tiles_step(address, rec, nt if parallel else 1, keep=keep)
