"""Small op emitters shared by the expanders, so that expansions read like the formulas they implement.

Every function takes and returns ``BValue`` handles (the builder travels with the value); Python numbers
become 0-d constants of the other operand's dtype.  Reductions always pass explicit ``axes`` (input 1) and
``keepdims``; nothing here emits an op that is itself expanded, so expansion needs a single pass.
"""
from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ...ir.core import Node, Value
from ...ir.dtype import DType
from ...ops.builder import BValue
from .registry import Declined


def scalar(like: BValue, value: float) -> Value:
    """A 0-d constant with ``like``'s dtype."""
    return like.b.const(value, like.dtype)


def _operand(like: BValue, y) -> Value | BValue:
    return y if isinstance(y, (BValue, Value)) else scalar(like, y)


def unary(op: str, x: BValue) -> BValue:
    return x.b.op(op, x)


def exp(x: BValue) -> BValue:
    return unary("Exp", x)


def log(x: BValue) -> BValue:
    return unary("Log", x)


def sqrt(x: BValue) -> BValue:
    return unary("Sqrt", x)


def reciprocal(x: BValue) -> BValue:
    return unary("Reciprocal", x)


def tanh(x: BValue) -> BValue:
    return unary("Tanh", x)


def erf(x: BValue) -> BValue:
    return unary("Erf", x)


def abs_(x: BValue) -> BValue:
    return unary("Abs", x)


def maximum(x: BValue, y) -> BValue:
    return x.b.op("Max", x, _operand(x, y))


def minimum(x: BValue, y) -> BValue:
    return x.b.op("Min", x, _operand(x, y))


def greater(x: BValue, y) -> BValue:
    return x.b.op("Greater", x, _operand(x, y))


def less(x: BValue, y) -> BValue:
    return x.b.op("Less", x, _operand(x, y))


def where(cond: BValue, x: BValue, y) -> BValue:
    """Where(cond, x, y); a number ``y`` becomes a constant of x's dtype."""
    return cond.b.op("Where", cond, x, _operand(x, y))


def cast(x: BValue, dtype: DType) -> BValue:
    return x if x.dtype == dtype else x.b.op("Cast", x, to=int(dtype))


def reshape(x: BValue, shape: Iterable[int]) -> BValue:
    shape = tuple(int(d) for d in shape)
    return x if x.shape == shape else x.b.op("Reshape", x, x.b.const(np.asarray(shape, np.int64)))


def reduce(op: str, x: BValue, axes: Iterable[int], keepdims: bool = True) -> BValue:
    axes_v = x.b.const(np.asarray(sorted(axes), np.int64))
    return x.b.op(op, x, axes_v, keepdims=int(keepdims))


def reduce_sum(x: BValue, axes: Iterable[int], keepdims: bool = True) -> BValue:
    return reduce("ReduceSum", x, axes, keepdims)


def reduce_max(x: BValue, axes: Iterable[int], keepdims: bool = True) -> BValue:
    return reduce("ReduceMax", x, axes, keepdims)


def mean(x: BValue, axes: Iterable[int], keepdims: bool = True) -> BValue:
    """ReduceSum(x, axes) * (1/n), n = number of reduced elements (MindSpore's ReduceMean expander)."""
    axes = tuple(axes)
    n = math.prod(x.shape[a] for a in axes)
    return reduce_sum(x, axes, keepdims) * (1.0 / n)


def sigmoid(x: BValue) -> BValue:
    """1 / (1 + exp(-x)) (MindSpore's Sigmoid expander)."""
    return 1.0 / (exp(-x) + 1.0)


def softplus(x: BValue) -> BValue:
    """log(1 + exp(x)) in the overflow-free form max(x, 0) + log(1 + exp(-|x|))."""
    return maximum(x, 0.0) + log(exp(-abs_(x)) + 1.0)


# -- reading node inputs and attributes ------------------------------------------------------------------------
def input_value(b, node: Node, i: int) -> BValue | None:
    """Input ``i`` of ``node`` as a BValue (None when absent)."""
    v = node.inputs[i] if i < len(node.inputs) else None
    return None if v is None else b.wrap(v)


def const_input(node: Node, i: int) -> np.ndarray | None:
    """The constant data of input ``i`` (None when the input is absent); Declined when it is computed."""
    v = node.inputs[i] if i < len(node.inputs) else None
    if v is None:
        return None
    if v.const is None:
        raise Declined(f"input {i} ({v.name!r}) is not a constant")
    return v.const


def output_used(b, node: Node, i: int) -> bool:
    """Output ``i`` of ``node`` exists and is read by a node or is a graph output."""
    if i >= len(node.outputs):
        return False
    o = node.outputs[i]
    return bool(o.uses) or any(o is g for g in b.graph.outputs)


def require_float(x: BValue, op: str) -> None:
    if not x.dtype.is_float:
        raise Declined(f"{op} expansion needs a float input, got {x.dtype.name}")


def as_scalar(x: BValue) -> BValue:
    """A one-element tensor reshaped to rank 0 (so that it broadcasts without changing any shape)."""
    if x.shape == ():
        return x
    if x.v.const is not None:
        return x.b.wrap(x.b.const(x.v.const.reshape(()), x.dtype))
    return reshape(x, ())
