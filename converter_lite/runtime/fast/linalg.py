"""MatMul and Gemm through numpy's BLAS, writing into the plan's buffers.

* ``MatMul(A[..., M, K], B[K, N])`` with a 2-D B (weights) is one GEMM over all of A's rows: A and the output
  are viewed as ``[prod(...) * M, K]`` / ``[..., N]`` (both contiguous, so no copy), instead of one small
  GEMM per batch entry.  Batched MatMuls (attention) go to ``np.matmul`` with ``out=``, which calls BLAS per
  batch entry on strided operands without copying them.
* ``Gemm``: ``transA``/``transB`` are transposed *views* (BLAS reads them with its transpose flag; nothing is
  copied, at load or at run time); then ``* alpha`` and ``+ C`` (``* beta`` pre-applied to a constant C) in
  place, the reference kernel's order of operations.

**Native driver.**  When the model's native library carries the GEMM tile driver (kernels/gemm/,
``NodeCtx.native``), a bound MatMul/Gemm step is one call of it (kernels/gemm/bind.py): the product split
into tiles (batch entries; rows or columns of large products) run across the native thread pool, each a
CBLAS call of numpy's own (single-threaded) BLAS, transposes read in place, Gemm's ``C`` copied into the
output tile by tile before the product (CBLAS's ``beta`` then adds it) and ``alpha`` passed to BLAS.
Otherwise (no native code, operands the driver does not take) large products are split by rows across the
Python thread team (``parallel.row_parallel``: each part a BLAS call on its rows).  Only float32/float64;
other dtypes use the reference kernels.  ``FusedMatMul`` (made by the optional matmul_elem fusions) runs on the
driver only: its bias is the prefill, then Relu in place or the reference Gelu.  ``MatMulBf16`` (``--bf16=on``)
runs on the bf16 GEMM (kernels/bgemm/) where the converter recorded it, else on its reference kernel.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ...kernels.bgemm.abi import BGEMM_SYMBOL
from ...kernels.bgemm.bind import PackedBf16, bgemm_step
from ...kernels.gemm.bind import PackedB, gemm_driver, gemm_step
from ...kernels.packing import shared
from ...kernels.qgemm.abi import QGEMM_SYMBOL
from ...kernels.qgemm.bind import PackedQ, qgemm_step
from ...ops.nn import matmul_shape
from ...ops.registry import OPS, KernelError
from ..program import Impl, NodeCtx
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
    addr = gemm_driver(ctx)
    if len(a.shape) >= 2 and len(b.shape) == 2:
        rows, k, n = int(np.prod(a.shape[:-1])), a.shape[-1], b.shape[1]
        packed = _packed(addr, ctx.const(1))

        def bind(ins, outs, ws, nt=1):
            a2, o2 = ins[0].reshape(rows, k), outs[0].reshape(rows, n)
            return (packed is not None and gemm_step(addr, a2, packed, o2, nt)) or gemm_step(addr, a2, ins[1], o2, nt) \
                or row_parallel(np.matmul, a2, ins[1], o2, rows * k * n, nt)
        return Impl(bind=bind)

    def bind_batched(ins, outs, ws, nt=1):
        x, w, o = ins[0], ins[1], outs[0]
        x = x[None, :] if x.ndim == 1 else x           # [K] -> [1, K]
        w = w[:, None] if w.ndim == 1 else w           # [K] -> [K, 1]; the output gains the axes as views
        step = None
        if o.flags.c_contiguous:
            o = o.reshape(np.broadcast_shapes(x.shape[:-2], w.shape[:-2]) + (x.shape[-2], w.shape[-1]))
            step = gemm_step(addr, x, w, o, nt)
        return step or partial(np.matmul, ins[0], ins[1], out=outs[0])
    return Impl(bind=bind_batched)


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

    addr = gemm_driver(ctx)
    packed = _packed(addr, None if ctx.const(1) is None else (ctx.const(1).T if tb else ctx.const(1)))

    def bind(ins, outs, ws, nt=1):
        at = ins[0].T if ta else ins[0]
        bt = packed if packed is not None else (ins[1].T if tb else ins[1])
        o = outs[0]
        if use_c:                                      # C prefilled tile by tile, then CBLAS adds beta * C
            native = gemm_step(addr, at, bt, o, nt, alpha, 1.0 if cc is not None else beta,
                               cc if cc is not None else ins[2])
        else:
            native = gemm_step(addr, at, bt, o, nt, alpha)
        if native is not None:
            return native
        mm = row_parallel(np.matmul, at, ins[1].T if tb else ins[1], o, m * k * n, nt)
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


def _fused_matmul(ctx: NodeCtx):
    """``FusedMatMul(A, B, bias?)`` + activation: only on the driver (else the reference kernel).  The bias is
    copied into the output tile by tile before the product; Relu runs in place after it, Gelu through the
    reference activation."""
    a, b, y = ctx.value(0), ctx.value(1), ctx.out()
    bias = ctx.value(2)
    act = ctx.attrs.get("activation", "")
    addr = gemm_driver(ctx)
    if addr is None or act not in ("", "Relu", "Gelu") or a.dtype not in FLOATS or b.dtype != a.dtype \
            or y.dtype != a.dtype or (bias is not None and bias.dtype != a.dtype):
        return None
    try:
        if matmul_shape(a.shape, b.shape) != y.shape or len(a.shape) < 2 or len(b.shape) < 2 or (
                bias is not None and np.broadcast_shapes(bias.shape, y.shape) != y.shape):
            return None
    except (KernelError, ValueError):
        return None
    gelu = OPS["Gelu"].compute if act == "Gelu" else None
    gelu_attrs = {"approximate": ctx.attrs.get("approximate", "none")}
    reference = OPS["FusedMatMul"].compute
    rows = int(np.prod(a.shape[:-1]))
    row_bias = bias is None or all(d == 1 for d in bias.shape[:-1])
    flat = len(b.shape) == 2 and row_bias          # one GEMM over all rows (bias: one row or a scalar)
    packed = _packed(addr, ctx.const(1)) if flat else None

    def bind(ins, outs, ws, nt=1):
        x, w, o = ins[0], ins[1], outs[0]
        if packed is not None and x.flags.c_contiguous and o.flags.c_contiguous:
            w = packed
        bv = None if bias is None else ins[2]
        if flat and x.flags.c_contiguous and o.flags.c_contiguous:
            x, o = x.reshape(rows, x.shape[-1]), o.reshape(rows, o.shape[-1])
            bv = None if bv is None else bv.reshape(bv.shape[-1:])
        mm = gemm_step(addr, x, w, o, nt, 1.0, 0.0 if bv is None else 1.0, bv)
        out = outs[0]
        if mm is None:
            return lambda: np.copyto(out, reference(ctx.attrs, *ins), casting="unsafe")
        if not act:
            return mm

        def run():
            mm()
            if gelu is None:
                np.maximum(out, 0, out=out)
            else:
                np.copyto(out, gelu(gelu_attrs, out))
        run.tiles = mm.tiles                           # (what the step runs, for tests and tools)
        return run
    return Impl(bind=bind)


def _packed(driver, b: np.ndarray | None) -> PackedB | None:
    """Constant float32 weights ``b [K, N]`` packed for the native GEMM (once, at load), or None."""
    if driver is None or not driver.sgemm or b is None or b.ndim != 2 or b.dtype != np.float32 or 0 in b.shape:
        return None
    return shared(b, ("panels",), lambda: PackedB(b))


def _matmul_integer(ctx: NodeCtx):
    """``MatMulInteger`` (int32 out) / ``MatMulIntegerToFloat`` (float32 out) on the native int8 GEMM
    (kernels/qgemm/: the converter recorded it for the node only when its ``select`` took it), the weights
    packed once; A's leading dims are rows.  Else None: the reference kernel."""
    addr = ctx.native(QGEMM_SYMBOL)
    w = ctx.const(1)
    if not addr or w is None:
        return None
    to_float = ctx.node.op == "MatMulIntegerToFloat"
    k, n = w.shape
    zpos = 4 if to_float else 2
    packed = shared(w, ("qpanels",), lambda: PackedQ(w))
    scales = (ctx.const(3), ctx.const(6)) if to_float else (None, None)
    reference = _reference_into(ctx.node)

    def bind(ins, outs, ws, nt=1):
        a, y = ins[0], outs[0]
        step = None
        if a.flags.c_contiguous and y.flags.c_contiguous:
            azp = ins[zpos] if len(ins) > zpos else None
            step = qgemm_step(addr, a.reshape(-1, k), packed, y.reshape(-1, n), nt, azp=azp,
                              ascale=ins[2] if to_float else None, bscale=scales[0], bias=scales[1])
        return step or partial(reference, ins, y)
    return Impl(bind=bind)


