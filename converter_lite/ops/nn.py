"""Reference kernels: matrix products (MatMul, MatMulInteger, Gemm, Einsum).

* ``MatMul(A, B)``: numpy ``matmul`` (1-D operands get a unit dim that is removed again; batch dims
  broadcast).  float16 accumulates in float32.
* ``MatMulInteger(A, B, a_zero_point?, b_zero_point?)``: ``(A - a_zp) @ (B - b_zp)`` in int32; ``a_zp`` is
  a scalar or per-row ``[M]``, ``b_zp`` a scalar or per-column ``[N]``.
* ``Gemm(A, B, C?)``: ``alpha * op(A) @ op(B) + beta * C`` with ``op`` = transpose when ``transA``/``transB``
  and ``C`` unidirectionally broadcast to ``[M, N]``.
* ``Einsum(inputs...)``: ``np.einsum(equation, ...)``.

The other NN kernels live in nn_conv.py, nn_pool.py, nn_norm.py, nn_resize.py and nn_space.py.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from .nn_window import compute_dtype
from .registry import KernelError, broadcast_shapes, reference


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """Result shape of numpy ``matmul(a, b)``; raises KernelError when the operands do not fit."""
    if not a or not b:
        raise KernelError("MatMul: operands must have rank >= 1")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise KernelError(f"MatMul: inner dims differ in {list(a)} @ {list(b)}")
    out = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _infer_matmul(node: Node) -> list[TensorType]:
    a, b = node.inputs[0].type, node.inputs[1].type
    return [TensorType(a.dtype, matmul_shape(a.shape, b.shape))]


@reference("MatMul", infer=_infer_matmul)
def matmul(attrs, a, b):
    matmul_shape(a.shape, b.shape)
    ct = compute_dtype(a.dtype)
    return np.matmul(a.astype(ct, copy=False), b.astype(ct, copy=False)).astype(a.dtype, copy=False)


def _infer_matmul_integer(node: Node) -> list[TensorType]:
    a, b = node.inputs[0].type, node.inputs[1].type
    return [TensorType(DType.int32, matmul_shape(a.shape, b.shape))]


@reference("MatMulInteger", infer=_infer_matmul_integer)
def matmul_integer(attrs, a, b, a_zero_point=None, b_zero_point=None):
    matmul_shape(a.shape, b.shape)
    a32, b32 = a.astype(np.int32), b.astype(np.int32)
    if a_zero_point is not None:
        zp = a_zero_point.astype(np.int32)
        a32 = a32 - (zp.reshape(-1, 1) if zp.ndim == 1 and a.ndim > 1 else zp)   # per row of A
    if b_zero_point is not None:
        b32 = b32 - b_zero_point.astype(np.int32)                                 # per column of B
    return np.matmul(a32, b32)


def _gemm_shape(attrs: dict, a, b, c) -> tuple[int, int]:
    if len(a) != 2 or len(b) != 2:
        raise KernelError(f"Gemm: A {list(a)} and B {list(b)} must be matrices")
    m, k = (a[1], a[0]) if attrs.get("transA", 0) else a
    k2, n = (b[1], b[0]) if attrs.get("transB", 0) else b
    if k != k2:
        raise KernelError(f"Gemm: inner dims differ ({k} vs {k2})")
    if c is not None and broadcast_shapes(c, (m, n)) != (m, n):
        raise KernelError(f"Gemm: C {list(c)} does not broadcast to {[m, n]}")
    return (m, n)


def _infer_gemm(node: Node) -> list[TensorType]:
    a, b, c = (node.inputs + [None] * 3)[:3]
    shape = _gemm_shape(node.attrs, a.type.shape, b.type.shape, None if c is None else c.type.shape)
    return [TensorType(a.type.dtype, shape)]


@reference("Gemm", infer=_infer_gemm)
def gemm(attrs, a, b, c=None):
    _gemm_shape(attrs, a.shape, b.shape, None if c is None else c.shape)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    ct = compute_dtype(a.dtype)
    at, bt = a.astype(ct, copy=False), b.astype(ct, copy=False)
    y = np.matmul(at.T if attrs.get("transA", 0) else at, bt.T if attrs.get("transB", 0) else bt)
    if alpha != 1.0:
        y = y * alpha           # a Python float keeps a float array's dtype (NEP 50)
    if c is not None and beta != 0.0:
        cc = c.astype(ct, copy=False)
        y = y + (cc if beta == 1.0 else cc * beta)
    return y.astype(a.dtype, copy=False)


# -- Einsum ---------------------------------------------------------------------------------------------------
def einsum_shape(equation: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Output shape of ``Einsum(equation)`` on operands of ``shapes`` (explicit or implicit form, ellipsis)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise KernelError(f"Einsum: equation {equation!r} has {len(terms)} operands, got {len(shapes)}")
    dims: dict[str, int] = {}
    counts: dict[str, int] = {}
    ellipsis: tuple[int, ...] | None = None
    for term, shape in zip(terms, shapes):
        before, dots, after = term.partition("...")
        n_ell = len(shape) - len(before) - len(after)
        if (n_ell != 0 and not dots) or n_ell < 0:
            raise KernelError(f"Einsum: term {term!r} does not match operand rank {len(shape)}")
        if dots:
            ell = tuple(shape[len(before):len(before) + n_ell])
            ellipsis = ell if ellipsis is None else broadcast_shapes(ellipsis, ell)
        labelled = list(zip(before, shape[:len(before)])) + list(zip(after, shape[len(shape) - len(after):]))
        for ch, d in labelled:
            counts[ch] = counts.get(ch, 0) + 1
            prev = dims.get(ch)
            if prev is None or prev == 1:
                dims[ch] = d
            elif d not in (1, prev):      # size-1 labelled dims broadcast, as in numpy
                raise KernelError(f"Einsum: label {ch!r} has sizes {prev} and {d}")
    if not arrow:
        rhs = ("..." if ellipsis is not None else "") + "".join(sorted(c for c, k in counts.items() if k == 1))
    before, dots, after = rhs.partition("...")
    try:
        out = tuple(dims[c] for c in before) + (ellipsis or () if dots else ()) + tuple(dims[c] for c in after)
    except KeyError as e:
        raise KernelError(f"Einsum: output label {e.args[0]!r} is not in the inputs of {equation!r}") from None
    return out


def _infer_einsum(node: Node) -> list[TensorType]:
    shapes = [v.type.shape for v in node.inputs]
    return [TensorType(node.inputs[0].type.dtype, einsum_shape(node.attrs["equation"], shapes))]


@reference("Einsum", infer=_infer_einsum)
def einsum(attrs, *inputs):
    equation = attrs["equation"].replace(" ", "")
    einsum_shape(equation, [x.shape for x in inputs])
    dt = inputs[0].dtype
    ct = compute_dtype(dt)
    y = np.einsum(equation, *(x.astype(ct, copy=False) for x in inputs), optimize=len(inputs) > 2)
    return np.asarray(y).astype(dt, copy=False)
