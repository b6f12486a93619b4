"""graph_kernel_recompute: a cheap one-input elementwise kernel whose result only feeds kernels is
recomputed inside each of them (cases 1-4 of the module docstring)."""
from __future__ import annotations

from fuse.fuse_testing import check_same_results, kernel_nodes, new_graph, random_feeds

import converter_lite.passes.pipeline  # noqa: F401  (registers every pass)
from converter_lite.config import GraphKernelConfig
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.verify import verify
from converter_lite.passes.base import PassContext
from converter_lite.passes.fuse.parallel_fusion import merge_kernels
from converter_lite.passes.recompute import GraphKernelRecomputePass


def kernelize(graph, groups):
    """Outlines each list of node indices (into the current graph.nodes) as one kernel, in order."""
    targets = [[graph.nodes[i] for i in group] for group in groups]
    for nodes in targets:
        merge_kernels(graph, nodes)
    verify(graph)


def recompute(graph) -> PassContext:
    ctx = PassContext(GraphKernelConfig(opt_level=2))
    GraphKernelRecomputePass().run(graph, ctx)
    verify(graph)
    return ctx


def producer_two_consumers(reduce_consumer=False, output=False, producer_inputs=1):
    g, b, xs = new_graph(("x", (4, 8)), ("y", (4, 8)), ("z", (4, 8)))
    x, y, z = xs
    p = b.op("Exp", x) * 2.0 if producer_inputs == 1 else b.op("Exp", x) * z
    c1 = b.op("Sqrt", b.op("Abs", p + y))
    c2 = b.op("Tanh", p - z)
    g.outputs = [c1.v, c2.v] + ([p.v] if output else [])
    return g


def test_recomputes_into_both_consumers():
    g = producer_two_consumers()
    feeds = random_feeds(g)
    before = eval_graph(g, feeds)
    kernelize(g, [[0, 1], [2, 3, 4], [5, 6]])
    ctx = recompute(g)
    check_same_results(before, g, feeds)
    ks = kernel_nodes(g)
    assert len(ks) == 2 and ctx.stats["graph_kernel_recompute"] == 1
    for k in ks:
        assert [n.op for n in k.attrs["graph"].nodes][:2] == ["Exp", "Mul"]
        assert k.inputs[0].name == "x"
    assert ctx.records["graph_kernel_recompute.txt"]


def test_graph_output_producer_is_kept():
    g = producer_two_consumers(output=True)
    kernelize(g, [[0, 1], [2, 3, 4], [5, 6]])
    ctx = recompute(g)
    assert len(kernel_nodes(g)) == 3 and "graph_kernel_recompute" not in ctx.stats


def test_two_input_producer_is_kept():
    g = producer_two_consumers(producer_inputs=2)
    kernelize(g, [[0, 1], [2, 3, 4], [5, 6]])
    assert "graph_kernel_recompute" not in recompute(g).stats


def test_producer_with_basic_consumer_is_kept():
    g = producer_two_consumers()
    kernelize(g, [[0, 1], [2, 3, 4]])          # Sub/Tanh stay basic ops
    assert "graph_kernel_recompute" not in recompute(g).stats
