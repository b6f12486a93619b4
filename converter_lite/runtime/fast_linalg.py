"""MatMul and Gemm through numpy's BLAS, writing into the plan's buffers.

* ``MatMul(A[..., M, K], B[K, N])`` with a 2-D B (weights) is one GEMM over all of A's rows: A and the output
  are viewed as ``[prod(...) * M, K]`` / ``[..., N]`` (both contiguous, so no copy), instead of one small
  GEMM per batch entry.  Batched MatMuls (attention) go to ``np.matmul`` with ``out=``, which calls BLAS per
  batch entry on strided operands without copying them.
* ``Gemm``: ``transA``/``transB`` are transposed *views* (BLAS reads them with its transpose flag; nothing is
  copied, at load or at run time); then ``* alpha`` and ``+ C`` (``* beta`` pre-applied to a constant C) in
  place, the reference kernel's order of operations.

Large products are split by rows across the thread team (``parallel.row_parallel``: each part a BLAS call
on its rows, written into its rows of the output) when the plan binds them for several threads.  Only float32/float64; other dtypes use the reference kernels.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..ops.nn import matmul_shape
from ..ops.registry import KernelError
from .lowering import Impl, NodeCtx
from .parallel import row_parallel

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _matmul(ctx: NodeCtx):
    a, b, y = ctx.value(0), ctx.value(1), ctx.out()
    if a.dtype not in FLOATS or b.dtype != a.dtype or y.dtype != a.dtype:
        return None
    try:
        if matmul_shape(a.shape, b.shape) != y.shape:
            return None
    except KernelError:
        return None
    if len(a.shape) >= 2 and len(b.shape) == 2:
        rows, k, n = int(np.prod(a.shape[:-1])), a.shape[-1], b.shape[1]

        def bind(ins, outs, ws, nt=1):
            a2, o2 = ins[0].reshape(rows, k), outs[0].reshape(rows, n)
            return row_parallel(np.matmul, a2, ins[1], o2, rows * k * n, nt)
        return Impl(bind=bind)
    return Impl(bind=lambda ins, outs, ws, nt=1: partial(np.matmul, ins[0], ins[1], out=outs[0]))


def _gemm(ctx: NodeCtx):
    a, b, y = ctx.value(0), ctx.value(1), ctx.out()
    c = ctx.value(2)
    if a.dtype not in FLOATS or b.dtype != a.dtype or y.dtype != a.dtype or (c is not None and c.dtype != a.dtype):
        return None
    alpha, beta = float(ctx.attrs.get("alpha", 1.0)), float(ctx.attrs.get("beta", 1.0))
    ta, tb = bool(ctx.attrs.get("transA", 0)), bool(ctx.attrs.get("transB", 0))
    cc = ctx.const(2)
    use_c = c is not None and beta != 0.0
    if use_c and cc is not None and beta != 1.0:
        cc = cc * beta
    if len(a.shape) != 2 or len(b.shape) != 2 or len(y.shape) != 2:
        return None
    m, n = y.shape
    k = a.shape[0] if ta else a.shape[1]
    if (a.shape[1] if ta else a.shape[0]) != m or (b.shape[1] if tb else b.shape[0]) != k \
            or (b.shape[0] if tb else b.shape[1]) != n:
        return None
    if use_c:
        try:
            if np.broadcast_shapes(c.shape, (m, n)) != (m, n):
                return None
        except ValueError:
            return None

    def bind(ins, outs, ws, nt=1):
        at = ins[0].T if ta else ins[0]
        bt = ins[1].T if tb else ins[1]
        o = outs[0]
        mm = row_parallel(np.matmul, at, bt, o, m * k * n, nt)
        bias = (cc if cc is not None else ins[2]) if use_c else None
        scale_c = use_c and cc is None and beta != 1.0

        def run():
            mm()
            if alpha != 1.0:
                np.multiply(o, alpha, out=o)
            if bias is not None:
                np.add(o, bias * beta if scale_c else bias, out=o)
        return run
    return Impl(bind=bind)


LINALG_FAST = {"MatMul": _matmul, "Gemm": _gemm}
