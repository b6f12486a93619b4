"""``parallel_fusion``: independent fused kernels are launched as one (MindSpore ParallelOpFusion).

Cases:

1. GraphKernel nodes with no path between any two of them (no data dependency, direct or through other
   nodes) and the same output size class (the bit length of their total output element count) are grouped,
   at most ``MAX_PARALLEL_GROUP`` per group, greedily in node order.
2. Each group becomes one GraphKernel whose sub-graph is the union of the members' sub-graphs (inputs shared
   by several members are passed once); ``attrs["parallel"]`` lists the members' kernel names.
3. Dependencies are recomputed after every merge, since a merge can create paths between other kernels.

``merge_kernels`` (the union of kernels into one node) is also used by stitch and recompute fusion.
"""
from __future__ import annotations

from collections.abc import Iterable

from ...ir.core import Graph, Node, TensorType, Value
from ..base import Pass, PassContext
from ..registry import register_pass

MAX_PARALLEL_GROUP = 7           # MindSpore's pipeline passes a limit of 7 kernels per parallel fusion
KERNEL = "GraphKernel"
PATTERN_ORDER = ("reshape", "elemwise", "broadcast", "reduce", "opaque")   # fuse/area.py Pattern, by name


def is_kernel(node: Node) -> bool:
    return node.op == KERNEL and isinstance(node.attrs.get("graph"), Graph)


def kernel_ops(node: Node) -> list[str]:
    return [n.op for n in node.attrs["graph"].nodes] if is_kernel(node) else [node.op]


def unique_kernel_name(graph: Graph, base: str) -> str:
    used = {n.attrs.get("kernel_name") for n in graph.nodes if is_kernel(n)}
    name, i = base, 1
    while name in used:
        name, i = f"{base}_{i}", i + 1
    return name


class _SubGraphBuilder:
    """Copies members' computations into one new sub-graph, keeping value names unique."""

    def __init__(self, name: str):
        self.graph = Graph(name)
        self.names: set[str] = set()
        self.clone: dict[int, Value] = {}        # id(main-graph or member sub-graph value) -> new value
        self.outer_inputs: list[Value] = []      # node inputs of the new kernel, in order

    def fresh(self, v: Value) -> Value:
        name, i = v.name, 1
        while name in self.names:
            name, i = f"{v.name}_{i}", i + 1
        self.names.add(name)
        return Value(name, TensorType(v.type.dtype, v.type.shape) if v.type is not None else None)

    def outer(self, v: Value | None) -> Value | None:
        """The new sub-graph's value for a main-graph value consumed by a member."""
        if v is None:
            return None
        if id(v) not in self.clone:
            inner = self.fresh(v)
            self.graph.inputs.append(inner)
            self.outer_inputs.append(v)
            self.clone[id(v)] = inner
        return self.clone[id(v)]

    def const(self, v: Value) -> Value:
        """A constant of the new sub-graph (its own Value, sharing the data), so use lists stay per graph."""
        if id(v) not in self.clone:
            self.clone[id(v)] = Value(v.name, v.type, const=v.const)
        return self.clone[id(v)]

    def copy_node(self, n: Node, inputs: list[Value | None]) -> list[Value]:
        outs = [self.fresh(o) for o in n.outputs]
        self.graph.nodes.append(Node(n.op, inputs, outs, dict(n.attrs), name=n.name))
        return outs

    def add_member(self, member: Node) -> None:
        if not is_kernel(member):             # a basic op: its constants stay inline
            ins = [self.const(v) if v is not None and v.is_const else self.outer(v) for v in member.inputs]
            for o, c in zip(member.outputs, self.copy_node(member, ins)):
                self.clone[id(o)] = c
            return
        sub = member.attrs["graph"]
        local: dict[int, Value | None] = {id(si): self.outer(v) for si, v in zip(sub.inputs, member.inputs)}
        for n in sub.nodes:
            ins = [None if v is None else (self.const(v) if v.is_const else local[id(v)]) for v in n.inputs]
            for o, c in zip(n.outputs, self.copy_node(n, ins)):
                local[id(o)] = c
        for so, o in zip(sub.outputs, member.outputs):
            self.clone[id(o)] = self.const(so) if so.is_const else local[id(so)]
        for si in sub.inputs:
            self.clone.setdefault(id(si), local[id(si)])
        for n in sub.nodes:
            for o in n.outputs:
                self.clone[id(o)] = local[id(o)]


