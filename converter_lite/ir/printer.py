"""Deterministic text form of a Graph (jaxpr-like), used for the IR dumps and in test failure messages.

    #IR entry      : @main
    #Total params  : 2

    %0 : f32[8,16]  # x
    %c0 : f32[] = 0.5  # mul_scale
    #Total subgraph : 2

    subgraph @main(%0:f32[8,16]) {
      %1:f32[8,16] = Mul(%0, %c0)  # mul_node
      %2:f32[8,16] = GraphKernel(%1) {kernel_name='fused_0'}  # fused_0
        @fused_0(%0:f32[8,16]) {
          %1:f32[8,16] = Relu(%0)  # relu
          return (%1)
        }
      return (%2)
    }

Values are numbered per graph in definition order (inputs first), constants ``%c<k>`` in first-use order, so the
text does not depend on generated value names; node names follow as comments.  Constants are summarised by
type and their first few elements.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .core import Graph, Node, Value

PREVIEW = 4                 # constant elements shown before "..."
_INDENT = "  "


def format_array(a: np.ndarray, preview: int = PREVIEW) -> str:
    """``0.5`` for a scalar, ``[1 2 3 4 ...]`` (first ``preview`` elements) otherwise."""
    a = np.asarray(a)
    if a.ndim == 0:
        return _scalar(a[()])
    flat = a.reshape(-1)
    items = " ".join(_scalar(x) for x in flat[:preview])
    return f"[{items}{' ...' if flat.size > preview else ''}]"


def _scalar(x: Any) -> str:
    """Shortest round-trip text of a numpy/Python scalar in its own precision (0.1 for float32 0.1)."""
    return repr(x) if isinstance(x, (str, bytes)) else str(x)


def _type(v: Value) -> str:
    return str(v.type) if v.type is not None else "?"


class _Names:
    """Per-graph numbering of values."""

    def __init__(self, graph: Graph):
        self.ids: dict[int, str] = {}
        self.next = 0
        for v in graph.inputs:
            self.define(v)
        for i, c in enumerate(graph.constants()):
            self.ids[id(c)] = f"%c{i}"

    def define(self, v: Value) -> str:
        name = self.ids.get(id(v))
        if name is None:
            name = self.ids[id(v)] = f"%{self.next}"
            self.next += 1
        return name

    def ref(self, v: Value | None) -> str:
        if v is None:
            return "_"
        return self.ids.get(id(v), f"%<undefined {v.name}>")


def _attr(value: Any) -> str:
    if isinstance(value, Graph):
        return f"@{value.name}"
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)} {format_array(value)}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_attr(x) for x in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _node_lines(node: Node, names: _Names, depth: int) -> list[str]:
    pad = _INDENT * depth
    outs = [f"{names.define(o)}:{_type(o)}" for o in node.outputs]
    lhs = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    args = ", ".join(names.ref(v) for v in node.inputs)
    attrs = {k: v for k, v in node.attrs.items() if not isinstance(v, Graph)}
    attr_text = (" {" + ", ".join(f"{k}={_attr(attrs[k])}" for k in sorted(attrs)) + "}") if attrs else ""
    comment = f"  # {node.name}" if node.name else ""
    lines = [f"{pad}{lhs} = {node.op}({args}){attr_text}{comment}"]
    for key in sorted(k for k, v in node.attrs.items() if isinstance(v, Graph)):
        lines.extend(_graph_lines(node.attrs[key], depth + 1, label=None if key == "graph" else key))
    return lines


def _graph_lines(graph: Graph, depth: int, label: str | None = None, keyword: str = "",
                 list_constants: bool = True) -> list[str]:
    names = _Names(graph)
    pad = _INDENT * depth
    params = ", ".join(f"{names.ref(v)}:{_type(v)}" for v in graph.inputs)
    head = f"{pad}{keyword}@{graph.name}({params}) {{" + (f"  # attr {label}" if label else "")
    lines = [head]
    for c in graph.constants() if list_constants else ():
        lines.append(f"{pad}{_INDENT}{names.ref(c)}:{_type(c)} = const {format_array(c.const)}")
    for node in graph.nodes:
        lines.extend(_node_lines(node, names, depth + 1))
    lines.append(f"{pad}{_INDENT}return (" + ", ".join(names.ref(v) for v in graph.outputs) + ")")
    lines.append(f"{pad}}}")
    return lines


def count_subgraphs(graph: Graph) -> int:
    """The graph itself plus every nested graph attribute, recursively."""
    return 1 + sum(count_subgraphs(v) for n in graph.nodes for v in n.attrs.values() if isinstance(v, Graph))


def print_graph(graph: Graph) -> str:
    """The graph body alone (no header)."""
    return "\n".join(_graph_lines(graph, 0)) + "\n"


def dump_ir(graph: Graph) -> str:
    """The full IR dump text: MindSpore-like header, parameters, then the graph body."""
    names = _Names(graph)
    constants = graph.constants()
    lines = [f"#IR entry      : @{graph.name}"]
    if graph.metadata:
        lines.append("#attrs         :")
        lines.extend(f"{k} : {graph.metadata[k]}" for k in sorted(graph.metadata))
    lines.append(f"#Total params  : {len(graph.inputs) + len(constants)}")
    lines.append("")
    for v in graph.inputs:
        lines.append(f"{names.ref(v)} : {_type(v)}  # {v.name}")
    for c in constants:
        lines.append(f"{names.ref(c)} : {_type(c)} = {format_array(c.const)}  # {c.name}")
    lines.append(f"#Total subgraph : {count_subgraphs(graph)}")
    lines.append("")
    lines.extend(_graph_lines(graph, 0, keyword="subgraph ", list_constants=False))  # listed above
    return "\n".join(lines) + "\n"


__all__ = ["count_subgraphs", "dump_ir", "format_array", "print_graph"]
