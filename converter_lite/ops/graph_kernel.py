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
import weakref

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
    shapes = [v.type.shape for v in node.inputs]
    if None in shapes:
        return [TensorType(v.dtype, None) for v in sub.outputs]
    src, in_groups, out_masks, ranks = _col_facts(sub)
    if [len(s) for s in shapes] != ranks:
        k = next(k for k, (s, r) in enumerate(zip(shapes, ranks)) if len(s) != r)
        raise KernelError(f"GraphKernel {node.name!r}: input {node.inputs[k].name!r} {list(shapes[k])} is not of "
                          f"rank {ranks[k]}")
    ext = [1 if i < 0 else int(shapes[i][j]) for j, i in enumerate(src)]
    want: dict = {}                                     # broadcast mask -> the shape it gives (few masks)
    for mask, members in in_groups:
        w = want[mask] = tuple([e if m else 1 for m, e in zip(mask, ext)])
        for k in members:
            if tuple(shapes[k]) != w:
                raise KernelError(f"GraphKernel {node.name!r}: input {node.inputs[k].name!r} {list(shapes[k])} does "
                                  f"not broadcast to {ext} as the kernel's pattern {list(sub.inputs[k].shape)}")
    out = []
    for v, mask in zip(sub.outputs, out_masks):
        w = want.get(mask)
        if w is None:
            w = want[mask] = tuple([e if m else 1 for m, e in zip(mask, ext)])
        out.append(TensorType(v.dtype, w))
    return out


_COL_FACTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _col_facts(sub) -> tuple:
    """What a column kernel's inference needs of its sub-graph's patterns, found once per sub-graph (a model of
    dynamic shapes infers each kernel at every new shape): per axis the first input not broadcasting along it
    (-1: none; ``column_extents``), the inputs grouped by the axes they broadcast along, each output's axes,
    the inputs' ranks."""
    got = _COL_FACTS.get(sub)
    if got is None:
        pats = [tuple(v.shape) for v in sub.inputs]
        src, groups = column_facts(pats, pats, len(pats[0]) if pats else 0)
        out_masks = [tuple(q != 1 for q in v.shape) for v in sub.outputs]
        got = _COL_FACTS[sub] = (src, groups, out_masks, [len(p) for p in pats])
    return got


def column_facts(in_patterns: list, patterns: list, rank: int
                 ) -> tuple[list[int], list[tuple[tuple[bool, ...], list[int]]]]:
    """A column kernel's iteration shape as positions (``column_extents`` found once, not per call): per axis (of
    ``rank``) the first of ``in_patterns`` not broadcasting along it (-1: none, extent 1); and ``patterns`` (the arguments
    checked) grouped by the axes they broadcast along: (mask, argument indices), one shape to compare per group."""
    src = [next((i for i, p in enumerate(in_patterns) if p[j] != 1), -1) for j in range(rank)]
    groups: dict = {}
    for k, p in enumerate(patterns):
        groups.setdefault(tuple(q != 1 for q in p), []).append(k)
    return src, list(groups.items())


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
