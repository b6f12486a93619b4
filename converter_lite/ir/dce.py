"""Dead-code elimination: removes nodes none of whose outputs is used or returned.

All IR ops are free of side effects, so a node whose outputs are neither used by another node nor graph
outputs can go.  Fused kernels' sub-graphs are cleaned too (their inputs and outputs stay as they are, so the
kernel's signature does not change).
"""
from __future__ import annotations

from .core import Graph


def remove_dead_nodes(graph: Graph, recursive: bool = True) -> int:
    """Removes dead nodes of ``graph`` (and of its GraphKernel sub-graphs); returns how many."""
    outputs = {id(v) for v in graph.outputs}
    dead: set[int] = set()
    for node in reversed(graph.nodes):      # users first, so a chain of dead nodes goes in one sweep
        if any(o.uses or id(o) in outputs for o in node.outputs):
            continue
        node.detach()
        dead.add(id(node))
    if dead:
        graph.nodes = [n for n in graph.nodes if id(n) not in dead]
    removed = len(dead)
    if recursive:
        for node in graph.nodes:
            sub = node.attrs.get("graph")
            if isinstance(sub, Graph):
                removed += remove_dead_nodes(sub)
    return removed
