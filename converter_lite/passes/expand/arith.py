"""Arithmetic composites -> multiplies and adds.

* Pow(x, c) with a constant scalar exponent (MindSpore ``square`` expander and simplify rules 15, 17, 18):
  c=1 -> x;  c=2 -> x * x;  c=3 -> x * x * x;  c=0.5 -> sqrt(x);  c=-1 -> 1/x;  c=-0.5 -> 1/sqrt(x).
  The SquaredDifference of other frameworks reaches ONNX as ``Pow(a - b, 2)`` and becomes ``d * d``.
  Other exponents (and roots/reciprocals of integers) are declined: Pow stays a basic op.
* Sum(x1, ..., xn)  = ((x1 + x2) + ...) + xn          (MindSpore ``addn`` expander; broadcasting Adds)
* Mean(x1, ..., xn) = Sum(x1, ..., xn) * (1/n)        (float inputs only)
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node
from ...ops.builder import BValue, GraphBuilder
from ...ops.registry import broadcast_shapes
from .emit import const_input, input_value, reciprocal, sqrt
from .registry import Declined, expander

_ANY_DTYPE = {1.0: lambda x: x, 2.0: lambda x: x * x, 3.0: lambda x: x * x * x}
_FLOAT_ONLY = {0.5: sqrt, -1.0: reciprocal, -0.5: lambda x: reciprocal(sqrt(x))}


@expander("Pow")
def expand_pow(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    c = const_input(node, 1)
    if c.size != 1:
        raise Declined("exponent is not a scalar")
    if broadcast_shapes(x.shape, c.shape) != x.shape:
        raise Declined("the exponent's shape changes the result shape")
    e = float(np.ravel(c)[0])
    if e in _ANY_DTYPE:
        return [_ANY_DTYPE[e](x)]
    if e in _FLOAT_ONLY and x.dtype.is_float:
        return [_FLOAT_ONLY[e](x)]
    raise Declined(f"exponent {e} has no cheaper form")


def _add_chain(b: GraphBuilder, node: Node) -> BValue:
    xs = [b.wrap(v) for v in node.inputs if v is not None]
    acc = xs[0]
    for x in xs[1:]:
        acc = acc + x
    return acc


@expander("Sum")
def expand_sum(b: GraphBuilder, node: Node) -> list:
    return [_add_chain(b, node)]


@expander("Mean")
def expand_mean(b: GraphBuilder, node: Node) -> list:
    n = sum(v is not None for v in node.inputs)
    if not node.inputs[0].dtype.is_float:
        raise Declined("integer Mean truncates")
    total = _add_chain(b, node)
    return [total * (1.0 / n) if n > 1 else total]
