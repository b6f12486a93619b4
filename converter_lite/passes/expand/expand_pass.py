"""``graph_kernel_expander``: rewrites composite ops into basic ops so that they can be clustered.

For every node (in graph order; nodes created by an expansion are not revisited) whose op is in
``ctx.config.expand_ops(DEFAULT_EXPAND)``, has an expander, and whose values all have static shapes
(MindSpore does not expand a node lacking shape info) and none a low-precision type (bfloat16, float8, float4,
int4: no native kernel handles them, and the reference kernel computes such an op in float32 where its
expansion would round every step):

1. the expander emits basic ops before the node through a ``GraphBuilder``;
2. if it raises ``Declined`` (or emits an op whose shape inference fails) the emitted ops are removed and the
   node stays, with a DEBUG line giving the reason;
3. MindSpore's invariant is checked: every expanded output keeps the node output's shape and dtype (an
   ``ExpandError`` otherwise: that is a bug in the expander, never silently accepted);
4. the uses of the node's outputs move to the new values and the node is removed.  A graph output keeps its
   name: the value replacing it takes the old name.  If that value cannot be renamed (it is a graph input, a
   constant or another graph output, e.g. ``Identity(input)`` as a graph output) the node stays.
"""
from __future__ import annotations

from ...ir.core import Graph, Node, Value
from ...ops.builder import GraphBuilder, unwrap
from ...ops.registry import KernelError
from ..base import Pass, PassContext
from ..registry import register_pass
from . import (  # noqa: F401  (registration)
    arith,
    batch_norm,
    conv_transpose,
    depthwise_conv,
    einsum,
    gelu,
    norm,
    pooling,
    quantize,
    reduce,
    relu,
    resize,
    rnn,
    sigmoid,
    softmax,
    tensor,
)
from .registry import EXPANDERS, Declined

# Every op with an expander is expanded by default (enable_/disable_expand_ops and the _only list adjust it).
DEFAULT_EXPAND: frozenset[str] = frozenset(EXPANDERS)


class ExpandError(RuntimeError):
    """An expander broke the shape/dtype invariant (a bug in the expander)."""


def _undo(graph: Graph, b: GraphBuilder) -> None:
    for n in reversed(b.new_nodes):
        graph.remove_node(n)


def _renamable(v: Value, graph: Graph) -> bool:
    """``v`` may take a graph output's name: it is produced by a node and is not itself a graph output."""
    return v.producer is not None and v.const is None and not any(v is o for o in graph.outputs)


@register_pass
class ExpandOpsPass(Pass):
    name = "graph_kernel_expander"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        ops = ctx.config.expand_ops(DEFAULT_EXPAND)
        expanded: dict[str, int] = {}
        for node in list(graph.nodes):
            if node.op in ops and node.op in EXPANDERS and self._expand(graph, node, ctx):
                expanded[node.op] = expanded.get(node.op, 0) + 1
        total = sum(expanded.values())
        if total:
            ctx.count(self.name, total)
            ctx.log.info("graph_kernel_expander: expanded %s", ", ".join(f"{n} {op}" for op, n in
                                                                          sorted(expanded.items())))
        return total > 0

    def _expand(self, graph: Graph, node: Node, ctx: PassContext) -> bool:
        values = [v for v in (*node.inputs, *node.outputs) if v is not None]
        if any(v.type is None or not v.type.is_static for v in values):
            ctx.log.debug("node %r (%s) has a value without a static shape; not expanded", node.name, node.op)
            return False
        if any(v.type.dtype.is_low_precision for v in values):
            ctx.log.debug("node %r (%s) has a value of a low-precision type; not expanded", node.name, node.op)
            return False
        b = GraphBuilder(graph, insert_before=node, name_prefix=node.name or node.op)
        try:
            outs = [None if o is None else unwrap(o) for o in EXPANDERS[node.op](b, node)]
        except (Declined, KernelError) as e:
            _undo(graph, b)
            ctx.log.debug("expander of %s declined node %r: %s", node.op, node.name, e)
            return False
        self._check(graph, node, outs)
        renames = [(old, new) for old, new in zip(node.outputs, outs)
                   if new is not None and any(old is o for o in graph.outputs)]
        if any(not _renamable(new, graph) for _, new in renames) or \
                len({id(new) for _, new in renames}) < len(renames):
            _undo(graph, b)
            ctx.log.debug("node %r (%s) feeds a graph output with a value that cannot take its name; "
                          "not expanded", node.name, node.op)
            return False
        for old, new in zip(node.outputs, outs):
            if new is not None:
                graph.replace_all_uses(old, new)
        for old, new in renames:
            new.name = old.name
        graph.remove_node(node)
        return True

    @staticmethod
    def _check(graph: Graph, node: Node, outs: list[Value | None]) -> None:
        """MindSpore ``_check_output_same``: one value per output, same dtype and shape."""
        if len(outs) != len(node.outputs):
            raise ExpandError(f"expander of {node.op} returned {len(outs)} values for node {node.name!r} with "
                              f"{len(node.outputs)} outputs")
        for i, (old, new) in enumerate(zip(node.outputs, outs)):
            if new is None:
                if old.uses or any(old is o for o in graph.outputs):
                    raise ExpandError(f"expander of {node.op} dropped output {i} of node {node.name!r}, "
                                      "which is used")
                continue
            if new.type != old.type:
                raise ExpandError(f"expander of {node.op} changed output {i} of node {node.name!r} from "
                                  f"{old.type} to {new.type}")
