"""``eliminate_redundant_output``: trims GraphKernel outputs (MindSpore ``EliminateRedundantOutput``).

For every GraphKernel node:

1. an output that no node reads and that is not a graph output is dropped;
2. two outputs that are the same sub-graph value are merged: the uses of the second move to the first
   (when only the second is a graph output, the first's uses move to it instead, to keep the output name;
   when both are graph outputs, both stay);
3. sub-graph nodes that no longer contribute to an output are removed, and kernel inputs that nothing reads
   any more are dropped (from the node and the sub-graph alike);
4. ``source_nodes`` keeps the names of the nodes that remain.
"""
from __future__ import annotations

from ...ir.core import Graph, Node, Value
from ..base import Pass, PassContext
from ..registry import register_pass


def _is_graph_output(v: Value, graph: Graph) -> bool:
    return any(v is o for o in graph.outputs)


def _merge_duplicates(graph: Graph, kernel: Node, sub: Graph) -> None:
    kept: dict[int, Value] = {}           # id(sub-graph output) -> the outer output that stays
    for inner, outer in zip(sub.outputs, kernel.outputs):
        first = kept.setdefault(id(inner), outer)
        if first is outer or (_is_graph_output(first, graph) and _is_graph_output(outer, graph)):
            continue
        if _is_graph_output(outer, graph):    # only the later one is a graph output: it takes over
            graph.replace_all_uses(first, outer)
            kept[id(inner)] = outer
        else:
            graph.replace_all_uses(outer, first)


def _prune(graph: Graph, kernel: Node, sub: Graph) -> bool:
    keep = [i for i, o in enumerate(kernel.outputs) if o.uses or _is_graph_output(o, graph)]
    if len(keep) == len(kernel.outputs):
        return False
    for i, o in enumerate(kernel.outputs):
        if i not in keep:
            o.producer = None              # a dropped value: no longer defined by anything
    kernel.outputs = [kernel.outputs[i] for i in keep]
    for i, o in enumerate(kernel.outputs):
        o.index = i
    sub.outputs = [sub.outputs[i] for i in keep]
    live = {id(v) for v in sub.outputs}
    kept_nodes = []
    for n in reversed(sub.nodes):
        if any(id(o) in live for o in n.outputs):
            kept_nodes.append(n)
            live.update(id(v) for v in n.inputs if v is not None)
        else:
            n.detach()
    sub.nodes = kept_nodes[::-1]
    used_inputs = [i for i, v in enumerate(sub.inputs) if id(v) in live]
    outer = list(kernel.inputs)
    kernel.detach()
    kernel.inputs = []
    for i in used_inputs:
        kernel.add_input(outer[i])
    sub.inputs = [sub.inputs[i] for i in used_inputs]
    kernel.attrs["source_nodes"] = tuple(n.name for n in sub.nodes)
    return True


@register_pass
class EliminateRedundantOutputPass(Pass):
    name = "eliminate_redundant_output"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        changed = 0
        for kernel in list(graph.nodes):
            if kernel.op != "GraphKernel":
                continue
            sub: Graph = kernel.attrs["graph"]
            _merge_duplicates(graph, kernel, sub)
            if _prune(graph, kernel, sub):
                changed += 1
        if changed:
            ctx.count(self.name, changed)
        return changed > 0
