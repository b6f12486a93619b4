"""The split model driver (MindSpore ``SplitModel``): one area per node, then each fusion pattern in turn
over all areas, fusing what it matches.

* Areas are visited in topological order; after a successful fusion the same area is tried again while it
  is alive (a pattern only looks at adjacent areas, so a chain is absorbed one link per step).
* Before fusing, the matched areas are trimmed so that the result has at most ``max_size`` nodes
  (``composite_op_limit_size``), the smaller areas first (MindSpore ``LimitAreaSize``).
* Every decision is appended to ``log`` (for ``graph_kernel_split_mode.txt``).
Nodes that are not fusible (opaque ops, ops outside the cluster list) keep an area so that the reach table
sees the paths through them; no pattern ever fuses them.
"""
from __future__ import annotations

from collections.abc import Callable

from ...ir.core import Graph, Node
from .area import Area, ReachTable, link_nodes
from .patterns import Direction, FusePattern


def limit_area_size(dom: Area, areas: list[Area], max_size: int) -> list[Area]:
    """The areas to fuse into ``dom`` without exceeding ``max_size`` nodes, smaller areas first."""
    if dom.size + sum(a.size for a in areas) <= max_size:
        return areas
    kept, total = [], dom.size
    for a in sorted(areas, key=lambda a: a.size):
        if total + a.size > max_size:
            break
        kept.append(a)
        total += a.size
    return kept


class SplitModel:
    def __init__(self, graph: Graph, fusible: Callable[[Node], bool]):
        outputs = {id(v) for v in graph.outputs}
        self.areas = [Area(i, n, fusible(n), any(id(o) in outputs for o in n.outputs))
                      for i, n in enumerate(graph.nodes)]
        self.area_of = {id(n): a for n, a in zip(graph.nodes, self.areas)}
        for n in graph.nodes:
            link_nodes(self.area_of, n)
        self.reach = ReachTable(self.areas)
        self.log: list[str] = []

    def run(self, patterns: list[FusePattern], max_size: int) -> list[Area]:
        """Runs every pattern; returns the alive fusible areas in topological order of their first node."""
        for pattern in patterns:
            self._run_one(pattern, max_size)
        return [a for a in self.areas if a.alive and a.fusible]

    def _run_one(self, pattern: FusePattern, max_size: int) -> None:
        order = [a for a in self.areas if a.alive and a.fusible]
        i = 0
        while i < len(order):
            dom = order[i]
            found = pattern.run(dom, self.reach) if dom.alive else None
            if found is None:
                i += 1
                continue
            kept = limit_area_size(dom, found.areas, max_size)
            if len(kept) < len(found.areas):
                dropped = [a for a in found.areas if a not in kept]
                self.log.append(f"{pattern.name}: {dom!r} cannot take {dropped} "
                                f"(composite_op_limit_size={max_size})")
            if not kept:
                i += 1
                continue
            self.log.append(f"{pattern.name}: {dom!r} {found.direction.value}{{{','.join(map(repr, kept))}}}")
            self._fuse(dom, kept, found.direction)

    def _fuse(self, dom: Area, areas: list[Area], direction: Direction) -> None:
        target = dom
        for a in areas:
            if direction == Direction.BACKWARD:     # the user always absorbs its input
                target, a = a, target
            target.fuse_input(a)
            self.reach.fuse(target, a)
