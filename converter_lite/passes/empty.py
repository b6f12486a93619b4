"""``empty_pass``: does nothing.  It runs first so that the IR dump of the first executed pass is the graph
before graph-kernel optimization (MindSpore's EmptyPass)."""
from __future__ import annotations

from ..ir.core import Graph
from .base import Pass, PassContext
from .registry import register_pass


@register_pass
class EmptyPass(Pass):
    name = "empty_pass"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        return False
