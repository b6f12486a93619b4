"""Outlining: the nodes of one fused area -> one ``GraphKernel`` node holding them as a sub-graph.

For ``nodes`` (in graph order):

1. constant inputs are captured inside the sub-graph when small (at most ``CAPTURE_CONST_MAX_ELEMENTS``
   elements) or when the op needs them constant (its ``static_inputs``: shapes, axes, ...); larger constants
   become kernel inputs;
2. kernel inputs = the other values read by the nodes and defined outside them, in order of first use;
3. kernel outputs = the values the nodes define that are used outside them or are graph outputs, in node
   order; the GraphKernel node takes over these very Value objects, so names and outside uses are unchanged;
4. the sub-graph gets fresh Values (same names and types) and copies of the nodes (same names and attrs);
5. the GraphKernel node replaces the first of the nodes; the caller re-sorts the graph topologically.

Attributes: ``graph``, ``kernel_name`` (``Fused_<op>_<op>..._<n>``, unique in the graph), ``source_nodes``
(the original node names), ``pattern`` and ``dominant`` (split-model info), and ``epilogue_of`` (the
MatMul/Gemm/Conv whose output an elementwise-only kernel reads, when there is one).
"""
from __future__ import annotations

from ...ir.core import Graph, Node, Value
from ...ops.registry import OPS

CAPTURE_CONST_MAX_ELEMENTS = 64
KERNEL_NAME_MAX_OPS = 5          # op types spelled in a kernel name
DESCRIBE_CONST_MAX_ELEMENTS = 4  # constants printed by value in the dump records


def _static_consts(nodes: list[Node]) -> set[int]:
    out = set()
    for n in nodes:
        for i in OPS[n.op].static_inputs:
            if i < len(n.inputs) and n.inputs[i] is not None:
                out.add(id(n.inputs[i]))
    return out


def kernel_name(nodes: list[Node], index: int) -> str:
    ops: list[str] = []
    for n in nodes:
        if n.op not in ops:
            ops.append(n.op)
    return "_".join(["Fused", *ops[:KERNEL_NAME_MAX_OPS], str(index)])


def make_kernel(graph: Graph, nodes: list[Node], name: str, attrs: dict | None = None) -> Node:
    """Builds the GraphKernel node for ``nodes`` (steps 1-4) and detaches ``nodes`` from their inputs; the
    caller replaces them by the returned node in ``graph.nodes``."""
    inside = {id(n) for n in nodes}
    static = _static_consts(nodes)
    graph_outputs = {id(v) for v in graph.outputs}
    sub = Graph(name)
    inner: dict[int, Value] = {}
    outer_inputs: list[Value] = []
    for n in nodes:
        ins: list[Value | None] = []
        for v in n.inputs:
            if v is not None and id(v) not in inner:
                if v.const is not None and (v.const.size <= CAPTURE_CONST_MAX_ELEMENTS or id(v) in static):
                    inner[id(v)] = Value(v.name, v.type, const=v.const)
                else:
                    inner[id(v)] = Value(v.name, v.type)
                    sub.inputs.append(inner[id(v)])
                    outer_inputs.append(v)
            ins.append(None if v is None else inner[id(v)])
        outs = [Value(o.name, o.type) for o in n.outputs]
        inner.update((id(o), new) for o, new in zip(n.outputs, outs))
        sub.nodes.append(Node(n.op, ins, outs, dict(n.attrs), name=n.name))
    outer_outputs = [o for n in nodes for o in n.outputs
                     if id(o) in graph_outputs or any(id(u) not in inside for u, _ in o.uses)]
    sub.outputs = [inner[id(o)] for o in outer_outputs]
    for n in nodes:
        n.detach()
    kernel_attrs = {"graph": sub, "kernel_name": name, "source_nodes": tuple(n.name for n in nodes)}
    kernel_attrs.update(attrs or {})
    return Node("GraphKernel", outer_inputs, outer_outputs, kernel_attrs, name=name)


def outline_all(graph: Graph, groups: list[tuple[list[Node], str, dict]]) -> list[Node]:
    """Outlines every ``(nodes, kernel name, extra attrs)`` group (disjoint, each cycle-free), placing each
    kernel where its first node was, then re-sorts the graph topologically; returns the kernels."""
    kernels, at_first, removed = [], {}, set()
    for nodes, name, attrs in groups:
        kernel = make_kernel(graph, nodes, name, attrs)
        kernels.append(kernel)
        at_first[id(nodes[0])] = kernel
        removed.update(id(n) for n in nodes)
    graph.nodes = [at_first.get(id(n), n) for n in graph.nodes if id(n) in at_first or id(n) not in removed]
    graph.toposort()
    return kernels


def outline(graph: Graph, nodes: list[Node], name: str, attrs: dict | None = None) -> Node:
    """Replaces ``nodes`` (a cycle-free set, in graph order) by one GraphKernel node; returns it."""
    return outline_all(graph, [(nodes, name, attrs or {})])[0]


def describe(kernel: Node) -> str:
    """MindSpore-like dump record: ``Source nodes of <kernel> = <signature>``, one indented line per
    original node, and a separator."""
    sub: Graph = kernel.attrs["graph"]

    def name(v: Value | None) -> str:
        if v is None:
            return "None"
        small_const = v.const is not None and v.const.size <= DESCRIBE_CONST_MAX_ELEMENTS
        return repr(v.const.tolist()) if small_const else v.name

    def names(vs) -> str:
        return ", ".join(map(name, vs))

    signature = f"GraphKernel({names(kernel.inputs)}) -> ({names(kernel.outputs)})"
    info = f"pattern={kernel.attrs.get('pattern', '?')} dominant={kernel.attrs.get('dominant', '?')}"
    lines = [f"Source nodes of {kernel.attrs['kernel_name']} = {signature}  {info}"]
    for n in sub.nodes:
        attrs = "".join(f" {k}={v!r}" for k, v in sorted(n.attrs.items()))
        lines.append(f"    {n.name}: {n.op}({names(n.inputs)}){attrs} -> ({names(n.outputs)})")
    lines.append("=======================")
    return "\n".join(lines)
