"""``constant_folding``: nodes whose inputs are all constants are evaluated now and become constants.

Cases (``fold_constants``):

1. Every present input is a constant and the op is deterministic -> the node is run with its reference
   kernel and its outputs become constant values (same names and types); the node is removed.
2. Not folded: ops with a non-deterministic result (random generators), ``GraphKernel`` nodes whose
   sub-graph holds such an op, ops the table does not know, and kernels that reject their inputs (the
   error will surface, with context, when the model runs).
3. Not folded: a node whose outputs are much bigger than its inputs (more than ``GROWTH_FACTOR`` times the
   inputs' bytes plus ``GROWTH_SLACK_BYTES``), e.g. ``ConstantOfShape``/``Expand``/``Tile`` of a small
   constant: materialising it would only bloat the model.
4. Not folded: a node producing a graph output, so every output keeps a producing node and its name.
5. ``shapes=True`` also folds ``Shape``/``Size`` of values with a static type (used by ``shape_reshape``);
   ``only`` restricts folding to nodes for which the predicate holds.

Works on one graph; the pass also folds inside fused kernels' sub-graphs, and bypasses no-op nodes
(``noop.py``).  The importer calls ``fold_constants`` directly.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir.core import Graph, Node, Value
from ...ops.registry import OPS, evaluate_node
from ..base import Pass, PassContext
from ..registry import register_pass
from .noop import remove_noops
from .rewriter import all_graphs

GROWTH_FACTOR = 4
GROWTH_SLACK_BYTES = 64 * 1024
SHAPE_OPS = ("Shape", "Size")


def is_deterministic(node: Node) -> bool:
    d = OPS.get(node.op)
    if d is None or not d.deterministic:
        return False
    sub = node.attrs.get("graph")
    return not isinstance(sub, Graph) or all(is_deterministic(n) for n in sub.nodes)


def static_shape_value(node: Node) -> np.ndarray | None:
    """The value of ``Shape``/``Size`` of a statically typed value (None if not such a node)."""
    x = node.inputs[0] if node.inputs else None
    if node.op not in SHAPE_OPS or x is None or x.type is None or not x.type.is_static:
        return None
    if node.op == "Size":
        return np.array(x.type.size, dtype=np.int64)
    shape = np.array(x.type.shape, dtype=np.int64)
    rank = len(shape)
    start, end = node.attrs.get("start", 0), node.attrs.get("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return shape[start:end]


def _fold(node: Node) -> list[np.ndarray] | None:
    if not is_deterministic(node):
        return None
    if any(o.type is not None and not o.type.is_tensor for o in node.outputs) or \
            (node.op != "GraphKernel" and any(isinstance(a, Graph) for a in node.attrs.values())):
        return None             # sequences and optionals are run-time values; loops run at run time
    inputs = [None if v is None else v.const for v in node.inputs]
    in_bytes = sum(a.nbytes for a in inputs if a is not None)
    out_bytes = sum(o.type.nbytes for o in node.outputs if o.type is not None and o.type.is_static)
    if out_bytes > GROWTH_FACTOR * in_bytes + GROWTH_SLACK_BYTES:
        return None
    try:
        with np.errstate(all="ignore"):
            outs = evaluate_node(node, inputs)
    except Exception:  # noqa: BLE001  (case 2: any kernel failure just means "not folded here")
        return None
    if sum(np.asarray(a).nbytes for a in outs) > GROWTH_FACTOR * in_bytes + GROWTH_SLACK_BYTES:
        return None
    return outs


def fold_constants(graph: Graph, *, shapes: bool = False, only: Callable[[Node], bool] | None = None,
                   created: set[int] | None = None) -> int:
    """Folds constant sub-expressions of ``graph`` (not its sub-graphs); returns the number of nodes folded.

    ``created``, if given, receives the ids of the constant values made (so a caller can follow them).
    """
    outputs = {id(v) for v in graph.outputs}
    folded: set[int] = set()
    for node in graph.nodes:
        if any(id(o) in outputs for o in node.outputs) or (only is not None and not only(node)):
            continue
        outs = None
        if shapes and node.op in SHAPE_OPS:
            value = static_shape_value(node)
            outs = None if value is None else [value]
        elif all(v is None or v.is_const for v in node.inputs):
            outs = _fold(node)
        if outs is None:
            continue
        for o, arr in zip(node.outputs, outs):
            arr = np.asarray(arr)
            if o.type is not None and arr.dtype != o.type.dtype.np:
                arr = arr.astype(o.type.dtype.np)
            c = Value(o.name, const=arr)
            graph.replace_all_uses(o, c)
            if created is not None:
                created.add(id(c))
        node.detach()
        folded.add(id(node))
    if folded:
        graph.nodes = [n for n in graph.nodes if id(n) not in folded]
    return len(folded)


@register_pass
class ConstantFoldingPass(Pass):
    """Folds constant sub-expressions in the main graph and inside every fused kernel, and bypasses no-op
    nodes (``noop.remove_noops``: Identity, same-dtype Cast, ...) so later pattern fusions see through them."""
    name = "constant_folding"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        n = sum(fold_constants(g) + remove_noops(g) for g in all_graphs(graph))
        if n:
            ctx.count(self.name, n)
        return n > 0
