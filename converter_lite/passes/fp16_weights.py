"""``--fp16=on``: store float32 weights as float16 in the ``.ms`` (MindSpore's converter flag).

Every float32 constant of at least ``MIN_ELEMENTS`` elements used by a node (of the main graph or of a
control-flow body) becomes a float16
constant followed by ``Cast(to=float32)``.  The runtime evaluates constant-only nodes once at load, so runs
compute in float32 as before; only the stored weights (and so their precision) shrink by half.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Graph, Node, TensorType, Value
from ..ir.dtype import DType
from ..ops.builder import fresh_name

MIN_ELEMENTS = 64


def store_weights_as_fp16(graph: Graph) -> int:
    """Rewrites ``graph`` and its bodies in place; returns how many constants were converted."""
    return sum(_in_graph(g) for g in graph.all_graphs())


def _in_graph(graph: Graph) -> int:
    casts: list[Node] = []
    replaced: dict[int, Value] = {}
    for node in list(graph.nodes):
        for i, v in enumerate(node.inputs):
            if v is None or v.const is None or v.type.dtype is not DType.float32 or v.const.size < MIN_ELEMENTS:
                continue
            new = replaced.get(id(v))
            if new is None:
                half = Value(v.name + "_fp16", const=v.const.astype(np.float16))
                new = Value(fresh_name(v.name + "_f32"), TensorType(DType.float32, v.type.shape))
                casts.append(Node("Cast", [half], [new], {"to": int(DType.float32)}, name=fresh_name("fp16_cast")))
                replaced[id(v)] = new
            node.set_input(i, new)
    graph.nodes[:0] = casts
    return len(casts)
