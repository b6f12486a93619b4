"""stitch_fusion: a reduce kernel and the kernel using its per-row result become one kernel, so Softmax and
LayerNorm each end up as ONE GraphKernel; cases 1-5 of the module docstring."""
from __future__ import annotations

import numpy as np

import converter_lite.passes.pipeline  # noqa: F401  (registers every pass)
from converter_lite.config import GraphKernelConfig
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.verify import verify
from converter_lite.passes.base import PassContext
from converter_lite.passes.fuse.stitch import StitchFusionPass

from .fuse_testing import (
    axes,
    check_same_results,
    cluster,
    kernel_nodes,
    new_graph,
    random_feeds,
)


def stitch(graph, **flags) -> PassContext:
    ctx = PassContext(GraphKernelConfig(opt_level=3, **flags))
    StitchFusionPass().run(graph, ctx)
    verify(graph)
    return ctx


def softmax_graph(shape=(4, 16), axis=-1):
    g, b, (x,) = new_graph(("x", shape))
    mx = b.op("ReduceMax", x, axes(b, axis), keepdims=1)
    e = b.op("Exp", x - mx)
    g.outputs = [(e / b.op("ReduceSum", e, axes(b, axis), keepdims=1)).v]
    return g


def layer_norm_graph(shape=(2, 3, 8)):
    g, b, (x,) = new_graph(("x", shape))
    n = 1.0 / shape[-1]
    mean = b.op("ReduceSum", x, axes(b, -1), keepdims=1) * n
    d = x - mean
    var = b.op("ReduceSum", d * d, axes(b, -1), keepdims=1) * n
    y = d * b.op("Reciprocal", b.op("Sqrt", var + 1e-5)) * np.float32(1.5) + np.float32(0.25)
    g.outputs = [y.v]
    return g


def run_stitch(graph):
    feeds = random_feeds(graph)
    before = eval_graph(graph, feeds)
    cluster(graph)
    n_before = len(kernel_nodes(graph))
    ctx = stitch(graph)
    check_same_results(before, graph, feeds)
    return n_before, ctx


def test_softmax_becomes_one_kernel():
    g = softmax_graph()
    n_before, ctx = run_stitch(g)
    assert n_before > 1
    (k,) = kernel_nodes(g)
    assert [n.op for n in g.nodes] == ["GraphKernel"]
    assert len(k.attrs["stitch"]) == n_before - 1 and ctx.stats["stitch_fusion"] == n_before - 1
    inner = {v.name for n in k.attrs["graph"].nodes for v in n.outputs}
    assert set(k.attrs["stitch"]) <= inner
    assert [n.op for n in k.attrs["graph"].nodes] == ["ReduceMax", "Sub", "Exp", "ReduceSum", "Div"]
    assert ctx.records["stitch_fusion.txt"]


def test_layer_norm_becomes_one_kernel():
    g = layer_norm_graph()
    n_before, _ = run_stitch(g)
    assert n_before > 1 and len(kernel_nodes(g)) == 1 and [n.op for n in g.nodes] == ["GraphKernel"]


def test_reduce_over_leading_axis_is_not_stitched():
    g = softmax_graph(axis=0)
    n_before, ctx = run_stitch(g)
    assert len(kernel_nodes(g)) == n_before and "stitch_fusion" not in ctx.stats


def test_value_broadcast_along_other_axis_is_not_stitched():
    # per-row sums without keepdims broadcast along the LAST axis of the consumer: not a row-wise stitch
    g, b, (x, y) = new_graph(("x", (4, 4)), ("y", (4, 4)))
    s = b.op("ReduceSum", x, axes(b, -1), keepdims=0)
    g.outputs = [b.op("Exp", y * s).v]
    feeds = random_feeds(g)
    before = eval_graph(g, feeds)
    cluster(g)
    n = len(kernel_nodes(g))
    ctx = stitch(g)
    check_same_results(before, g, feeds)
    assert n == 2 and len(kernel_nodes(g)) == 2 and "stitch_fusion" not in ctx.stats


def test_size_limit():
    g = softmax_graph()
    feeds = random_feeds(g)
    before = eval_graph(g, feeds)
    cluster(g)
    n = len(kernel_nodes(g))
    ctx = stitch(g, composite_op_limit_size=2)
    assert len(kernel_nodes(g)) == n and "stitch_fusion" not in ctx.stats
    check_same_results(before, g, feeds)


def test_no_stitch_when_a_path_leaves_the_pair():
    # mx feeds the consumer kernel directly and through an op that cannot join a kernel (MatMul)
    g, b, (x, w) = new_graph(("x", (4, 4)), ("w", (4, 4)))
    mx = b.op("ReduceMax", x, axes(b, -1), keepdims=1)
    around = b.op("MatMul", x - mx, w)
    g.outputs = [(b.op("Exp", around) / mx).v]
    feeds = random_feeds(g)
    before = eval_graph(g, feeds)
    cluster(g)
    stitch(g)
    check_same_results(before, g, feeds)
    assert [n.op for n in g.nodes].count("MatMul") == 1
