"""``graph_kernel_op_combiner``: parallel matrix products that share their activation input become one wider
product followed by a ``Split`` (MindSpore GraphKernelOpCombiner; e.g. attention's Q, K and V projections).

Cases, for every value ``x`` feeding two or more products as their first operand:

1. ``MatMul(x, W_i)`` with constant 2-D ``W_i [K, N_i]`` -> ``Split(MatMul(x, concat(W_i, axis=1)), N_i)``.
2. If every such MatMul's only user is ``Add(MatMul, b_i)`` with a constant per-column bias (``b_i`` of N_i
   elements broadcasting along the last axis), the Adds are combined too: ``Add(MatMul, concat(b_i))``.
3. ``Gemm(x, W_i, C_i?)`` with ``transA=0`` and equal ``alpha``/``beta``/``transB``, constant ``W_i`` and
   constant 1-D ``C_i [N_i]`` (all present or all absent) -> one Gemm on the concatenated operands + Split.
4. ``FusedMatMul(x, W_i, b_i?)`` (made by the matmul_elem fusions) with the same activation and bias
   presence -> one FusedMatMul on the concatenated operands + Split (the epilogue is per element).

Products are grouped by (op, signature); a group needs at least two members.  Each member's result is the
corresponding Split output (graph outputs keep their names).
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Graph, Node, Value
from ..ir.dce import remove_dead_nodes
from ..ops.builder import GraphBuilder
from .base import Pass, PassContext
from .registry import register_pass
from .simplify.rewriter import replace_value

PRODUCTS = ("MatMul", "Gemm", "FusedMatMul")


def _const(v: Value | None) -> np.ndarray | None:
    return v.const if v is not None and v.is_const else None


def _column_bias(v: Value | None, n: int) -> np.ndarray | None:
    """The bias as a 1-D array of n values if it only varies along the last axis, else None."""
    c = _const(v)
    if c is None or c.size != n or (c.ndim and c.shape[-1] != n):
        return None
    return c.reshape(n)


def _member(node: Node, x: Value) -> tuple[tuple, dict] | None:
    """(group signature, member info) of a combinable product reading ``x`` as its first operand."""
    if node.op not in PRODUCTS or node.inputs[0] is not x or len(node.outputs) != 1 or not x.type.is_static:
        return None
    w = _const(node.inputs[1])
    if w is None or w.ndim != 2 or w.dtype != x.type.dtype.np:
        return None
    attrs = node.attrs
    if node.op == "Gemm":
        if attrs.get("transA", 0):
            return None
        trans_b = attrs.get("transB", 0)
        n = w.shape[0] if trans_b else w.shape[1]
        c = node.inputs[2] if len(node.inputs) > 2 else None
        bias = None if c is None else _column_bias(c, n)
        if c is not None and (bias is None or c.type.rank != 1):
            return None
        sig = ("Gemm", trans_b, attrs.get("alpha", 1.0), attrs.get("beta", 1.0), bias is not None)
        return sig, {"node": node, "w": w, "n": n, "bias": bias, "out": node.outputs[0], "axis": 1 - trans_b}
    n = w.shape[1]
    if node.op == "FusedMatMul":
        b = node.inputs[2] if len(node.inputs) > 2 else None
        bias = None if b is None else _column_bias(b, n)
        if b is not None and bias is None:
            return None
        sig = ("FusedMatMul", attrs.get("activation", ""), attrs.get("approximate", "none"), bias is not None)
        return sig, {"node": node, "w": w, "n": n, "bias": bias, "out": node.outputs[0], "axis": 1}
    out, bias, add = node.outputs[0], None, None
    users = out.uses
    if len(users) == 1 and users[0][0].op == "Add":
        add = users[0][0]
        other = add.inputs[1 - users[0][1]]
        bias = _column_bias(other, n)
        if bias is None or add.outputs[0].type.shape != out.type.shape:
            bias, add = None, None
    info = {"node": node, "w": w, "n": n, "bias": bias, "out": add.outputs[0] if add else out, "axis": 1,
            "add": add}
    return ("MatMul", bias is not None), info


def find_groups(graph: Graph) -> list[tuple[Value, tuple, list[dict]]]:
    groups = []
    seen: set[int] = set()
    for node in graph.nodes:
        if node.op not in PRODUCTS or node.inputs[0] is None or id(node.inputs[0]) in seen:
            continue
        x = node.inputs[0]
        seen.add(id(x))
        by_sig: dict[tuple, list[dict]] = {}
        for user in dict.fromkeys(u for u, _ in x.uses):
            found = _member(user, x)
            if found is not None:
                by_sig.setdefault(found[0], []).append(found[1])
        groups.extend((x, sig, members) for sig, members in by_sig.items() if len(members) >= 2)
    return groups


def combine(graph: Graph, x: Value, sig: tuple, members: list[dict]) -> None:
    first = min(members, key=lambda m: graph.nodes.index(m["node"]))["node"]
    b = GraphBuilder(graph, insert_before=first, name_prefix=f"{first.name}_combined")
    axis = members[0]["axis"]
    w = b.const(np.concatenate([m["w"] for m in members], axis=axis))
    bias = None
    if members[0]["bias"] is not None:
        bias = b.const(np.concatenate([m["bias"] for m in members]).astype(members[0]["w"].dtype))
    if first.op == "MatMul":
        y = b.node("MatMul", x, w).outputs[0]
        if bias is not None:
            y = b.node("Add", y, bias).outputs[0]
    else:
        operands = (x, w) if bias is None else (x, w, bias)
        y = b.node(first.op, *operands, **first.attrs).outputs[0]
    sizes = b.const(np.array([m["n"] for m in members], dtype=np.int64))
    split = b.node("Split", y, sizes, n_outputs=len(members), axis=-1)
    for m, part in zip(members, split.outputs):
        replace_value(graph, m["out"], part)
    graph.toposort()


@register_pass
class GraphKernelOpCombinerPass(Pass):
    name = "graph_kernel_op_combiner"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        count = 0
        for x, sig, members in find_groups(graph):
            combine(graph, x, sig, members)
            ctx.record("graph_kernel_op_combiner.txt",
                       f"combined {', '.join(m['node'].name for m in members)} on {x.name}")
            count += 1
        if count:
            remove_dead_nodes(graph, recursive=False)
            ctx.count(self.name, count)
        return count > 0
