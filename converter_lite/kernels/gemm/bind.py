"""GEMMs as tile records for the native tile driver (emit.py): built once at bind time.

``gemm_step(driver, a, b, c, nt, alpha=1, beta=0, bias=None)`` -> a zero-argument callable computing
``c = alpha * a @ b + beta * c`` (after ``c`` is prefilled from ``bias``, when given) with one call of the
tile driver, or None when the operands do not fit (other dtypes, negative or unaligned strides, an empty
product, no GEMM to call): the caller then keeps its numpy path.  ``driver`` is a ``GemmDriver``
(``gemm_driver(ctx)``: the tile driver's address, and the model's native ``cl_sgemm_v1`` (emit_sgemm.py),
which float32 tiles call instead of numpy's CBLAS) or a bare tile-driver address (numpy's CBLAS only).

* ``b`` may be a ``PackedB``: constant float32 weights ``[K, N]`` packed once (at load) into the native
  GEMM's ``PANEL``-column panels, so no tile re-reads them with a stride; it needs the native sgemm.

* ``a [..., M, K]``, ``b [..., K, N]``, ``c [..., M, N]``: numpy arrays (views into the plan's buffers);
  batch dims broadcast (``c``'s batch shape is the broadcast of the others').  Each 2-D matrix is read in
  place: row-major with ``ld`` = its row stride, or, when its *columns* are contiguous (a transposed view),
  as the transpose of a row-major matrix (CBLAS's transpose flag); nothing is copied.  ``c`` must have
  contiguous rows.
* ``bias``: broadcastable to ``c`` (``gemm_records``: of ``c``'s dtype); copied into ``c`` tile by tile before the product (use ``beta=1`` to add it).
* Splitting (``tile_grid``): each batch entry is one tile; when the whole product has at least ``MIN_WORK``
  multiply-adds and ``nt > 1``, entries are further split into about ``TILES_PER_THREAD * nt`` tiles in all,
  along N when N > M (each tile then packs only its columns of B; its A rows are repacked per tile, the cheaper
  operand) else along M, into equal parts of at least ``ALIGN`` rows/columns (column cuts at multiples of
  ``ALIGN``, or of ``PANEL`` for the native sgemm, whose panels they must not cut): a short last tile would
  leave a thread idle while the other finishes a full one.  Below ``MIN_WORK`` the step runs on one thread.

The records hold raw addresses: the step keeps every array it points into alive.

Other drivers' use (e.g. a 1x1 convolution, NCHW): ``gemm_step(addr, W[Cout, Cin], X.reshape(N, Cin, H*W),
Y.reshape(N, Cout, H*W), nt, beta=1.0, bias=b[:, None])`` (the 2-D weight broadcasts over the batch); several
products in one call: ``tiles_step(addr, np.concatenate([rec1, rec2]), nt, keep=...)`` with the records of
``gemm_records`` (tiles of one call run concurrently: they must not depend on each other).
"""
from __future__ import annotations

import ctypes
import itertools
import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from ...model import pages
from ..blas import GemmEntry, gemm_entry
from ..native_call import aligned, data_address
from ..runlist.bind import tag
from .abi import (
    FIELDS,
    FLAG_WIDE,
    FLOAT_FIELDS,
    GEMM_TILES_SYMBOL,
    KIND_DOUBLE,
    KIND_INT64,
    NO_TRANS,
    PACKED,
    PANEL,
    ROW_MAJOR,
    SGEMM_SYMBOL,
    TRANS,
)

