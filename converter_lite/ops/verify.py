"""verify(graph): structural and type invariants every pass must keep.

Checks, per graph and recursively for every nested graph attribute (GraphKernel sub-graphs):

1. graph inputs are distinct, non-constant, and produced by no node;
2. SSA: every node output is defined exactly once, and its ``producer``/``index`` point at its node;
3. every node input is None, a graph input, a constant, or an output of an EARLIER node of this graph
   (a later node means the order is not topological; a node outside the graph means a dangling value);
4. ``Value.uses`` agrees with the node inputs: every reference is recorded, and every recorded use of a
   non-constant value belongs to a node of this graph at that input slot;
5. every op type is registered in ``converter_lite.ops.registry.OPS``;
6. stored output types equal the types the op table infers (``registry.infer_types``);
7. graph outputs are defined (inputs, constants or node outputs);
8. a GraphKernel's sub-graph has as many inputs/outputs as the node, with the same types.

All problems are collected; ``VerifyError`` lists them (the first ``MAX_REPORTED``).
"""
from __future__ import annotations

from collections import Counter

from ..ir.core import Graph, Node, Value
from .registry import OPS, infer_types

MAX_REPORTED = 20


class VerifyError(ValueError):
    """The graph breaks an IR invariant; ``problems`` lists each one."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        more = len(problems) - MAX_REPORTED
        text = "\n  ".join(problems[:MAX_REPORTED]) + (f"\n  ... and {more} more" if more > 0 else "")
        super().__init__(f"IR verification failed ({len(problems)} problem(s)):\n  {text}")


def verify(graph: Graph, check_types: bool = True) -> None:
    """Raises VerifyError if ``graph`` (or a nested graph) breaks an invariant listed in the module doc."""
    problems: list[str] = []
    _verify_graph(graph, graph.name, problems, check_types)
    if problems:
        raise VerifyError(problems)


def _where(path: str, node: Node) -> str:
    return f"@{path}: {node.op} node {node.name!r}"


def _verify_graph(graph: Graph, path: str, problems: list[str], check_types: bool) -> None:

    defined: dict[int, str] = {}          # id(value) -> what defined it
    for v in graph.inputs:
        if id(v) in defined:
            problems.append(f"@{path}: graph input {v.name!r} is listed twice")
        if v.is_const:
            problems.append(f"@{path}: graph input {v.name!r} is a constant")
        if v.producer is not None:
            problems.append(f"@{path}: graph input {v.name!r} is produced by {v.producer.op} node "
                            f"{v.producer.name!r}")
        defined[id(v)] = "graph input"
    positions = {id(n): i for i, n in enumerate(graph.nodes)}
    producer_pos: dict[int, int] = {id(o): i for i, n in enumerate(graph.nodes) for o in n.outputs}
    refs: dict[int, Counter] = {}         # id(value) -> Counter of (id(node), slot) actually present

    for pos, node in enumerate(graph.nodes):
        where = _where(path, node)
        if positions[id(node)] != pos:
            problems.append(f"{where} appears more than once in the node list")
        for slot, v in enumerate(node.inputs):
            if v is None:
                continue
            refs.setdefault(id(v), Counter())[(id(node), slot)] += 1
            if v.is_const or id(v) in defined:
                continue
            later = producer_pos.get(id(v))
            if later is not None and later >= pos:
                problems.append(f"{where} uses {v.name!r} before it is defined (node order is not "
                                f"topological)")
            else:
                problems.append(f"{where} input {slot} {v.name!r} is not defined in this graph "
                                f"(dangling value)")
        for i, o in enumerate(node.outputs):
            if id(o) in defined:
                problems.append(f"{where} output {o.name!r} is already defined ({defined[id(o)]}): "
                                f"not SSA")
            defined[id(o)] = f"{node.op} node {node.name!r}"
            if o.producer is not node or o.index != i:
                problems.append(f"{where} output {i} {o.name!r} has producer/index "
                                f"{getattr(o.producer, 'name', None)!r}/{o.index}")
            if o.is_const:
                problems.append(f"{where} output {o.name!r} carries constant data")
        if node.op not in OPS:
            problems.append(f"{where}: op type {node.op!r} is not registered")
            continue
        if check_types:
            _check_types(node, where, problems)
        for key, sub in node.attrs.items():
            if isinstance(sub, Graph):
                _check_kernel_signature(node, key, sub, where, problems)
                _verify_graph(sub, f"{path}/{sub.name}", problems, check_types)

    _check_uses(graph, path, positions, refs, problems)
    for v in graph.outputs:
        if not (v.is_const or id(v) in defined):
            problems.append(f"@{path}: graph output {v.name!r} is not defined in this graph")


def _check_types(node: Node, where: str, problems: list[str]) -> None:
    if any(v is not None and v.type is None for v in node.inputs):
        return                               # reported where the untyped value is produced
    try:
        inferred = infer_types(node)
    except Exception as e:                   # noqa: BLE001 — any inference failure is a finding
        problems.append(f"{where}: type inference failed: {type(e).__name__}: {e}")
        return
    for i, o in enumerate(node.outputs):
        if o.type is None:
            problems.append(f"{where} output {o.name!r} has no type")
        elif i < len(inferred) and inferred[i] != o.type:
            problems.append(f"{where} output {i} {o.name!r} is stored as {o.type} but infers as {inferred[i]}")


def _check_kernel_signature(node: Node, key: str, sub: Graph, where: str, problems: list[str]) -> None:
    if key != "graph":
        return
    pairs = (("inputs", [v for v in node.inputs if v is not None], sub.inputs),
             ("outputs", node.outputs, sub.outputs))
    for what, outer, inner in pairs:
        if len(outer) != len(inner):
            problems.append(f"{where} has {len(outer)} {what} but its sub-graph @{sub.name} has {len(inner)}")
            continue
        for i, (a, b) in enumerate(zip(outer, inner)):
            if a.type is not None and b.type is not None and a.type != b.type:
                problems.append(f"{where} {what[:-1]} {i} is {a.type} but sub-graph @{sub.name} has {b.type}")


def _check_uses(graph: Graph, path: str, positions: dict[int, int], refs: dict[int, Counter],
                problems: list[str]) -> None:
    values: dict[int, Value] = {id(v): v for v in graph.inputs}
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None:
                values[id(v)] = v
        for o in n.outputs:
            values[id(o)] = o
    for v in values.values():
        recorded = Counter((id(n), slot) for n, slot in v.uses)
        for n, slot in v.uses:
            in_graph = id(n) in positions and slot < len(n.inputs) and n.inputs[slot] is v
            if not in_graph and not v.is_const:
                problems.append(f"@{path}: value {v.name!r} lists a stale use ({n.op} node {n.name!r}, "
                                f"input {slot})")
        for (nid, slot), count in refs.get(id(v), Counter()).items():
            if recorded[(nid, slot)] < count:
                node = graph.nodes[positions[nid]]
                problems.append(f"@{path}: value {v.name!r} misses the use by {node.op} node "
                                f"{node.name!r} (input {slot}) in Value.uses")


__all__ = ["VerifyError", "verify"]
