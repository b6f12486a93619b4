"""GEMMs as tile records for the native tile driver (codegen/gemm_driver.py): built once at bind time.

``gemm_step(addr, a, b, c, nt, alpha=1, beta=0, bias=None)`` -> a zero-argument callable computing
``c = alpha * a @ b + beta * c`` (after ``c`` is prefilled from ``bias``, when given) with one call of the
driver at ``addr`` (``NodeCtx.native(GEMM_TILES_SYMBOL)``), or None when the operands do not fit (other
dtypes, negative or unaligned strides, an empty product, no CBLAS in numpy's BLAS): the caller then keeps its
numpy path.

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
  ``ALIGN``): a short last tile would leave a thread idle while the other finishes a full one.  Below ``MIN_WORK`` the step runs on one thread.

The records hold raw addresses: the step keeps every array it points into alive.

Other drivers' use (e.g. a 1x1 convolution, NCHW): ``gemm_step(addr, W[Cout, Cin], X.reshape(N, Cin, H*W),
Y.reshape(N, Cout, H*W), nt, beta=1.0, bias=b[:, None])`` (the 2-D weight broadcasts over the batch); several
products in one call: ``tiles_step(addr, np.concatenate([rec1, rec2]), nt, keep=...)`` with the records of
``gemm_records`` (tiles of one call run concurrently: they must not depend on each other).
"""
from __future__ import annotations

import ctypes
import itertools
from functools import partial

import numpy as np

from .blas import NO_TRANS, ROW_MAJOR, TRANS, gemm_entry

# the driver's symbol and tile-record layout, as codegen/gemm_driver.py defines them (the runtime does not import
# codegen, which needs llvmlite; tests/codegen/test_codegen_gemm_driver.py checks that the two agree)
GEMM_TILES_SYMBOL = "cl_gemm_tiles_v1"      # the version of the tile-record layout below
FIELDS = ("fn", "kind", "order", "transA", "transB", "M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta",
          "C", "ldc", "bias", "rs", "cs", "unused")
KIND_DOUBLE, KIND_INT64 = 1, 2
RECORD = np.dtype([(name, "<f8" if name in ("alpha", "beta") else "<i8") for name in FIELDS])
# multiply-adds (~10 us on one core) below which a product runs on the calling thread: on an idle core a split
# pays from ~1e5 (measured), but a pool worker that the OS preempts or wakes late (busy machine, a VM) stalls the
# caller for 0.1 ms or more, so only products that gain several microseconds take the risk
MIN_WORK = 1 << 19
TILES_PER_THREAD = 2
ALIGN = 16
_DRIVER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


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


