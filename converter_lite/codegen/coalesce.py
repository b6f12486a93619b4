"""Leading axes merged into one before a kernel is lowered, so that its threads have rows to share.

A parallel stage is split along its partition axis, the first axis longer than 1 (stages.py, reduce.py).  When
that axis is short (a batch of 2, two attention heads), a kernel has at most that many chunks: GELU over
[2, 64, 512] ran as 2 chunks, so on 4, 8 or 16 threads it took as long as on 2 (measured on a 16-core Xeon:
73 us on 1 thread, 61-78 us on 4-16).  ``coalesce_leading(graph)`` returns a copy of the kernel's graph in
which the leading axes are one axis (``[2, 64, 512]`` -> ``[128, 512]``), when that keeps every element where
it is:

* every node is elementwise (a scalar emitter) or a reduction with ``keepdims`` over axes after the merged
  ones; no index map, whose coordinates would change meaning;
* every value, its shape right-aligned to the kernel's rank, is on each merged axis either the full extent
  or 1 (broadcast) consistently: ``[2, 64, 512]`` and ``[1, 1, 512]`` merge, ``[1, 64, 512]`` against
  ``[2, 64, 512]`` does not (row ``r`` of the merged axis would need ``r % 64``).

Axes are merged from the first until the merged extent reaches ``target`` (the last axis never: it carries
the vector loops).  The copy is only lowered; the model keeps the original graph, and the kernel's ABI
(buffer pointers, row-major layout) is unchanged, since merging adjacent row-major axes moves no element.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.core import Graph, Node, TensorType, Value
from .reduce import REDUCE_OPS, keepdims, reduce_axes
from .scalar import SCALAR_EMITTERS

TARGET = 64             # merge until the partition axis has at least this many rows (schedule.CHUNKS)


def coalesce_leading(graph: Graph, target: int = TARGET) -> Graph:
    """``graph`` with its leading axes merged (see the module doc), or ``graph`` itself when nothing merges."""
    values = graph.values()
    k = _merge_count(graph, values, target)
    if k < 2:
        return graph
    return _rewrite(graph, k, max(len(v.shape) for v in values))


def _merge_count(graph: Graph, values: list[Value], target: int) -> int:
    if any(v.type is None or not v.type.is_tensor or v.shape is None for v in values):
        return 0
    rank = max((len(v.shape) for v in values), default=0)
    if rank < 3:
        return 0
    first_reduced = rank
    for node in graph.nodes:
        if node.op in REDUCE_OPS:
            x = node.inputs[0]
            axes = reduce_axes(node)
            if len(x.shape) != rank or not keepdims(node) or not axes:
                return 0
            first_reduced = min(first_reduced, axes[0])
        elif node.op not in SCALAR_EMITTERS:
            return 0
    full = [1] * rank
    padded = []
    for v in values:
        p = (1,) * (rank - len(v.shape)) + tuple(v.shape)
        padded.append(p)
        full = [max(a, b) for a, b in zip(full, p)]
    big = [d for d in range(rank) if full[d] > 1]
    if not big or full[big[0]] >= target:
        return 0

    def mergeable(k: int) -> bool:
        if k > first_reduced or k > rank - 1:
            return False
        for p in padded:
            axes = [d for d in range(k) if full[d] > 1]
            if not (all(p[d] == 1 for d in axes) or all(p[d] == full[d] for d in axes)):
                return False
        return True

    k = 1
    while math.prod(full[:k]) < target and mergeable(k + 1):
        k += 1
    # merging only size-1 axes into the first long one changes nothing
    return k if k >= 2 and math.prod(full[:k]) > full[big[0]] else 0


def _rewrite(graph: Graph, k: int, rank: int) -> Graph:
    keep = rank - k                                     # axes after the merged one

    def new_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(shape) <= keep:
            return tuple(shape)
        p = (1,) * (rank - len(shape)) + tuple(shape)
        return (math.prod(p[:k]),) + p[k:]

    mapping: dict[int, Value] = {}

    def get(v: Value | None) -> Value | None:
        if v is None:
            return None
        got = mapping.get(id(v))
        if got is None:
            shape = new_shape(v.shape)
            const = None if v.const is None else np.asarray(v.const).reshape(shape)
            got = Value(v.name, TensorType(v.dtype, shape, v.type.kind), const)
            mapping[id(v)] = got
        return got

    inputs = [get(v) for v in graph.inputs]
    nodes = []
    for node in graph.nodes:
        ins = [get(v) for v in node.inputs]
        attrs = dict(node.attrs)
        if node.op in REDUCE_OPS:
            axes = [a - (k - 1) for a in reduce_axes(node)]
            if node.op in ("ArgMax", "ArgMin"):
                attrs["axis"] = axes[0]
            elif len(node.inputs) > 1 and node.inputs[1] is not None:
                ins[1] = Value(node.inputs[1].name, None, np.asarray(axes, np.int64))
            else:
                attrs["axes"] = axes
        outs = [get(v) for v in node.outputs]
        nodes.append(Node(node.op, ins, outs, attrs, node.name))
    out = Graph(graph.name, inputs, [get(v) for v in graph.outputs], nodes)
    out.metadata = dict(graph.metadata)
    return out
