"""``graph_kernel_cse``: common sub-expression elimination, in the main graph and inside fused kernels.

Cases:

1. Constants with the same dtype, shape and bytes are one constant (the first one seen is kept).
2. Two nodes with the same op, the same inputs (after cases 1-2 were applied to the inputs; ``Add``/``Mul``/
   ``Max``/... compare their inputs as a multiset), equal attributes (arrays by value, fused sub-graphs by
   structure) and the same number of outputs compute the same values: the later one's outputs are replaced
   by the earlier one's.
3. Not merged: non-deterministic ops, and a node whose outputs are graph outputs (outputs keep their names).
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable
from typing import Any

import numpy as np

from ...ir.core import Graph, Node, Value
from ..base import Pass, PassContext
from ..registry import register_pass
from .constant_fold import is_deterministic
from .rewriter import all_graphs

COMMUTATIVE_OPS = frozenset({"Add", "Mul", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal",
                             "BitwiseAnd", "BitwiseOr", "BitwiseXor"})


def const_key(a: np.ndarray) -> Hashable:
    """Equal for constants with the same dtype, shape and bytes (a digest keeps big weights cheap)."""
    a = np.asarray(a, order="C")        # not np.ascontiguousarray: it makes 0-d arrays shape [1]
    return ("const", a.dtype.str, a.shape, hashlib.sha256(a.tobytes()).hexdigest())


def attr_key(v: Any) -> Hashable:
    if isinstance(v, np.ndarray):
        return const_key(v)
    if isinstance(v, Graph):
        return graph_signature(v)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(attr_key(x) for x in v)
    if isinstance(v, dict):
        return ("dict",) + tuple(sorted((k, attr_key(x)) for k, x in v.items()))
    if isinstance(v, float) and math.isnan(v):
        return ("nan",)
    return (type(v).__name__, v)


def graph_signature(g: Graph) -> Hashable:
    """A structural key of ``g``: equal for graphs computing the same thing with the same node structure."""
    ids: dict[int, int] = {id(v): i for i, v in enumerate(g.inputs)}
    rows: list[Hashable] = [tuple((str(v.type),) for v in g.inputs)]

    def ref(v: Value | None) -> Hashable:
        if v is None:
            return None
        if v.is_const:
            return const_key(v.const)
        return ids[id(v)]

    for n in g.nodes:
        rows.append((n.op, tuple(ref(v) for v in n.inputs), len(n.outputs),
                     tuple(sorted((k, attr_key(a)) for k, a in n.attrs.items()
                                  if k not in ("kernel_name", "source_nodes")))))
        for o in n.outputs:
            ids[id(o)] = len(ids)
    rows.append(tuple(ref(v) for v in g.outputs))
    return tuple(rows)


def eliminate_common_subexpressions(graph: Graph) -> int:
    """Cases 1-3 on ``graph`` only; returns the number of constants and nodes merged."""
    merged = 0
    consts: dict[Hashable, Value] = {}
    for c in graph.constants():
        key = const_key(c.const)
        first = consts.setdefault(key, c)
        if first is not c:
            for user, i in list(c.uses):
                user.set_input(i, first)
            merged += 1
    outputs = {id(v) for v in graph.outputs}
    seen: dict[Hashable, Node] = {}
    dead: set[int] = set()
    for node in graph.nodes:
        if not is_deterministic(node):
            continue
        ins = tuple(None if v is None else id(v) for v in node.inputs)
        if node.op in COMMUTATIVE_OPS:
            ins = tuple(sorted(ins, key=lambda x: (x is None, x or 0)))
        key = (node.op, ins, len(node.outputs),
               tuple(sorted((k, attr_key(a)) for k, a in node.attrs.items()
                            if k not in ("kernel_name", "source_nodes"))))
        first = seen.setdefault(key, node)
        if first is node or any(id(o) in outputs for o in node.outputs):
            continue
        for old, new in zip(node.outputs, first.outputs):
            graph.replace_all_uses(old, new)
        node.detach()
        dead.add(id(node))
    if dead:
        graph.nodes = [n for n in graph.nodes if id(n) not in dead]
    return merged + len(dead)


@register_pass
class GraphKernelCSEPass(Pass):
    """Common sub-expression elimination (MindSpore GraphKernelCSE), also inside fused kernels."""
    name = "graph_kernel_cse"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        n = sum(eliminate_common_subexpressions(g) for g in all_graphs(graph))
        if n:
            ctx.count(self.name, n)
        return n > 0
