"""``GraphKernel``: a fused kernel.  ``attrs["graph"]`` is its sub-graph of basic ops (inputs and outputs in the
node's order), ``attrs["kernel_name"]`` its symbol and ``attrs["source_nodes"]`` the original ONNX node names.

Its reference semantics are the interpretation of the sub-graph, so every opt_level runs without native code.

A *row kernel* (``attrs["rows"]``, passes/dynamic_fusion.py) is a fused kernel of a model with dynamic dims:
its sub-graph's values have the shape ``[nominal, *tail]``, where the row axis stands for the leading dims of
the node's values up to their last dynamic one, flattened (``lead`` of them, taken from input ``ref``), so the
same sub-graph (and native code, codegen/rows.py) serves every number of rows.  ``rows`` = ``{"nominal": int,
"lead": int, "ref": int, "inputs": [bool per input: has the rows]}``.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.core import TensorType
from ..ops.interpret import eval_graph
from .registry import KernelError, reference


def _infer(node):
    rows = node.attrs.get("rows")
    sub = node.attrs["graph"]
    if "cols" in node.attrs:
        return _infer_cols(node, sub)
    if rows is None:
        return [v.type for v in sub.outputs]
    ref = node.inputs[rows["ref"]]
    if ref.type.shape is None:
        return [TensorType(v.dtype, None) for v in sub.outputs]
    prefix = ref.type.shape[:rows["lead"]]
    r = math.prod(prefix)
    for v, has, sv in zip(node.inputs, rows["inputs"], sub.inputs):
        if has and v.type.shape is not None and v.type.size != r * math.prod(sv.shape[1:]):
            raise KernelError(f"GraphKernel {node.name!r}: input {v.name!r} {list(v.type.shape)} does not have "
                              f"the kernel's {r} rows of {list(sv.shape[1:])}")
    return [TensorType(v.dtype, tuple(prefix) + tuple(v.shape[1:])) for v in sub.outputs]


def column_extents(patterns: list, shapes: list) -> list[int]:
    """A column kernel's iteration shape: per axis, the size of the first argument not broadcasting along it."""
    rank = len(patterns[0])
    out = [1] * rank
    for j in range(rank):
        for p, s in zip(patterns, shapes):
            if p[j] != 1:
                out[j] = int(s[j])
                break
    return out


def _infer_cols(node, sub):
    if any(v is not None and v.type.shape is None for v in node.inputs):
        return [TensorType(v.dtype, None) for v in sub.outputs]
    pats = [v.shape for v in sub.inputs]
    shapes = [v.type.shape for v in node.inputs]
    for v, p, s in zip(node.inputs, pats, shapes):
        if len(s) != len(p):
            raise KernelError(f"GraphKernel {node.name!r}: input {v.name!r} {list(s)} is not of rank {len(p)}")
    ext = column_extents(pats, shapes)
    want: dict = {}                                     # pattern -> the shape it broadcasts to (few patterns)

    def shape_of(p):
        got = want.get(p)
        if got is None:
            got = want[p] = tuple(1 if q == 1 else e for q, e in zip(p, ext))
        return got
    for v, p, s in zip(node.inputs, pats, shapes):
        if tuple(s) != shape_of(tuple(p)):
            raise KernelError(f"GraphKernel {node.name!r}: input {v.name!r} {list(s)} does not broadcast to "
                              f"{ext} as the kernel's pattern {list(p)}")
    return [TensorType(v.dtype, shape_of(tuple(v.shape))) for v in sub.outputs]


@reference("GraphKernel", infer=_infer)
def graph_kernel(attrs, *inputs):
    rows = attrs.get("rows")
    if rows is None:
        return tuple(eval_graph(attrs["graph"], list(inputs)))
    sub = attrs["graph"]
    prefix = np.shape(inputs[rows["ref"]])[:rows["lead"]]
    r = math.prod(prefix)
    flat = [np.reshape(a, (r, *v.shape[1:])) if has else a for a, has, v in zip(inputs, rows["inputs"], sub.inputs)]
    outs = eval_graph(sub, flat)
    return tuple(np.reshape(o, tuple(prefix) + tuple(v.shape[1:])) for o, v in zip(outs, sub.outputs))


def kernel_entry(node) -> tuple:
    """What codegen.build_kernels takes for a GraphKernel node: (name, sub-graph) or, for a row or column
    kernel, (name, sub-graph, {"rows": nominal rows} or {"cols": rank})."""
    if node.attrs.get("rows"):
        return node.attrs["kernel_name"], node.attrs["graph"], {"rows": node.attrs["rows"]["nominal"]}
    if node.attrs.get("cols"):
        return node.attrs["kernel_name"], node.attrs["graph"], {"cols": node.attrs["cols"]["rank"]}
    return node.attrs["kernel_name"], node.attrs["graph"]
