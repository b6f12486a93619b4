"""parallel_fusion: independent kernels of one size class are merged (at most 7 per group); dependent ones
never are."""
from __future__ import annotations

import converter_lite.passes.pipeline  # noqa: F401  (registers every pass)
from converter_lite.config import GraphKernelConfig
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.verify import verify
from converter_lite.passes.base import PassContext
from converter_lite.passes.fuse.parallel_fusion import (
    MAX_PARALLEL_GROUP,
    ParallelFusionPass,
    merge_kernels,
)

from .fuse_testing import (
    check_same_results,
    cluster,
    kernel_nodes,
    new_graph,
    random_feeds,
)


def parallel(graph) -> PassContext:
    ctx = PassContext(GraphKernelConfig(opt_level=3))
    ParallelFusionPass().run(graph, ctx)
    verify(graph)
    return ctx


def branches(n, shape=(4, 8), sizes=None):
    """n independent elementwise branches x_i -> exp(x_i) * 2 + 1, each separated by a MatMul so the
    clusterer keeps them apart; outputs are the MatMul results."""
    specs = [(f"x{i}", (sizes[i] if sizes else shape)) for i in range(n)]
    g, b, xs = new_graph(*specs, ("w", (shape[-1], shape[-1])))
    w = xs[-1]
    outs = []
    for x in xs[:-1]:
        k = b.op("Exp", x) * 2.0 + 1.0
        outs.append(b.op("MatMul", k, w).v)
    g.outputs = outs
    return g


def run(graph):
    feeds = random_feeds(graph)
    before = eval_graph(graph, feeds)
    cluster(graph)
    n = len(kernel_nodes(graph))
    ctx = parallel(graph)
    check_same_results(before, graph, feeds)
    return n, ctx


def test_independent_kernels_merge():
    g = branches(3)
    n, ctx = run(g)
    assert n == 3
    (k,) = kernel_nodes(g)
    assert len(k.attrs["parallel"]) == 3 and len(k.outputs) == 3 and ctx.stats["parallel_fusion"] == 1
    assert len(k.attrs["graph"].inputs) == 3
    assert ctx.records["parallel_fusion.txt"]


def test_group_limit():
    g = branches(MAX_PARALLEL_GROUP + 2)
    run(g)
    sizes = sorted(len(k.attrs["parallel"]) for k in kernel_nodes(g))
    assert sizes == [2, MAX_PARALLEL_GROUP]


def test_different_size_classes_stay_apart():
    g = branches(2, sizes=[(4, 8), (64, 8)])
    n, ctx = run(g)
    assert len(kernel_nodes(g)) == n == 2 and "parallel_fusion" not in ctx.stats


def test_dependent_kernels_stay_apart():
    g, b, (x, w) = new_graph(("x", (4, 4)), ("w", (4, 4)))
    k1 = b.op("Exp", x) + 1.0
    m = b.op("MatMul", k1, w)
    g.outputs = [(b.op("Exp", m) + 1.0).v]
    n, ctx = run(g)
    assert n == 2 and len(kernel_nodes(g)) == 2 and "parallel_fusion" not in ctx.stats


def test_merge_kernels_keeps_outputs_and_names():
    g = branches(2)
    cluster(g)
    k0, k1 = kernel_nodes(g)
    outs = list(k0.outputs) + list(k1.outputs)
    node, clone = merge_kernels(g, [k0, k1], kind="parallel")
    verify(g)
    assert node.outputs == outs and node.attrs["kernel_name"].startswith("Fused_")
    assert set(node.attrs["source_nodes"]) == set(k0.attrs["source_nodes"]) | set(k1.attrs["source_nodes"])
    assert all(id(o) in clone for o in outs)