RECORD = np.dtype([(name, "<f8" if name in FLOAT_FIELDS else "<i8") for name in FIELDS])
_NONE = (0,) * len(FIELDS)          # (the value of a field ``words`` leaves out)
# multiply-adds (~10 us on one core) below which a product runs on the calling thread: on an idle core a split
# pays from ~1e5 (measured), but a pool worker that the OS preempts or wakes late (busy machine, a VM) stalls the
# caller for 0.1 ms or more, so only products that gain several microseconds take the risk
MIN_WORK = 1 << 19
# ... except a skinny product (at most SKINNY rows) whose B has at least MIN_B_ELEMENTS: it streams B from memory
# at a few bytes per multiply-add, so its time goes with B's size, not its multiply-adds, and two cores stream it
# faster than one (openWakeWord's wake-word heads, batch 1: a [1, 3264] x [3264, 128] Gemm, 418K multiply-adds
# but 1.7 MB of weights, ~30 us on one thread; onnxruntime splits it: 31.7 -> 22.4 us a call on 2 threads)
SKINNY = 4
MIN_B_ELEMENTS = 1 << 17
TILES_PER_THREAD = 2
ALIGN = 16
_DRIVER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
F32 = np.dtype(np.float32)


@dataclass(frozen=True)
class GemmDriver:
    """What a model's native library offers for products: the tile driver and (float32) its own GEMM."""
    tiles: int
    sgemm: int | None = None
    wide: bool = False


def gemm_driver(ctx) -> GemmDriver | None:
    """The GEMM drivers of ``ctx``'s native library (a lowering.NodeCtx), or None without a tile driver."""
    tiles = ctx.native(GEMM_TILES_SYMBOL)
    if not tiles:
        return None
    sgemm = ctx.native(SGEMM_SYMBOL)
    return GemmDriver(tiles, sgemm or None, bool(sgemm) and ctx.wide_vectors())


