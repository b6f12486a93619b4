"""``graph_kernel_cluster``: groups clusterable basic ops into fused kernels (GraphKernel nodes).

1. A node is clusterable when its op is in ``ctx.config.cluster_ops(DEFAULT_CLUSTER)`` (or it is a window
   Pad, window.py, and Pad is not in ``disable_cluster_ops``), the op table does
   not mark it OPAQUE, it is deterministic, its static inputs (shapes, axes) are constants, and every value it
   reads or writes has a static shape (dynamic-shape values run unfused) and a type the native code handles
   (not a low-precision one, bfloat16, float8, float4, int4: those nodes run on their reference kernels).
2. The split model (``split_model.py``) runs the CPU fusion patterns (``patterns.py``) over the whole
   graph; the reach table rejects any fusion that would create a cycle (also through opaque nodes), and
   ``composite_op_limit_size`` bounds the kernel size, ``reduce_fuse_depth`` the producers a reduction takes.
3. An area becomes a GraphKernel node (``outline.py``, "composite" mode) when it holds more than index maps
   and either has several nodes, or is a single op that the split model separated from fusible neighbours
   (MindSpore's CPU split model makes every area of a cluster a composite kernel; later passes such as
   stitch and recompute work on kernels), or reads the output of a MatMul/Gemm/Conv (an epilogue).  An op
   with no fusible neighbour, and a group of index maps only, stay basic ops ("basic" mode).
4. With ``dump_as_text``, ``graph_kernel_cluster.txt`` gets "Source nodes of <kernel> = ..." for every new
   kernel, and ``graph_kernel_split_mode.txt`` the pattern decisions and the final areas with their mode.
"""
from __future__ import annotations

from ...ir.core import Graph, Node
from ...ops.registry import OPS, OpKind
from ..base import Pass, PassContext
from ..registry import register_pass
from .area import Area, Pattern
from .outline import describe, kernel_name, outline_all
from .patterns import EPILOGUE_HOSTS, cpu_patterns
from .split_model import SplitModel
from .window import window_pad

# ONNX names of MindSpore's CPU cluster list (seed 003 appendix 2, CPU column, plus the Lite cluster list:
# Maximum->Max, RealDiv->Div, Select->Where, LogicalNot->Not, ExpandDims->Unsqueeze), the comparisons and
# logic and bitwise ops, Erf (the Gelu expansion), and the index maps a CPU kernel reads through (Reshape,
# Transpose, Squeeze, Unsqueeze, Flatten, Slice, Expand, Concat).  Composite ops (Sigmoid, Gelu, ...) are not
# listed: they are expanded first, and one whose expansion is disabled stays a basic op unless it is added
# with enable_cluster_ops.  Every op here has a native lowering (tests/passes/fuse/test_cluster_ops.py).
DEFAULT_CLUSTER: frozenset[str] = frozenset({
    "Abs", "Add", "Sub", "Mul", "Div", "Neg", "Pow", "Reciprocal", "Sqrt", "Exp", "Log", "Tanh", "Erf",
    "Sin", "Cos", "Tan", "Sinh", "Cosh", "Round", "Floor", "Ceil", "Sign", "Mod", "Max", "Min", "Cast", "Where",
    "IsNaN", "IsInf", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift",
    "ReduceSum", "ReduceMax", "ReduceMin", "ArgMax", "ArgMin",
    "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Expand", "Concat",
})

SPLIT_MODE_FILE = "graph_kernel_split_mode.txt"
CLUSTER_FILE = "graph_kernel_cluster.txt"


def clusterable(node: Node, ops: frozenset[str], window_pads: bool = True) -> bool:
    """Rule 1 of the module docstring; a window Pad counts as listed when ``window_pads``."""
    d = OPS.get(node.op)
    if node.op not in ops and not (window_pads and window_pad(node)):
        return False
    if d is None or d.kind >= OpKind.OPAQUE or not d.deterministic:
        return False
    values = [v for v in (*node.inputs, *node.outputs) if v is not None]
    if any(v.type is None or not v.type.is_static or v.type.dtype.is_low_precision for v in values):
        return False
    return all(node.inputs[i] is None or node.inputs[i].const is not None
               for i in d.static_inputs if i < len(node.inputs))


