"""Softmax and LogSoftmax (opset 13: one ``axis``, default -1) -> max-shifted reductions.

* Softmax(x)    = e / ReduceSum(e),        e = exp(x - ReduceMax(x))
* LogSoftmax(x) = d - log(ReduceSum(exp(d))),  d = x - ReduceMax(x)

All reductions keep dims over ``[axis]``.  Source: MindSpore ``softmax`` and ``logsoftmax`` expanders.
"""
from __future__ import annotations

from ...ir.core import Node
from ...ops.builder import BValue, GraphBuilder
from ...ops.registry import normalize_axis
from .emit import exp, input_value, log, reduce_max, reduce_sum, require_float
from .registry import Declined, expander


def _shifted(b: GraphBuilder, node: Node) -> tuple[BValue, tuple[int]]:
    x = input_value(b, node, 0)
    require_float(x, node.op)
    if x.type.size == 0:
        raise Declined("empty input")
    axes = (normalize_axis(int(node.attrs.get("axis", -1)), x.type.rank),)
    return x - reduce_max(x, axes), axes


@expander("Softmax")
def expand_softmax(b: GraphBuilder, node: Node) -> list:
    d, axes = _shifted(b, node)
    e = exp(d)
    return [e / reduce_sum(e, axes)]


@expander("LogSoftmax")
def expand_log_softmax(b: GraphBuilder, node: Node) -> list:
    d, axes = _shifted(b, node)
    return [d - log(reduce_sum(exp(d), axes))]