class PackedB:
    """A constant float32 ``B [K, N]`` packed for the native GEMM: panel ``p`` holds columns ``PANEL*p ...`` as
    ``[K][PANEL]`` floats (zeros past N), 64-byte aligned.  ``matrix`` keeps the original for numpy paths."""

    def __init__(self, b: np.ndarray):
        k, n = b.shape
        data = aligned((-(-n // PANEL), k, PANEL))
        full = n // PANEL
        if full:
            data[:full] = b[:, :full * PANEL].reshape(k, full, PANEL).transpose(1, 0, 2)
        if n > full * PANEL:
            data[full, :, :n - full * PANEL] = b[:, full * PANEL:]
        pages.release(b)             # the GEMM reads the panels from now on (numpy paths map b in again)
        self.data, self.matrix, self.shape = data, b, (k, n)
        self.ndim, self.dtype = 2, F32


def blas_layout(x: np.ndarray) -> tuple[int, int] | None:
    """(CBLAS transpose flag, leading dimension) reading the 2-D-strided ``x[..., R, C]`` in place, or None."""
    r, c = x.shape[-2:]
    sr, sc = x.strides[-2:]
    es = x.itemsize
    if (c == 1 or sc == es) and (r == 1 or (sr > 0 and sr % es == 0 and sr // es >= c)):
        return NO_TRANS, (max(1, c) if r == 1 else sr // es)
    if (r == 1 or sr == es) and (c == 1 or (sc > 0 and sc % es == 0 and sc // es >= r)):
        return TRANS, (max(1, r) if c == 1 else sc // es)
    return None


def tile_grid(batch: int, m: int, n: int, k: int, nt: int, align: int = ALIGN) -> tuple[str, list[tuple[int, int]], bool]:
    """(split axis "M"/"N", the [start, stop) ranges of that axis per batch entry, run on several threads);
    column cuts at multiples of ``align``."""
    axis, size = ("N", n) if n > m else ("M", m)
    if nt <= 1 or (batch * m * n * k < MIN_WORK and (m > SKINNY or k * n < MIN_B_ELEMENTS)):
        return axis, [(0, size)], False
    # equal parts (a last short tile would leave one thread idle), each at least ALIGN long; column cuts
    # at multiples of ALIGN, row cuts anywhere; the most parts whose span (tiles per thread x tile size) is
    # within 15% of the shortest
    most = max(1, min(-(-TILES_PER_THREAD * nt // batch), size // (align if axis == "N" else ALIGN)))
    unit = align if axis == "N" else 1
    units = -(-size // unit)
    span = {p: -(-batch * p // nt) * -(-units // p) for p in range(1, most + 1)}
    parts = max(p for p in span if span[p] <= 1.15 * min(span.values()))
    cuts = [min(size, -(-i * units // parts) * unit) for i in range(parts + 1)]    # larger tiles first
    ranges = [(lo, hi) for lo, hi in itertools.pairwise(cuts) if hi > lo]
    return axis, ranges, batch * len(ranges) > 1


def _batch_offsets(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Byte offset of every batch entry of ``x`` broadcast to batch ``shape`` (C order)."""
    nb = len(shape)
    if x.ndim <= 2 or all(d == 1 for d in shape):
        return np.zeros(max(1, math.prod(shape)), np.int64)
    bshape = (1,) * (nb - (x.ndim - 2)) + x.shape[:-2]
    bstrides = (0,) * (nb - (x.ndim - 2)) + x.strides[:-2]
    off = np.zeros(shape, np.int64)
    for d in range(nb):
        if bshape[d] != 1:
            idx = np.arange(shape[d], dtype=np.int64) * bstrides[d]
            off = off + idx.reshape((-1,) + (1,) * (nb - d - 1))
    return off.reshape(-1)


def _entry(driver, dt: np.dtype) -> tuple[GemmEntry, int, int] | None:
    """(GEMM to call, order word, column alignment of tiles) for ``dt`` with ``driver``."""
    if isinstance(driver, GemmDriver) and driver.sgemm and dt == F32:
        return GemmEntry(driver.sgemm, True), ROW_MAJOR | (FLAG_WIDE if driver.wide else 0), PANEL
    entry = gemm_entry(dt)
    return None if entry is None else (entry, ROW_MAJOR, ALIGN)


def gemm_records(a: np.ndarray, b, c: np.ndarray, nt: int, alpha: float = 1.0, beta: float = 0.0,
                 bias: np.ndarray | None = None, driver=None) -> tuple[np.ndarray, bool] | None:
    """(tile records, run on several threads) of ``c = alpha * a @ b + beta * c`` (see the module doc);
    ``driver``: a GemmDriver or None (numpy's CBLAS)."""
    dt = c.dtype
    chosen = _entry(driver, dt)
    packed = isinstance(b, PackedB)
    if chosen is None or a.dtype != dt or b.dtype != dt or min(a.ndim, b.ndim, c.ndim) < 2:
        return None
    entry, order, align = chosen
    if packed and entry.address != getattr(driver, "sgemm", None):
        return None                                    # packed weights need the native sgemm
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k or c.shape[-2:] != (m, n) or min(m, n, k) == 0:
        return None
    b_batch = () if packed else b.shape[:-2]
    if not b_batch or b_batch == a.shape[:-2]:
        bshape = a.shape[:-2]
    else:
        try:
            bshape = np.broadcast_shapes(a.shape[:-2], b_batch)
        except ValueError:
            return None
    b_strides = () if packed else b.strides
    if bshape != c.shape[:-2] or any(s < 0 for s in a.strides + b_strides + c.strides):
        return None
    la, lc = blas_layout(a), blas_layout(c)
    lb = (PACKED, k * PANEL) if packed else blas_layout(b)
    if la is None or lb is None or lc is None or lc[0] != NO_TRANS:
        return None
    bdata = b.data if packed else b
    pa, pb, pc = data_address(a), data_address(bdata), data_address(c)
    if pa % a.itemsize or pb % bdata.itemsize or pc % c.itemsize:
        return None
    es = dt.itemsize
    if bias is not None:
        if bias.dtype != dt:
            return None
        try:
            bias = np.broadcast_to(bias, c.shape)
        except ValueError:
            return None
        if any(s < 0 or s % es for s in bias.strides):
            return None
    batch = math.prod(bshape)
    axis, ranges, parallel = tile_grid(batch, m, n, k, nt, align)
    if batch == 1:                                     # one product (most GEMMs): every offset is 0
        oa = oc = ob = ob_bias = 0
    else:
        oa, oc = (_batch_offsets(x, bshape) for x in (a, c))
        ob = np.zeros(batch, np.int64) if packed else _batch_offsets(b, bshape)
        ob_bias = _batch_offsets(bias, bshape) if bias is not None else None
    words = {"fn": entry.address, "kind": (KIND_DOUBLE if es == 8 else 0) | (KIND_INT64 if entry.int64 else 0),
             "order": order, "transA": la[0], "transB": lb[0], "K": k, "alpha": alpha, "beta": beta,
             "lda": la[1], "ldb": lb[1], "ldc": lc[1]}
    if len(ranges) == 1:                               # one tile per batch entry: no tiling arrays
        lo, hi = ranges[0]
        rep = lambda o: o
    else:
        lo = np.tile(np.array([r[0] for r in ranges], np.int64), batch)
        hi = np.tile(np.array([r[1] for r in ranges], np.int64), batch)
        rep = lambda o: np.repeat(o, len(ranges))
    a0, b0, c0 = pa + rep(oa), pb + rep(ob), pc + rep(oc)
    # the byte step of one row of A / one column of B in storage, whichever way the GEMM reads them (a packed
    # B is cut at panel boundaries only: tile_grid's column cuts are multiples of PANEL)
    a_row = (la[1] if la[0] == NO_TRANS else 1) * es
    if axis == "M":
        words.update(M=hi - lo, N=n, A=a0 + lo * a_row, B=b0, C=c0 + lo * lc[1] * es)
    else:
        b_off = (lo // PANEL) * lb[1] * es if packed else lo * (1 if lb[0] == NO_TRANS else lb[1]) * es
        words.update(M=m, N=hi - lo, A=a0, B=b0 + b_off, C=c0 + lo * es)
    if bias is not None:
        rs, cs = (s // es for s in bias.strides[-2:])
        base = bias.ctypes.data + rep(ob_bias)
        words.update(bias=base + (lo * rs if axis == "M" else lo * cs) * es, rs=rs, cs=cs)
    return _records(batch * len(ranges), words), parallel


def _records(count: int, words: dict) -> np.ndarray:
    """``count`` tile records from ``words`` (field -> one value for all, or an array of ``count``)."""
    if count == 1:                                     # (one tuple: a third of the per-field assignments' cost)
        return np.array([tuple([v[0] if isinstance(v, np.ndarray) else v for v in map(words.get, FIELDS, _NONE)])],
                        RECORD)
    rec = np.zeros(count, RECORD)
    for name, v in words.items():
        rec[name] = v
    return rec


def gemm_step(driver, a: np.ndarray, b, c: np.ndarray, nt: int, alpha: float = 1.0,
              beta: float = 0.0, bias: np.ndarray | None = None):
    """The bound step (see the module doc), or None.  ``driver``: a GemmDriver, a tile-driver address (numpy's
    CBLAS for every tile) or None."""
    tiles = driver.tiles if isinstance(driver, GemmDriver) else driver
    if not tiles:
        return None
    if bias is not None:
        bias = np.asarray(bias, c.dtype)
    built = gemm_records(a, b, c, nt, alpha, beta, bias, driver if isinstance(driver, GemmDriver) else None)
    if built is None:
        return None
    rec, parallel = built
    return tiles_step(tiles, rec, nt if parallel else 1, keep=(a, b, c, bias))


def tiles_step(addr: int, rec: np.ndarray, nt: int, keep=()):
    """A zero-argument callable running the records ``rec`` with the driver at ``addr`` on ``nt`` threads
    (``keep``: arrays the records point into, held for the callable's lifetime).  The callable's ``tiles``
    attribute is ``rec``."""
    ptr = data_address(rec)
    call = partial(_DRIVER(addr), ptr, len(rec), nt)
    call.tiles, call.keep = rec, keep                         # type: ignore[attr-defined]
    return tag(call, addr, 3, ptr, len(rec), nt)