def _matmul_bf16(ctx: NodeCtx):
    """``MatMulBf16`` on the native bf16 GEMM (kernels/bgemm/: recorded for the node only when its ``select``
    took it), the bfloat16 weights packed once into panels of pairs; A's leading dims are rows.  Else None: the
    reference kernel (ops/bf16.py)."""
    addr = ctx.native(BGEMM_SYMBOL)
    w = ctx.const(1)
    if not addr or w is None or w.ndim != 2:
        return None
    k, n = w.shape
    packed = shared(w, ("bf16panels",), lambda: PackedBf16(w))
    bias = ctx.const(2) if len(ctx.node.inputs) > 2 and ctx.node.inputs[2] is not None else None
    if len(ctx.node.inputs) > 2 and ctx.node.inputs[2] is not None and bias is None:
        return None
    reference = _reference_into(ctx.node)

    def bind(ins, outs, ws, nt=1):
        a, y = ins[0], outs[0]
        step = None
        if a.flags.c_contiguous and y.flags.c_contiguous:
            step = bgemm_step(addr, a.reshape(-1, k), packed, y.reshape(-1, n), nt, bias=bias)
        return step or partial(reference, ins, y)
    return Impl(bind=bind)


def _reference_into(node):
    """``run(ins, out)``: the node's reference kernel, its result copied into ``out``."""
    compute, attrs = OPS[node.op].compute, node.attrs
    return lambda ins, out: np.copyto(out, compute(attrs, *ins))


LINALG_FAST = {"MatMul": _matmul, "Gemm": _gemm, "FusedMatMul": _fused_matmul,
               "MatMulInteger": _matmul_integer, "MatMulIntegerToFloat": _matmul_integer, "MatMulBf16": _matmul_bf16}