def tile_grid(batch: int, m: int, n: int, k: int, nt: int) -> tuple[str, list[tuple[int, int]], bool]:
    """(split axis "M"/"N", the [start, stop) ranges of that axis per batch entry, run on several threads)."""
    axis, size = ("N", n) if n > m else ("M", m)
    if nt <= 1 or batch * m * n * k < MIN_WORK:
        return axis, [(0, size)], False
    # equal parts (a last short tile would leave one thread idle), each at least ALIGN long; column cuts
    # at multiples of ALIGN, row cuts anywhere; the most parts whose span (tiles per thread x tile size) is
    # within 15% of the shortest
    most = max(1, min(-(-TILES_PER_THREAD * nt // batch), size // ALIGN))
    unit = ALIGN if axis == "N" else 1
    units = -(-size // unit)
    span = {p: -(-batch * p // nt) * -(-units // p) for p in range(1, most + 1)}
    parts = max(p for p in span if span[p] <= 1.15 * min(span.values()))
    cuts = [min(size, -(-i * units // parts) * unit) for i in range(parts + 1)]    # larger tiles first
    ranges = [(lo, hi) for lo, hi in itertools.pairwise(cuts) if hi > lo]
    return axis, ranges, batch * len(ranges) > 1


def _batch_offsets(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Byte offset of every batch entry of ``x`` broadcast to batch ``shape`` (C order)."""
    nb = len(shape)
    bshape = (1,) * (nb - (x.ndim - 2)) + x.shape[:-2]
    bstrides = (0,) * (nb - (x.ndim - 2)) + x.strides[:-2]
    off = np.zeros(shape, np.int64)
    for d in range(nb):
        if bshape[d] != 1:
            idx = np.arange(shape[d], dtype=np.int64) * bstrides[d]
            off = off + idx.reshape((-1,) + (1,) * (nb - d - 1))
    return off.reshape(-1)


def gemm_records(a: np.ndarray, b: np.ndarray, c: np.ndarray, nt: int, alpha: float = 1.0, beta: float = 0.0,
                 bias: np.ndarray | None = None) -> tuple[np.ndarray, bool] | None:
    """(tile records, run on several threads) of ``c = alpha * a @ b + beta * c`` (see the module doc)."""
    dt = c.dtype
    entry = gemm_entry(dt)
    if entry is None or a.dtype != dt or b.dtype != dt or min(a.ndim, b.ndim, c.ndim) < 2:
        return None
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k or c.shape[-2:] != (m, n) or min(m, n, k) == 0:
        return None
    try:
        bshape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    if bshape != c.shape[:-2] or any(s < 0 for s in a.strides + b.strides + c.strides):
        return None
    la, lb, lc = blas_layout(a), blas_layout(b), blas_layout(c)
    if la is None or lb is None or lc is None or lc[0] != NO_TRANS:
        return None
    if any(x.ctypes.data % x.itemsize for x in (a, b, c)):
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
    batch = int(np.prod(bshape, dtype=np.int64))
    axis, ranges, parallel = tile_grid(batch, m, n, k, nt)
    oa, ob, oc = (_batch_offsets(x, bshape) for x in (a, b, c))
    ob_bias = _batch_offsets(bias, bshape) if bias is not None else None
    rec = np.zeros(batch * len(ranges), RECORD)
    rec["fn"] = entry.address
    rec["kind"] = (KIND_DOUBLE if es == 8 else 0) | (KIND_INT64 if entry.int64 else 0)
    rec["order"], rec["transA"], rec["transB"] = ROW_MAJOR, la[0], lb[0]
    rec["K"], rec["alpha"], rec["beta"] = k, alpha, beta
    rec["lda"], rec["ldb"], rec["ldc"] = la[1], lb[1], lc[1]
    lo = np.tile(np.array([r[0] for r in ranges], np.int64), batch)
    hi = np.tile(np.array([r[1] for r in ranges], np.int64), batch)
    rep = lambda o: np.repeat(o, len(ranges))
    a0, b0, c0 = a.ctypes.data + rep(oa), b.ctypes.data + rep(ob), c.ctypes.data + rep(oc)
    # the byte step of one row of A / one column of B in storage, whichever way BLAS reads them
    a_row = (la[1] if la[0] == NO_TRANS else 1) * es
    b_col = (1 if lb[0] == NO_TRANS else lb[1]) * es
    if axis == "M":
        rec["M"], rec["N"] = hi - lo, n
        rec["A"], rec["B"], rec["C"] = a0 + lo * a_row, b0, c0 + lo * lc[1] * es
    else:
        rec["M"], rec["N"] = m, hi - lo
        rec["A"], rec["B"], rec["C"] = a0, b0 + lo * b_col, c0 + lo * es
    if bias is not None:
        rs, cs = (s // es for s in bias.strides[-2:])
        base = bias.ctypes.data + rep(ob_bias)
        rec["bias"] = base + (lo * rs if axis == "M" else lo * cs) * es
        rec["rs"], rec["cs"] = rs, cs
    return rec, parallel


def gemm_step(addr: int | None, a: np.ndarray, b: np.ndarray, c: np.ndarray, nt: int, alpha: float = 1.0,
              beta: float = 0.0, bias: np.ndarray | None = None):
    """The bound step (see the module doc), or None."""
    if not addr:
        return None
    if bias is not None:
        bias = np.asarray(bias, c.dtype)
    built = gemm_records(a, b, c, nt, alpha, beta, bias)
    if built is None:
        return None
    rec, parallel = built
    return tiles_step(addr, rec, nt if parallel else 1, keep=(a, b, c, bias))


def tiles_step(addr: int, rec: np.ndarray, nt: int, keep=()):
    """A zero-argument callable running the records ``rec`` with the driver at ``addr`` on ``nt`` threads
    (``keep``: arrays the records point into, held for the callable's lifetime).  The callable's ``tiles``
    attribute is ``rec``."""
    call = partial(_DRIVER(addr), rec.ctypes.data, len(rec), nt)
    call.tiles, call.keep = rec, keep                         # type: ignore[attr-defined]
    return call