def merge_kernels(graph: Graph, members: Iterable[Node], duplicate: Iterable[Node] = (),
                  kind: str = "merged") -> tuple[Node, dict[int, Value]]:
    """Replaces ``members`` (GraphKernel or basic nodes of ``graph``, free of cycles through outside nodes)
    by one GraphKernel computing all of them.

    ``duplicate`` nodes are copied into the new kernel but also stay in ``graph`` (recompute fusion): their
    outputs are internal to the new kernel.  The new node reuses the members' output values that are used
    outside the merged set (or are graph outputs), so every consumer and output name is preserved.

    Returns the new node and the map ``id(value) -> value inside the new sub-graph`` for the members'
    main-graph values and the values of their sub-graphs.
    """
    dup = list(duplicate)
    removed = list(members)
    gone = {id(n) for n in removed}
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    order = sorted(dup + removed, key=lambda n: position[id(n)])
    base = "Fused_" + "_".join(dict.fromkeys(op for n in order for op in kernel_ops(n)))[:48] + "_" + kind
    sb = _SubGraphBuilder(unique_kernel_name(graph, base))
    for member in order:
        sb.add_member(member)
    graph_outs = {id(v) for v in graph.outputs}
    exported = [o for n in removed for o in n.outputs
                if id(o) in graph_outs or any(id(user) not in gone for user, _ in o.uses)]
    sb.graph.outputs = [sb.clone[id(o)] for o in exported]
    sources: list[str] = []
    for n in order:
        sources.extend(n.attrs.get("source_nodes", ()) if is_kernel(n) else (n.name,))
    attrs = {"graph": sb.graph, "kernel_name": sb.graph.name, "source_nodes": tuple(dict.fromkeys(sources))}
    patterns = [n.attrs.get("pattern") for n in order]
    if all(p in PATTERN_ORDER for p in patterns):       # the clusterer's split-model class, if every member has one
        attrs["pattern"] = max(patterns, key=PATTERN_ORDER.index)
    first = min(position[id(n)] for n in removed)
    for n in removed:
        n.detach()
    for o in exported:
        o.producer = None
    node = Node(KERNEL, sb.outer_inputs, exported, attrs, name=sb.graph.name)
    rest = [n for n in graph.nodes if id(n) not in gone]
    before = sum(1 for n in graph.nodes[:first] if id(n) not in gone)
    graph.nodes = rest[:before] + [node] + rest[before:]
    graph.toposort()
    return node, sb.clone


# -- parallel fusion ----------------------------------------------------------------------------------------
def ancestors(graph: Graph) -> dict[int, int]:
    """id(node) -> bitset (Python int) of the positions of all nodes it depends on."""
    pos = {id(n): i for i, n in enumerate(graph.nodes)}
    anc: dict[int, int] = {}
    for n in graph.nodes:
        bits = 0
        for v in n.inputs:
            p = v.producer if v is not None else None
            if p is not None and id(p) in pos:
                bits |= anc[id(p)] | (1 << pos[id(p)])
        anc[id(n)] = bits
    return anc


def size_class(node: Node) -> int:
    return sum(o.type.size for o in node.outputs).bit_length()


def find_group(graph: Graph, limit: int = MAX_PARALLEL_GROUP) -> list[Node]:
    """The first group (in node order) of >= 2 mutually independent kernels of one size class."""
    anc = ancestors(graph)
    pos = {id(n): i for i, n in enumerate(graph.nodes)}
    groups: dict[int, list[list[Node]]] = {}
    for n in graph.nodes:
        if not is_kernel(n):
            continue
        for group in groups.setdefault(size_class(n), []):
            if len(group) < limit and all(not (anc[id(n)] >> pos[id(g)]) & 1 for g in group):
                group.append(n)      # n comes later, so g never depends on n
                break
        else:
            groups[size_class(n)].append([n])
    best = [g for gs in groups.values() for g in gs if len(g) >= 2]
    return min(best, key=lambda g: pos[id(g[0])]) if best else []


@register_pass
class ParallelFusionPass(Pass):
    name = "parallel_fusion"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        merged = 0
        while group := find_group(graph):
            names = tuple(n.attrs["kernel_name"] for n in group)
            node, _ = merge_kernels(graph, group, kind="parallel")
            node.attrs["parallel"] = names
            ctx.record("parallel_fusion.txt", f"{node.attrs['kernel_name']} = parallel({', '.join(names)})")
            merged += 1
        if merged:
            ctx.count(self.name, merged)
        return merged > 0
