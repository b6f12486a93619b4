"""eval_graph: runs a graph node by node with the reference kernels (the oracle every pass is checked against)."""
from __future__ import annotations

import numpy as np

from ..ir.core import Graph
from .registry import evaluate_node


def eval_graph(graph: Graph, feeds: dict[str, np.ndarray] | list[np.ndarray]) -> list[np.ndarray]:
    """Evaluates ``graph``; ``feeds`` maps input names to arrays (or lists them in input order)."""

    if not isinstance(feeds, dict):
        feeds = {v.name: a for v, a in zip(graph.inputs, feeds)}
    env: dict[int, np.ndarray] = {}
    for v in graph.inputs:
        a = feeds[v.name]
        env[id(v)] = a if a is None or isinstance(a, list) else np.asarray(a)

    def get(v):
        if v is None:
            return None
        if v.const is not None:
            return v.const
        return env[id(v)]

    for node in graph.nodes:
        outs = evaluate_node(node, [get(v) for v in node.inputs])
        for o, a in zip(node.outputs, outs):
            if o.type is not None and isinstance(a, np.ndarray) and a.dtype != o.type.dtype.np:
                a = a.astype(o.type.dtype.np)
            env[id(o)] = a
    return [get(v) for v in graph.outputs]
