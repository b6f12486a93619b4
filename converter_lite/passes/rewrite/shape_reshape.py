"""``shape_reshape``: shape computations of a static graph are folded, values whose shape was only known at
run time get their static shape back, and the reshapes they drive vanish when they change nothing.

Cases:

1. ``Shape(x)`` / ``Size(x)`` of a statically shaped x -> a constant.
2. A node whose inputs are all constant and that is part of a shape computation -> constants: an input
   came from case 1 or 2, or every input is an integer constant (shape arithmetic: ``Gather``/``Concat``/
   ``Unsqueeze``/``Mul``/``Cast`` of dims).  This is constant folding restricted to shape sub-graphs.
3. A node whose output shape was dynamic (it depended on a computed shape input) is re-inferred once its
   inputs are constant/static, and the static shapes flow to its users.
4. Chains of reshape-like ops (Reshape, Flatten, Squeeze, Unsqueeze) become one Reshape, and one whose
   output shape equals its input shape is replaced by its input (``transform_op_optimizer`` cases 4-5).

Graph outputs keep their producing nodes (``fold_constants`` case 4).
"""
from __future__ import annotations

from ...ir.core import Graph, Node
from ...ir.dce import remove_dead_nodes
from ...ops.registry import KernelError, infer_types
from ..base import PassContext
from ..registry import register_pass
from ..simplify.constant_fold import SHAPE_OPS, fold_constants
from ..simplify.transform_op import RESHAPE_RULES
from .base import RewritePass


def fold_shape_subgraphs(graph: Graph) -> int:
    """Cases 1-2; returns the number of nodes folded."""
    created: set[int] = set()

    def in_shape_subgraph(node: Node) -> bool:
        present = [v for v in node.inputs if v is not None]
        return (node.op in SHAPE_OPS or any(id(v) in created for v in present)
                or (bool(present) and all(v.is_const and v.const.dtype.kind in "iu" for v in present)))

    return fold_constants(graph, shapes=True, only=in_shape_subgraph, created=created)


def reinfer_dynamic(graph: Graph) -> int:
    """Case 3; returns the number of nodes whose outputs became static."""
    fixed = 0
    for node in graph.nodes:
        if all(o.type is None or o.type.is_static for o in node.outputs):
            continue
        if any(v is not None and v.type is not None and not v.type.is_static for v in node.inputs):
            continue
        try:
            types = infer_types(node)
        except KernelError:
            continue
        if all(t.is_static for t in types):
            for o, t in zip(node.outputs, types):
                o.type = t
            fixed += 1
    return fixed


@register_pass
class ShapeReshapePass(RewritePass):
    name = "shape_reshape"
    rules = RESHAPE_RULES

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        n = fold_shape_subgraphs(graph)
        n += reinfer_dynamic(graph) if n else 0
        if n:
            remove_dead_nodes(graph, recursive=False)
            ctx.count(self.name, n)
        return super().run(graph, ctx) or n > 0
