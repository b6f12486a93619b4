"""``shape_reshape``: shape computations of a static graph are folded, and the reshapes they drive vanish
when they change nothing.

Cases:

1. ``Shape(x)`` / ``Size(x)`` -> a constant (every shape is static once the importer fixed input dims).
2. Nodes whose inputs are all constant and at least one of them comes from case 1 or 2 -> constants (constant
   folding restricted to shape sub-graphs: ``Gather``/``Concat``/``Unsqueeze``/... of shapes).
3. A reshape-like op (Reshape, Flatten, Squeeze, Unsqueeze) whose output shape equals its input shape -> its
   input.

Graph outputs keep their producing nodes (``fold_constants`` case 4).
"""
from __future__ import annotations

from ...ir.core import Graph, Node
from ..base import PassContext
from ..registry import register_pass
from ..simplify.constant_fold import SHAPE_OPS, fold_constants
from ..simplify.dce import remove_dead_nodes
from ..simplify.pattern import OpPattern, Var
from ..simplify.rewriter import Rule, apply_rules
from ..simplify.transform_op import RESHAPE_LIKE, same_shape
from .base import RewritePass

X = Var("x")


def fold_shape_subgraphs(graph: Graph) -> int:
    """Cases 1-2; returns the number of nodes folded."""
    created: set[int] = set()

    def in_shape_subgraph(node: Node) -> bool:
        return node.op in SHAPE_OPS or any(v is not None and id(v) in created for v in node.inputs)

    return fold_constants(graph, shapes=True, only=in_shape_subgraph, created=created)


@register_pass
class ShapeReshapePass(RewritePass):
    name = "shape_reshape"
    rules = (Rule("identity_reshape", OpPattern(RESHAPE_LIKE, (X, ...)), X, check=same_shape),)

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        n = fold_shape_subgraphs(graph)
        if n:
            remove_dead_nodes(graph, recursive=False)
            ctx.count(self.name, n)
        return super().run(graph, ctx) or n > 0
