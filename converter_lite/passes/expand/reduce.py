"""Composite reductions -> ReduceSum / ReduceMax plus elementwise ops (axes from the constant input 1).

* ReduceMean(x)      = ReduceSum(x) * (1/n),  n = number of reduced elements   (MindSpore ``reduce_mean``)
* ReduceL1(x)        = ReduceSum(|x|)
* ReduceL2(x)        = sqrt(ReduceSum(x * x))
* ReduceSumSquare(x) = ReduceSum(x * x)
* ReduceLogSumExp(x) = log(ReduceSum(exp(x - m))) + m,  m = ReduceMax(x) (kept dims, reshaped to the output)

Declined: non-constant axes, ``noop_with_empty_axes`` with no axes (nothing reduced), empty reductions, and
integer inputs where the op table computes in float64 (Mean, L2, LogSumExp).
"""
from __future__ import annotations

import math
from collections.abc import Callable

from ...ir.core import Node
from ...ops.builder import BValue, GraphBuilder
from ...ops.reduce import reduce_axes
from .emit import (
    abs_,
    const_input,
    exp,
    input_value,
    log,
    reduce_max,
    reduce_sum,
    require_float,
    reshape,
    sqrt,
)
from .registry import Declined, expander


def _axes(node: Node, x: BValue) -> tuple[tuple[int, ...], bool]:
    axes = reduce_axes(x.type.rank, const_input(node, 1), node.attrs.get("noop_with_empty_axes", 0))
    if not axes and x.type.rank:
        raise Declined("reduces nothing (noop_with_empty_axes=1 without axes)")
    if math.prod(x.shape[a] for a in axes) == 0:
        raise Declined("empty reduction")
    return axes, bool(node.attrs.get("keepdims", 1))


def _sum_of(f: Callable[[BValue], BValue], needs_float: bool = False):
    def expand(b: GraphBuilder, node: Node) -> list:
        x = input_value(b, node, 0)
        if needs_float:
            require_float(x, node.op)
        axes, keepdims = _axes(node, x)
        return [reduce_sum(f(x), axes, keepdims)]
    return expand


expander("ReduceL1")(_sum_of(abs_))
expander("ReduceSumSquare")(_sum_of(lambda x: x * x))


@expander("ReduceMean")
def expand_reduce_mean(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "ReduceMean")
    axes, keepdims = _axes(node, x)
    n = math.prod(x.shape[a] for a in axes)
    return [reduce_sum(x, axes, keepdims) * (1.0 / n)]


@expander("ReduceL2")
def expand_reduce_l2(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "ReduceL2")
    axes, keepdims = _axes(node, x)
    return [sqrt(reduce_sum(x * x, axes, keepdims))]


@expander("ReduceLogSumExp")
def expand_reduce_log_sum_exp(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "ReduceLogSumExp")
    axes, keepdims = _axes(node, x)
    m = reduce_max(x, axes)
    s = log(reduce_sum(exp(x - m), axes, keepdims))
    return [s + reshape(m, s.shape)]
