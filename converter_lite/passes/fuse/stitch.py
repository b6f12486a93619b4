"""``stitch_fusion``: a reduce kernel and the kernel consuming its per-row result become one kernel
(MindSpore reduce_stitch), so Softmax (ReduceMax -> Sub, Exp -> ReduceSum -> Div) and LayerNorm (mean ->
variance -> normalize) each end up as ONE GraphKernel.

A producer kernel P and a consumer kernel C are stitched over an edge ``t`` (an output of P read by C) when:

1. P contains a reduction over trailing axes ``[a, ..., rank-1]`` of an input of shape ``S``; its "rows"
   are ``S[:a]``;
2. ``t`` is a per-row value laid out to broadcast along the rows: shape ``S[:a] + (1,) * (rank - a)``;
3. every output of C covers the same rows (its shape starts with ``S[:a]``), and every reduction in C
   reduces the same axes of a rank-``len(S)`` input with the same rows;
4. no path leads from P to C through a node outside the two (the merge would create a cycle);
5. the merged kernel has at most ``config.composite_op_limit_size`` ops.

The merged kernel records the names (inside its sub-graph) of the stitched intermediates in
``attrs["stitch"]`` for code generation: they stay in a per-row buffer instead of crossing a kernel boundary.
Stitching repeats until no pair qualifies.
"""
from __future__ import annotations

from ...ir.core import Graph, Node, Value
from ...ops.registry import OPS, OpKind
from ..base import Pass, PassContext
from ..registry import register_pass
from .parallel_fusion import is_kernel, merge_kernels

DEFAULT_OP_LIMIT = 200           # MindSpore's composite_op_limit_size default, used without a config


def reduce_axes(n: Node) -> tuple[int, ...] | None:
    """Normalized axes of a reduction node (all axes when none are given); None if not a reduction."""
    d = OPS.get(n.op)
    if d is None or d.kind != OpKind.REDUCE or not n.inputs or n.inputs[0] is None:
        return None
    rank = n.inputs[0].type.rank
    axes_v = n.inputs[1] if len(n.inputs) > 1 else None
    if axes_v is not None and axes_v.is_const and axes_v.const.size:
        raw = [int(a) for a in axes_v.const.reshape(-1)]
    elif "axes" in n.attrs:
        raw = [int(a) for a in n.attrs["axes"]]
    elif "axis" in n.attrs:
        raw = [int(n.attrs["axis"])]
    else:
        raw = list(range(rank))
    return tuple(sorted({a + rank if a < 0 else a for a in raw}))


def row_space(kernel: Node) -> tuple[tuple[int, ...], int, tuple[int, ...]] | None:
    """(rows, input rank, reduced axes) shared by all reductions of the kernel; None if it has none, or if
    one is not over trailing axes, or if they disagree."""
    found = set()
    for n in kernel.attrs["graph"].nodes:
        axes = reduce_axes(n)
        if axes is None:
            continue
        shape = n.inputs[0].type.shape
        if not axes or axes != tuple(range(axes[0], len(shape))):
            return None
        found.add((shape[:axes[0]], len(shape), axes))
    return found.pop() if len(found) == 1 else None


def has_reduce(kernel: Node) -> bool:
    return any(reduce_axes(n) is not None for n in kernel.attrs["graph"].nodes)


def _per_row(t: Value, space: tuple[tuple[int, ...], int, tuple[int, ...]]) -> bool:
    """``t`` holds one value per row, laid out so that broadcasting lines it up with the rows (keepdims)."""
    rows, rank, _ = space
    return t.type.shape == rows + (1,) * (rank - len(rows))


def _covers_rows(kernel: Node, space: tuple[tuple[int, ...], int, tuple[int, ...]]) -> bool:
    rows = space[0]
    if any(o.type.shape[:len(rows)] != rows for o in kernel.outputs):
        return False
    return not has_reduce(kernel) or row_space(kernel) == space


def has_outside_path(graph: Graph, src: Node, dst: Node) -> bool:
    """True if a path src -> x -> ... -> dst exists with x outside {src, dst}."""
    pos = {id(n): i for i, n in enumerate(graph.nodes)}
    limit = pos[id(dst)]
    stack = [u for o in src.outputs for u, _ in o.uses if u is not dst]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) in seen or pos.get(id(n), limit + 1) >= limit:
            continue
        seen.add(id(n))
        for o in n.outputs:
            for u, _ in o.uses:
                if u is dst:
                    return True
                stack.append(u)
    return False


def stitched_values(kernel: Node) -> list[Value]:
    """The sub-graph values named in the kernel's ``attrs["stitch"]``."""
    wanted = set(kernel.attrs.get("stitch", ()))
    sub = kernel.attrs["graph"]
    values = list(sub.inputs) + [o for n in sub.nodes for o in n.outputs]
    return [v for v in values if v.name in wanted]


def find_stitch(graph: Graph, op_limit: int) -> tuple[Node, Node, list[Value]] | None:
    """The first (producer, consumer, stitched edges) satisfying cases 1-5, in node order."""
    for p in graph.nodes:
        if not is_kernel(p):
            continue
        space = row_space(p)
        if space is None:
            continue
        consumers: dict[int, tuple[Node, list[Value]]] = {}
        for t in p.outputs:
            if not _per_row(t, space):
                continue
            for user, _ in t.uses:
                if is_kernel(user):
                    edges = consumers.setdefault(id(user), (user, []))[1]
                    if t not in edges:
                        edges.append(t)
        for c, edges in consumers.values():
            size = len(p.attrs["graph"].nodes) + len(c.attrs["graph"].nodes)
            if (size <= op_limit and _covers_rows(c, space)
                    and not has_outside_path(graph, p, c)):
                return p, c, edges
    return None


@register_pass
class StitchFusionPass(Pass):
    name = "stitch_fusion"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        limit = getattr(ctx.config, "composite_op_limit_size", DEFAULT_OP_LIMIT)
        stitched = 0
        while found := find_stitch(graph, limit):
            p, c, edges = found
            previous = [v for k in (p, c) for v in stitched_values(k)]
            names = (p.attrs["kernel_name"], c.attrs["kernel_name"])
            node, clone = merge_kernels(graph, [p, c], kind="stitch")
            node.attrs["stitch"] = tuple(dict.fromkeys(clone[id(v)].name for v in previous + edges))
            ctx.record("stitch_fusion.txt", f"{node.attrs['kernel_name']} = stitch({names[0]}, {names[1]}) "
                                            f"over {', '.join(clone[id(t)].name for t in edges)}")
            stitched += 1
        if stitched:
            ctx.count(self.name, stitched)
        return stitched > 0