def becomes_kernel(area: Area) -> bool:
    """Rule 3 of the module docstring."""
    if not area.fusible or area.pattern <= Pattern.RESHAPE:
        return False
    if area.size > 1 or any(a.fusible for a in (*area.inputs, *area.users)):
        return True
    return any(a.dom.op in EPILOGUE_HOSTS for a in area.inputs)


def _epilogue_host(nodes: list[Node], pattern_name: str) -> str | None:
    """The heavy op an elementwise-only kernel reads the output of, if any."""
    if pattern_name not in ("elemwise", "broadcast"):
        return None
    for n in nodes:
        for v in n.inputs:
            if v is not None and v.producer is not None and v.producer.op in EPILOGUE_HOSTS:
                return v.producer.name
    return None


def _used_names(graph: Graph) -> set[str]:
    return {n.attrs.get("kernel_name", "") for n in graph.nodes if n.op == "GraphKernel"}


@register_pass
class GraphKernelClusterPass(Pass):
    name = "graph_kernel_cluster"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        ops = ctx.config.cluster_ops(DEFAULT_CLUSTER)
        skipped = sorted({n.op for n in graph.nodes if n.op in ops and n.op in OPS and
                          OPS[n.op].kind >= OpKind.OPAQUE and n.op != "GraphKernel"})
        if skipped:
            ctx.log.info("graph_kernel_cluster: %s cannot join a fused kernel (opaque op); kept as a basic op",
                         ", ".join(skipped))
        pads = "Pad" in ctx.config.cluster_ops(DEFAULT_CLUSTER | {"Pad"})   # disable_cluster_ops=Pad: none
        model = SplitModel(graph, lambda n: clusterable(n, ops, pads))
        areas = model.run(cpu_patterns(ctx.config.reduce_fuse_depth), ctx.config.composite_op_limit_size)
        position = {id(n): i for i, n in enumerate(graph.nodes)}
        taken = _used_names(graph)
        groups: list[tuple[list[Node], str, dict]] = []
        grouped: list[Area] = []
        index = 0
        chosen = [(a, sorted(a.nodes, key=lambda n: position[id(n)])) for a in areas if becomes_kernel(a)]
        for area, nodes in sorted(chosen, key=lambda item: position[id(item[1][0])]):
            while kernel_name(nodes, index) in taken:
                index += 1
            name = kernel_name(nodes, index)
            taken.add(name)
            index += 1
            pattern = area.pattern.name.lower()
            attrs = {"pattern": pattern, "dominant": area.dom.name}
            host = _epilogue_host(nodes, pattern)
            if host is not None:
                attrs["epilogue_of"] = host
            groups.append((nodes, name, attrs))
            grouped.append(area)
        kernels = list(zip(grouped, outline_all(graph, groups))) if groups else []
        if kernels:
            ctx.count(self.name, len(kernels))
        if ctx.config.dump_as_text:
            self._record(graph, ctx, model, areas, {id(a): k for a, k in kernels})
        return bool(kernels)

    @staticmethod
    def _record(graph: Graph, ctx: PassContext, model: SplitModel, areas: list[Area], kernel_of: dict) -> None:
        lines = [f"********** main graph: {graph.name} **********", *model.log]
        for i, area in enumerate(areas):
            kernel = kernel_of.get(id(area))
            mode = "composite" if kernel is not None else "basic"
            lines.append(f"-------- subgraph {i}, mode: {mode} --------")
            names = kernel.attrs["source_nodes"] if kernel is not None else [n.name for n in area.nodes]
            head = f"  kernel {kernel.attrs['kernel_name']}, " if kernel is not None else "  "
            lines.append(f"{head}pattern {area.pattern.name.lower()}, dominant {area.dom.name}: "
                         f"{', '.join(names)}")
        ctx.record(SPLIT_MODE_FILE, "\n".join(lines))
        for kernel in kernel_of.values():
            ctx.record(CLUSTER_FILE, describe(kernel))
