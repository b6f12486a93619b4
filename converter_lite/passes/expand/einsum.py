"""Einsum of two operands that is a (batched) matrix product -> Transpose, Reshape, MatMul, Reshape, Transpose.

PyTorch exports ``torch.einsum`` as ONNX Einsum (CvT's attention: ``bhlk,bhtk->bhlt`` and ``bhlt,bhtv->bhlv``),
which the reference kernel evaluates with ``np.einsum`` on one core and without BLAS (CvT-13 at 224x224 spent
83 of its 115 ms there).  An equation whose labels are each either

* batch (in both operands and the output),
* contracted (in both operands, not the output),
* free on the left (first operand and output only) or free on the right (second operand and output only)

is ``Y[batch, m, n] = sum_k A[batch, m, k] * B[batch, k, n]``: each operand is transposed to (batch, free,
contracted) / (batch, contracted, free) order and its free and contracted labels merged into one axis each
(Reshape), one MatMul computes the product on the native GEMM, and the result is split back into the free
labels and transposed into the output order.  Identity transposes and reshapes are not emitted.  Declined:
other than two operands, the implicit form (no ``->``), ellipses, a label repeated within a term (a
diagonal), a label in one operand only that is summed away, labels whose sizes differ between the operands
(size-1 broadcasting), and dtypes other than float32/float64.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.core import Node
from ...ir.dtype import DType
from ...ops.builder import GraphBuilder
from .emit import input_value
from .registry import Declined, expander

FLOATS = (DType.float32, DType.float64)


def matmul_labels(equation: str) -> tuple[str, str, str, list[str], list[str], list[str], list[str]]:
    """(term A, term B, output, batch, left free, right free, contracted) labels of a two-operand Einsum that
    is a batched matrix product; Declined otherwise."""
    eq = equation.replace(" ", "")
    if "..." in eq:
        raise Declined("ellipsis")
    lhs, arrow, out = eq.partition("->")
    if not arrow:
        raise Declined("implicit output (no '->')")
    terms = lhs.split(",")
    if len(terms) != 2:
        raise Declined(f"{len(terms)} operands")
    ta, tb = terms
    for t in (ta, tb, out):
        if len(set(t)) != len(t):
            raise Declined(f"a label repeats within {t!r}")
    if not set(out) <= set(ta) | set(tb):
        raise Declined("an output label is in no operand")
    alone = [c for c in ta + tb if c not in out and (c in ta) != (c in tb)]
    if alone:
        raise Declined(f"label {alone[0]!r} of one operand is summed away")
    batch = [c for c in out if c in ta and c in tb]
    left = [c for c in out if c in ta and c not in tb]
    right = [c for c in out if c in tb and c not in ta]
    contracted = [c for c in ta if c in tb and c not in out]
    return ta, tb, out, batch, left, right, contracted


def _transpose(b: GraphBuilder, x, term: str, order: list[str]):
    perm = [term.index(c) for c in order]
    return x if perm == sorted(perm) else b.op("Transpose", x, perm=tuple(perm))


def _reshape(b: GraphBuilder, x, shape: list[int]):
    return x if tuple(x.shape) == tuple(shape) else b.op("Reshape", x, b.const(np.asarray(shape, np.int64)))


@expander("Einsum")
def expand_einsum(b: GraphBuilder, node: Node) -> list:
    if len(node.inputs) != 2 or node.inputs[0].dtype not in FLOATS:
        raise Declined("not two float32/float64 operands")
    ta, tb, out, batch, left, right, contracted = matmul_labels(node.attrs["equation"])
    a, y = input_value(b, node, 0), input_value(b, node, 1)
    size = {}
    for term, shape in ((ta, a.shape), (tb, y.shape)):
        for c, d in zip(term, shape):
            if size.setdefault(c, d) != d:
                raise Declined(f"label {c!r} has sizes {size[c]} and {d}")
    bdims = [size[c] for c in batch]

    def prod(labels):
        return math.prod(size[c] for c in labels)

    a2 = _reshape(b, _transpose(b, a, ta, batch + left + contracted), bdims + [prod(left), prod(contracted)])
    b2 = _reshape(b, _transpose(b, y, tb, batch + contracted + right), bdims + [prod(contracted), prod(right)])
    prodn = b.op("MatMul", a2, b2)
    split = _reshape(b, prodn, bdims + [size[c] for c in left + right])
    return [_transpose(b, split, "".join(batch + left + right), list(out))]
